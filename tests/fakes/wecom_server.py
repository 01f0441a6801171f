"""A fake WeCom (企业微信) for a self-built app, over real HTTP on 127.0.0.1.

`base_url` plays `https://qyapi.weixin.qq.com`: `GET /cgi-bin/gettoken?corpid&corpsecret`
hands out access tokens (7,200 s unless told otherwise; `expire_tokens()` makes every token
handed out so far answer errcode 42001), `POST /cgi-bin/message/send?access_token` records
what the app sent (refusing content over 2,048 bytes with errcode 45002, as WeCom does),
`GET /cgi-bin/agent/get?agentid` describes the app and `GET /cgi-bin/media/get` serves files.
Every answer is WeCom's `{"errcode", "errmsg", ...}` with HTTP 200. `fail_next` scripts
errcodes (45009: the API's rate limit).

`callback(...)` builds what WeCom posts to an app's callback URL: the message's XML
encrypted and signed, computed here with `cryptography` on its own (not Tally's code).
Thread-safe: the blocking `wait_*` helpers are meant for `asyncio.to_thread` in async tests.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Self
from xml.sax.saxutils import escape

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from . import FakeServer, HttpError, RecordedRequest, Reply

MAX_CONTENT_BYTES = 2048
ERRMSG = {
    40001: "invalid credential",
    40013: "invalid corpid",
    40014: "invalid access_token",
    42001: "access_token expired",
    45002: "content size out of limit",
    45009: "api freq out of limit",
    60011: "no privilege to access/modify contact/party/agent",
    301002: "not allow operate another agent with this accesstoken.",
}


@dataclass(frozen=True)
class App:
    corp_id: str
    agent_id: int
    secret: str
    token: str  # the callback's Token
    aes_key: str  # the callback's EncodingAESKey
    name: str = "Tally"


@dataclass(frozen=True)
class Sent:
    """One message the app sent successfully."""

    to_user: str
    agent_id: int
    msgtype: str
    content: str


class FakeWeComServer(FakeServer):
    label = "wecom"

    def __init__(self, *, token_expires_in: int = 7200, **options: Any) -> None:
        super().__init__(**options)
        self._mutex = threading.RLock()
        self._changed = threading.Condition(self._mutex)
        self.token_expires_in = token_expires_in
        self.apps: dict[str, App] = {}  # secret -> app
        self.files: dict[str, bytes] = {}  # media id -> content
        self._tokens: dict[str, App] = {}
        self._expired: set[str] = set()
        self._sent: list[Sent] = []
        self._calls: dict[str, int] = {}
        self._failures: deque[tuple[str, int]] = deque()

    # -- the test's side --

    def add_app(self, app: App) -> App:
        with self._mutex:
            self.apps[app.secret] = app
        return app

    def expire_tokens(self) -> None:
        """Every token handed out so far now answers 42001 (expired)."""
        with self._mutex:
            self._expired |= set(self._tokens)

    def fail_next(self, path: str, errcode: int, times: int = 1) -> None:
        """The next `times` calls of `path` (e.g. "message/send") answer `errcode`."""
        with self._mutex:
            self._failures.extend([(path, errcode)] * times)

    def calls(self, path: str) -> int:
        with self._mutex:
            return self._calls.get(path, 0)

    def sent(self, to_user: str | None = None) -> list[Sent]:
        with self._mutex:
            return [s for s in self._sent if to_user is None or s.to_user == to_user]

    def wait_for_sent(
        self, count: int, *, to_user: str | None = None, timeout: float = 60.0
    ) -> list[Sent]:
        self.wait_until(
            lambda server: len(server.sent(to_user)) >= count,
            f"{count} messages sent to {to_user or 'anyone'}",
            timeout,
        )
        return self.sent(to_user)

    def wait_until(
        self, condition: Callable[[Self], bool], what: str, timeout: float = 60.0
    ) -> None:
        """Until `condition(self)` holds; checked whenever a call arrives."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not condition(self):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"within {timeout} s: no {what}: sent {self._sent}")
                self._changed.wait(remaining)

    # -- WeCom's side of a callback --

    @staticmethod
    def message_xml(
        text: str = "",
        *,
        app: App,
        user: str = "ada",
        msgtype: str = "text",
        msg_id: str | None = None,
        create_time: int | None = None,
        media_id: str = "",
        event: str = "",
    ) -> bytes:
        """A message to the app, as WeCom's plaintext XML."""
        fields: list[tuple[str, str, bool]] = [
            ("ToUserName", app.corp_id, True),
            ("FromUserName", user, True),
            ("CreateTime", str(create_time or int(time.time())), False),
            ("MsgType", msgtype, True),
        ]
        if msgtype == "text":
            fields.append(("Content", text, True))
        if msgtype == "image":
            fields += [
                ("PicUrl", "https://example.invalid/p.jpg", True),
                ("MediaId", media_id, True),
            ]
        if msgtype == "event":
            fields.append(("Event", event, True))
        else:
            fields.append(("MsgId", msg_id or str(secrets.randbelow(10**18) + 10**18), False))
        fields.append(("AgentID", str(app.agent_id), False))
        return xml_of(fields)

    @staticmethod
    def callback(
        app: App,
        plaintext: bytes,
        *,
        timestamp: int | None = None,
        nonce: str | None = None,
        token: str | None = None,
        corp_id: str | None = None,
    ) -> tuple[dict[str, str], bytes]:
        """The query and body WeCom posts for `plaintext` (signed with `token`, for `corp_id`)."""
        encrypted = encrypt(app.aes_key, plaintext, corp_id or app.corp_id)
        query = signed_query(token or app.token, encrypted, timestamp=timestamp, nonce=nonce)
        body = xml_of(
            [
                ("ToUserName", app.corp_id, True),
                ("AgentID", str(app.agent_id), True),
                ("Encrypt", encrypted, True),
            ]
        )
        return query, body

    # -- the API --

    def error_body(self, error: HttpError) -> object:
        return {"errcode": error.status, "errmsg": error.message}

    async def route(self, request: RecordedRequest, reply: Reply) -> None:
        path = request.path.removeprefix("/cgi-bin/")
        with self._changed:
            self._calls[path] = self._calls.get(path, 0) + 1
            failure = next((f for f in self._failures if f[0] == path), None)
            if failure is not None:
                self._failures.remove(failure)
            self._changed.notify_all()
        if failure is not None:
            await reply.json(200, _error(failure[1]))
            return
        if (request.method, path) == ("GET", "media/get"):
            content = self.files.get(request.query.get("media_id", ""))
            if self._app_of(request) is None or content is None:
                await reply.json(200, _error(40007 if content is None else 40014))
            else:
                await reply.raw(200, content, "image/png")
            return
        handler = {
            ("GET", "gettoken"): self._gettoken,
            ("POST", "message/send"): self._send,
            ("GET", "agent/get"): self._agent,
        }.get((request.method, path))
        answer = _error(404, f"no API at {request.method} {path}")
        if handler is not None:
            answer = handler(request)
        with self._changed:
            self._changed.notify_all()
        await reply.json(200, answer)

    def _gettoken(self, request: RecordedRequest) -> dict[str, Any]:
        with self._mutex:
            app = self.apps.get(request.query.get("corpsecret", ""))
            if app is None:
                return _error(40001)
            if app.corp_id != request.query.get("corpid"):
                return _error(40013)
            token = secrets.token_hex(16)
            self._tokens[token] = app
        return {
            "errcode": 0,
            "errmsg": "ok",
            "access_token": token,
            "expires_in": self.token_expires_in,
        }

    def _app_of(self, request: RecordedRequest) -> App | dict[str, Any] | None:
        token = request.query.get("access_token", "")
        with self._mutex:
            if token in self._expired:
                return _error(42001)
            return self._tokens.get(token) or _error(40014)

    def _send(self, request: RecordedRequest) -> dict[str, Any]:
        app = self._app_of(request)
        if not isinstance(app, App):
            return app or _error(40014)
        body = request.body if isinstance(request.body, dict) else {}
        if body.get("agentid") != app.agent_id:
            return _error(301002)
        msgtype = body.get("msgtype")
        content = (
            (body.get(msgtype) or {}).get("content", "") if msgtype in ("text", "markdown") else ""
        )
        if not isinstance(content, str) or not content:
            return _error(44004, "empty content")
        if len(content.encode()) > MAX_CONTENT_BYTES:
            return _error(45002)
        with self._changed:
            self._sent.append(Sent(str(body.get("touser")), app.agent_id, str(msgtype), content))
            self._changed.notify_all()
        return {"errcode": 0, "errmsg": "ok", "invaliduser": "", "msgid": secrets.token_hex(8)}

    def _agent(self, request: RecordedRequest) -> dict[str, Any]:
        app = self._app_of(request)
        if not isinstance(app, App):
            return app or _error(40014)
        if request.query.get("agentid") != str(app.agent_id):
            return _error(60011)
        return {"errcode": 0, "errmsg": "ok", "agentid": app.agent_id, "name": app.name}


