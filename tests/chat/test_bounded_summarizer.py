"""A bounded summarizer (issue 13, item 3): a range too large for the summarizer is summarized
in parts, and a summarizer that fails forever still lets the conversation go on: after
`memory.max_summary_attempts` the range is kept as a raw line (its identifiers and where it
is), which `tally memory resummarize` later turns into a real summary."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from backend.app import create_app
from backend.chat.prompts import PromptRenderer
from backend.chat.summarizer import Summarizer, SummaryModel
from backend.domain.messages import Role, StoredMessage
from backend.errors import ProviderUnavailable
from backend.providers.scripted import ScriptedProvider
from backend.settings import load_settings
from tests.cli.runner import tally
from tests.conftest import ROOT, serve
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.summarizer import EchoSummarizer

EMAIL = "ada.lovelace@example.org"


def message(message_id: int, role: Role, content: str, tokens: int) -> StoredMessage:
    return StoredMessage(
        id=message_id,
        session_id="s",
        role=role,
        content=content,
        turn_id=f"t{message_id}",
        status="complete",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        token_count=tokens,
    )


async def test_a_range_larger_than_the_budget_is_summarized_in_parts() -> None:
    model = EchoSummarizer()
    summarizer = Summarizer(
        [SummaryModel(model, "m")], PromptRenderer(ROOT / "prompts"), input_budget_tokens=500
    )
    messages = [
        message(i, "user" if i % 2 else "assistant", f"message {i} " + "word " * 150, 200)
        for i in range(1, 9)
    ]
    huge = message(9, "user", f"my email is {EMAIL} " + "x" * 20_000 + " my code is ZX-4471", 6000)
    output = await summarizer.summarize(
        SummaryModel(model, "m"),
        messages=[*messages, huge],
        memory_from_id=1,
        previous_summary="Earlier: tea.",
        language="en",
    )
    prompts = [r.messages[-1].content for r in model.requests]
    assert len(prompts) >= 5  # 8 messages of 200 tokens, 2 a part; the huge one alone
    assert all(len(p) < 500 * 4 + 4_000 for p in prompts)  # each part within the budget
    assert "Earlier: tea." in prompts[0]  # each part gets the summary so far
    assert "The user sent" in prompts[1]
    assert "more characters not shown" in prompts[-1]
    said = [f for f in output.facts if f.startswith("user said: message")]
    assert len(said) == 4  # the facts of every part (one per user message)
    assert any("ZX-4471" in fact for fact in output.facts)  # cut from the prompt, yet kept
    assert output.summary.startswith("The user sent")


@pytest.mark.process
async def test_a_summarizer_that_fails_forever_leaves_raw_lines_then_resummarize_fixes_them(
    tmp_path: Path,
) -> None:
    with FakeOpenAIServer() as upstream:
        path = tmp_path / "config.yaml"
        path.write_text(
            yaml.safe_dump(
                {
                    "database": {"url": f"sqlite+aiosqlite:///{tmp_path}/t.db"},
                    "providers": {
                        "fake": {
                            "kind": "openai_compatible",
                            "base_url": upstream.base_url,
                            "max_retries": 0,
                        }
                    },
                    "model": {"provider": "fake", "name": "gpt-4o-mini"},
                    "persona": {"max_history_messages": 4},
                    "memory": {
                        "path": str(tmp_path / "MEMORY.md"),
                        "overflow_batch": 2,
                        "retry_base_s": 0.01,
                        "max_summary_attempts": 2,
                    },
                    "prompts_dir": str(ROOT / "prompts"),
                    "data_dir": str(tmp_path / "data"),
                }
            ),
            encoding="utf-8",
        )
        broken = ScriptedProvider()
        broken.push(*[ProviderUnavailable("summarizer", "HTTP 503") for _ in range(100)])
        app = create_app(load_settings(path), summarizer_provider=broken)
        async with serve(app) as client:
            session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
            first = f"hello, my email is {EMAIL}"
            for text in [first, "second", "third", "fourth"]:
                sent = await client.post(
                    "/api/chat/send", json={"session_id": session_id, "message": text}
                )
                assert sent.status_code == 200, sent.text  # the conversation goes on
                await app.state.services.runtimes.wait_idle()
            session = (await client.get(f"/api/chat/sessions/{session_id}")).json()
            raw = (await client.get("/api/memory")).json()["entries"]
        assert session["window_start_id"] > 1  # the window moved on
        assert raw and {e["source"] for e in raw} == {"auto-raw"}
        assert "not summarized yet: messages #1–" in raw[0]["content"]
        assert EMAIL in raw[0]["content"]

        fixed = tally("--config", str(path), "memory", "resummarize")
        after = tally("--config", str(path), "memory", "show").stdout
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert f"re-summarized {len(raw)} of {len(raw)}; 0 still raw" in fixed.stdout
    assert "auto-raw" not in after and "not summarized yet" not in after
    assert EMAIL in after  # the summarizer's line (the fake echoes the user) keeps it
