"""Confirm before remember (`memory.confirm_writes`), over HTTP against the served app: a line
the model's `memory_write` or the overflow summarizer would write about an end user is proposed
instead; it is in no prompt until approved, in none ever once discarded or expired; an approved
summary line keeps its range, and the summarized turns are never distilled a second time; an
approval a crash interrupted is written at the next start."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from backend.app import create_app
from backend.domain.messages import ToolCall
from backend.memory.entries import NewEntry, Provenance
from backend.providers.scripted import ScriptedProvider, ScriptedToolCalls
from backend.storage.database import Database
from backend.storage.tables import memory_entries, overflow_jobs, pending_memory
from tests.conftest import ManualClock, fill, make_settings, serve
from tests.fakes.summarizer import EchoSummarizer
from tests.prompt_text import prompt_text

ADA = "ada"


def confirming(database_url: str, tmp_path: Path, **memory: Any) -> Any:
    return make_settings(
        database_url,
        tmp_path,
        persona={"max_history_messages": 4},
        memory={
            "path": str(tmp_path / "MEMORY.md"),
            "scope": "user",
            "confirm_writes": True,
            "confirm_expire_s": 3600,
            "overflow_batch": 2,
            **memory,
        },
    )


def remember(fact: str) -> ScriptedToolCalls:
    return ScriptedToolCalls(
        [ToolCall(id=f"w-{fact}", name="memory_write", arguments={"fact": fact})]
    )


async def send(
    client: httpx.AsyncClient, message: str, user: str = ADA, session_id: str | None = None
) -> dict[str, Any]:
    """One turn of `user`: in `session_id`, else in a new session of theirs."""
    body = {"message": message, "user": user}
    if session_id is not None:
        body["session_id"] = session_id
    response = await client.post("/api/chat/send", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def proposals(client: httpx.AsyncClient, user: str = ADA) -> list[dict[str, Any]]:
    listed = await client.get("/api/memory/proposals", params={"user": user})
    assert listed.status_code == 200, listed.text
    found: list[dict[str, Any]] = listed.json()["proposals"]
    return found


async def decide(client: httpx.AsyncClient, proposal_id: str, approved: bool) -> httpx.Response:
    return await client.post(
        f"/api/memory/proposals/{proposal_id}/decision", json={"approved": approved}
    )


async def memory_text(client: httpx.AsyncClient, user: str = ADA) -> str:
    return str((await client.get("/api/memory", params={"user": user})).json()["content"])


async def test_a_proposed_line_reaches_the_prompt_only_once_approved(
    database_url: str, tmp_path: Path
) -> None:
    clock = ManualClock()
    provider = ScriptedProvider(replies=["ok"])
    app = create_app(confirming(database_url, tmp_path), provider=provider, clock=clock)
    async with serve(app) as client:
        provider.push(remember("Ada keeps bees"), "Shall I?")
        provider.push(remember("Ada hates figs"), "Shall I?")
        provider.push(remember("Ada was in Oslo"), "Shall I?")
        first = await send(client, "I keep bees")
        await send(client, "I hate figs")
        await send(client, "I was in Oslo")
        waiting = await proposals(client)
        await send(client, "what do you know?")
        before = prompt_text(provider.requests[-1])

        keep, drop, late = (p["id"] for p in waiting)
        approved = await decide(client, keep, True)
        discarded = await decide(client, drop, False)
        twice = await decide(client, keep, False)
        clock.now += timedelta(seconds=3600)
        expired = await decide(client, late, True)
        await send(client, "and now?")
        after = prompt_text(provider.requests[-1])
        left = await proposals(client)
        stored = await memory_text(client)
        bobs = await proposals(client, "bob")

    (call,) = first["tool_calls"]
    assert call["result"].startswith("proposed to the user")
    assert [p["content"] for p in waiting] == [
        "Ada keeps bees",
        "Ada hates figs",
        "Ada was in Oslo",
    ]
    assert all(p["status"] == "pending" and p["source"] == "api" for p in waiting)
    assert not any(fact in before for fact in ("bees", "figs", "Oslo"))
    assert approved.status_code == 200 and approved.json()["status"] == "approved"
    assert discarded.status_code == 200 and discarded.json()["status"] == "discarded"
    assert twice.status_code == 409 and twice.json()["error"]["code"] == "proposal_decided"
    assert expired.status_code == 410 and expired.json()["error"]["code"] == "proposal_expired"
    assert "Ada keeps bees" in after and "figs" not in after and "Oslo" not in after
    assert left == [] and bobs == []
    assert "Ada keeps bees" in stored and "figs" not in stored and "Oslo" not in stored


@pytest.mark.parametrize("approved", [True, False])
async def test_a_summary_line_is_proposed_once_and_its_turns_are_never_distilled_again(
    database_url: str, tmp_path: Path, approved: bool
) -> None:
    summarizer = EchoSummarizer()
    provider = ScriptedProvider(replies=["ok"])
    app = create_app(
        confirming(database_url, tmp_path), provider=provider, summarizer_provider=summarizer
    )
    async with serve(app) as client:
        session = None
        for n in range(3):  # the window of 4 overflows: the first turn leaves it
            session = (await send(client, f"fact number {n}", session_id=session))["session_id"]
            await app.state.services.runtimes.wait_idle()
        (proposal,) = await proposals(client)
        calls = summarizer.calls
        decided = await decide(client, proposal["id"], approved)
        await app.state.services.runtimes.wait_idle()
        calls_after_answer = summarizer.calls
        await send(client, "what do you remember?", session_id=session)
        prompt = prompt_text(provider.requests[-1])
        stored = await memory_text(client)
        database: Database = app.state.services.database
        async with database.read() as conn:
            jobs = list(await conn.execute(select(overflow_jobs)))
            lines = list(await conn.execute(select(pending_memory)))

    assert (proposal["source"], proposal["origin"]) == (
        "auto-overflow",
        "api",
    ) and "user said: fact number 0" in proposal["content"]
    assert decided.status_code == 200
    first_job = jobs[0]
    assert first_job.status == "done" and first_job.memory_entry_id is None
    assert calls_after_answer == calls  # the answer distils nothing again
    assert len(jobs) == len({(j.first_message_id, j.last_message_id) for j in jobs})
    assert len(lines) == len({(r.first_message_id, r.last_message_id) for r in lines})
    if approved:
        assert "user said: fact number 0" in prompt and "user said: fact number 0" in stored
        assert f"@{first_job.session_id}:" in stored  # with its range: exactly once holds
    else:
        assert "fact number 0" not in prompt.split("what do you remember?")[0]
        assert "fact number 0" not in stored


async def test_confirmation_off_writes_at_once(database_url: str, tmp_path: Path) -> None:
    provider = ScriptedProvider(replies=["ok"])
    settings = confirming(database_url, tmp_path, confirm_writes=False)
    async with serve(create_app(settings, provider=provider)) as client:
        provider.push(remember("Ada keeps bees"), "Noted.")
        await send(client, "I keep bees")
        waiting = await proposals(client)
        stored = await memory_text(client)
    assert waiting == [] and "Ada keeps bees" in stored


async def test_an_approval_a_crash_interrupted_is_written_at_the_next_start(
    database_url: str, tmp_path: Path
) -> None:
    settings = confirming(database_url, tmp_path)
    provider = ScriptedProvider(replies=["ok"])
    app = create_app(settings, provider=provider)
    async with serve(app) as client:
        provider.push(remember("Ada keeps bees"), "Shall I?")
        await send(client, "I keep bees")
        (proposal,) = await proposals(client)
        database: Database = app.state.services.database
        # As a crash between the approval and the write leaves it: approved, never written.
        async with database.write() as conn:
            await conn.execute(
                pending_memory.update()
                .where(pending_memory.c.id == int(proposal["id"]))
                .values(status="approved", decided_at=datetime.now(UTC))
            )
        before = await memory_text(client)
    async with serve(create_app(settings, provider=provider)) as client:
        after = await memory_text(client)
        again = await decide(client, proposal["id"], True)
    assert "bees" not in before and after.count("Ada keeps bees") == 1
    assert again.status_code == 409


async def test_bad_answers_are_refused_and_change_nothing(
    database_url: str, tmp_path: Path
) -> None:
    provider = ScriptedProvider(replies=["ok"])
    app = create_app(confirming(database_url, tmp_path, store="database"), provider=provider)
    async with serve(app) as client:
        provider.push(remember("Ada keeps bees"), "Shall I?")
        await send(client, "I keep bees")
        (proposal,) = await proposals(client)
        unknown = await decide(client, "999999", True)
        bobs_answer = await client.post(
            f"/api/memory/proposals/{proposal['id']}/decision",
            json={"approved": True, "user": "bob"},
        )
        not_a_number = await decide(client, "bees", True)
        no_body = await client.post(f"/api/memory/proposals/{proposal['id']}/decision", json={})
        no_user = await client.get("/api/memory/proposals")
        still = await proposals(client)
        database: Database = app.state.services.database
        async with database.read() as conn:
            entries = list(await conn.execute(select(memory_entries)))
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "proposal_not_found"
    assert not_a_number.status_code == 404
    assert bobs_answer.status_code == 404  # named, only the person it is about answers it
    assert no_body.status_code == 422 and no_user.status_code == 422
    assert [p["id"] for p in still] == [proposal["id"]] and entries == []


async def test_only_true_approves_a_proposed_line(database_url: str, tmp_path: Path) -> None:
    """`"approved": "yes"` once wrote a proposed line: only JSON `true` means yes."""
    provider = ScriptedProvider(replies=["ok"])
    app = create_app(confirming(database_url, tmp_path, store="database"), provider=provider)
    async with serve(app) as client:
        provider.push(remember("Ada keeps bees"), "Shall I?")
        await send(client, "I keep bees")
        (proposal,) = await proposals(client)
        answers = [
            await client.post(
                f"/api/memory/proposals/{proposal['id']}/decision", json={"approved": value}
            )
            for value in ("yes", "true", 1, "on", None)
        ]
        still = await proposals(client)
        database: Database = app.state.services.database
        async with database.read() as conn:
            entries = list(await conn.execute(select(memory_entries)))
    assert [a.status_code for a in answers] == [422] * 5
    assert [p["status"] for p in still] == ["pending"] and entries == []


async def test_a_summary_step_retried_after_a_crash_proposes_its_line_once(
    database_url: str, tmp_path: Path
) -> None:
    app = create_app(confirming(database_url, tmp_path), provider=ScriptedProvider())
    async with serve(app) as client:
        session = (await send(client, "hello"))["session_id"]
        line = NewEntry("auto-overflow", "user said: hello", provenance=Provenance(session, 1, 2))
        proposals_service = app.state.services.proposals
        first, again, redone = [  # the job's step retried; the range distilled again (revert)
            await proposals_service.propose(
                tenant_id="default",
                user_key=ADA,
                session_id=session,
                entry=line,
                expire_s=60,
                job_id=job_id,
            )
            for job_id in (7, 7, 8)
        ]
        waiting = await proposals(client)
    assert first.id == again.id != redone.id
    assert [p["id"] for p in waiting] == [first.id, redone.id]


async def test_an_approval_memory_cannot_take_is_kept_to_answer_or_write_later(
    small_disk: Path, database_url: str, tmp_path: Path
) -> None:
    settings = confirming(database_url, tmp_path, path=str(small_disk / "MEMORY.md")).model_copy(
        update={"data_dir": str(small_disk)}
    )
    provider = ScriptedProvider(replies=["ok"])
    app = create_app(settings, provider=provider)
    async with serve(app) as client:
        provider.push(remember("Ada keeps bees"), "Shall I?", remember("Ada hates figs"), "And?")
        await send(client, "I keep bees")
        await send(client, "I hate figs")
        bees, figs = await proposals(client)
        filler = fill(small_disk)
        refused = await decide(client, bees["id"], True)
        still = await proposals(client)
        database: Database = app.state.services.database
        async with database.write() as conn:  # as a crash between approval and write leaves it
            await conn.execute(
                pending_memory.update()
                .where(pending_memory.c.id == int(figs["id"]))
                .values(status="approved", decided_at=datetime.now(UTC))
            )
    async with serve(create_app(settings, provider=provider)) as client:  # still full
        waiting = await memory_text(client)
    filler.unlink()
    async with serve(create_app(settings, provider=provider)) as client:
        written = await memory_text(client)
        approved = await decide(client, bees["id"], True)
        both = await memory_text(client)
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "memory_write_failed"
    assert [p["id"] for p in still] == [bees["id"], figs["id"]]  # it can be answered again
    assert "figs" not in waiting and "Ada hates figs" in written  # written once space is back
    assert approved.status_code == 200
    assert both.count("Ada keeps bees") == 1 and both.count("Ada hates figs") == 1


async def test_a_reverted_approved_line_is_proposed_again_when_its_turns_leave_again(
    database_url: str, tmp_path: Path
) -> None:
    summarizer = EchoSummarizer()
    app = create_app(
        confirming(database_url, tmp_path),
        provider=ScriptedProvider(replies=["ok"]),
        summarizer_provider=summarizer,
    )
    async with serve(app) as client:
        session = None
        for n in range(3):
            session = (await send(client, f"fact number {n}", session_id=session))["session_id"]
            await app.state.services.runtimes.wait_idle()
        (first,) = await proposals(client)
        assert (await decide(client, first["id"], True)).status_code == 200
        (entry,) = (await client.get("/api/memory", params={"user": ADA})).json()["entries"]
        reverted = await client.post(
            f"/api/memory/entries/{entry['id']}/revert", params={"user": ADA}
        )
        gone = await memory_text(client)
        await send(client, "one more", session_id=session)  # the turns leave the window again
        await app.state.services.runtimes.wait_idle()
        again = await proposals(client)
    assert reverted.status_code == 200, reverted.text
    assert "fact number 0" not in gone
    assert [p["content"] for p in again if "fact number 0" in p["content"]]  # not lost
    assert all(p["id"] != first["id"] for p in again)
