"""What was said in other sessions, or left this session's window, reaches a later prompt when
it bears on the message, through the real turn; what was deleted never does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from backend.app import create_app
from backend.providers.scripted import ScriptedProvider
from tests.chat.test_overflow import overflow_settings, send
from tests.conftest import serve
from tests.fakes.summarizer import EchoSummarizer
from tests.prompt_text import prompt_text


async def new_session(client: httpx.AsyncClient) -> str:
    created = await client.post("/api/chat/sessions", json={})
    session_id: str = created.json()["id"]
    return session_id


def serving(database_url: str, tmp_path: Path, **memory: Any) -> tuple[Any, ScriptedProvider]:
    chat = ScriptedProvider(replies=["ok"])
    settings = overflow_settings(database_url, tmp_path, **memory)
    return create_app(settings, provider=chat, summarizer_provider=EchoSummarizer()), chat


async def test_a_turn_brings_back_what_another_session_said(
    database_url: str, tmp_path: Path
) -> None:
    app, chat = serving(database_url, tmp_path)
    async with serve(app) as client:
        earlier = await new_session(client)
        await send(client, earlier, "The spare key is under the blue flowerpot.")
        await send(client, earlier, "Lunch was fine.")
        later = await new_session(client)
        await send(client, later, "Where did I leave the spare key?")

    request = chat.requests[-1]
    assert "The spare key is under the blue flowerpot." in request.messages[-1].context
    assert "Lunch was fine." not in prompt_text(request)  # it bears on nothing asked


async def test_a_deleted_sessions_words_never_reach_a_later_prompt(
    database_url: str, tmp_path: Path
) -> None:
    app, chat = serving(database_url, tmp_path)
    async with serve(app) as client:
        earlier = await new_session(client)
        await send(client, earlier, "My locker combination is 31-7-22.")
        later = await new_session(client)
        await send(client, later, "What is my locker combination?")
        found = chat.requests[-1].messages[-1].context
        deleted = await client.delete(f"/api/chat/sessions/{earlier}")
        await send(client, later, "Tell me my locker combination again.")

    assert deleted.status_code == 204
    assert "31-7-22" in found  # the check below means something
    assert "31-7-22" not in prompt_text(chat.requests[-1])


async def test_with_delete_evicted_archived_turns_are_gone_from_later_prompts(
    database_url: str, tmp_path: Path
) -> None:
    app, chat = serving(database_url, tmp_path, delete_evicted=True)
    async with serve(app) as client:
        session_id = await new_session(client)
        await send(client, session_id, "The gate code is 4417.")
        for turn in range(12):  # the window of 20 overflows: the first turns are deleted
            await send(client, session_id, f"small talk {turn}")
            await app.state.services.runtimes.wait_idle()
        await send(client, session_id, "What was the gate code?")
        page = (
            await client.get(
                f"/api/chat/sessions/{session_id}/messages", params={"include_archived": "true"}
            )
        ).json()

    assert "The gate code is 4417." not in [m["content"] for m in page["messages"]]
    context = chat.requests[-1].messages[-1].context
    assert "The gate code is 4417." not in context  # the deleted message itself never returns


async def test_what_the_window_carries_is_never_repeated_as_an_earlier_message(
    database_url: str, tmp_path: Path
) -> None:
    app, chat = serving(database_url, tmp_path)
    async with serve(app) as client:
        session_id = await new_session(client)
        await send(client, session_id, "The spare key is under the blue flowerpot.")
        await send(client, session_id, "Where did I leave the spare key?")
        in_window = chat.requests[-1]
        other = await new_session(client)
        await send(client, other, "Where did I leave the spare key?")

    said = "The spare key is under the blue flowerpot."
    assert said in [message.content for message in in_window.messages]
    assert said not in in_window.messages[-1].context  # once in a request is enough
    assert said in chat.requests[-1].messages[-1].context  # the check above means something


async def test_a_bare_question_never_comes_back_but_what_answers_it_does(
    database_url: str, tmp_path: Path
) -> None:
    app, chat = serving(database_url, tmp_path)
    async with serve(app) as client:
        earlier = await new_session(client)
        await send(client, earlier, "Which platform does the night train to Vienna leave from?")
        await send(client, earlier, "The night train to Vienna leaves from platform 9.")
        later = await new_session(client)
        await send(client, later, "Remind me about the night train to Vienna.")

    context = chat.requests[-1].messages[-1].context
    assert "The night train to Vienna leaves from platform 9." in context
    assert "Which platform does the night train" not in context  # it held what was not known
