"""A fake Slack: the Web API and Socket Mode, over real HTTP and a real websocket on 127.0.0.1.

`base_url` + "/api/" plays `https://slack.com/api/`: `auth.test` (the bot token), `chat.
postMessage`, `chat.update`, `chat.postEphemeral` (recorded in `sent`), and
`apps.connections.open` (the app-level token), which hands out a one-use wss URL on a port of
its own. There Slack's envelopes are sent: `hello` on connect, then what a test `push`es
(`events_api`, `interactive`, `disconnect`); every `{"envelope_id"}` the client answers is
recorded, and an envelope left unacknowledged when its socket drops is delivered again on the
next socket, its `retry_attempt` counted, as Slack does. Files a user shared are served at
`/files/<name>` to the bot token. Errors are Slack's: HTTP 200 `{"ok": false, "error"}`, and
429 with `Retry-After` for its rate limit (`rate_limit_next`).

Thread-safe: the server runs its own loop in a thread, and the blocking helpers are meant for
`asyncio.to_thread` in async tests.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from . import FakeServer, HttpError, RecordedRequest, Reply

TEAM = "T0TALLY"
MAX_TEXT_CHARS = 40_000  # chat.postMessage's `msg_too_long`
SENDS = ("chat.postMessage", "chat.update", "chat.postEphemeral")


@dataclass(frozen=True)
class Sent:
    method: str  # one of SENDS
    channel: str
    text: str
    thread_ts: str | None = None
    ts: str = ""
    user: str = ""  # chat.postEphemeral's person
    blocks: list[dict[str, Any]] = field(default_factory=list)

    def buttons(self) -> list[dict[str, Any]]:
        return [e for b in self.blocks if b.get("type") == "actions" for e in b["elements"]]


@dataclass
class _Envelope:
    envelope_id: str
    kind: str
    payload: Any  # a dict from Slack; anything else in tests of bad envelopes
    attempts: int = 0


class FakeSlackServer(FakeServer):
    label = "slack"

    def __init__(self, *, bot_token: str, app_token: str, bot_user: str = "UBOT") -> None:
        super().__init__()
        self.bot_token = bot_token
        self.app_token = app_token
        self.bot_user = bot_user
        self._mutex = threading.RLock()
        self._changed = threading.Condition(self._mutex)
        self._sent: list[Sent] = []
        self._acks: list[str] = []
        self._unacked: dict[str, _Envelope] = {}
        self._tickets: set[str] = set()
        self._sockets: list[ServerConnection] = []
        self._opened = 0
        self._calls: dict[str, int] = {}
        self._rate_limits: dict[str, list[int]] = {}  # method -> Retry-After seconds to play
        self.files: dict[str, bytes] = {}
        self._ids = itertools.count(1)
        self._ws_server: Server | None = None
        self.ws_port = 0

    @property
    def api_url(self) -> str:
        return f"{self.base_url}/api/"

    # -- the test's side: what users do --

    def event(
        self,
        text: str = "",
        *,
        user: str = "U0ADA",
        channel: str = "D0ADA",
        kind: str = "message",
        thread_ts: str | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """An `event_callback` exactly as Slack delivers it: a direct message from Ada unless
        told otherwise (a channel id starting with C is a channel)."""
        number = next(self._ids)
        ts = f"{int(time.time())}.{number:06d}"
        event: dict[str, Any] = {"type": kind, "user": user, "text": text, "ts": ts}
        event |= {"channel": channel, "event_ts": ts, "team": TEAM}
        if kind == "message":
            event["channel_type"] = "im" if channel.startswith("D") else "channel"
        if thread_ts:
            event["thread_ts"] = thread_ts
        event |= fields
        return {
            "token": "verification-token-unused",
            "team_id": TEAM,
            "api_app_id": "A0TALLY",
            "event": event,
            "type": "event_callback",
            "event_id": f"Ev{number:08d}{secrets.token_hex(3).upper()}",
            "event_time": int(time.time()),
            "authorizations": [{"team_id": TEAM, "user_id": self.bot_user, "is_bot": True}],
        }

    def press(self, sent: Sent, label: str, *, user: str = "U0ADA") -> dict[str, Any]:
        """A `block_actions` payload: `user` pressed the button `label` of message `sent`."""
        for block in sent.blocks:
            for button in block.get("elements", []):
                if button["text"]["text"] == label:
                    action = {
                        "type": "button",
                        "action_id": button["action_id"],
                        "block_id": block.get("block_id", ""),
                        "value": button["value"],
                        "action_ts": f"{time.time():.6f}",
                    }
                    return {
                        "type": "block_actions",
                        "user": {"id": user, "team_id": TEAM},
                        "team": {"id": TEAM},
                        "api_app_id": "A0TALLY",
                        "trigger_id": f"{next(self._ids)}.{secrets.token_hex(6)}",
                        "channel": {"id": sent.channel},
                        "container": {"type": "message", "message_ts": sent.ts},
                        "message": {"ts": sent.ts, "text": sent.text, "blocks": sent.blocks},
                        "response_url": f"{self.base_url}/actions/unused",
                        "actions": [action],
                    }
        raise AssertionError(f"no button {label!r} in {sent}")

    def slash(
        self, command: str, text: str = "", *, user: str = "U0ADA", channel: str = "D0ADA"
    ) -> dict[str, str]:
        """A slash command's fields, as Slack sends them (a form over HTTP)."""
        return {
            "token": "verification-token-unused",
            "team_id": TEAM,
            "channel_id": channel,
            "user_id": user,
            "command": command,
            "text": text,
            "response_url": f"{self.base_url}/commands/unused",
            "trigger_id": f"{next(self._ids)}.{secrets.token_hex(6)}",
            "api_app_id": "A0TALLY",
        }

    def add_file(self, name: str, data: bytes) -> str:
        with self._mutex:
            self.files[name] = data
        return f"{self.base_url}/files/{name}"

    def rate_limit_next(self, method: str, retry_after_s: int = 1) -> None:
        """The next call of `method` is answered 429 with `Retry-After`."""
        with self._mutex:
            self._rate_limits.setdefault(method, []).append(retry_after_s)

    # -- the test's side: Socket Mode --

    def push(self, payload: Any, kind: str = "events_api") -> str:  # type: ignore[override]
        """Send `payload` in an envelope on the newest socket (waiting for one); its id."""
        envelope = _Envelope(f"env-{next(self._ids)}-{secrets.token_hex(4)}", kind, payload)
        with self._mutex:
            self._unacked[envelope.envelope_id] = envelope
        self._send(envelope, self._newest_socket())
        return envelope.envelope_id

    def push_raw(self, text: str) -> None:
        """Send `text` verbatim on the newest socket."""
        self._call_soon(self._newest_socket().send(text))

    def push_disconnect(self) -> None:
        """Slack's notice that this socket is about to be replaced (`type: disconnect`)."""
        self.push_raw(json.dumps({"type": "disconnect", "reason": "refresh_requested"}))

    def drop_sockets(self) -> None:
        """Cut every socket without a close frame, as a network failure would."""
        with self._changed:
            sockets, self._sockets = self._sockets, []
            self._changed.notify_all()
        for socket in sockets:
            assert self._loop is not None
            self._loop.call_soon_threadsafe(socket.transport.abort)

    def wait_connected(self, count: int = 1, timeout: float = 60.0) -> None:
        """Until `count` sockets were opened in all (reconnects count)."""
        self._wait(lambda: self._opened >= count, timeout, lambda: f"{self._opened} sockets")

    def wait_for_ack(self, envelope_id: str, timeout: float = 60.0) -> None:
        self._wait(lambda: envelope_id in self._acks, timeout, lambda: f"no ack {envelope_id}")

    def wait_open_sockets(self, count: int, timeout: float = 60.0) -> None:
        """Until exactly `count` sockets are open now (0: all closed)."""
        self._wait(
            lambda: len(self._sockets) == count,
            timeout,
            lambda: f"{len(self._sockets)} sockets open, not {count}",
        )

    @property
    def acks(self) -> list[str]:
        with self._mutex:
            return list(self._acks)

    @property
    def opened(self) -> int:
        with self._mutex:
            return self._opened

    # -- the test's side: what the bot did --

    def sent(self, method: str | None = "chat.postMessage") -> list[Sent]:
        with self._mutex:
            return [s for s in self._sent if method is None or s.method == method]

    def wait_for_sent(
        self, count: int, *, method: str | None = "chat.postMessage", timeout: float = 60.0
    ) -> list[Sent]:
        self._wait(
            lambda: len(self.sent(method)) >= count,
            timeout,
            lambda: f"{len(self.sent(method))} {method} sent, not {count}",
        )
        return self.sent(method)

    def wait_until(
        self, condition: Callable[[Self], bool], what: str, timeout: float = 60.0
    ) -> None:
        self._wait(lambda: condition(self), timeout, lambda: f"no {what}")

    def calls(self, method: str) -> int:
        with self._mutex:
            return self._calls.get(method, 0)

    def _wait(self, done: Callable[[], bool], timeout: float, why: Callable[[], str]) -> None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not done():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"within {timeout} s: {why()}")
                self._changed.wait(remaining)

    # -- the websocket --

    def start(self) -> Self:
        super().start()
        self._call_soon(self._start_websocket())
        return self

    def stop(self) -> None:
        if self._loop is not None and self._ws_server is not None:
            self._call_soon(self._stop_websocket())
        super().stop()

    def _call_soon(self, coroutine: Any) -> Any:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(30)

    def _newest_socket(self) -> ServerConnection:
        self._wait(lambda: bool(self._sockets), 60.0, lambda: "the app never connected")
        with self._mutex:
            return self._sockets[-1]

    def _send(self, envelope: _Envelope, socket: ServerConnection) -> None:
        envelope.attempts += 1
        message: dict[str, Any] = {
            "envelope_id": envelope.envelope_id,
            "type": envelope.kind,
            "payload": envelope.payload,
            "accepts_response_payload": envelope.kind != "events_api",
        }
        if envelope.kind == "events_api":
            message["retry_attempt"] = envelope.attempts - 1
            message["retry_reason"] = "" if envelope.attempts == 1 else "timeout"
        try:
            self._call_soon(socket.send(json.dumps(message)))
        except ConnectionClosed:
            pass  # delivered again on the next socket

    async def _start_websocket(self) -> None:
        self._ws_server = await serve(
            self._on_socket, self.host, 0, process_request=self._check_ticket, ping_interval=None
        )
        self.ws_port = next(iter(self._ws_server.sockets)).getsockname()[1]

    async def _stop_websocket(self) -> None:
        assert self._ws_server is not None
        with self._mutex:
            sockets = list(self._sockets)
        for socket in sockets:
            socket.transport.abort()
        self._ws_server.close()
        async with asyncio.timeout(5):
            await self._ws_server.wait_closed()
        self._ws_server = None

    async def _check_ticket(
        self, connection: ServerConnection, request: Request
    ) -> Response | None:
        url = urlsplit(request.path)
        ticket = parse_qs(url.query).get("ticket", [""])[0]
        with self._mutex:
            if url.path != "/link/" or ticket not in self._tickets:
                return connection.respond(HTTPStatus.UNAUTHORIZED, "invalid ticket\n")
            self._tickets.discard(ticket)  # one socket per URL
        return None

    async def _on_socket(self, socket: ServerConnection) -> None:
        await socket.send(json.dumps({"type": "hello", "num_connections": 1}))
        with self._changed:
            self._sockets.append(socket)
            self._opened += 1
            waiting = list(self._unacked.values())
            self._changed.notify_all()
        for envelope in waiting:  # Slack delivers what was not acknowledged again
            asyncio.get_running_loop().run_in_executor(None, self._send, envelope, socket)
        try:
            async for raw in socket:
                ack = json.loads(raw)
                with self._changed:
                    self._acks.append(str(ack.get("envelope_id")))
                    self._unacked.pop(str(ack.get("envelope_id")), None)
                    self._changed.notify_all()
        except ConnectionClosed:
            pass
        finally:
            with self._changed:
                if socket in self._sockets:
                    self._sockets.remove(socket)
                self._changed.notify_all()

    # -- the Web API --

    def error_body(self, error: HttpError) -> object:
        return {"ok": False, "error": error.error_type or "fatal_error"}

    async def route(self, request: RecordedRequest, reply: Reply) -> None:
        if request.method == "GET" and request.path.startswith("/files/"):
            await self._file(request, reply)
            return
        method = request.path.removeprefix("/api/")
        with self._changed:
            self._calls[method] = self._calls.get(method, 0) + 1
            limits = self._rate_limits.get(method, [])
            retry_after = limits.pop(0) if limits else None
            self._changed.notify_all()
        if retry_after is not None:
            body = {"ok": False, "error": "ratelimited"}
            await reply.json(429, body, {"retry-after": str(retry_after)})
            return
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        wanted = self.app_token if method == "apps.connections.open" else self.bot_token
        if token != wanted:
            await reply.json(200, {"ok": False, "error": "invalid_auth"})
            return
        answer = self._answer(method, request.body if isinstance(request.body, dict) else {})
        await reply.json(200, answer)

    def _answer(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        if method == "auth.test":
            return {"ok": True, "url": "https://tally-test.slack.com/", "team": "Tally Test"} | {
                "user": "tally",
                "team_id": TEAM,
                "user_id": self.bot_user,
                "bot_id": "B0TALLY",
            }
        if method == "apps.connections.open":
            ticket = secrets.token_urlsafe(16)
            with self._mutex:
                self._tickets.add(ticket)
            return {"ok": True, "url": f"ws://{self.host}:{self.ws_port}/link/?ticket={ticket}"}
        if method in SENDS:
            return self._record(method, body)
        return {"ok": False, "error": "unknown_method"}

    def _record(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        text, channel = str(body.get("text", "")), str(body.get("channel", ""))
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if len(text) > MAX_TEXT_CHARS:
            return {"ok": False, "error": "msg_too_long"}
        blocks = body.get("blocks") or []
        if isinstance(blocks, str):  # a form-encoded call sends them as JSON text
            blocks = json.loads(blocks)
        ts = str(body.get("ts") or f"{int(time.time())}.{next(self._ids):06d}")
        sent = Sent(
            method, channel, text, body.get("thread_ts"), ts, str(body.get("user", "")), blocks
        )
        with self._changed:
            self._sent.append(sent)
            self._changed.notify_all()
        return {"ok": True, "channel": channel, "ts": ts, "message": {"text": text, "ts": ts}}

    async def _file(self, request: RecordedRequest, reply: Reply) -> None:
        if request.headers.get("authorization") != f"Bearer {self.bot_token}":
            await reply.raw(200, b"<html>sign in to Slack</html>", "text/html")
            return
        with self._mutex:
            data = self.files.get(request.path.removeprefix("/files/"))
        if data is None:
            await reply.raw(404, b"not found", "text/plain")
            return
        await reply.raw(200, data, "image/png")
