"""The emergency token budget: the request is cut, the user is told, the session never sticks."""

from __future__ import annotations

from pathlib import Path

from backend.app import create_app
from backend.providers.scripted import ScriptedProvider
from tests.conftest import make_settings, serve
from tests.sse import stream_turn

WORDS_100 = " ".join(f"w{i}" for i in range(100))


async def test_over_the_emergency_limit_old_turns_leave_the_request_not_storage(
    database_url: str, tmp_path: Path
) -> None:
    settings = make_settings(
        database_url,
        tmp_path,
        providers={"m": {"kind": "scripted"}},
        model={
            "provider": "m",
            "name": "gpt-4o-mini",
            "context_window": 1200,
            "max_output_tokens": 200,
        },
        tools={"enabled": []},
    )
    chat = ScriptedProvider(replies=["short"])
    failing_summarizer = ScriptedProvider(replies=[""])  # summaries fail: only compaction helps
    app = create_app(settings, provider=chat, summarizer_provider=failing_summarizer)
    async with serve(app) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
        compactions = []
        for _ in range(8):
            events = await stream_turn(client, {"session_id": session_id, "message": WORDS_100})
            assert events[-1][0] == "turn.completed"
            compactions += [data for name, data in events if name == "compaction"]
        too_long = await client.post(
            "/api/chat/send", json={"session_id": session_id, "message": WORDS_100 * 12}
        )
        after = await client.post(
            "/api/chat/send", json={"session_id": session_id, "message": "still ok?"}
        )
        stored = (
            await client.get(f"/api/chat/sessions/{session_id}/messages", params={"limit": 100})
        ).json()["messages"]
    assert compactions, "the budget was exceeded but nothing was compacted"
    first = compactions[0]
    assert first["reason"] == "emergency"
    assert first["tokens_after"] < first["tokens_before"] and first["dropped_messages"] > 0
    last_request = chat.requests[-1]
    assert "left out of this request" in last_request.system
    assert last_request.messages[0].role == "user"
    assert (too_long.status_code, too_long.json()["error"]["code"]) == (413, "context_too_long")
    assert after.status_code == 200
    assert len([m for m in stored if m["role"] == "user"]) == 10  # nothing left storage
    # A compacted request's reply says so by its flag; its text is the model's alone, so no
    # note reaches the model or the summarizer with the history.
    compacted = [m for m in stored if m["compacted"]]
    assert compacted and all(m["role"] == "assistant" for m in compacted)
    assert all((m["content"], m["status"]) == ("short", "complete") for m in compacted)
    assert not any("compacted" in message.content for r in chat.requests for message in r.messages)


async def test_images_are_stored_but_stripped_for_a_model_without_vision(
    database_url: str, tmp_path: Path
) -> None:
    settings = make_settings(
        database_url,
        tmp_path,
        providers={"m": {"kind": "scripted"}},
        model={"provider": "m", "name": "text-only", "supports_vision": False},
    )
    chat = ScriptedProvider(replies=["I cannot see it"])
    image = {"type": "image", "media_type": "image/png", "data": "iVBORw0KGgo="}
    async with serve(create_app(settings, provider=chat)) as client:
        body = {"message": [{"type": "text", "text": "look"}, image]}
        sent = (await client.post("/api/chat/send", json=body)).json()
        stored = (await client.get(f"/api/chat/sessions/{sent['session_id']}/messages")).json()[
            "messages"
        ]
    assert stored[0]["images"] == [{"media_type": "image/png", "data": "iVBORw0KGgo="}]
    (request_message,) = chat.requests[0].messages
    assert request_message.images == ()
    assert "image(s) omitted" in request_message.content
