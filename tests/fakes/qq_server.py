"""A fake QQ Bot Open Platform (API v2): the access-token endpoint, the message routes, the
websocket gateway, and a signer for webhook calls, over real HTTP and a real websocket on
127.0.0.1.

`base_url` plays both `https://api.sgroup.qq.com` (or `api.bot.qq.com`) and the token host.
`POST /app/getAppAccessToken` issues tokens (`Authorization: QQBot <token>`; `expires_in` a
string, as QQ sends it); `POST /v2/groups/{group_openid}/messages` and
`POST /v2/users/{openid}/messages` take passive replies: the `msg_id` must be one the platform
delivered, each `msg_seq` once per `msg_id` (QQ: "消息被去重"), at most `MAX_REPLIES` replies per
message and `MAX_CONTENT_CHARS` characters each. `GET /users/@me` names the bot; `GET /gateway`
names the websocket, which speaks QQ's opcodes: HELLO (10), IDENTIFY (2), RESUME (6),
HEARTBEAT (1) / ACK (11), READY / RESUMED and message dispatches (0), each with a sequence
number `s`, kept per session so a RESUME gets again every dispatch after the `seq` it names.

`fail_next` scripts one error on a route (429 with Retry-After, 5xx...), `expire_tokens` makes
every token so far refused (401), `drop_connections` cuts the websocket without a close frame.
`webhook_headers` signs a webhook call as QQ does: ed25519 with the seed made of the AppSecret
(built here with `cryptography` alone, independently of Tally's code).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Self

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from . import FakeServer, HttpError, RecordedRequest, Reply

MAX_REPLIES = 5  # passive replies QQ takes to one message
MAX_CONTENT_CHARS = 5000
DEDUPLICATED = 40054005  # the same msg_id and msg_seq again
INVALID_TOKEN = 11244
GROUP_AND_C2C = 1 << 25
GROUP, PRIVATE = "GROUP_AT_MESSAGE_CREATE", "C2C_MESSAGE_CREATE"


def seed_of(secret: str) -> bytes:
    """The ed25519 seed QQ derives from an AppSecret: the secret repeated, cut to 32 bytes."""
    raw = secret.encode()
    return (raw * (32 // len(raw) + 1))[:32]


def sign(secret: str, message: bytes) -> str:
    return Ed25519PrivateKey.from_private_bytes(seed_of(secret)).sign(message).hex()


def webhook_headers(secret: str, body: bytes, timestamp: int | None = None) -> dict[str, str]:
    """The headers QQ signs a webhook call with."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    return {
        "X-Signature-Ed25519": sign(secret, ts.encode() + body),
        "X-Signature-Timestamp": ts,
        "X-Bot-Appid": "fake",
        "Content-Type": "application/json",
    }


@dataclass(frozen=True)
class Sent:
    """One message the bot sent successfully."""

    group: bool
    target: str  # the group's openid, or the person's
    app_id: str  # whose token sent it
    msg_id: str
    msg_seq: int
    msg_type: int
    text: str  # `content`, or `markdown.content`


@dataclass
class _Session:
    app_id: str
    events: list[dict[str, Any]] = field(default_factory=list)  # every dispatch, by s - 1
    connection: ServerConnection | None = None


