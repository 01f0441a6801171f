"""Fake vendor servers speaking the real wire protocols over real HTTP on 127.0.0.1.

Each server runs its own event loop in a background thread, so tests drive the real SDKs
against it from any loop. Scripted steps (below) are played one per model call; with the queue
empty a server answers `ok: <first 40 chars of the last user text>`.

Like a real vendor, a server can answer 401 to a wrong key (`api_key`), 404 to an unknown model
(`known_models`) or to a wrong path, 400 to bytes that are not HTTP (a TLS handshake sent to
its plain-HTTP port), and serve HTTPS with a certificate no client trusts (`tls=True`).
`SilentServer` accepts connections and never answers.

This package shares nothing with `backend/`: it plays the vendor, not Tally.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import socket
import ssl
import threading
from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qsl

# ---- steps: what the next model call answers ---------------------------------------------------


@dataclass(frozen=True)
class Text:
    """A text reply, streamed word by word; `thinking` is streamed first as reasoning
    (OpenAI-compatible: `reasoning_content` deltas; Anthropic: a thinking block). `pause_s`
    is waited after each streamed event, as a slow model takes its time."""

    text: str
    thinking: str = ""
    pause_s: float = 0.0

    async def pause(self) -> None:
        if self.pause_s:
            await asyncio.sleep(self.pause_s)


@dataclass(frozen=True)
class Call:
    """One tool call. `arguments` given as a string is sent verbatim, so it can be malformed."""

    name: str
    arguments: Mapping[str, object] | str = field(default_factory=dict)
    id: str | None = None

    def arguments_json(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass(frozen=True)
class ToolCalls:
    """A reply asking for one or more tool calls, after optional text. `thinking` is streamed
    first as reasoning, as with `Text`; `redacted_thinking` (Anthropic only) adds a
    `redacted_thinking` block carrying it as opaque data."""

    calls: Sequence[Call]
    text: str = ""
    thinking: str = ""
    redacted_thinking: str = ""


@dataclass(frozen=True)
class HttpError:
    """An HTTP error with a vendor-shaped body. `error_type` defaults from the status
    (Anthropic: 529 → overloaded_error, 429 → rate_limit_error, ...)."""

    status: int
    message: str = "scripted failure"
    retry_after: str | None = None
    error_type: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Delay:
    """Wait `seconds` before answering with `then` (default: the default reply)."""

    seconds: float
    then: Step | None = None


@dataclass(frozen=True)
class StreamCut:
    """Stream the first `sent_words` words of `text`, then close the socket mid-body."""

    text: str = "this reply is cut off before it ends"
    sent_words: int = 2


@dataclass(frozen=True)
class Empty:
    """A complete reply with no text and no tool call."""


@dataclass(frozen=True)
class StreamError:
    """Stream `text`, then an in-stream error event (`error_type`), then end the stream."""

    error_type: str = "overloaded_error"
    message: str = "Overloaded"
    text: str = ""


@dataclass(frozen=True)
class Shapeless:
    """HTTP 200 with JSON that parses but is no answer (`{}`, `{"choices": []}`...): `body` as
    the whole reply, or streamed as one chunk before the stream ends."""

    body: Mapping[str, object]


Step = str | Text | ToolCalls | HttpError | Delay | StreamCut | Empty | StreamError | Shapeless
Answer = Text | ToolCalls | StreamCut | Empty | StreamError | Shapeless  # each protocol renders


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: Any  # the parsed JSON or form body (a form as a dict of strings), or None
    query: dict[str, str] = field(default_factory=dict)


def words(text: str) -> list[str]:
    """`text` in word-sized pieces that join back to exactly `text`."""
    return re.findall(r"\s*\S+\s*", text)


def count_words(value: object) -> int:
    """A rough token count of any JSON value: the words of its strings, block types aside."""
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, Mapping):
        return sum(count_words(item) for key, item in value.items() if key != "type")
    if isinstance(value, list):
        return sum(count_words(item) for item in value)
    return 0


TURN_CONTEXT = "<turn-context>"  # what Tally adds after the user's words (the time, memory)


def last_user_text(body: Any) -> str:
    """The text of the last user message with text, in either vendor's message shape: what
    the user wrote, without the context Tally adds after it."""
    messages = body.get("messages", []) if isinstance(body, dict) else []
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content.split(f"\n\n{TURN_CONTEXT}")[0]
        texts = [
            p.get("text", "")
            for p in content or []
            if p.get("type") == "text" and not p.get("text", "").startswith(TURN_CONTEXT)
        ]
        if texts:
            return " ".join(texts)
    return ""


class RecordingSleep:
    """A fake `asyncio.sleep` for retry tests: records each delay and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


