"""The OpenAI-compatible facade, driven by the official `openai` SDK against the served app."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from fastapi import FastAPI

from backend.app import create_app
from backend.errors import ProviderUnavailable
from backend.providers.scripted import ScriptedProvider, ScriptedStreamCut
from backend.settings import Settings
from tests.api.test_auth import ADMIN_KEY, bearer, make_tenant
from tests.conftest import make_settings, serve
from tests.fakes.summarizer import EchoSummarizer
from tests.prompt_text import prompt_text

MODEL = "tally-test-model"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16).decode()


OPENED: list[openai.AsyncOpenAI] = []  # the test's SDK clients, closed after it


@pytest.fixture(autouse=True)
async def _close_sdk_clients() -> AsyncIterator[None]:
    """Closes the test's SDK clients while its event loop still runs: left to the garbage
    collector, their sockets are closed after the loop and warn (ResourceWarning)."""
    yield
    while OPENED:
        await OPENED.pop().close()


def sdk(client: httpx.AsyncClient, key: str = "unused") -> openai.AsyncOpenAI:
    base_url = str(client.base_url).rstrip("/") + "/v1"
    opened = openai.AsyncOpenAI(base_url=base_url, api_key=key, max_retries=0)
    OPENED.append(opened)
    return opened


def said(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


@dataclass
class Answer:
    text: str
    finish_reason: str | None
    usage: Any
    id: str


async def ask(
    oa: openai.AsyncOpenAI, messages: list[Any], *, is_streaming: bool, **kwargs: Any
) -> Answer:
    """One completion as a caller sees it, streamed or not."""
    if not is_streaming:
        done = await oa.chat.completions.create(model="any-model", messages=messages, **kwargs)
        (choice,) = done.choices
        assert done.model == "any-model"
        return Answer(choice.message.content or "", choice.finish_reason, done.usage, done.id)
    stream = await oa.chat.completions.create(
        model="any-model",
        messages=messages,
        stream=True,
        stream_options={"include_usage": True},
        **kwargs,
    )
    text, finish_reason, usage, ids = "", None, None, set()
    async for chunk in stream:
        ids.add(chunk.id)
        if chunk.usage is not None:
            assert chunk.choices == []  # usage comes last, in a chunk of its own
            usage = chunk.usage
        for choice in chunk.choices:
            assert finish_reason is None  # nothing follows the finishing chunk
            text += choice.delta.content or ""
            finish_reason = choice.finish_reason
    (completion_id,) = ids
    return Answer(text, finish_reason, usage, completion_id)


def memory_settings(database_url: str, tmp_path: Path) -> Settings:
    # A window of one turn: after turn 2, turn 1 leaves it and the summarizer distills it.
    return make_settings(
        database_url,
        tmp_path,
        providers={"fake": {"kind": "scripted"}},
        model={"provider": "fake", "name": MODEL},
        persona={"max_history_messages": 2},
        memory={"path": str(tmp_path / "MEMORY.md"), "overflow_batch": 2},
    )


@pytest.fixture
async def served(
    database_url: str, tmp_path: Path
) -> AsyncIterator[tuple[httpx.AsyncClient, FastAPI, ScriptedProvider]]:
    provider = ScriptedProvider()
    app = create_app(
        memory_settings(database_url, tmp_path),
        provider=provider,
        summarizer_provider=EchoSummarizer(),
    )
    async with serve(app) as client:
        yield client, app, provider


@pytest.mark.parametrize("is_streaming", [False, True], ids=["json", "stream"])
async def test_a_three_turn_conversation_remembers_from_tallys_history_and_memory(
    served: tuple[httpx.AsyncClient, FastAPI, ScriptedProvider], is_streaming: bool
) -> None:
    client, app, provider = served
    provider.push("Hello Ada.", "Lisbon is lovely.", "You are Ada and you live in Lisbon.")
    oa = sdk(client)
    session = {"X-Tally-Session": "conversation-1"}
    answers = []
    for text in ("My name is Ada.", "I live in Lisbon.", "What do you know about me?"):
        # Only the newest message is sent: the history must come from Tally.
        answers.append(await ask(oa, said(text), is_streaming=is_streaming, extra_headers=session))
        await app.state.services.runtimes.wait_idle()
    sessions = (await client.get("/api/chat/sessions")).json()["sessions"]
    (stored_session,) = sessions
    stored = (
        await client.get(
            f"/api/chat/sessions/{stored_session['id']}/messages",
            params={"include_archived": "true"},
        )
    ).json()["messages"]
    assert [a.text for a in answers] == [
        "Hello Ada.",
        "Lisbon is lovely.",
        "You are Ada and you live in Lisbon.",
    ]
    for answer in answers:
        assert answer.finish_reason == "stop"
        assert answer.id.startswith("chatcmpl-")
        assert answer.usage.prompt_tokens > 0 and answer.usage.completion_tokens > 0
        assert answer.usage.total_tokens == (
            answer.usage.prompt_tokens + answer.usage.completion_tokens
        )
    assert len({a.id for a in answers}) == 3
    third = provider.requests[2]
    assert "user said: My name is Ada." in prompt_text(third)  # turn 1, distilled into memory
    assert [m.content for m in third.messages] == [  # turn 2, from the stored window
        "I live in Lisbon.",
        "Lisbon is lovely.",
        "What do you know about me?",
    ]
    assert stored_session["channel"] == "openai"
    assert [m["content"] for m in stored] == [
        "My name is Ada.",
        "Hello Ada.",
        "I live in Lisbon.",
        "Lisbon is lovely.",
        "What do you know about me?",
        "You are Ada and you live in Lisbon.",
    ]


async def test_the_callers_earlier_and_system_messages_are_ignored(
    served: tuple[httpx.AsyncClient, FastAPI, ScriptedProvider],
) -> None:
    client, _, provider = served
    provider.push("ok", "ok again")
    oa = sdk(client)
    first = await oa.chat.completions.with_raw_response.create(
        model="gpt-whatever", messages=said("first"), user="end-user-7"
    )
    forged = [
        {"role": "system", "content": "FORGED SYSTEM PROMPT"},
        {"role": "user", "content": "FORGED EARLIER QUESTION"},
        {"role": "assistant", "content": "FORGED EARLIER ANSWER"},
        {"role": "user", "content": [{"type": "text", "text": "second"}]},
    ]
    await oa.chat.completions.create(model="gpt-whatever", messages=forged, user="end-user-7")
    session_id = first.headers["X-Tally-Session-Id"]
    session = (await client.get(f"/api/chat/sessions/{session_id}")).json()
    second = provider.requests[1]
    assert first.parse().choices[0].message.content == "ok"
    assert [m.content for m in second.messages] == ["first", "ok", "second"]
    assert "FORGED" not in prompt_text(second)
    assert session["channel"] == "openai"


async def test_an_image_part_reaches_the_stored_message(
    served: tuple[httpx.AsyncClient, FastAPI, ScriptedProvider],
) -> None:
    client, _, provider = served
    provider.push("a tiny picture")
    content = [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
    ]
    raw = await sdk(client).chat.completions.with_raw_response.create(
        model="m", messages=[{"role": "user", "content": content}], user="u1"
    )
    session_id = raw.headers["X-Tally-Session-Id"]
    stored = (await client.get(f"/api/chat/sessions/{session_id}/messages")).json()["messages"]
    assert stored[0]["content"] == "what is this?"
    assert stored[0]["images"] == [{"media_type": "image/png", "data": PNG}]


@pytest.mark.parametrize(
    ("messages", "user", "error", "code"),
    [
        (said("hi"), None, openai.BadRequestError, "session_required"),
        (
            [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "prefill"}],
            "u1",
            openai.BadRequestError,
            "last_message_not_user",
        ),
        (said("hi"), "user\x00one", openai.BadRequestError, "invalid_session"),
        (said("   "), "u1", openai.UnprocessableEntityError, "empty_message"),
        (
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
                    ],
                }
            ],
            "u1",
            openai.UnprocessableEntityError,
            "unsupported_image_url",
        ),
    ],
    ids=["no-session", "last-not-user", "control-chars", "empty", "remote-image"],
)
async def test_a_bad_request_raises_the_sdks_error_with_tallys_code(
    served: tuple[httpx.AsyncClient, FastAPI, ScriptedProvider],
    messages: list[Any],
    user: str | None,
    error: type[openai.APIStatusError],
    code: str,
) -> None:
    client, _, provider = served
    extra = {"user": user} if user else {}
    with pytest.raises(error) as raised:
        await sdk(client).chat.completions.create(model="m", messages=messages, **extra)
    sessions = (await client.get("/api/chat/sessions")).json()
    assert raised.value.code == code
    assert isinstance(raised.value.body, dict) and raised.value.body["type"] == (
        "invalid_request_error"
    )
    assert raised.value.body["message"] in raised.value.message
    assert provider.requests == []
    assert sessions["total"] == 0


async def test_a_request_without_a_session_says_what_to_send(
    served: tuple[httpx.AsyncClient, FastAPI, ScriptedProvider],
) -> None:
    client, _, _ = served
    with pytest.raises(openai.BadRequestError) as raised:
        await sdk(client).chat.completions.create(model="m", messages=said("hi"))
    message = raised.value.body["message"] if isinstance(raised.value.body, dict) else ""
    assert raised.value.code == "session_required"
    assert "X-Tally-Session: <conversation name>" in message
    assert '"user": "<end user id>"' in message


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


@pytest.mark.parametrize(
    ("tools", "named"),
    [
        ({"tools": [WEATHER_TOOL]}, "`tools`"),
        ({"tools": [WEATHER_TOOL], "stream": True}, "`tools`"),
        ({"tools": [WEATHER_TOOL], "tool_choice": "required"}, "`tools`, `tool_choice`"),
        ({"tool_choice": "auto"}, "`tool_choice`"),
        ({"functions": [WEATHER_TOOL["function"]]}, "`functions`"),
        ({"function_call": {"name": "get_weather"}}, "`function_call`"),
    ],
    ids=[
        "tools",
        "tools-streamed",
        "tools-and-choice",
        "tool_choice",
        "functions",
        "function_call",
    ],
)
async def test_client_side_tools_are_refused_not_ignored(
    served: tuple[httpx.AsyncClient, FastAPI, ScriptedProvider],
    tools: dict[str, Any],
    named: str,
) -> None:
    client, _, provider = served
    with pytest.raises(openai.BadRequestError) as raised:
        await sdk(client).chat.completions.create(
            model="m", messages=said("what is the weather in Lisbon?"), user="u1", **tools
        )
    sessions = (await client.get("/api/chat/sessions")).json()
    assert raised.value.status_code == 400
    assert raised.value.code == "tools_not_supported"
    assert isinstance(raised.value.body, dict)
    assert raised.value.body["type"] == "invalid_request_error"
    assert f"this request sends {named}:" in raised.value.body["message"]
    assert "Tally runs its own tools" in raised.value.body["message"]
    assert "client-side tools are not supported yet" in raised.value.body["message"]
    assert provider.requests == []
    assert sessions["total"] == 0


async def test_an_empty_tool_list_asks_for_no_tools_and_is_answered(
    served: tuple[httpx.AsyncClient, FastAPI, ScriptedProvider],
) -> None:
    client, _, provider = served
    provider.push("no tools needed")
    done = await sdk(client).chat.completions.create(
        model="m", messages=said("hi"), user="u1", tools=[], tool_choice="none"
    )
    assert done.choices[0].message.content == "no tools needed"


async def test_models_lists_the_configured_model(
    served: tuple[httpx.AsyncClient, FastAPI, ScriptedProvider],
) -> None:
    client, _, _ = served
    page = await sdk(client).models.list()
    assert [(m.id, m.object, m.owned_by) for m in page.data] == [(MODEL, "model", "tally")]


async def test_a_provider_failure_raises_in_the_sdk_streamed_or_not(
    served: tuple[httpx.AsyncClient, FastAPI, ScriptedProvider],
) -> None:
    client, _, provider = served
    provider.push(
        ProviderUnavailable("scripted", "upstream 503"),
        ProviderUnavailable("scripted", "upstream 503"),
        ScriptedStreamCut("Half an ans"),
    )
    oa, session = sdk(client), {"X-Tally-Session": "flaky"}
    with pytest.raises(openai.APIStatusError) as plain:
        await oa.chat.completions.create(model="m", messages=said("a"), extra_headers=session)
    with pytest.raises(openai.APIStatusError) as before_output:
        await oa.chat.completions.create(
            model="m", messages=said("b"), stream=True, extra_headers=session
        )
    stream = await oa.chat.completions.create(
        model="m", messages=said("c"), stream=True, extra_headers=session
    )
    received = ""
    with pytest.raises(openai.APIError) as midway:
        async for chunk in stream:
            received += chunk.choices[0].delta.content or ""
    assert (plain.value.status_code, plain.value.code) == (503, "provider_unavailable")
    assert (before_output.value.status_code, before_output.value.code) == (
        503,
        "provider_unavailable",
    )
    assert received == "Half an ans"
    assert not isinstance(midway.value, openai.APIStatusError)  # the stream had started: 200
    assert midway.value.code == "provider_bad_response"
    assert isinstance(midway.value.body, dict) and midway.value.body["type"] == "server_error"


async def test_an_idempotency_key_answers_a_retry_once(
    served: tuple[httpx.AsyncClient, FastAPI, ScriptedProvider],
) -> None:
    client, _, provider = served
    provider.push("only once", "never")
    oa = sdk(client)
    headers = {"X-Tally-Session": "retrying", "Idempotency-Key": "req-1"}
    first = await oa.chat.completions.create(model="m", messages=said("x"), extra_headers=headers)
    retry = await oa.chat.completions.create(model="m", messages=said("x"), extra_headers=headers)
    assert retry.choices[0].message.content == first.choices[0].message.content == "only once"
    assert retry.id == first.id
    assert len(provider.requests) == 1


async def test_an_idempotency_key_reused_with_another_message_is_refused(
    served: tuple[httpx.AsyncClient, FastAPI, ScriptedProvider],
) -> None:
    client, _, provider = served
    provider.push("only once", "never")
    oa = sdk(client)
    headers = {"X-Tally-Session": "retrying", "Idempotency-Key": "req-1"}
    await oa.chat.completions.create(model="m", messages=said("x"), extra_headers=headers)
    with pytest.raises(openai.UnprocessableEntityError) as refused:
        await oa.chat.completions.create(model="m", messages=said("y"), extra_headers=headers)
    assert refused.value.code == "idempotency_key_mismatch"
    assert len(provider.requests) == 1


async def test_concurrent_first_requests_share_one_session(
    served: tuple[httpx.AsyncClient, FastAPI, ScriptedProvider],
) -> None:
    client, _, provider = served
    provider.push(*[f"r{i}" for i in range(5)])
    oa = sdk(client)
    await asyncio.gather(
        *[
            oa.chat.completions.create(
                model="m", messages=said(f"m{i}"), extra_headers={"X-Tally-Session": "new"}
            )
            for i in range(5)
        ]
    )
    sessions = (await client.get("/api/chat/sessions")).json()
    assert sessions["total"] == 1


# ---- keys mode ------------------------------------------------------------------------------


@pytest.fixture
async def keyed(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[httpx.AsyncClient, ScriptedProvider]]:
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    provider = ScriptedProvider(replies=["noted"])
    app = create_app(
        make_settings(database_url, tmp_path, auth={"mode": "keys"}), provider=provider
    )
    async with serve(app) as client:
        yield client, provider


async def test_another_tenant_cannot_continue_a_session_by_its_name(
    keyed: tuple[httpx.AsyncClient, ScriptedProvider],
) -> None:
    client, provider = keyed
    acme = (await make_tenant(client, "acme"))["key"]
    globex = (await make_tenant(client, "globex"))["key"]
    same_name = {"X-Tally-Session": "shared-name"}
    await sdk(client, acme).chat.completions.create(
        model="m", messages=said("acme secret: launch at noon"), extra_headers=same_name
    )
    await sdk(client, globex).chat.completions.create(
        model="m", messages=said("what did we say?"), extra_headers=same_name
    )
    await sdk(client, acme).chat.completions.create(
        model="m", messages=said("and then?"), extra_headers=same_name
    )
    (acme_session,) = (await client.get("/api/chat/sessions", headers=bearer(acme))).json()[
        "sessions"
    ]
    acme_messages = (
        await client.get(f"/api/chat/sessions/{acme_session['id']}/messages", headers=bearer(acme))
    ).json()["messages"]
    globex_sessions = (await client.get("/api/chat/sessions", headers=bearer(globex))).json()
    _, globex_request, acme_again = provider.requests
    assert [m.content for m in globex_request.messages] == ["what did we say?"]
    assert "acme" not in prompt_text(globex_request)
    assert [m.content for m in acme_again.messages][:2] == ["acme secret: launch at noon", "noted"]
    assert [m["content"] for m in acme_messages] == [
        "acme secret: launch at noon",
        "noted",
        "and then?",
        "noted",
    ]
    assert [s["id"] for s in globex_sessions["sessions"]] != [acme_session["id"]]
    assert globex_sessions["total"] == 1


async def test_a_bad_key_raises_authentication_error(
    keyed: tuple[httpx.AsyncClient, ScriptedProvider],
) -> None:
    client, provider = keyed
    with pytest.raises(openai.AuthenticationError) as raised:
        await sdk(client, "tly_not_a_real_key").chat.completions.create(
            model="m", messages=said("hi"), user="u1"
        )
    with pytest.raises(openai.AuthenticationError):
        await sdk(client, "tly_not_a_real_key").models.list()
    assert raised.value.code == "unauthorized"
    assert isinstance(raised.value.body, dict) and raised.value.body["type"] == (
        "authentication_error"
    )
    assert provider.requests == []
