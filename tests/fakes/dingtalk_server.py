"""A fake DingTalk platform: Stream mode's gateway and websocket, the robot OpenAPI, and
session webhooks, over real HTTP and a real websocket on 127.0.0.1.

`base_url` plays `https://api.dingtalk.com` and also hosts session webhooks and file downloads.
`POST /v1.0/gateway/connections/open` hands out a one-use ticket for the websocket endpoint (a
port of its own); a test then `push`es robot messages there as CALLBACK frames, and every ACK the
client answers is recorded. The OpenAPI side issues access tokens (`x-acs-dingtalk-access-token`),
sends robot messages one-to-one (`oToMessages/batchSend`) and to groups (`groupMessages/send`) and
serves files by download code. Like the real platform it refuses a text over 5,000 characters,
answers OpenAPI errors as `{"code", "message", "requestid"}` (a missing, unknown or expired token:
400 `InvalidAuthentication`) and session webhook errors as HTTP 200 with a nonzero `errcode`.

`fail_next` scripts one error (`QPS_LIMITED` is the OpenAPI rate limit, `errcode=130101` the
webhook's); `hang` makes a route accept and never answer; `hang_websocket_handshake` does the
same to the websocket port. Thread-safe: the server runs its own loop in a thread, and the
blocking helpers (`push`, `wait_for_*`) are meant for `asyncio.to_thread` in async tests.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from . import FakeServer, HttpError, RecordedRequest, Reply

BOT_TOPIC = "/v1.0/im/bot/messages/get"
MAX_TEXT_CHARS = 5000
CORP_ID = "ding-corp-1"
# The real platform answers a bad token with HTTP 400, not 401 (seen in the wild as
# `[400] {"code":"InvalidAuthentication","message":"不合法的access_token"}`).
INVALID_TOKEN_STATUS = 400
QPS_LIMITED = HttpError(
    403, "调用该接口触发了限流", error_type="Forbidden.AccessDenied.QpsLimitForApi"
)
WEBHOOK_ERRORS = {
    130101: "send too fast, exceed 20 times per minute",
    300001: "session 不存在或已过期",
    460101: "message too long",
    40035: "缺少参数 msgtype",
}
ROUTES = {
    "/v1.0/gateway/connections/open": "open",
    "/v1.0/oauth2/accessToken": "accessToken",
    "/v1.0/robot/oToMessages/batchSend": "batchSend",
    "/v1.0/robot/groupMessages/send": "groupSend",
    "/v1.0/robot/messageFiles/download": "download",
    "/robot/sendBySession": "session",
}
DEFAULT_CODES = {400: "invalidParameter", 401: "InvalidAuthentication", 403: "Forbidden"}


@dataclass(frozen=True)
class App:
    client_id: str  # also the appKey of the OpenAPI
    client_secret: str
    robot_code: str


@dataclass(frozen=True)
class Sent:
    """One message the robot sent successfully."""

    via: str  # "session" | "batchSend" | "groupSend"
    robot_code: str
    target: str  # the session id, the userIds joined by ",", or the openConversationId
    title: str
    text: str
    msgtype: str  # the webhook's msgtype, or the OpenAPI's msgKey


@dataclass(frozen=True)
class WebhookError:
    errcode: int
    errmsg: str


class Refused(Exception):
    """An error answer, raised from deep in a handler."""

    def __init__(self, error: HttpError | WebhookError) -> None:
        super().__init__(error)
        self.error = error


def refused(status: int, code: str, message: str) -> Refused:
    """An OpenAPI error: HTTP `status` with `{"code", "message", "requestid"}`."""
    return Refused(HttpError(status, message, error_type=code))


def webhook_error(errcode: int) -> Refused:
    """A session webhook error: HTTP 200 with `{"errcode", "errmsg"}`."""
    return Refused(WebhookError(errcode, WEBHOOK_ERRORS[errcode]))


@dataclass
class _Link:
    connection: ServerConnection
    connection_id: str


class FakeDingTalkServer(FakeServer):
    label = "dingtalk"

    def __init__(self, *, token_expire_in: int = 7200, **options: Any) -> None:
        super().__init__(**options)
        self._mutex = threading.RLock()  # this fake's state; the base class's _lock keeps requests
        self._changed = threading.Condition(self._mutex)
        self.token_expire_in = token_expire_in
        self.hang_websocket_handshake = False
        self.apps: dict[str, App] = {}
        self.files: dict[str, bytes] = {}  # download code -> content
        self._sessions: dict[str, tuple[str, float]] = {}  # id -> (robot code, expiry epoch)
        self._tokens: dict[str, tuple[str, float]] = {}  # token -> (client id, expiry epoch)
        self._tickets: dict[str, str] = {}  # ticket -> client id, until used
        self._handshakes: dict[ServerConnection, str] = {}  # accepted, not yet handled
        self._links: dict[str, list[_Link]] = {}  # client id -> open connections, oldest first
        self._opened: dict[str, int] = {}  # client id -> connections ever opened
        self._acks: dict[str, dict[str, Any]] = {}
        self._sent: list[Sent] = []
        self._calls: dict[str, int] = {}
        self._failures: deque[tuple[str, HttpError | WebhookError]] = deque()
        self._hanging: set[str] = set()
        self._ids = itertools.count(1)
        self._ws_server: Server | None = None
        self._stopping: asyncio.Event | None = None
        self.ws_port = 0

    # -- the test's side: apps, messages, sessions, files --

    def add_app(self, client_id: str, client_secret: str, robot_code: str) -> App:
        app = App(client_id, client_secret, robot_code)
        with self._mutex:
            self.apps[client_id] = app
        return app

    def robot_message(
        self,
        text: str = "",
        *,
        robot_code: str,
        conversation_id: str = "cid-private-1",
        conversation_type: str = "1",
        sender_staff_id: str = "staff-1",
        sender_id: str = "$:LWCP_v1:$ada",
        sender_nick: str = "Ada",
        is_in_at_list: bool = False,
        msgtype: str = "text",
        download_code: str | None = None,
        session_webhook: str | None = None,
        webhook_expires_in_s: float = 3600,
    ) -> dict[str, Any]:
        """A robot message exactly as DingTalk delivers it in a CALLBACK frame's data."""
        now = time.time()
        bot_user = f"$:LWCP_v1:$bot-{robot_code}"
        message: dict[str, Any] = {
            "msgId": f"msg{secrets.token_hex(8)}",
            "msgtype": msgtype,
            "conversationId": conversation_id,
            "conversationType": conversation_type,
            "isInAtList": is_in_at_list,
            "senderStaffId": sender_staff_id,
            "senderId": sender_id,
            "senderNick": sender_nick,
            "senderCorpId": CORP_ID,
            "chatbotCorpId": CORP_ID,
            "chatbotUserId": bot_user,
            "robotCode": robot_code,
            "sessionWebhook": session_webhook
            or self.new_session_webhook(webhook_expires_in_s, robot_code=robot_code),
            "sessionWebhookExpiredTime": int((now + webhook_expires_in_s) * 1000),
            "createAt": int(now * 1000),
            "atUsers": [{"dingtalkId": bot_user}] if is_in_at_list else [],
        }
        if conversation_type == "2":
            message["conversationTitle"] = "Test group"
        if msgtype == "picture":
            message["content"] = {
                "downloadCode": download_code,
                "pictureDownloadCode": download_code,
            }
        else:
            # DingTalk cuts the @mention out of a group message but keeps the space after it.
            at = " " if conversation_type == "2" and is_in_at_list else ""
            message["text"] = {"content": at + text}
        return message

    def new_session_webhook(self, expires_in_s: float = 3600, *, robot_code: str = "") -> str:
        session = f"sess-{secrets.token_hex(8)}"
        with self._mutex:
            self._sessions[session] = (robot_code, time.time() + expires_in_s)
        return f"{self.base_url}/robot/sendBySession?session={session}"

    def expire_session(self, url: str) -> None:
        session = parse_qs(urlsplit(url).query)["session"][0]
        with self._mutex:
            self._sessions[session] = (self._sessions[session][0], 0.0)

    def add_file(self, download_code: str, data: bytes) -> None:
        with self._mutex:
            self.files[download_code] = data

    def expire_tokens(self) -> None:
        """Every token issued so far is refused from now on."""
        with self._mutex:
            self._tokens.clear()

    # -- the test's side: scripting --

    def fail_next(
        self,
        route: str,
        error: HttpError | None = None,
        *,
        errcode: int | None = None,
        errmsg: str | None = None,
    ) -> None:
        """The next call of `route` (a name in ROUTES' values) answers `error`, or for
        "session" the webhook error `errcode`, e.g. `fail_next("session", errcode=130101)`."""
        if route not in ROUTES.values() or (error is None) == (errcode is None):
            raise ValueError(f"fail_next({route!r}) takes a route and an error or an errcode")
        if errcode is not None and route != "session":
            raise ValueError("errcode is for the session webhook; OpenAPI errors are HttpError")
        failure: HttpError | WebhookError | None = error
        if errcode is not None:
            failure = WebhookError(errcode, errmsg or WEBHOOK_ERRORS.get(errcode, "scripted"))
        assert failure is not None
        with self._mutex:
            self._failures.append((route, failure))

    def hang(self, route: str, hanging: bool = True) -> None:
        """From now on `route` accepts each request and never answers (until `hang(route,
        False)` for later requests, or `stop()`)."""
        with self._mutex:
            if hanging:
                self._hanging.add(route)
            else:
                self._hanging.discard(route)

    # -- the test's side: the websocket --

    # The base class's push() queues model replies; a chat platform pushes frames instead.
    def push(self, client_id: str, message: dict[str, Any]) -> str:  # type: ignore[override]
        """Send `message` as a bot CALLBACK frame on the app's newest connection, waiting for
        one up to 60 s; the frame's messageId."""
        data = json.dumps(message, ensure_ascii=False)
        return self._send_frame(client_id, "CALLBACK", BOT_TOPIC, data)

    def push_raw(self, client_id: str, data: str) -> str:
        """Send `data` verbatim as a CALLBACK frame's data (JSON or not); the frame's id."""
        return self._send_frame(client_id, "CALLBACK", BOT_TOPIC, data)

    def push_system_disconnect(self, client_id: str) -> str:
        """The gateway's notice that it is about to close this connection."""
        return self._send_frame(client_id, "SYSTEM", "disconnect", "{}")

    def drop_connections(self, client_id: str) -> None:
        """Cut every connection of the app without a close frame, as a network failure would."""
        with self._changed:
            links = self._links.pop(client_id, [])
            self._changed.notify_all()
        for link in links:
            if self._loop is not None:
                self._loop.call_soon_threadsafe(link.connection.transport.abort)

    def wait_connected(self, client_id: str, count: int = 1, timeout: float = 60.0) -> None:
        """Until the app has opened `count` websocket connections in all (reconnects count)."""
        self._wait(
            lambda: self._opened.get(client_id, 0) >= count,
            timeout,
            lambda: f"{client_id} opened {self._opened.get(client_id, 0)} connections, not {count}",
        )

    def opened(self, client_id: str) -> int:
        """How many websocket connections the app has opened in all."""
        with self._mutex:
            return self._opened.get(client_id, 0)

    def wait_open_links(self, client_id: str, count: int, timeout: float = 60.0) -> None:
        """Until exactly `count` of the app's connections are open now (0: all closed)."""
        self._wait(
            lambda: len(self._links.get(client_id, [])) == count,
            timeout,
            lambda: f"{client_id} has {len(self._links.get(client_id, []))} open, not {count}",
        )

    def wait_for_ack(self, message_id: str, timeout: float = 60.0) -> dict[str, Any]:
        self._wait(lambda: message_id in self._acks, timeout, lambda: f"no ACK for {message_id}")
        with self._mutex:
            return self._acks[message_id]

    def acks(self) -> dict[str, dict[str, Any]]:
        with self._mutex:
            return dict(self._acks)

    def calls(self, route: str) -> int:
        """How many requests `route` (a name in ROUTES, or "session") received."""
        with self._mutex:
            return self._calls.get(route, 0)

    def wait_until(
        self, condition: Callable[[Self], bool], what: str, timeout: float = 60.0
    ) -> None:
        """Until `condition(self)` holds; it is checked whenever a call or ACK arrives."""
        self._wait(lambda: condition(self), timeout, lambda: f"no {what}")

    @property
    def open_calls(self) -> int:
        with self._mutex:
            return self._calls.get("open", 0)

    @property
    def token_requests(self) -> int:
        with self._mutex:
            return self._calls.get("accessToken", 0)

    def sent(self, target: str | None = None) -> list[Sent]:
        with self._mutex:
            return [s for s in self._sent if target is None or s.target == target]

    def wait_for_sent(
        self, count: int, *, target: str | None = None, timeout: float = 60.0
    ) -> list[Sent]:
        """Until the robot has sent at least `count` messages (to `target`); those messages."""
        self._wait(
            lambda: len(self.sent(target)) >= count,
            timeout,
            lambda: (
                f"the robot sent {len(self.sent(target))}, not {count}, to {target or 'all'}:"
                f" {[s.text[:60] for s in self._sent]}"
            ),
        )
        return self.sent(target)

    def _wait(self, done: Callable[[], bool], timeout: float, why: Callable[[], str]) -> None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not done():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"within {timeout} s: {why()}")
                self._changed.wait(remaining)

    def _send_frame(self, client_id: str, kind: str, topic: str, data: str) -> str:
        self._wait(
            lambda: bool(self._links.get(client_id)), 60.0, lambda: f"{client_id} never connected"
        )
        with self._mutex:
            link = self._links[client_id][-1]
        message_id = f"{kind.lower()}-{next(self._ids)}-{secrets.token_hex(4)}"
        headers = {"appId": client_id, "connectionId": link.connection_id}
        headers |= {"contentType": "application/json", "messageId": message_id}
        headers |= {"time": str(int(time.time() * 1000)), "topic": topic}
        frame = {"specVersion": "1.0", "type": kind, "headers": headers, "data": data}
        assert self._loop is not None
        sending = link.connection.send(json.dumps(frame, ensure_ascii=False))
        asyncio.run_coroutine_threadsafe(sending, self._loop).result(60)
        return message_id

    # -- starting and stopping the websocket side in the server's loop --

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
        self._stopping = asyncio.Event()
        # No server pings, no handshake timeout: the gateway says nothing on its own, so a
        # client's own keepalive is what finds a dead link, and a hung handshake stays hung.
        self._ws_server = await serve(
            self._on_websocket,
            self.host,
            0,
            process_request=self._check_ticket,
            open_timeout=None,
            ping_interval=None,
            close_timeout=2,
        )
        self.ws_port = self._ws_server.sockets[0].getsockname()[1]

    async def _stop_websocket(self) -> None:
        assert self._stopping is not None and self._ws_server is not None
        self._stopping.set()  # hung handshakes and requests end
        with self._mutex:
            links = [link for links in self._links.values() for link in links]
        for link in links:
            link.connection.transport.abort()
        self._ws_server.close()
        async with asyncio.timeout(5):
            await self._ws_server.wait_closed()
        self._ws_server = None

    async def _check_ticket(
        self, connection: ServerConnection, request: Request
    ) -> Response | None:
        if self.hang_websocket_handshake:
            assert self._stopping is not None
            await self._stopping.wait()
            return connection.respond(HTTPStatus.SERVICE_UNAVAILABLE, "stopping\n")
        url = urlsplit(request.path)
        if url.path != "/connect":
            return connection.respond(HTTPStatus.NOT_FOUND, "not found\n")
        ticket = parse_qs(url.query).get("ticket", [""])[0]
        with self._mutex:
            client_id = self._tickets.pop(ticket, None)  # a ticket opens one connection
            if client_id is None:
                return connection.respond(HTTPStatus.UNAUTHORIZED, "invalid ticket\n")
            self._handshakes[connection] = client_id
        return None

    async def _on_websocket(self, connection: ServerConnection) -> None:
        link = _Link(connection, f"conn-{secrets.token_hex(6)}")
        with self._changed:
            client_id = self._handshakes.pop(connection)
            self._links.setdefault(client_id, []).append(link)
            self._opened[client_id] = self._opened.get(client_id, 0) + 1
            self._changed.notify_all()
        try:
            async for raw in connection:
                ack = json.loads(raw)
                with self._changed:
                    self._acks[ack.get("headers", {}).get("messageId", "")] = ack
                    self._changed.notify_all()
        except ConnectionClosed:
            pass  # dropped, by the client or by drop_connections
        finally:
            with self._changed:
                if link in self._links.get(client_id, []):
                    self._links[client_id].remove(link)
                self._changed.notify_all()

    # -- the platform's HTTP side --

    def error_body(self, error: HttpError) -> object:
        code = error.error_type or DEFAULT_CODES.get(error.status, "ServiceUnavailable")
        return {"code": code, "message": error.message, "requestid": secrets.token_hex(8)}

    async def route(self, request: RecordedRequest, reply: Reply) -> None:
        try:
            if request.method == "GET" and request.path.startswith("/files/"):
                content = self._file(request.path.removeprefix("/files/"))
                await reply.raw(200, content, "application/octet-stream")
                return
            name = ROUTES.get(request.path) if request.method == "POST" else None
            if name is None:
                raise refused(404, "NotFound", f"no API at {request.method} {request.path}")
            if self._count_call(name):
                await self._hang_up(reply)
                return
            self._play_failure(name)
            body = getattr(self, f"_r_{name}")(request)
        except Refused as refusal:
            await self._refuse(refusal.error, reply)
            return
        await reply.json(200, body)

    def _count_call(self, name: str) -> bool:
        """Count a call of route `name`; whether it hangs."""
        with self._changed:
            self._calls[name] = self._calls.get(name, 0) + 1
            self._changed.notify_all()
            return name in self._hanging

    async def _hang_up(self, reply: Reply) -> None:
        """Never answer; at `stop()` close the socket without a word."""
        assert self._stopping is not None
        await self._stopping.wait()
        reply.cut()

    def _play_failure(self, name: str) -> None:
        with self._mutex:
            for index, (route, error) in enumerate(self._failures):
                if route == name:
                    del self._failures[index]
                    raise Refused(error)

    async def _refuse(self, error: HttpError | WebhookError, reply: Reply) -> None:
        if isinstance(error, WebhookError):  # the webhook answers errors with HTTP 200
            await reply.json(200, {"errcode": error.errcode, "errmsg": error.errmsg})
            return
        headers = dict(error.headers)
        if error.retry_after is not None:
            headers["retry-after"] = error.retry_after
        await reply.json(error.status, self.error_body(error), headers)

    def _file(self, code: str) -> bytes:
        with self._mutex:
            content = self.files.get(code)
        if content is None:
            raise refused(404, "NotFound", "no such file")
        return content

    # Each `_r_<route>` answers one route's body, or raises Refused.

    def _r_open(self, request: RecordedRequest) -> object:
        body = _body(request)
        app = self.apps.get(str(body.get("clientId")))
        if app is None or body.get("clientSecret") != app.client_secret:
            raise refused(401, "InvalidAuthentication", "clientId 或 clientSecret 不正确")
        ticket = secrets.token_urlsafe(24)  # has characters the client must quote_plus
        with self._mutex:
            self._tickets[ticket] = app.client_id
        return {"endpoint": f"ws://{self.host}:{self.ws_port}/connect", "ticket": ticket}

    def _r_accessToken(self, request: RecordedRequest) -> object:
        body = _body(request)
        app = self.apps.get(str(body.get("appKey")))
        if app is None:
            raise refused(400, "invalidClientId", "无效的clientId")
        if body.get("appSecret") != app.client_secret:
            raise refused(400, "invalidClientSecret", "无效的clientSecret")
        token = secrets.token_hex(16)
        with self._mutex:
            self._tokens[token] = (app.client_id, time.time() + self.token_expire_in)
        return {"accessToken": token, "expireIn": self.token_expire_in}

    def _r_batchSend(self, request: RecordedRequest) -> object:
        body = self._robot_call(request)
        user_ids = body.get("userIds") or []
        if not user_ids:
            raise refused(400, "invalidParameter.userIds.empty", "userIds 为空")
        self._record("batchSend", body, ",".join(user_ids))
        return {"processQueryKey": secrets.token_hex(12)}

    def _r_groupSend(self, request: RecordedRequest) -> object:
        body = self._robot_call(request)
        self._record("groupSend", body, str(body.get("openConversationId", "")))
        return {"processQueryKey": secrets.token_hex(12)}

    def _r_download(self, request: RecordedRequest) -> object:
        code = str(self._robot_call(request).get("downloadCode"))
        if code not in self.files:
            raise refused(404, "resource.not.found", "downloadCode 不存在")
        return {"downloadUrl": f"{self.base_url}/files/{code}"}

    def _r_session(self, request: RecordedRequest) -> object:
        session = request.query.get("session", "")
        with self._mutex:
            robot_code, expires = self._sessions.get(session, ("", 0.0))
        if expires < time.time():
            raise webhook_error(300001)
        body = _body(request)
        msgtype = str(body.get("msgtype"))
        if msgtype not in ("markdown", "text"):
            raise webhook_error(40035)
        part = body.get(msgtype) or {}
        text = str(part.get("text" if msgtype == "markdown" else "content", ""))
        if len(text) > MAX_TEXT_CHARS:
            raise webhook_error(460101)
        sent = Sent("session", robot_code, session, str(part.get("title", "")), text, msgtype)
        self._add_sent(sent)
        return {"errcode": 0, "errmsg": "ok"}

    def _robot_call(self, request: RecordedRequest) -> dict[str, Any]:
        """The body of an OpenAPI robot call, once its token and robotCode check out."""
        with self._mutex:
            client_id, expires = self._tokens.get(
                request.headers.get("x-acs-dingtalk-access-token", ""), ("", 0.0)
            )
            app = self.apps.get(client_id)
        if app is None or expires < time.time():
            raise refused(INVALID_TOKEN_STATUS, "InvalidAuthentication", "不合法的access_token")
        body = _body(request)
        if body.get("robotCode") != app.robot_code:
            raise refused(400, "invalidParameter.robotCode.auth", "robotCode 与应用不匹配")
        return body

    def _record(self, via: str, body: dict[str, Any], target: str) -> None:
        key = str(body.get("msgKey"))
        try:
            param = json.loads(body.get("msgParam") or "")
        except (TypeError, json.JSONDecodeError):
            raise refused(400, "invalidParameter.msgParam.invalid", "msgParam 须为 JSON") from None
        if key == "sampleMarkdown":
            title, text = str(param.get("title", "")), str(param.get("text", ""))
        elif key == "sampleText":
            title, text = "", str(param.get("content", ""))
        else:
            raise refused(400, "invalidParameter.msgKey.invalid", f"fake: msgKey {key}")
        if len(text) > MAX_TEXT_CHARS:
            raise refused(400, "invalidParameter.param.invalid", "消息内容过长")
        self._add_sent(Sent(via, str(body.get("robotCode")), target, title, text, key))

    def _add_sent(self, sent: Sent) -> None:
        with self._changed:
            self._sent.append(sent)
            self._changed.notify_all()


def _body(request: RecordedRequest) -> dict[str, Any]:
    return request.body if isinstance(request.body, dict) else {}
