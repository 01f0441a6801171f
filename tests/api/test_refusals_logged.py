"""Every refused request is one log line an operator can read: what was asked, what was said."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from backend.app import create_app
from backend.providers.scripted import ScriptedProvider
from tests.conftest import make_settings, serve

PRIVATE_WORDS = "my card is 4111 1111"


async def test_each_refusal_logs_one_line_without_the_request_text(
    sqlite_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("TALLY_ADMIN_KEY", "admin-key-for-refusals")
    settings = make_settings(sqlite_url, tmp_path, auth={"mode": "keys"})
    app = create_app(settings, provider=ScriptedProvider())
    async with serve(app) as client:
        with caplog.at_level(logging.INFO, logger="backend.api.errors"):
            no_key = await client.post("/api/chat/send", json={"message": PRIVATE_WORDS})
            admin = {"Authorization": "Bearer admin-key-for-refusals"}
            no_route = await client.get("/api/no-such-route", headers=admin)
            bad_body = await client.post(
                "/api/admin/tenants", json={"tenant_id": "Bad Id!"}, headers=admin
            )
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused ")]
    assert (no_key.status_code, no_route.status_code, bad_body.status_code) == (401, 404, 422)
    assert lines[0].startswith("refused POST /api/chat/send: 401 unauthorized: ")
    assert lines[1].startswith("refused GET /api/no-such-route: 404 not_found: ")
    assert lines[2].startswith("refused POST /api/admin/tenants: 422 invalid_request: ")
    assert len(lines) == 3
    assert all(r.levelno == logging.INFO for r in caplog.records if r.getMessage() in lines)
    assert all(PRIVATE_WORDS not in r.getMessage() for r in caplog.records)
