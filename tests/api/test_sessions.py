"""Session routes, health and the demo provider, over real HTTP."""

from __future__ import annotations

from pathlib import Path

from backend.app import create_app
from backend.providers.scripted import ScriptedProvider
from backend.settings import Settings
from tests.conftest import ROOT, make_settings, serve


async def test_session_routes_create_list_read_rename_delete(settings: Settings) -> None:
    async with serve(create_app(settings, provider=ScriptedProvider())) as client:
        created = await client.post("/api/chat/sessions", json={"title": "  Groceries "})
        assert created.status_code == 201
        session = created.json()
        assert session["title"] == "Groceries" and session["summary"] == ""
        second = (await client.post("/api/chat/sessions", json={})).json()
        listed = (await client.get("/api/chat/sessions")).json()
        assert listed["total"] == 2
        assert [s["id"] for s in listed["sessions"]] == [second["id"], session["id"]]
        found = (await client.get("/api/chat/sessions", params={"q": "groc"})).json()
        assert [s["id"] for s in found["sessions"]] == [session["id"]]
        renamed = await client.patch(f"/api/chat/sessions/{session['id']}", json={"title": "Food"})
        assert renamed.json()["title"] == "Food"
        read = (await client.get(f"/api/chat/sessions/{session['id']}")).json()
        assert read["title"] == "Food"
        deleted = await client.delete(f"/api/chat/sessions/{session['id']}")
        assert deleted.status_code == 204
        gone = await client.get(f"/api/chat/sessions/{session['id']}")
    assert gone.status_code == 404
    assert gone.json() == {
        "error": {
            "code": "session_not_found",
            "message": f"session {session['id']!r} does not exist",
        }
    }


async def test_unknown_ids_and_bad_bodies_get_coded_errors(settings: Settings) -> None:
    async with serve(create_app(settings, provider=ScriptedProvider())) as client:
        missing = [
            await client.get("/api/chat/sessions/nope"),
            await client.patch("/api/chat/sessions/nope", json={"title": "x"}),
            await client.delete("/api/chat/sessions/nope"),
            await client.put("/api/chat/sessions/nope/summary", json={"summary": "x"}),
            await client.get("/api/chat/sessions/nope/messages"),
            await client.get("/api/chat/sessions/nope/tool-conversations"),
            await client.post("/api/chat/sessions/nope/cancel"),
        ]
        long_title = await client.post("/api/chat/sessions", json={"title": "x" * 201})
        wrong_type = await client.patch("/api/chat/sessions/nope", json={"title": 5})
        bad_paging = await client.get("/api/chat/sessions", params={"limit": 0})
        no_route = await client.get("/api/nothing-here")
    assert {(r.status_code, r.json()["error"]["code"]) for r in missing} == {
        (404, "session_not_found")
    }
    for response in (long_title, wrong_type, bad_paging):
        assert (response.status_code, response.json()["error"]["code"]) == (422, "invalid_request")
    assert no_route.status_code == 404


async def test_archived_messages_are_listed_only_on_request(settings: Settings) -> None:
    provider = ScriptedProvider(replies=["r"])
    app = create_app(settings, provider=provider)
    async with serve(app) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
        for i in range(3):
            await client.post("/api/chat/send", json={"session_id": session_id, "message": f"m{i}"})
        everything = (await client.get(f"/api/chat/sessions/{session_id}/messages")).json()
        third_turn = everything["messages"][4]["id"]
        services = app.state.services
        await services.sessions.update(
            tenant_id="default", session_id=session_id, window_start_id=third_turn
        )
        window = (await client.get(f"/api/chat/sessions/{session_id}/messages")).json()
        full = (
            await client.get(
                f"/api/chat/sessions/{session_id}/messages", params={"include_archived": "true"}
            )
        ).json()
        page = (
            await client.get(
                f"/api/chat/sessions/{session_id}/messages",
                params={"include_archived": "true", "limit": 2, "before_id": third_turn},
            )
        ).json()
    assert [m["content"] for m in window["messages"]] == ["m2", "r"]
    assert len(full["messages"]) == 6
    assert [m["is_archived"] for m in full["messages"]] == [True] * 4 + [False] * 2
    assert [m["content"] for m in page["messages"]] == ["m1", "r"] and page["has_more"]


async def test_without_a_provider_key_the_demo_provider_answers_and_says_so(
    sqlite_url: str, tmp_path: Path
) -> None:
    settings = make_settings(
        sqlite_url,
        tmp_path,
        providers={"openai": {"kind": "openai_compatible", "api_key_env": "OPENAI_API_KEY"}},
        model={"provider": "openai", "name": "gpt-4o-mini"},
    )
    async with serve(create_app(settings)) as client:
        health = (await client.get("/api/health")).json()
        reply = (await client.post("/api/chat/send", json={"message": "hello demo"})).json()
    assert health["is_demo"] is True and health["status"] == "ok"
    assert "OPENAI_API_KEY" in health["notice"]
    assert "demo provider" in reply["reply"] and "hello demo" in reply["reply"]


async def test_health_names_the_configured_model(settings: Settings) -> None:
    async with serve(create_app(settings, provider=ScriptedProvider())) as client:
        health = await client.get("/api/health")
        docs = await client.get("/docs")
        schema = (await client.get("/openapi.json")).json()
    assert health.status_code == 200
    assert health.json()["database"] == "ok" and health.json()["is_demo"] is False
    assert docs.status_code == 200
    assert "/api/chat/send" in schema["paths"]


def test_prompts_directory_ships_the_system_template() -> None:
    assert (ROOT / "prompts" / "system.md.j2").is_file()