def _error(errcode: int, errmsg: str | None = None) -> dict[str, Any]:
    return {"errcode": errcode, "errmsg": errmsg or ERRMSG.get(errcode, "error")}


def xml_of(fields: list[tuple[str, str, bool]]) -> bytes:
    """`<xml>` of (name, value, as CDATA) as WeCom writes it: strings in CDATA, numbers bare."""
    parts = [
        f"<{name}><![CDATA[{value}]]></{name}>" if cdata else f"<{name}>{escape(value)}</{name}>"
        for name, value, cdata in fields
    ]
    return ("<xml>" + "".join(parts) + "</xml>").encode()


def encrypt(aes_key: str, plaintext: bytes, corp_id: str) -> str:
    """WeCom's Encrypt: AES-256-CBC (IV = key[:16]) of random(16) + len(4, big-endian) + the
    message + the corp id, PKCS#7 padded to 32 bytes, in base64."""
    key = base64.b64decode(aes_key + "=")
    data = os.urandom(16) + struct.pack(">I", len(plaintext)) + plaintext + corp_id.encode()
    pad = 32 - len(data) % 32
    data += bytes([pad]) * pad
    encryptor = Cipher(algorithms.AES(key), modes.CBC(key[:16])).encryptor()
    return base64.b64encode(encryptor.update(data) + encryptor.finalize()).decode()


def signed_query(
    token: str, encrypted: str, *, timestamp: int | None = None, nonce: str | None = None
) -> dict[str, str]:
    stamp = str(timestamp if timestamp is not None else int(time.time()))
    nonce = nonce or str(secrets.randbelow(10**10))
    digest = hashlib.sha1("".join(sorted([token, stamp, nonce, encrypted])).encode()).hexdigest()
    return {"msg_signature": digest, "timestamp": stamp, "nonce": nonce}
