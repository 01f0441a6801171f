"""A fake Discord: the REST API (`/api/v10/...`) and the gateway's websocket (`/gw`), on one
port on 127.0.0.1, speaking the real wire protocol to the real discord.py.

The gateway says HELLO (op 10), answers HEARTBEAT (op 1) with HEARTBEAT_ACK (op 11), takes
IDENTIFY (op 2) with READY (a session id and a `resume_gateway_url` pointing back here), and
RESUME (op 6) with every dispatch the session missed after the client's `seq`, then RESUMED;
an unknown session gets INVALID_SESSION (op 9, d=false). A test `dispatch`es MESSAGE_CREATE and
INTERACTION_CREATE events to a bot's session, `drop`s its connection (what is dispatched
meanwhile waits for the resume), or sends RECONNECT (op 7).

REST: `GET /users/@me` (the token check; 401 `{"message": "401: Unauthorized", "code": 0}` to an
unknown token), `GET /oauth2/applications/@me`, `POST /channels/{id}/messages` (content over
2,000 characters is 400 code 50035), `POST /channels/{id}/typing`,
`POST /interactions/{id}/{token}/callback`, and attachments at `/attachments/{name}`.
`rate_limit_next` answers the next message send with 429 `retry_after` and the X-RateLimit
headers (or the global limit). Replies carry `Content-Type: application/json` exactly, as
discord.py compares the whole header. Thread-safe: the server runs its own loop in a thread;
the blocking helpers (`wait_for_*`) are meant for `asyncio.to_thread` in async tests.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Self

from aiohttp import WSMsgType, web

from . import discord_payloads as payloads
from .discord_payloads import APPLICATION_ID, snowflake

MAX_CONTENT = 2000
HEARTBEAT_MS = 41_250
MESSAGE_CONTENT = 1 << 15  # the privileged intent's bit


@dataclass(frozen=True)
class Sent:
    token: str
    channel_id: str
    content: str
    reference: dict[str, Any] | None
    components: list[dict[str, Any]]
    allowed_mentions: dict[str, Any] | None


@dataclass(frozen=True)
class Callback:
    interaction_id: str
    token: str
    type: int
    data: dict[str, Any]


@dataclass
class _Session:
    session_id: str
    token: str
    events: list[dict[str, Any]] = field(default_factory=list)  # every dispatch, with its seq
    seq: int = 0
    socket: web.WebSocketResponse | None = None


class FakeDiscordServer:
    def __init__(self) -> None:
        self._mutex = threading.RLock()
        self._changed = threading.Condition(self._mutex)
        self.bots: dict[str, dict[str, Any]] = {}  # token -> bot user
        self.files: dict[str, bytes] = {}
        self._sessions: dict[str, _Session] = {}
        self._current: dict[str, str] = {}  # token -> its latest session id
        self._sent: list[Sent] = []
        self._callbacks: list[Callback] = []
        self._rate_limits: list[tuple[float, bool]] = []
        self.send_attempts = 0
        self.identifies: list[dict[str, Any]] = []
        self.resumes: list[dict[str, Any]] = []
        self.heartbeats = 0
        self.typing: list[str] = []
        # Bots whose application may not have the Message Content intent: an IDENTIFY asking
        # for it is closed with 4014, as Discord does until the Developer Portal allows it.
        self.intents_refused: set[str] = set()  # channel ids "typing…" was shown in
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # ---- lifecycle ----------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_base_url(self) -> str:
        return f"{self.base_url}/api/v10"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gw"

    def __enter__(self) -> Self:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        loop = self._loop
        if loop is not None and self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    def _run(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        app = web.Application()
        app.router.add_get("/gw", self._gateway)
        app.router.add_route("*", "/attachments/{name}", self._attachment)
        app.router.add_route("*", "/api/v10/{path:.*}", self._rest)
        self._runner = web.AppRunner(app)
        loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        ready.set()
        loop.run_forever()
        loop.close()

    # ---- the test's side ----------------------------------------------------------------

    def add_bot(self, token: str, *, user_id: str, username: str) -> dict[str, Any]:
        user = {
            "id": user_id,
            "username": username,
            "discriminator": "0",
            "global_name": None,
            "avatar": None,
            "bot": True,
        }
        with self._mutex:
            self.bots[token] = user
        return user

    def snowflake(self) -> str:
        return snowflake()

    def message(self, text: str, **fields: Any) -> dict[str, Any]:
        """A MESSAGE_CREATE's data (a direct message unless `guild_id` is given)."""
        return payloads.message(text, **fields)

    def attachment(self, name: str, content_type: str = "image/png") -> dict[str, Any]:
        size = len(self.files.get(name, b""))
        return payloads.attachment(self.base_url, name, size, content_type)

    def press(self, custom_id: str, **fields: Any) -> dict[str, Any]:
        """An INTERACTION_CREATE's data: a button pressed (type 3)."""
        return payloads.press(custom_id, **fields)

    def dispatch(self, token: str, event: str, data: dict[str, Any]) -> int:
        """Dispatch `event` to `token`'s current session (sent now if connected, else on its
        RESUME); its seq."""
        with self._mutex:
            session = self._sessions[self._current[token]]
            session.seq += 1
            seq = session.seq
            frame = {"op": 0, "t": event, "s": seq, "d": data}
            session.events.append(frame)
            socket = session.socket
        if socket is not None:
            try:
                self._call(socket.send_str(json.dumps(frame)))
            except ConnectionResetError:
                # The bot is leaving this connection (after RECONNECT, say) and has not resumed
                # yet: as Discord does, the session keeps the event and its RESUME replays it.
                pass
        return seq

    def drop(self, token: str) -> None:
        """Cut the bot's connection (as a network failure would); the session stays resumable."""
        with self._mutex:
            session = self._sessions[self._current[token]]
            socket, session.socket = session.socket, None
        if socket is not None:
            self._call(socket.close(code=4000, message=b"dropped"))

    def send_op(self, token: str, op: int, d: Any = None) -> None:
        """A gateway op to the bot (7 RECONNECT, 9 INVALID_SESSION, 1 HEARTBEAT)."""
        with self._mutex:
            socket = self._sessions[self._current[token]].socket
        assert socket is not None
        self._call(socket.send_str(json.dumps({"op": op, "d": d})))

    def send_raw(self, token: str, text: str) -> None:
        """A text frame as is (a dispatch that does not read, or no JSON at all)."""
        with self._mutex:
            socket = self._sessions[self._current[token]].socket
        assert socket is not None
        self._call(socket.send_str(text))

    def rate_limit_next(self, retry_after: float, *, is_global: bool = False) -> None:
        with self._mutex:
            self._rate_limits.append((retry_after, is_global))

    def sent(self, channel_id: str | None = None, token: str | None = None) -> list[Sent]:
        with self._mutex:
            return [
                s
                for s in self._sent
                if (channel_id is None or s.channel_id == channel_id)
                and (token is None or s.token == token)
            ]

    def callbacks(self) -> list[Callback]:
        with self._mutex:
            return list(self._callbacks)

    def wait_for_sent(
        self, count: int, channel_id: str | None = None, token: str | None = None
    ) -> list[Sent]:
        self.wait_until(
            lambda: len(self.sent(channel_id, token)) >= count,
            what=f"{count} messages sent to {channel_id or 'any channel'}",
        )
        return self.sent(channel_id, token)

    def wait_connected(self, token: str, count: int = 1) -> None:
        """Until `token` has a live connection that identified or resumed `count` times in all."""

        def connected() -> bool:
            tokens = [i["token"] for i in self.identifies + self.resumes]
            session = self._sessions.get(self._current.get(token, ""))
            return tokens.count(token) >= count and session is not None and bool(session.socket)

        self.wait_until(connected, what=f"{token} connected {count} times")

    def open_sockets(self, token: str) -> int:
        with self._mutex:
            return sum(
                1 for s in self._sessions.values() if s.token == token and s.socket is not None
            )

    def wait_open(self, token: str, count: int) -> None:
        """Until `token` has exactly `count` live gateway connections."""
        self.wait_until(
            lambda: self.open_sockets(token) == count, what=f"{count} connections of {token}"
        )

    def wait_until(self, condition: Callable[[], bool], *, what: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not condition():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"fake Discord: timed out waiting for {what}")
                self._changed.wait(min(left, 0.5))

    # ---- the gateway --------------------------------------------------------------------

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        await socket.send_json({"op": 10, "d": {"heartbeat_interval": HEARTBEAT_MS}})
        session: _Session | None = None
        async for frame in socket:
            if frame.type != WSMsgType.TEXT:
                continue
            payload = json.loads(frame.data)
            op, d = payload.get("op"), payload.get("d")
            if op == 1:
                with self._changed:
                    self.heartbeats += 1
                    self._changed.notify_all()
                await socket.send_json({"op": 11})
            elif op == 2:
                session = await self._identify(socket, d)
            elif op == 6:
                session = await self._resume(socket, d)
        with self._changed:
            if session is not None and session.socket is socket:
                session.socket = None
            self._changed.notify_all()
        return socket

    async def _identify(self, socket: web.WebSocketResponse, d: dict[str, Any]) -> _Session | None:
        user = self.bots.get(d.get("token", ""))
        if user is None:
            await socket.close(code=4004, message=b"Authentication failed.")
            return None
        if d["token"] in self.intents_refused and int(d.get("intents", 0)) & MESSAGE_CONTENT:
            await socket.close(code=4014, message=b"Disallowed intent(s).")
            return None
        session = _Session(f"session-{self.snowflake()}", d["token"], seq=1)
        ready = {
            "v": 10,
            "user": user,
            "guilds": [],
            "session_id": session.session_id,
            "resume_gateway_url": self.gateway_url,
            "application": {"id": APPLICATION_ID, "flags": 0},
        }
        with self._changed:
            self._sessions[session.session_id] = session
            self._current[d["token"]] = session.session_id
            session.socket = socket
            self.identifies.append(d)
            self._changed.notify_all()
        await socket.send_json({"op": 0, "t": "READY", "s": 1, "d": ready})
        return session

    async def _resume(self, socket: web.WebSocketResponse, d: dict[str, Any]) -> _Session | None:
        with self._changed:
            session = self._sessions.get(d.get("session_id", ""))
            if session is None or session.token != d.get("token"):
                session = None
            else:
                session.socket = socket
                self.resumes.append(d)
                missed = [e for e in session.events if e["s"] > (d.get("seq") or 0)]
            self._changed.notify_all()
        if session is None:
            await socket.send_json({"op": 9, "d": False})
            return None
        for event in missed:  # what the dropped connection did not deliver, in order
            await socket.send_json(event)
        with self._mutex:
            session.seq += 1
            seq = session.seq
        await socket.send_json({"op": 0, "t": "RESUMED", "s": seq, "d": {}})
        return session

    # ---- REST ---------------------------------------------------------------------------

    async def _rest(self, request: web.Request) -> web.Response:
        token = request.headers.get("Authorization", "").removeprefix("Bot ")
        path, method = request.match_info["path"], request.method
        if path.startswith("interactions/") and path.endswith("/callback"):
            return await self._callback(request, path)
        user = self.bots.get(token)
        if user is None:
            return _json({"message": "401: Unauthorized", "code": 0}, 401)
        if (method, path) == ("GET", "users/@me"):
            return _json(user)
        if (method, path) == ("GET", "oauth2/applications/@me"):
            return _json(payloads.application(user))
        parts = path.split("/")
        if method == "POST" and len(parts) == 3 and parts[0] == "channels":
            if parts[2] == "typing":
                with self._changed:
                    self.typing.append(parts[1])
                    self._changed.notify_all()
                return web.Response(status=204)
            if parts[2] == "messages":
                return await self._send(request, token, parts[1], user)
        return _json({"message": "404: Not Found", "code": 0}, 404)

    async def _send(
        self, request: web.Request, token: str, channel_id: str, user: dict[str, Any]
    ) -> web.Response:
        body = await request.json()
        with self._changed:
            self.send_attempts += 1
            limit = self._rate_limits.pop(0) if self._rate_limits else None
            self._changed.notify_all()
        if limit is not None:
            return _rate_limited(*limit)
        content = body.get("content") or ""
        if len(content) > MAX_CONTENT:
            return _json(
                {
                    "message": "Invalid Form Body",
                    "code": 50035,
                    "errors": {"content": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH"}]}},
                },
                400,
            )
        sent = Sent(
            token,
            channel_id,
            content,
            body.get("message_reference"),
            body.get("components") or [],
            body.get("allowed_mentions"),
        )
        with self._changed:
            self._sent.append(sent)
            self._changed.notify_all()
        message = self.message(content, channel_id=channel_id, author_id=user["id"])
        message["author"] = user
        return _json(message)

    async def _callback(self, request: web.Request, path: str) -> web.Response:
        _, interaction_id, token, _ = path.split("/")
        body = await request.json()
        with self._changed:
            self._callbacks.append(
                Callback(interaction_id, token, body.get("type"), body.get("data") or {})
            )
            self._changed.notify_all()
        return web.Response(status=204)

    async def _attachment(self, request: web.Request) -> web.Response:
        raw = self.files.get(request.match_info["name"])
        if raw is None:
            return _json({"message": "404: Not Found", "code": 0}, 404)
        return web.Response(body=raw, headers={"Content-Type": "application/octet-stream"})

    def _call(self, coroutine: Any) -> None:
        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(10)


def _json(body: object, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status,
        body=json.dumps(body).encode(),
        # Discord's answers come through Google's front (`Via`); discord.py takes a 429 without
        # it for a Cloudflare ban and does not retry.
        headers={"Content-Type": "application/json", "Via": "1.1 google", **(headers or {})},
    )


def _rate_limited(retry_after: float, is_global: bool) -> web.Response:
    headers = {
        "X-RateLimit-Limit": "5",
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset-After": str(retry_after),
        "X-RateLimit-Bucket": "fake-bucket",
        "X-RateLimit-Scope": "global" if is_global else "user",
    }
    if is_global:
        headers["X-RateLimit-Global"] = "true"
    body = {"message": "You are being rate limited.", "retry_after": retry_after}
    body["global"] = is_global
    return _json(body, 429, headers)
