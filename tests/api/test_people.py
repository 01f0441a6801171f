"""Linking end users over HTTP (`/api/people/...`): codes are single-use, expire after 10
minutes and are refused with a clear error; linking moves what each identity remembered into
the person's memory, on both stores; an unlinked identity starts afresh while the person keeps
what was remembered; bad input is refused with nothing changed."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from backend.app import create_app
from backend.chat.linking import LINK_ATTEMPTS
from backend.providers.scripted import ScriptedProvider
from tests.api.test_auth import ADMIN_KEY, bearer, make_tenant
from tests.conftest import ManualClock, fill, make_settings, serve
from tests.prompt_text import prompt_text


async def code_for(client: httpx.AsyncClient, user: str) -> str:
    response = await client.post("/api/people/link-codes", json={"user": user})
    assert response.status_code == 201, response.text
    return str(response.json()["code"])


async def link(client: httpx.AsyncClient, user: str, code: str) -> httpx.Response:
    return await client.post("/api/people/links", json={"user": user, "code": code})


async def remember(client: httpx.AsyncClient, user: str, fact: str) -> None:
    added = await client.post("/api/memory/entries", params={"user": user}, json={"content": fact})
    assert added.status_code == 201, added.text


async def facts(client: httpx.AsyncClient, user: str) -> list[str]:
    memory = await client.get("/api/memory", params={"user": user})
    return sorted(entry["content"] for entry in memory.json()["entries"])


def error_code(response: httpx.Response) -> str:
    return str(response.json()["error"]["code"])


@pytest.mark.parametrize("store", ["file", "database"])
async def test_linking_moves_both_memories_into_the_persons_and_unlinking_starts_afresh(
    database_url: str, tmp_path: Path, store: str
) -> None:
    provider = ScriptedProvider(replies=["ok"])
    settings = make_settings(
        database_url,
        tmp_path,
        memory={"path": str(tmp_path / "MEMORY.md"), "scope": "user", "store": store},
    )
    async with serve(create_app(settings, provider=provider)) as client:
        await remember(client, "ada-phone", "Ada keeps bees")
        await remember(client, "ada-laptop", "Ada lives in Porto")
        await remember(client, "bob", "Bob plays the oboe")
        linked = await link(client, "ada-laptop", await code_for(client, "ada-phone"))
        both = [await facts(client, user) for user in ("ada-phone", "ada-laptop")]
        again = await link(client, "ada-laptop", await code_for(client, "ada-phone"))
        asked = await client.post("/api/chat/send", json={"message": "hi", "user": "ada-laptop"})
        prompt = prompt_text(provider.requests[-1])

        unlinked = await client.delete("/api/people/links", params={"user": "ada-laptop"})
        after = {user: await facts(client, user) for user in ("ada-phone", "ada-laptop", "bob")}
        gone = await client.get("/api/people/links", params={"user": "ada-laptop"})
        still = await client.get("/api/people/links", params={"user": "ada-phone"})

    assert linked.status_code == 200, linked.text
    assert sorted(linked.json()["identities"]) == ["ada-laptop", "ada-phone"]
    assert both == [["Ada keeps bees", "Ada lives in Porto"]] * 2  # moved once, no copies
    assert again.status_code == 200 and again.json() == linked.json()  # already one person
    assert asked.status_code == 200 and "Ada keeps bees" in prompt and "oboe" not in prompt
    assert unlinked.status_code == 204
    assert after == {
        "ada-phone": ["Ada keeps bees", "Ada lives in Porto"],  # the person keeps it
        "ada-laptop": [],  # a device given away takes nothing with it
        "bob": ["Bob plays the oboe"],
    }
    assert gone.status_code == 404 and error_code(gone) == "not_linked"
    assert still.status_code == 404  # one identity left is no person: its memory is its own


async def test_a_code_is_refused_when_reused_expired_unknown_or_ones_own(
    database_url: str, tmp_path: Path
) -> None:
    clock = ManualClock()
    settings = make_settings(database_url, tmp_path, memory={"scope": "user"})
    async with serve(create_app(settings, provider=ScriptedProvider(), clock=clock)) as client:
        code = await code_for(client, "ada")
        own = await link(client, "ada", code)
        first = await link(client, "ada-web", code)
        reused = await link(client, "carol", code)
        late = await code_for(client, "dan")
        clock.now += timedelta(minutes=10)
        expired = await link(client, "erin", late)
        unknown = await link(client, "erin", "ABCD-EFGH")
        in_time = await code_for(client, "frank")
        clock.now += timedelta(minutes=9, seconds=59)
        just_in_time = await link(client, "gina", in_time)
        links = await client.get("/api/admin/tenants/default/links")

    assert own.status_code == 409 and error_code(own) == "link_code_own"
    assert first.status_code == 200
    assert reused.status_code == 409 and error_code(reused) == "link_code_used"
    assert expired.status_code == 410 and error_code(expired) == "link_code_expired"
    assert unknown.status_code == 404 and error_code(unknown) == "link_code_invalid"
    assert just_in_time.status_code == 200
    people = {}
    for identity in links.json()["identities"]:
        people.setdefault(identity["person_id"], []).append(identity["user"])
    assert sorted(sorted(users) for users in people.values()) == [
        ["ada", "ada-web"],
        ["frank", "gina"],
    ]


async def test_two_people_linked_become_one(database_url: str, tmp_path: Path) -> None:
    settings = make_settings(database_url, tmp_path, memory={"scope": "user"})
    async with serve(create_app(settings, provider=ScriptedProvider())) as client:
        await link(client, "a2", await code_for(client, "a1"))
        await link(client, "b2", await code_for(client, "b1"))
        await remember(client, "b1", "a fact of the b person")
        merged = await link(client, "b2", await code_for(client, "a2"))
        seen = await facts(client, "a1")
    assert sorted(merged.json()["identities"]) == ["a1", "a2", "b1", "b2"]
    assert seen == ["a fact of the b person"]


@pytest.mark.parametrize(
    ("method", "path", "body", "params", "code"),
    [
        ("POST", "/api/people/link-codes", {}, {}, "invalid_request"),
        ("POST", "/api/people/link-codes", {"user": "line\nbreak"}, {}, "invalid_text"),
        ("POST", "/api/people/link-codes", {"user": "x" * 201}, {}, "invalid_request"),
        ("POST", "/api/people/links", {"user": "ada"}, {}, "invalid_request"),
        ("POST", "/api/people/links", {"user": "ada", "code": "C" * 33}, {}, "invalid_request"),
        ("GET", "/api/people/links", None, {}, "invalid_request"),
        ("DELETE", "/api/people/links", None, {"user": ""}, "invalid_request"),
    ],
)
async def test_bad_input_is_refused_and_links_nothing(
    database_url: str,
    tmp_path: Path,
    method: str,
    path: str,
    body: dict[str, str] | None,
    params: dict[str, str],
    code: str,
) -> None:
    settings = make_settings(database_url, tmp_path, memory={"scope": "user"})
    async with serve(create_app(settings, provider=ScriptedProvider())) as client:
        response = await client.request(method, path, json=body, params=params)
        links = await client.get("/api/admin/tenants/default/links")
    assert response.status_code == 422, response.text
    assert error_code(response) == code
    assert links.json()["identities"] == []


async def test_memory_a_full_disk_kept_from_moving_moves_at_the_next_start(
    small_disk: Path, database_url: str, tmp_path: Path
) -> None:
    settings = make_settings(
        database_url,
        tmp_path,
        data_dir=str(small_disk),
        memory={"path": str(small_disk / "MEMORY.md"), "scope": "user"},
    )
    async with serve(create_app(settings, provider=ScriptedProvider())) as client:
        await remember(client, "ada-laptop", "Ada lives in Porto")
        code = await code_for(client, "ada-phone")
        filler = fill(small_disk)
        linked = await link(client, "ada-laptop", code)
        meanwhile = await facts(client, "ada-phone")
        filler.unlink()  # space again; the move waits for the next start (or link)
    async with serve(create_app(settings, provider=ScriptedProvider())) as client:
        after = [await facts(client, user) for user in ("ada-phone", "ada-laptop")]
    assert linked.status_code == 200  # the link holds while its memory waits to move
    assert meanwhile == []
    assert after == [["Ada lives in Porto"]] * 2


async def test_guessing_codes_with_one_key_is_stopped_with_a_429(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ten codes per API key in ten minutes (good ones count too); then 429
    `too_many_attempts` with Retry-After, even for a real code; another key still links."""
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    settings = make_settings(
        database_url,
        tmp_path,
        auth={"mode": "keys"},
        memory={"path": str(tmp_path / "MEMORY.md"), "scope": "user"},
    )
    async with serve(create_app(settings, provider=ScriptedProvider())) as client:
        guesser = (await make_tenant(client, "acme"))["key"]
        app_key = (await make_tenant(client, "acme"))["key"]
        as_guesser, as_app = bearer(guesser), bearer(app_key)
        issued = await client.post(
            "/api/people/link-codes", json={"user": "ada-phone"}, headers=as_app
        )
        code = issued.json()["code"]
        body = {"user": "ada-laptop"}
        guesses = [
            await client.post(
                "/api/people/links", json={**body, "code": f"AAAA-{n:04d}"}, headers=as_guesser
            )
            for n in range(LINK_ATTEMPTS)
        ]
        refused = await client.post(
            "/api/people/links", json={**body, "code": code}, headers=as_guesser
        )
        linked = await client.post("/api/people/links", json={**body, "code": code}, headers=as_app)
    assert [error_code(g) for g in guesses] == ["link_code_invalid"] * LINK_ATTEMPTS
    assert refused.status_code == 429 and error_code(refused) == "too_many_attempts"
    assert 60 < int(refused.headers["Retry-After"]) <= 600
    assert "try again in 10 minutes" in refused.json()["error"]["message"]
    assert linked.status_code == 200, linked.text
