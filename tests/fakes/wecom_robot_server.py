"""A fake WeCom intelligent robot's long connection (智能机器人长连接), a real websocket on
127.0.0.1 speaking the `wecom-aibot-python-sdk`'s protocol: JSON frames `{cmd, headers:
{req_id}, body}`.

The robot subscribes with `aibot_subscribe` (`body: {bot_id, secret}`; acknowledged
`errcode` 0, or 40001 for a secret that is not the robot's), pings (`ping`, acknowledged), and
answers a message by `aibot_respond_msg` with the message's `req_id` (a `stream` message,
or a `template_card`), each acknowledged. A test `push`es messages (`aibot_msg_callback`) and
reads what the robot replied. Thread-safe; the blocking helpers are for `asyncio.to_thread`.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Self

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed


@dataclass(frozen=True)
class Reply:
    """One reply the robot sent (acknowledged)."""

    req_id: str
    msgtype: str
    stream_id: str
    finish: bool
    content: str
    body: dict[str, Any]


class FakeRobotServer:
    def __init__(self, bot_id: str, secret: str) -> None:
        self.bot_id = bot_id
        self.secret = secret
        self.port = 0
        self._changed = threading.Condition(threading.RLock())
        self._links: list[ServerConnection] = []  # authenticated, oldest first
        self.subscribes: list[dict[str, Any]] = []
        self._replies: list[Reply] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: Server | None = None

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    # -- the test's side --

    def message(
        self,
        text: str,
        *,
        user: str = "ada",
        chat_id: str | None = None,
        msgid: str | None = None,
    ) -> dict[str, Any]:
        """A message frame as WeCom pushes it (a group's when `chat_id` is given)."""
        body: dict[str, Any] = {
            "msgid": msgid or secrets.token_hex(16),
            "aibotid": self.bot_id,
            "chattype": "group" if chat_id else "single",
            "from": {"userid": user},
            "msgtype": "text",
            "text": {"content": text},
        }
        if chat_id:
            body["chatid"] = chat_id
        req_id = f"req-{secrets.token_hex(8)}"
        return {"cmd": "aibot_msg_callback", "headers": {"req_id": req_id}, "body": body}

    def press(self, card: Reply, key: str, *, user: str = "ada") -> dict[str, Any]:
        """The event frame WeCom pushes when `user` presses the button `key` of `card`."""
        template_card = card.body["template_card"]
        event = {
            "eventtype": "template_card_event",
            "template_card_event": {
                "card_type": template_card["card_type"],
                "event_key": key,
                "task_id": template_card["task_id"],
            },
        }
        body = {
            "msgid": secrets.token_hex(16),
            "aibotid": self.bot_id,
            "chattype": "single",
            "from": {"userid": user},
            "msgtype": "event",
            "event": event,
        }
        req_id = f"req-{secrets.token_hex(8)}"
        return {"cmd": "aibot_event_callback", "headers": {"req_id": req_id}, "body": body}

    def push(self, frame: dict[str, Any] | str) -> None:
        """Send `frame` (or raw text) to the newest authenticated connection."""
        self.wait_until(lambda s: bool(s._links), "an authenticated connection")
        with self._changed:
            link = self._links[-1]
        data = frame if isinstance(frame, str) else json.dumps(frame, ensure_ascii=False)
        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(link.send(data), self._loop).result(30)

    def open_links(self) -> int:
        """How many authenticated connections are open now."""
        with self._changed:
            return len(self._links)

    def replies(self) -> list[Reply]:
        with self._changed:
            return list(self._replies)

    def wait_for_replies(self, count: int, timeout: float = 60.0) -> list[Reply]:
        self.wait_until(lambda s: len(s.replies()) >= count, f"{count} replies", timeout)
        return self.replies()

    def wait_connected(self, count: int = 1) -> None:
        self.wait_until(lambda s: len(s.subscribes) >= count, f"{count} subscriptions")

    def wait_until(
        self, condition: Callable[[Self], bool], what: str, timeout: float = 60.0
    ) -> None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not condition(self):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"within {timeout} s: no {what}: {self._replies}")
                self._changed.wait(remaining)

    # -- running --

    def __enter__(self) -> Self:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self._thread.start()
        ready.wait(5)
        return self

    def __exit__(self, *_: object) -> None:
        if self._loop is not None and self._thread is not None:
            asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)

    def _run(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._server = loop.run_until_complete(self._serve())
        self.port = self._server.sockets[0].getsockname()[1]
        ready.set()
        loop.run_forever()
        loop.close()

    async def _serve(self) -> Server:
        return await serve(self._on_websocket, "127.0.0.1", 0, ping_interval=None)

    async def _stop(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _on_websocket(self, connection: ServerConnection) -> None:
        try:
            async for raw in connection:
                await self._answer(connection, json.loads(raw))
        except ConnectionClosed:
            pass
        finally:
            with self._changed:
                if connection in self._links:
                    self._links.remove(connection)
                self._changed.notify_all()

    async def _answer(self, connection: ServerConnection, frame: dict[str, Any]) -> None:
        cmd, req_id = frame.get("cmd"), frame.get("headers", {}).get("req_id", "")
        errcode = 0
        if cmd == "aibot_subscribe":
            body = frame.get("body", {})
            ok = (body.get("bot_id"), body.get("secret")) == (self.bot_id, self.secret)
            errcode = 0 if ok else 40001
            with self._changed:
                self.subscribes.append(body)
                if ok:
                    self._links.append(connection)
                self._changed.notify_all()
        elif cmd in ("aibot_respond_msg", "aibot_send_msg", "aibot_respond_update_msg"):
            body = frame.get("body", {})
            stream = body.get("stream", {})
            reply = Reply(
                req_id,
                str(body.get("msgtype") or body.get("response_type")),
                str(stream.get("id", "")),
                bool(stream.get("finish")),
                str(stream.get("content") or body.get("markdown", {}).get("content", "")),
                body,
            )
            with self._changed:
                self._replies.append(reply)
                self._changed.notify_all()
        ack = {
            "headers": {"req_id": req_id},
            "errcode": errcode,
            "errmsg": "ok" if not errcode else "invalid secret",
        }
        await connection.send(json.dumps(ack))
