"""POST /api/chat/send: one turn, JSON and SSE, with what it stores."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import httpx
import pytest

from backend.app import create_app
from backend.domain.messages import ToolCall
from backend.errors import ProviderUnavailable
from backend.providers.scripted import (
    ScriptedProvider,
    ScriptedStreamCut,
    ScriptedThinking,
    ScriptedToolCalls,
)
from backend.settings import Settings
from tests.conftest import make_settings, serve
from tests.sse import read_events, stream_turn


async def messages_of(client: httpx.AsyncClient, session_id: str) -> list[dict[str, object]]:
    response = await client.get(f"/api/chat/sessions/{session_id}/messages")
    assert response.status_code == 200
    messages: list[dict[str, object]] = response.json()["messages"]
    return messages


async def new_session(client: httpx.AsyncClient) -> str:
    response = await client.post("/api/chat/sessions", json={"title": "t"})
    assert response.status_code == 201
    session_id: str = response.json()["id"]
    return session_id


async def test_send_answers_and_stores_user_and_reply(settings: Settings) -> None:
    provider = ScriptedProvider()
    provider.push("Hello there!")
    async with serve(create_app(settings, provider=provider)) as client:
        response = await client.post("/api/chat/send", json={"message": "hi"})
        assert response.status_code == 200
        body = response.json()
        assert body["reply"] == "Hello there!"
        assert body["tool_calls"] == []
        assert body["user_message_id"] < body["assistant_message_id"]
        assert 0 < body["context_tokens"] < body["context_budget"] == 128_000 - 4096
        stored = await messages_of(client, body["session_id"])
    assert [(m["role"], m["content"], m["status"]) for m in stored] == [
        ("user", "hi", "complete"),
        ("assistant", "Hello there!", "complete"),
    ]
    assert {m["turn_id"] for m in stored} == {body["turn_id"]}


async def test_stream_sends_named_events_in_order(settings: Settings) -> None:
    provider = ScriptedProvider()
    provider.push("one two three")
    async with serve(create_app(settings, provider=provider)) as client:
        session_id = await new_session(client)
        events = await stream_turn(client, {"session_id": session_id, "message": "count"})
    names = [name for name, _ in events]
    assert names[0] == "turn.started"
    assert names[-1] == "turn.completed"
    assert names.count("text.delta") == 3
    assert "".join(d["text"] for n, d in events if n == "text.delta") == "one two three"
    completed = events[-1][1]
    assert completed["reply"] == "one two three"
    assert completed["user_message_id"] == events[0][1]["user_message_id"]


async def test_tool_call_goes_to_tool_conversations_not_messages(settings: Settings) -> None:
    provider = ScriptedProvider()
    provider.push(
        ScriptedToolCalls([ToolCall(id="call_1", name="now", arguments={"timezone": "UTC"})]),
        "It is late.",
    )
    async with serve(create_app(settings, provider=provider)) as client:
        events = await stream_turn(client, {"message": "what time is it?"})
        session_id = events[0][1]["session_id"]
        stored = await messages_of(client, session_id)
        tools = (await client.get(f"/api/chat/sessions/{session_id}/tool-conversations")).json()
    names = [name for name, _ in events]
    assert names.index("tool.call") < names.index("tool.result") < names.index("turn.completed")
    assert [m["role"] for m in stored] == ["user", "assistant"]
    (row,) = tools["tool_conversations"]
    assert row["tool_name"] == "now"
    assert row["arguments"] == {"timezone": "UTC"}
    assert row["result"].endswith("+00:00")
    assert row["message_id"] == stored[1]["id"]
    assert row["user_message"] == "what time is it?"
    assert row["is_error"] is False
    # The second model call saw the tool result; the stored history did not get it.
    second = provider.requests[1]
    assert [m.role for m in second.messages] == ["user", "assistant", "tool"]


async def test_provider_failure_midstream_ends_with_one_error_event(settings: Settings) -> None:
    provider = ScriptedProvider()
    provider.push(ScriptedStreamCut("Half an ans"))
    async with serve(create_app(settings, provider=provider)) as client:
        events = await stream_turn(client, {"message": "tell me"})
        stored = await messages_of(client, events[0][1]["session_id"])
    names = [name for name, _ in events]
    assert names.count("error") == 1 and names[-1] == "error"
    assert "turn.completed" not in names
    assert events[-1][1]["code"] == "provider_bad_response"
    assert [(m["role"], m["status"]) for m in stored] == [
        ("user", "complete"),
        ("assistant", "incomplete"),
    ]
    assert stored[1]["content"] == "Half an ans"


async def test_provider_error_before_output_stores_only_the_user_message(
    settings: Settings,
) -> None:
    provider = ScriptedProvider()
    provider.push(ProviderUnavailable("scripted", "upstream 503"), "recovered")
    async with serve(create_app(settings, provider=provider)) as client:
        response = await client.post("/api/chat/send", json={"message": "first"})
        assert response.status_code == 503
        assert response.json()["error"]["code"] == "provider_unavailable"
        session_id = (await client.get("/api/chat/sessions")).json()["sessions"][0]["id"]
        again = await client.post(
            "/api/chat/send", json={"session_id": session_id, "message": "second"}
        )
        assert again.json()["reply"] == "recovered"
        stored = await messages_of(client, session_id)
    assert [(m["role"], m["content"]) for m in stored] == [
        ("user", "first"),
        ("user", "second"),
        ("assistant", "recovered"),
    ]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"message": ""}, 422, "empty_message"),
        ({"message": "   \n"}, 422, "empty_message"),
        ({"message": 42}, 422, "invalid_request"),
        ({"message": "hi", "extra": 1}, 422, "invalid_request"),
        ({"message": "a\u0000b"}, 422, "invalid_text"),
        ({"message": "x" * 100_001}, 413, "message_too_long"),
        (
            {"message": [{"type": "image", "media_type": "image/png", "data": "!!"}]},
            422,
            "invalid_image",
        ),
        (
            {"message": [{"type": "image", "media_type": "image/png", "data": ""}]},
            422,
            "invalid_image",
        ),
        (  # text bytes labelled as a picture
            {"message": [{"type": "image", "media_type": "image/png", "data": "aGVsbG8="}]},
            422,
            "invalid_image",
        ),
        (  # a PNG labelled as JPEG
            {"message": [{"type": "image", "media_type": "image/jpeg", "data": "iVBORw0KGgo="}]},
            422,
            "invalid_image",
        ),
        ({"message": "hi", "session_id": "no-such-session"}, 404, "session_not_found"),
    ],
)
async def test_bad_request_gets_a_coded_4xx_and_stores_nothing(
    settings: Settings, body: dict[str, object], status: int, code: str
) -> None:
    provider = ScriptedProvider()
    async with serve(create_app(settings, provider=provider)) as client:
        response = await client.post("/api/chat/send", json=body)
        sessions = (await client.get("/api/chat/sessions")).json()
    assert response.status_code == status
    assert response.json()["error"]["code"] == code
    assert sessions["total"] == 0
    assert provider.requests == []


async def test_malformed_json_and_lone_surrogates_are_rejected(settings: Settings) -> None:
    async with serve(create_app(settings, provider=ScriptedProvider())) as client:
        broken = await client.post(
            "/api/chat/send",
            content=b'{"message": "hi"',
            headers={"content-type": "application/json"},
        )
        surrogate = await client.post(
            "/api/chat/send",
            content=b'{"message": "\\ud800"}',
            headers={"content-type": "application/json"},
        )
        deep = await client.post(
            "/api/chat/send",
            content=b"[" * 200_000 + b"]" * 200_000,
            headers={"content-type": "application/json"},
        )
        huge = await client.post("/api/chat/send", content=b"x" * (9 * 1024 * 1024))
        sessions = (await client.get("/api/chat/sessions")).json()
    assert (broken.status_code, broken.json()["error"]["code"]) == (422, "invalid_json")
    assert (surrogate.status_code, surrogate.json()["error"]["code"]) == (422, "invalid_text")
    assert (deep.status_code, deep.json()["error"]["code"]) == (400, "invalid_request")
    assert (huge.status_code, huge.json()["error"]["code"]) == (413, "payload_too_large")
    assert sessions["total"] == 0


async def test_a_vendor_control_token_in_a_message_or_a_reply_is_plain_text(
    settings: Settings,
) -> None:
    """Tokenizers refuse `<|endoftext|>` unless told: counting it once failed the turn."""
    provider = ScriptedProvider()
    provider.push("it ends with <|endoftext|>")
    async with serve(create_app(settings, provider=provider)) as client:
        sent = await client.post("/api/chat/send", json={"message": "what is <|endoftext|>?"})
        session_id = sent.json()["session_id"]
        stored = (await client.get(f"/api/chat/sessions/{session_id}/messages")).json()

    assert sent.status_code == 200, sent.text
    assert [m["content"] for m in stored["messages"]] == [
        "what is <|endoftext|>?",
        "it ends with <|endoftext|>",
    ]


async def test_ten_concurrent_sends_run_one_at_a_time_in_order(settings: Settings) -> None:
    provider = ScriptedProvider(delay_s=0.001)
    provider.push(*[f"reply {i}" for i in range(10)])
    async with serve(create_app(settings, provider=provider)) as client:
        session_id = await new_session(client)
        responses = await asyncio.gather(
            *[
                client.post("/api/chat/send", json={"session_id": session_id, "message": f"m{i}"})
                for i in range(10)
            ]
        )
        stored = (
            await client.get(f"/api/chat/sessions/{session_id}/messages", params={"limit": 50})
        ).json()["messages"]
    assert all(r.status_code == 200 for r in responses), [r.text for r in responses]
    assert [m["role"] for m in stored] == ["user", "assistant"] * 10
    for user, reply in zip(stored[0::2], stored[1::2], strict=True):
        assert user["turn_id"] == reply["turn_id"]
    by_user_id = {r.json()["user_message_id"]: r.json() for r in responses}
    for user, reply in zip(stored[0::2], stored[1::2], strict=True):
        assert by_user_id[user["id"]]["assistant_message_id"] == reply["id"]
    # Each model call saw every earlier turn complete: no interleaving.
    for index, request in enumerate(provider.requests):
        assert len(request.messages) == 2 * index + 1


async def test_cancel_stops_the_turn_and_keeps_what_was_said(settings: Settings) -> None:
    provider = ScriptedProvider(delay_s=0.05)
    provider.push(" ".join(f"w{i}" for i in range(200)))
    async with serve(create_app(settings, provider=provider)) as client:
        session_id = await new_session(client)
        body = {"session_id": session_id, "message": "long please", "stream": True}
        async with client.stream("POST", "/api/chat/send", json=body) as response:
            events = []
            async for name, data in read_events(response):
                events.append((name, data))
                if name == "text.delta" and len(events) == 3:
                    cancel = await client.post(f"/api/chat/sessions/{session_id}/cancel")
                    assert cancel.json() == {"cancelled": True}
        stored = await messages_of(client, session_id)
    assert events[-1][0] == "error"
    assert events[-1][1]["code"] == "cancelled"
    assert [(m["role"], m["status"]) for m in stored] == [
        ("user", "complete"),
        ("assistant", "incomplete"),
    ]
    assert len(str(stored[1]["content"]).split()) < 200


async def test_cancel_without_a_turn_in_flight_says_so(settings: Settings) -> None:
    async with serve(create_app(settings, provider=ScriptedProvider())) as client:
        session_id = await new_session(client)
        response = await client.post(f"/api/chat/sessions/{session_id}/cancel")
    assert response.json() == {"cancelled": False}


async def test_idempotency_key_returns_the_first_result(settings: Settings) -> None:
    provider = ScriptedProvider()
    provider.push("first answer", "second answer")
    async with serve(create_app(settings, provider=provider)) as client:
        session_id = await new_session(client)
        body = {"session_id": session_id, "message": "once"}
        headers = {"Idempotency-Key": "abc-123"}
        first = await client.post("/api/chat/send", json=body, headers=headers)
        retry = await client.post("/api/chat/send", json=body, headers=headers)
        stored = await messages_of(client, session_id)
    assert retry.json()["reply"] == first.json()["reply"] == "first answer"
    assert retry.json()["assistant_message_id"] == first.json()["assistant_message_id"]
    assert [m["content"] for m in stored] == ["once", "first answer"]
    assert len(provider.requests) == 1


async def test_an_idempotency_key_reused_with_another_message_is_refused(
    settings: Settings,
) -> None:
    provider = ScriptedProvider()
    provider.push("first answer", "never sent")
    async with serve(create_app(settings, provider=provider)) as client:
        session_id = await new_session(client)
        headers = {"Idempotency-Key": "abc-123"}
        body = {"session_id": session_id, "message": "once"}
        first = await client.post("/api/chat/send", json=body, headers=headers)
        other = {"session_id": session_id, "message": "something else"}
        refused = await client.post("/api/chat/send", json=other, headers=headers)
        streamed = await client.post(
            "/api/chat/send", json={**other, "stream": True}, headers=headers
        )
        stored = await messages_of(client, session_id)
    assert first.status_code == 200
    for response in (refused, streamed):
        assert response.status_code == 422, response.text
        assert response.json()["error"]["code"] == "idempotency_key_mismatch"
    assert [m["content"] for m in stored] == ["once", "first answer"]  # nothing new stored
    assert len(provider.requests) == 1


async def test_idempotent_retry_after_a_failure_answers_without_a_second_user_message(
    settings: Settings,
) -> None:
    provider = ScriptedProvider()
    provider.push(ProviderUnavailable("scripted", "down"), "now it works")
    async with serve(create_app(settings, provider=provider)) as client:
        session_id = await new_session(client)
        body = {"session_id": session_id, "message": "please"}
        headers = {"Idempotency-Key": "k1"}
        failed = await client.post("/api/chat/send", json=body, headers=headers)
        retried = await client.post("/api/chat/send", json=body, headers=headers)
        stored = await messages_of(client, session_id)
    assert failed.status_code == 503
    assert retried.json()["reply"] == "now it works"
    assert [m["content"] for m in stored] == ["please", "now it works"]


async def test_template_syntax_in_messages_and_summary_stays_literal(settings: Settings) -> None:
    provider = ScriptedProvider()
    provider.push("ok")
    async with serve(create_app(settings, provider=provider)) as client:
        session_id = await new_session(client)
        summary = "{{ 7*7 }} {% for x in range(3) %}loop{% endfor %}"
        put = await client.put(
            f"/api/chat/sessions/{session_id}/summary", json={"summary": summary}
        )
        assert put.status_code == 200
        await client.post("/api/chat/send", json={"session_id": session_id, "message": "{{ 7*7 }}"})
    (request,) = provider.requests
    assert "## Current Session Context" in request.system
    assert summary in request.system
    assert "{{ 7*7 }}" in request.system  # kept as text, never evaluated
    assert request.messages[-1].content == "{{ 7*7 }}"


async def test_window_sends_at_most_max_history_messages_even_while_summaries_fail(
    database_url: str, tmp_path: Path
) -> None:
    settings = make_settings(database_url, tmp_path, persona={"max_history_messages": 4})
    provider = ScriptedProvider(replies=["r"])
    failing_summarizer = ScriptedProvider(replies=[""])  # every summary comes back empty
    app = create_app(settings, provider=provider, summarizer_provider=failing_summarizer)
    async with serve(app) as client:
        session_id = await new_session(client)
        for i in range(5):
            await client.post("/api/chat/send", json={"session_id": session_id, "message": f"m{i}"})
    last = provider.requests[-1]
    assert [m.content for m in last.messages] == ["m2", "r", "m3", "r", "m4"]


async def test_a_stream_that_cannot_start_is_an_http_error(settings: Settings) -> None:
    async with serve(create_app(settings, provider=ScriptedProvider())) as client:
        response = await client.post(
            "/api/chat/send", json={"session_id": "nope", "message": "hi", "stream": True}
        )
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["error"]["code"] == "session_not_found"


async def test_forty_sessions_at_once_all_answer(settings: Settings) -> None:
    """More turns in flight than the main connection pool holds (PostgreSQL: each turn also
    holds its session's advisory lock on a connection of its own)."""
    provider = ScriptedProvider(replies=["fine"], delay_s=0.01)
    async with serve(create_app(settings, provider=provider)) as client:
        responses = await asyncio.gather(
            *[client.post("/api/chat/send", json={"message": f"hi {i}"}) for i in range(40)]
        )
    assert [r.status_code for r in responses] == [200] * 40, [r.text for r in responses][:3]
    assert len({r.json()["session_id"] for r in responses}) == 40


async def test_resuming_a_cut_turn_sends_its_message_once(settings: Settings) -> None:
    provider = ScriptedProvider()
    provider.push(ScriptedStreamCut("Half an ans"), "Whole answer.")
    async with serve(create_app(settings, provider=provider)) as client:
        session_id = await new_session(client)
        body = {"session_id": session_id, "message": "please"}
        headers = {"Idempotency-Key": "cut-1"}
        cut = await client.post("/api/chat/send", json=body, headers=headers)
        resumed = await client.post("/api/chat/send", json=body, headers=headers)
    assert cut.status_code == 502 and resumed.json()["reply"] == "Whole answer."
    assert [(m.role, m.content) for m in provider.requests[-1].messages] == [("user", "please")]


@pytest.mark.parametrize(
    ("media_type", "head"),
    [
        ("image/png", b"\x89PNG\r\n\x1a\n"),
        ("image/jpeg", b"\xff\xd8\xff\xe0"),
        ("image/gif", b"GIF89a"),
        ("image/webp", b"RIFF\x10\x00\x00\x00WEBPVP8 "),
    ],
)
async def test_an_image_whose_bytes_match_its_type_is_kept(
    settings: Settings, media_type: str, head: bytes
) -> None:
    data = base64.b64encode(head + b"\x00" * 16).decode()
    part = {"type": "image", "media_type": media_type, "data": data}
    async with serve(create_app(settings, provider=ScriptedProvider())) as client:
        response = await client.post("/api/chat/send", json={"message": [part]})
        stored = await messages_of(client, response.json()["session_id"])
    assert response.status_code == 200, response.text
    assert stored[0]["images"] == [{"media_type": media_type, "data": data}]


async def test_a_replys_reasoning_is_stored_with_it_and_not_in_its_text(
    settings: Settings,
) -> None:
    provider = ScriptedProvider()
    provider.push(ScriptedThinking("Two and two make four.", "Four."))
    async with serve(create_app(settings, provider=provider)) as client:
        session_id = await new_session(client)
        events = await stream_turn(client, {"session_id": session_id, "message": "2+2?"})
        stored = await messages_of(client, session_id)
    assert [d["text"] for n, d in events if n == "thinking.delta"] == ["Two and two make four."]
    assert (stored[1]["content"], stored[1]["thinking"]) == ("Four.", "Two and two make four.")
    assert stored[0]["thinking"] == ""