# ---- HTTP plumbing ------------------------------------------------------------------------------


class Reply:
    """Writes one HTTP/1.1 response: a JSON body, or a chunked stream that may be cut."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self.is_closed = False

    async def json(
        self, status: int, body: object, headers: Mapping[str, str] | None = None
    ) -> None:
        data = json.dumps(body).encode()
        head = {"content-type": "application/json", "content-length": str(len(data))}
        head.update(headers or {})
        await self._write(self._head(status, head) + data)

    async def raw(self, status: int, data: bytes, content_type: str) -> None:
        head = {"content-type": content_type, "content-length": str(len(data))}
        await self._write(self._head(status, head) + data)

    async def start_stream(self, headers: Mapping[str, str] | None = None) -> None:
        head = {"content-type": "text/event-stream", "transfer-encoding": "chunked"}
        head.update(headers or {})
        await self._write(self._head(200, head))

    async def send(self, text: str) -> None:
        data = text.encode()
        await self._write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    async def end_stream(self) -> None:
        await self._write(b"0\r\n\r\n")

    def cut(self) -> None:
        """Close the socket without the final chunk: the client sees a truncated body."""
        self.is_closed = True
        self._writer.close()

    def _head(self, status: int, headers: Mapping[str, str]) -> bytes:
        lines = [f"HTTP/1.1 {status} Fake", *(f"{k}: {v}" for k, v in headers.items())]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    async def _write(self, data: bytes) -> None:
        self._writer.write(data)
        await self._writer.drain()


class FakeServer:
    """The protocol-neutral part: threading, HTTP parsing, auth, the step queue, recording."""

    label = "vendor"

    def __init__(
        self,
        *,
        api_key: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        known_models: Collection[str] | None = None,
        tls: bool = False,
    ):
        self.api_key = api_key  # None: any key is accepted
        self.host = host
        self.port = port
        self.known_models = known_models  # None: any model is served
        self.tls = tls  # serve HTTPS with UNTRUSTED_CERT
        self._lock = threading.Lock()
        self._steps: deque[Step] = deque()
        self._requests: list[RecordedRequest] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[asyncio.Task[Any]] = set()
        self._startup_error: BaseException | None = None

    # -- what subclasses provide --

    @property
    def base_url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    async def route(self, request: RecordedRequest, reply: Reply) -> None:
        raise NotImplementedError

    def error_body(self, error: HttpError) -> object:
        raise NotImplementedError

    def unknown_model(self, model: str) -> HttpError:
        """The vendor's 404 for a model it does not serve."""
        raise NotImplementedError

    # -- test-facing API --

    def push(self, *steps: Step) -> None:
        with self._lock:
            self._steps.extend(steps)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def start(self) -> Self:
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name=f"fake-{self.label}", daemon=True
        )
        self._thread.start()
        ready.wait(5)
        if self._startup_error is not None:
            raise self._startup_error
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
        self._loop = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- playing steps --

    async def answer_call(self, request: RecordedRequest, reply: Reply) -> None:
        """One model call: a 404 for an unknown model, else the next step."""
        model = (request.body or {}).get("model") if isinstance(request.body, dict) else None
        if self.known_models is not None and model not in self.known_models:
            error = self.unknown_model(str(model))
            await reply.json(error.status, self.error_body(error))
            return
        await self.play(self.next_step(request), request, reply)

    def next_step(self, request: RecordedRequest) -> Step:
        with self._lock:
            if self._steps:
                return self._steps.popleft()
        return f"ok: {last_user_text(request.body)[:40]}"

    async def play(self, step: Step, request: RecordedRequest, reply: Reply) -> None:
        while isinstance(step, Delay):
            await asyncio.sleep(step.seconds)
            step = step.then if step.then is not None else self.next_step(request)
        if isinstance(step, HttpError):
            headers = dict(step.headers)
            if step.retry_after is not None:
                headers["retry-after"] = step.retry_after
            await reply.json(step.status, self.error_body(step), headers)
            return
        await self.answer(Text(step) if isinstance(step, str) else step, request, reply)

    async def answer(self, step: Answer, request: RecordedRequest, reply: Reply) -> None:
        raise NotImplementedError

    def is_authorized(self, headers: Mapping[str, str]) -> bool:
        if self.api_key is None:
            return True
        offered = {
            headers.get("x-api-key"),
            headers.get("authorization", "").removeprefix("Bearer "),
        }
        return self.api_key in offered

    # -- the server thread --

    def _run(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        context = _untrusted_tls_context() if self.tls else None
        try:
            server = loop.run_until_complete(
                asyncio.start_server(self._on_connection, self.host, self.port, ssl=context)
            )
        except OSError as exc:
            self._startup_error = exc
            ready.set()
            loop.close()
            return
        self.port = server.sockets[0].getsockname()[1]
        self._loop = loop
        ready.set()
        loop.run_forever()
        loop.run_until_complete(self._shutdown(server))
        loop.close()

    async def _shutdown(self, server: asyncio.Server) -> None:
        server.close()
        for task in self._connections:
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await server.wait_closed()

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            while (request := await _read_request(reader)) is not None:
                with self._lock:
                    self._requests.append(request)
                reply = Reply(writer)
                await self._handle(request, reply)
                if reply.is_closed:
                    break
        except NotHttp:
            # As real HTTP servers do, e.g. to a TLS handshake sent to this plain-HTTP port.
            writer.write(b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n")
            with contextlib.suppress(ConnectionError):
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass  # the client hung up (e.g. after its own timeout) or refused our certificate
        except asyncio.CancelledError:
            # Only `stop()` cancels; ending quietly spares asyncio's "exception never
            # retrieved" noise from a cancelled stream callback.
            pass
        finally:
            self._connections.discard(task)
            writer.close()

    async def _handle(self, request: RecordedRequest, reply: Reply) -> None:
        if not self.is_authorized(request.headers):
            error = HttpError(401, "invalid x-api-key", error_type="authentication_error")
            await reply.json(401, self.error_body(error))
            return
        await self.route(request, reply)


class NotHttp(Exception):
    """The client sent bytes that do not start an HTTP request."""


async def _read_request(reader: asyncio.StreamReader) -> RecordedRequest | None:
    try:
        first = await reader.readexactly(1)
        if not first.isalpha():  # every HTTP request starts with its method's name
            raise NotHttp
        head = first + await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None  # the client closed a kept-alive connection
    request_line, *header_lines = head.decode("latin-1").strip("\r\n").split("\r\n")
    method, target, _version = request_line.split(" ", 2)
    headers: dict[str, str] = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    raw = await reader.readexactly(length) if length else b""
    path, _, query = target.partition("?")
    return RecordedRequest(method, path, headers, _parse_body(raw, headers), dict(parse_qsl(query)))


def _parse_body(raw: bytes, headers: Mapping[str, str]) -> Any:
    if not raw:
        return None
    if headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        return dict(parse_qsl(raw.decode("utf-8"), keep_blank_values=True))
    return json.loads(raw)


UNTRUSTED_CERT = Path(__file__).with_name("untrusted_cert.pem")  # self-signed, with its key


def _untrusted_tls_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(UNTRUSTED_CERT)
    return context


class SilentServer:
    """A TCP port that takes connections and never says a word: it listens but never accepts,
    so the kernel completes each client's handshake and queues it. An HTTP request sent there
    waits for an answer (a read timeout); a TLS handshake waits for the server's hello (a
    connect timeout)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = 0
        self._socket: socket.socket | None = None

    def url(self, scheme: str = "http", path: str = "/v1") -> str:
        return f"{scheme}://{self.host}:{self.port}{path}"

    def __enter__(self) -> Self:
        self._socket = socket.socket()
        self._socket.bind((self.host, 0))
        self._socket.listen(64)
        self.port = self._socket.getsockname()[1]
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._socket is not None:
            self._socket.close()
        self._socket = None


def serve_forever(server: FakeServer, description: str) -> None:
    """Run `server` until interrupted (the `python -m tests.fakes.*` entry points)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default=server.host)
    parser.add_argument("--port", type=int, default=server.port)
    parser.add_argument("--api-key", default=None, help="reject other keys with 401")
    options = parser.parse_args()
    server.host, server.port, server.api_key = options.host, options.port, options.api_key
    with server, contextlib.suppress(KeyboardInterrupt):
        print(f"fake {server.label} server at {server.base_url} (Ctrl-C stops)", flush=True)
        threading.Event().wait()
