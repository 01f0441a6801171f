"""A fake Slack, and Tally serving a Slack bot against it (the real slack_sdk on our side):
Socket Mode by default, the Events API with signed calls when told."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from fastapi import FastAPI

from backend.app import create_app
from backend.providers.scripted import ScriptedProvider
from tests.conftest import make_settings, serve
from tests.fakes.slack_server import FakeSlackServer, Sent

BOT_TOKEN = "xoxb-tally-test"
APP_TOKEN = "xapp-tally-test"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


def fake_slack(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSlackServer]:
    """The `slack` fixture's body (`tests/channels/conftest.py`)."""
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    monkeypatch.setenv("SLACK_APP_TOKEN", APP_TOKEN)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SIGNING_SECRET)
    with FakeSlackServer(bot_token=BOT_TOKEN, app_token=APP_TOKEN) as server:
        yield server


def slack_settings(slack: FakeSlackServer, **overrides: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "kind": "slack",
        "bot_token_env": "SLACK_BOT_TOKEN",
        "app_token_env": "SLACK_APP_TOKEN",
        "signing_secret_env": "SLACK_SIGNING_SECRET",
        "mode": "socket",
        "allow_from": ["*"],
        "api_base_url": slack.api_url,
    }
    return settings | overrides


def signed(body: bytes, *, at: float | None = None, secret: str = SIGNING_SECRET) -> dict[str, str]:
    """The headers Slack signs an Events API call with (computed here, as Slack does)."""
    timestamp = str(int(time.time() if at is None else at))
    base = f"v0:{timestamp}:".encode() + body
    digest = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": f"v0={digest}"}


@dataclass
class ServedSlack:
    app: FastAPI
    client: httpx.AsyncClient
    slack: FakeSlackServer
    provider: ScriptedProvider
    bot: str = "sl"
    tenant: str = "default"

    async def push(self, payload: Any, kind: str = "events_api") -> str:
        """Deliver `payload` over Socket Mode; the envelope's id."""
        return await asyncio.to_thread(self.slack.push, payload, kind)

    async def acked(self, envelope_id: str) -> None:
        await asyncio.to_thread(self.slack.wait_for_ack, envelope_id)

    async def sent(self, count: int, method: str | None = "chat.postMessage") -> list[Sent]:
        return await asyncio.to_thread(self.slack.wait_for_sent, count, method=method)

    async def post(
        self,
        payload: dict[str, Any],
        headers: dict[str, str] | None = None,
        *,
        form: bool = False,
        retry: int | None = None,
    ) -> httpx.Response:
        """`payload` as Slack posts it to the Events API (signed unless `headers` say
        otherwise); `form`: as an interactivity call (`payload=<json>`); `retry`: as Slack's
        n-th retry (`X-Slack-Retry-Num`)."""
        body = json.dumps(payload).encode()
        kind = "application/json"
        if form:
            body = urlencode({"payload": body.decode()}).encode()
            kind = "application/x-www-form-urlencoded"
        sent = {"content-type": kind, **(signed(body) if headers is None else headers)}
        if retry is not None:
            sent |= {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"}
        path = f"/channels/{self.tenant}/{self.bot}"
        return await self.client.post(path, content=body, headers=sent)

    async def stored(self, channel: str = "D0ADA") -> list[tuple[str, str]]:
        sessions = self.app.state.services.sessions
        found = await sessions.find(
            tenant_id=self.tenant, channel="slack", external_key=f"{self.bot}:{channel}"
        )
        if found is None:
            return []
        messages = await self.app.state.services.messages.window(
            tenant_id=self.tenant, session_id=found.id, start_id=0, limit=100
        )
        return [(m.role, m.content) for m in messages]

    async def settle(self) -> None:
        await self.app.state.channels.get(self.tenant, self.bot).settle()


@asynccontextmanager
async def serving_slack(
    slack: FakeSlackServer,
    tmp_path: Path,
    database_url: str,
    *,
    provider: ScriptedProvider | None = None,
    bot: dict[str, Any] | None = None,
    wait_connected: bool = True,
    **sections: Any,
) -> AsyncIterator[ServedSlack]:
    """Tally serving Slack bot `sl`; in Socket Mode, once its socket is open (unless told not
    to wait: a test of a Slack that never lets it connect)."""
    bot = bot or slack_settings(slack)
    settings = make_settings(database_url, tmp_path, channels={"sl": bot}, **sections)
    provider = provider or ScriptedProvider(replies=["Hello from Tally."])
    app = create_app(settings, provider=provider)
    async with serve(app) as client:
        served = ServedSlack(app, client, slack, provider)
        if wait_connected and bot.get("mode", "socket") == "socket":
            await asyncio.to_thread(slack.wait_connected)
        yield served
