"""Demo mode: with no key a newcomer still sees the rolling window work, over real HTTP.

No provider is passed in: the real demo provider answers and the real demo summarizer
distills what leaves its small window.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from backend.app import create_app
from backend.composition.model_choice import DEMO_WINDOW
from backend.settings import load_settings
from tests.conftest import make_settings, serve

OPENAI = {"openai": {"kind": "openai_compatible", "api_key_env": "OPENAI_API_KEY"}}
INTRODUCTION = [
    "Hi! My name is Ada Lovelace and I live in Lisbon.",
    "Remember that my flight is on 12 May, seat 14C.",
    "My email is ada@example.com.",
    "What is a good book about engines?",
    "And one about looms?",
    "Thanks, that is all for now.",
]


async def send(client: httpx.AsyncClient, session_id: str | None, text: str) -> dict[str, Any]:
    body: dict[str, Any] = {"message": text}
    if session_id is not None:
        body["session_id"] = session_id
    response = await client.post("/api/chat/send", json=body)
    assert response.status_code == 200, response.text
    reply: dict[str, Any] = response.json()
    return reply


async def test_within_a_dozen_turns_the_demo_remembers_what_left_the_window(
    sqlite_url: str, tmp_path: Path
) -> None:
    settings = make_settings(
        sqlite_url, tmp_path, providers=OPENAI, model={"provider": "openai", "name": "gpt-4o"}
    )
    app = create_app(settings)
    async with serve(app) as client:
        session_id = None
        replies = []
        for text in INTRODUCTION:
            replies.append(await send(client, session_id, text))
            session_id = replies[-1]["session_id"]
        await app.state.services.runtimes.wait_idle()
        memory = (await client.get("/api/memory")).json()
        session = (await client.get(f"/api/chat/sessions/{session_id}")).json()
        window = (await client.get(f"/api/chat/sessions/{session_id}/messages")).json()
        everything = (
            await client.get(
                f"/api/chat/sessions/{session_id}/messages", params={"include_archived": "true"}
            )
        ).json()
        recalled = await send(client, session_id, "What do you remember about me?")

    (entry,) = memory["entries"]
    assert entry["source"] == "auto-overflow"
    assert entry["provenance"]["session_id"] == session_id
    for fact in ("Ada Lovelace", "Lisbon", "12 May", "14C", "ada@example.com"):
        assert fact in entry["content"]
    assert "Ada Lovelace" in session["summary"]
    assert len(window["messages"]) <= DEMO_WINDOW
    assert len(everything["messages"]) == 2 * len(INTRODUCTION)
    assert any(m["is_archived"] for m in everything["messages"])
    # Said once, on the session's first reply: the rest show memory at work.
    notices = ["built-in demo provider" in reply["reply"] for reply in [*replies, recalled]]
    assert notices == [True] + [False] * len(INTRODUCTION)
    assert recalled["reply"].startswith("From memory I recall")
    assert "Ada Lovelace" in recalled["reply"]


async def test_health_says_demo_and_names_the_variable_the_config_names(
    sqlite_url: str, tmp_path: Path
) -> None:
    providers = {"vendor": {"kind": "openai_compatible", "api_key_env": "MY_VENDOR_KEY"}}
    settings = make_settings(
        sqlite_url, tmp_path, providers=providers, model={"provider": "vendor", "name": "m"}
    )
    async with serve(create_app(settings)) as client:
        health = (await client.get("/api/health")).json()
        reply = await send(client, None, "hello demo")
    assert health["is_demo"] is True
    assert "MY_VENDOR_KEY" in health["notice"] and "OPENAI_API_KEY" not in health["notice"]
    assert "MY_VENDOR_KEY" in reply["reply"] and "hello demo" in reply["reply"]


async def test_health_names_the_config_file_that_names_the_model(tmp_path: Path) -> None:
    config = tmp_path / "deploy.yaml"
    config.write_text(
        f'database: {{url: "sqlite+aiosqlite:///{tmp_path}/t.db"}}\n'
        "providers: {vendor: {kind: openai_compatible, api_key_env: MY_VENDOR_KEY}}\n"
        "model: {provider: vendor, name: m}\n",
        encoding="utf-8",
    )
    async with serve(create_app(load_settings(config))) as client:
        health = (await client.get("/api/health")).json()
        first = await send(client, None, "hello demo")

    assert health["demo_config_file"] == str(config)
    hint = f"set MY_VENDOR_KEY and restart (providers.vendor.api_key_env in {config} names it)"
    assert hint in health["notice"] and hint in first["reply"]