class Refused(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class FakeQQServer(FakeServer):
    label = "qq"

    def __init__(self, *, heartbeat_interval_ms: int = 41_250, **options: Any) -> None:
        super().__init__(**options)
        self._mutex = threading.RLock()
        self._changed = threading.Condition(self._mutex)
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.answer_heartbeats = True  # False: a gateway that went quiet
        self.token_expires_in = 7200
        self.apps: dict[str, str] = {}  # app id -> secret
        self.files: dict[str, bytes] = {}  # what GET /files/<name> serves (users' pictures)
        self._tokens: dict[str, str] = {}  # token -> app id
        self._messages: dict[str, str] = {}  # msg id delivered -> its chat
        self._seqs: dict[tuple[str, str], set[int]] = {}  # (app, msg id) -> msg_seq used
        self._sent: list[Sent] = []
        self._calls: dict[str, int] = {}
        self._failures: list[tuple[str, HttpError, bool]] = []
        self._sessions: dict[str, _Session] = {}  # session id -> session
        self._opened: dict[str, int] = {}  # app id -> connections ever identified/resumed
        self.frames: list[dict[str, Any]] = []  # every frame the bot sent on the websocket
        self._ids = itertools.count(1)
        self._ws_server: Server | None = None
        self.ws_port = 0

    # -- the test's side --

    def add_app(self, app_id: str, secret: str) -> None:
        with self._mutex:
            self.apps[app_id] = secret

    def group_message(
        self, text: str, *, group: str = "group-1", member: str = "member-1"
    ) -> dict[str, Any]:
        """A group @-message as QQ delivers it (the @-mention already cut, a space left)."""
        author = {"id": member, "member_openid": member}
        return self._event(GROUP, {"content": " " + text, "group_openid": group, "author": author})

    def private_message(
        self, text: str, *, user: str = "user-1", picture: str | None = None
    ) -> dict[str, Any]:
        """A private message; with `picture`, an image attachment at the fake's /files/<it>."""
        data: dict[str, Any] = {"content": text, "author": {"id": user, "user_openid": user}}
        if picture is not None:
            url = f"{self.base_url}/files/{picture}"
            data["attachments"] = [{"content_type": "image/png", "filename": picture, "url": url}]
        return self._event(PRIVATE, data)

    def add_file(self, name: str, content: bytes) -> None:
        with self._mutex:
            self.files[name] = content

    def _event(self, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        msg_id = f"ROBOT1.0_{secrets.token_hex(8)}"
        chat = data.get("group_openid") or data["author"]["user_openid"]
        with self._mutex:
            self._messages[msg_id] = chat
        message = {"id": msg_id, "timestamp": "2026-12-05T04:00:00+08:00", **data}
        return {"op": 0, "id": f"{kind}:{secrets.token_hex(6)}", "t": kind, "d": message}

    def expire_tokens(self) -> None:
        with self._mutex:
            self._tokens.clear()

    def fail_next(self, route: str, error: HttpError, *, after_keeping: bool = False) -> None:
        """The next call of `route` ("token", "send", "me", "gateway") answers `error`; with
        `after_keeping`, a send is recorded first (QQ failed after it took the message)."""
        with self._mutex:
            self._failures.append((route, error, after_keeping))

    def calls(self, route: str) -> int:
        with self._mutex:
            return self._calls.get(route, 0)

    def sent(self, target: str | None = None) -> list[Sent]:
        with self._mutex:
            return [s for s in self._sent if target is None or s.target == target]

    def wait_for_sent(
        self, count: int, *, target: str | None = None, timeout: float = 60.0
    ) -> list[Sent]:
        self._wait(
            lambda: len(self.sent(target)) >= count,
            timeout,
            lambda: f"the bot sent {len(self.sent(target))}, not {count}, to {target or 'all'}",
        )
        return self.sent(target)

    def wait_until(
        self, condition: Callable[[Self], bool], what: str, timeout: float = 60.0
    ) -> None:
        self._wait(lambda: condition(self), timeout, lambda: f"no {what}")

    def opened(self, app_id: str) -> int:
        with self._mutex:
            return self._opened.get(app_id, 0)

    def wait_connected(self, app_id: str, count: int = 1, timeout: float = 60.0) -> None:
        """Until the app has identified or resumed `count` times in all."""
        self._wait(lambda: self.opened(app_id) >= count, timeout, lambda: f"{app_id} not connected")

    # The base class's push() queues model replies; a platform pushes dispatches instead.
    def push(self, app_id: str, event: dict[str, Any]) -> int:  # type: ignore[override]
        """Deliver `event` on the app's gateway session (now, or at its RESUME); its `s`."""
        self._wait(lambda: self._session_of(app_id) is not None, 60.0, lambda: "no session")
        with self._mutex:
            session = self._session_of(app_id)
            assert session is not None
            frame = {**event, "s": len(session.events) + 1}
            session.events.append(frame)
            connection = session.connection
        if connection is not None and self._loop is not None:
            sending = self._send(connection, frame)
            asyncio.run_coroutine_threadsafe(sending, self._loop).result(60)
        return int(frame["s"])

    def drop_connections(self, app_id: str) -> None:
        """Cut the app's websocket without a close frame, as a network failure would."""
        with self._changed:
            session = self._session_of(app_id)
            connection = session.connection if session else None
            if session:
                session.connection = None
        if connection is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(connection.transport.abort)

    def _session_of(self, app_id: str) -> _Session | None:
        with self._mutex:
            found = [s for s in self._sessions.values() if s.app_id == app_id]
            return found[-1] if found else None

    def _wait(self, done: Callable[[], bool], timeout: float, why: Callable[[], str]) -> None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not done():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"within {timeout} s: {why()}")
                self._changed.wait(remaining)

    # -- the websocket gateway --

    def start(self) -> Self:
        super().start()
        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(self._start_websocket(), self._loop).result(5)
        return self

    def stop(self) -> None:
        if self._loop is not None and self._ws_server is not None:
            asyncio.run_coroutine_threadsafe(self._stop_websocket(), self._loop).result(10)
        super().stop()

    async def _start_websocket(self) -> None:
        self._ws_server = await serve(
            self._on_websocket, self.host, 0, ping_interval=None, close_timeout=2
        )
        self.ws_port = self._ws_server.sockets[0].getsockname()[1]

    async def _stop_websocket(self) -> None:
        assert self._ws_server is not None
        with self._mutex:
            connections = [s.connection for s in self._sessions.values() if s.connection]
        for connection in connections:
            connection.transport.abort()
        self._ws_server.close()
        async with asyncio.timeout(5):
            await self._ws_server.wait_closed()
        self._ws_server = None

    async def _send(self, connection: ServerConnection, frame: dict[str, Any]) -> None:
        try:
            await connection.send(json.dumps(frame, ensure_ascii=False))
        except ConnectionClosed:
            pass  # dropped meanwhile: the bot resumes and gets it again

    async def _on_websocket(self, connection: ServerConnection) -> None:
        hello = {"op": 10, "d": {"heartbeat_interval": self.heartbeat_interval_ms}}
        await connection.send(json.dumps(hello))
        try:
            async for raw in connection:
                frame = json.loads(raw)
                with self._changed:
                    self.frames.append(frame)
                    self._changed.notify_all()
                await self._on_frame(connection, frame)
        except ConnectionClosed:
            pass

    async def _on_frame(self, connection: ServerConnection, frame: dict[str, Any]) -> None:
        op, data = frame.get("op"), frame.get("d") or {}
        if op == 1:
            if self.answer_heartbeats:
                await connection.send(json.dumps({"op": 11}))
            return
        app_id = self._app_of(str(data.get("token", "")).removeprefix("QQBot "))
        if op == 2 and app_id and int(data.get("intents", 0)) & GROUP_AND_C2C:
            session_id = secrets.token_hex(8)
            with self._changed:
                self._sessions[session_id] = _Session(app_id, connection=connection)
                self._opened[app_id] = self._opened.get(app_id, 0) + 1
                self._changed.notify_all()
            ready = {
                "version": 1,
                "session_id": session_id,
                "user": {"id": "bot-1"},
                "shard": [0, 1],
            }
            await connection.send(json.dumps({"op": 0, "s": 0, "t": "READY", "d": ready}))
        elif op == 6 and app_id and data.get("session_id") in self._sessions:
            with self._changed:
                session = self._sessions[data["session_id"]]
                session.connection = connection
                missed = [e for e in session.events if e["s"] > int(data.get("seq") or 0)]
                self._opened[app_id] = self._opened.get(app_id, 0) + 1
                self._changed.notify_all()
            await connection.send(json.dumps({"op": 0, "t": "RESUMED", "d": ""}))
            for event in missed:
                await self._send(connection, event)
        else:  # a bad token, no intents, an unknown session: op 9, start again
            await connection.send(json.dumps({"op": 9, "d": False}))

    def _app_of(self, token: str) -> str | None:
        with self._mutex:
            return self._tokens.get(token)

    # -- the HTTP API --

    def error_body(self, error: HttpError) -> object:
        return {"code": error.status * 100, "message": error.message}

    async def route(self, request: RecordedRequest, reply: Reply) -> None:
        if request.method == "GET" and request.path.startswith("/files/"):
            with self._mutex:
                content = self.files.get(request.path.removeprefix("/files/"))
            if content is None:
                await reply.json(404, {"code": 404, "message": "file expired"})
            else:
                await reply.raw(200, content, "image/png")
            return
        name, target = _route(request)
        if name is None:
            await reply.json(404, {"code": 404, "message": "not found"})
            return
        with self._changed:
            self._calls[name] = self._calls.get(name, 0) + 1
            self._changed.notify_all()
            failure = next((f for f in self._failures if f[0] == name), None)
            if failure is not None:
                self._failures.remove(failure)
        if failure is not None:
            if failure[2]:
                with contextlib.suppress(Refused):
                    self._answer(name, target, request)
            await self.play(failure[1], request, reply)
            return
        try:
            body = self._answer(name, target, request)
        except Refused as refusal:
            await reply.json(refusal.status, {"code": refusal.code, "message": refusal.message})
            return
        await reply.json(200, body)

    def _answer(self, name: str, target: tuple[bool, str], request: RecordedRequest) -> object:
        body = request.body if isinstance(request.body, dict) else {}
        if name == "token":
            if self.apps.get(str(body.get("appId"))) != body.get("clientSecret") or not body:
                raise Refused(401, 100016, "invalid appid or secret")
            token = secrets.token_hex(16)
            with self._mutex:
                self._tokens[token] = str(body["appId"])
            return {"access_token": token, "expires_in": str(self.token_expires_in)}
        auth = request.headers.get("authorization", "")
        app_id = self._app_of(auth.removeprefix("QQBot ")) if auth.startswith("QQBot ") else None
        if app_id is None:
            raise Refused(401, INVALID_TOKEN, "token not exist or expire")
        if name == "me":
            return {"id": "bot-1", "username": "Tally QQ", "avatar": "", "union_openid": "u1"}
        if name == "gateway":
            return {"url": f"ws://{self.host}:{self.ws_port}/websocket"}
        return self._send_message(app_id, target, body)

    def _send_message(self, app_id: str, target: tuple[bool, str], body: dict[str, Any]) -> object:
        group, openid = target
        msg_id, seq, msg_type = body.get("msg_id"), body.get("msg_seq", 1), body.get("msg_type")
        if msg_type == 2:
            text = str((body.get("markdown") or {}).get("content", ""))
        elif msg_type == 0:
            text = str(body.get("content", ""))
        else:
            raise Refused(400, 40034001, f"fake: msg_type {msg_type}")
        if not text or len(text) > MAX_CONTENT_CHARS:
            raise Refused(400, 40034006, "content empty or too long")
        with self._changed:
            if self._messages.get(str(msg_id)) != openid:
                raise Refused(400, 40034024, "msg_id invalid for this chat")
            used = self._seqs.setdefault((app_id, str(msg_id)), set())
            if seq in used:
                raise Refused(400, DEDUPLICATED, "消息被去重，请检查请求msgseq")
            if len(used) >= MAX_REPLIES:
                raise Refused(400, 40034025, "passive reply limit reached")
            used.add(int(seq))
            sent = Sent(group, openid, app_id, str(msg_id), int(seq), int(msg_type), text)
            self._sent.append(sent)
            self._changed.notify_all()
        return {"id": secrets.token_hex(8), "timestamp": int(time.time())}


def _route(request: RecordedRequest) -> tuple[str | None, tuple[bool, str]]:
    parts = request.path.strip("/").split("/")
    if request.method == "POST" and request.path == "/app/getAppAccessToken":
        return "token", (False, "")
    if request.method == "GET" and request.path == "/users/@me":
        return "me", (False, "")
    if request.method == "GET" and request.path == "/gateway":
        return "gateway", (False, "")
    if request.method == "POST" and len(parts) == 4 and parts[0] == "v2" and parts[3] == "messages":
        if parts[1] in ("groups", "users"):
            return "send", (parts[1] == "groups", parts[2])
    return None, (False, "")
