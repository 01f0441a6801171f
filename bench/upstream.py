#!/usr/bin/env python3
"""A fake model upstream for `tally bench`, on plain asyncio: OpenAI and Anthropic wire formats.

    python bench/upstream.py --port 18080 [--deltas 20] [--reply-s 0] [--record]

POST /v1/chat/completions   OpenAI Chat Completions: plain JSON, or with "stream": true an SSE
                            stream of N content deltas, a finish chunk, a usage chunk (when
                            asked) and [DONE]; usage.prompt_tokens_details.cached_tokens
POST /v1/messages           Anthropic Messages: plain JSON, or streamed (message_start,
                            content_block_start, N content_block_delta, content_block_stop,
                            message_delta, message_stop); usage with input_tokens,
                            output_tokens, cache_read_input_tokens, cache_creation_input_tokens;
                            400 for more than 4 cache_control blocks
GET  /stats                 counters as JSON: calls, stream calls, prompt bytes and messages, and
                            the tokens billed: prompt_tokens (cache reads and writes included),
                            cached_tokens (read), cache_write_tokens (Anthropic's creation)
GET  /requests              with --record: every chat request body so far, in order, as a list
POST /requests/reset        with --record: forget them

Prompt caching is simulated per vendor by `prompt_cache.py` beside this file (a token is 4
bytes of the prompt's JSON; see there). prompt_tokens are the request body's bytes / 4, + 1.

Reply time: instant unless `--reply-s S` or, per request, the last user message contains
`[reply-s=S]`, which the bench's driver adds to the turns it measures (so one upstream serves
fast and slow scenarios, and warm-up turns stay fast). A slow reply spreads its deltas evenly
over S seconds (a non-streamed one answers after S seconds).

No framework, so it costs little CPU next to the server under test. Standard library only.
Only loopback hosts are accepted.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import ipaddress
import json
import re
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

MAX_BODY = 64 * 1024 * 1024
OPENAI_PATHS = ("/v1/chat/completions", "/chat/completions")
ANTHROPIC_PATHS = ("/v1/messages", "/messages")
SLOW = re.compile(r"\[reply-s=(\d+(?:\.\d+)?)\]")


def _load_helper(name: str) -> ModuleType:
    """A module beside this file, imported by its path: this script runs from anywhere."""
    path = Path(__file__).resolve().with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while building
    spec.loader.exec_module(module)
    return module


prompt_cache = _load_helper("prompt_cache")
Write = Callable[[bytes], Awaitable[None]]


class Upstream:
    def __init__(self, deltas: int, model: str, *, reply_s: float = 0, record: bool = False):
        self.model = model
        self.deltas = [f"tok{i} " for i in range(deltas)]
        self.reply = "".join(self.deltas).strip()
        self.reply_s = reply_s
        self.requests: list[Any] | None = [] if record else None
        self.seq = 0
        self.openai_cache = prompt_cache.PrefixCache()
        self.anthropic_cache = prompt_cache.BreakpointCache()
        self.stats = {
            "chat_total": 0,
            "chat_stream": 0,
            "prompt_bytes": 0,
            "prompt_messages": 0,
            "prompt_tokens": 0,
            "cached_tokens": 0,
            "cache_write_tokens": 0,
        }

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await self.one_request(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except Exception as exc:  # a bad request must not kill the server
            print(f"upstream: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        finally:
            writer.close()

    async def one_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, target, version = request_line.split(" ", 2)
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length") or 0)
        if length > MAX_BODY:
            send_json(writer, 413, {"error": {"message": "body too large"}}, False)
            return False
        body = await reader.readexactly(length) if length else b""
        keep_alive = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        path = target.split("?", 1)[0]
        if method == "POST" and path in OPENAI_PATHS + ANTHROPIC_PATHS:
            request = json.loads(body or b"{}")
            self.count(request, len(body))
            respond = self.openai if path in OPENAI_PATHS else self.anthropic
            await respond(request, len(body), writer, keep_alive)
        elif method == "GET" and path == "/stats":
            send_json(writer, 200, self.stats, keep_alive)
        elif path in ("/requests", "/requests/reset") and self.requests is None:
            send_json(writer, 404, {"error": {"message": "start with --record"}}, keep_alive)
        elif method == "GET" and path == "/requests":
            send_json(writer, 200, self.requests, keep_alive)
        elif method == "POST" and path == "/requests/reset":
            cleared, self.requests = len(self.requests or []), []
            send_json(writer, 200, {"cleared": cleared}, keep_alive)
        else:
            send_json(writer, 404, {"error": {"message": f"no {method} {path}"}}, keep_alive)
        await writer.drain()
        return keep_alive

    def count(self, request: dict[str, Any], size: int) -> None:
        self.seq += 1
        self.stats["chat_total"] += 1
        self.stats["chat_stream"] += bool(request.get("stream"))
        self.stats["prompt_bytes"] += size
        self.stats["prompt_messages"] += len(request.get("messages") or [])
        if self.requests is not None:
            self.requests.append(request)

    def bill(self, outcome: Any) -> None:
        self.stats["prompt_tokens"] += outcome.prompt
        self.stats["cached_tokens"] += outcome.read
        self.stats["cache_write_tokens"] += outcome.written

    def reply_seconds(self, request: dict[str, Any]) -> float:
        for message in reversed(request.get("messages") or []):
            if message.get("role") == "user":
                match = SLOW.search(text_of(message.get("content")))
                return float(match.group(1)) if match else self.reply_s
        return self.reply_s

    # ---- OpenAI Chat Completions --------------------------------------------------------------

    async def openai(
        self, request: dict[str, Any], size: int, writer: asyncio.StreamWriter, keep_alive: bool
    ) -> None:
        outcome = self.openai_cache.serve(request, prompt_tokens=size // 4 + 1)
        self.bill(outcome)
        base = {
            "id": f"chatcmpl-fake-{self.seq}",
            "created": int(time.time()),
            "model": request.get("model") or self.model,
        }
        usage = {
            "prompt_tokens": outcome.prompt,
            "completion_tokens": len(self.deltas),
            "total_tokens": outcome.prompt + len(self.deltas),
            "prompt_tokens_details": {"cached_tokens": outcome.read},
        }
        reply_s = self.reply_seconds(request)
        if not request.get("stream"):
            await asyncio.sleep(reply_s)
            message = {"role": "assistant", "content": self.reply}
            choice = {"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}
            completion = {**base, "object": "chat.completion", "choices": [choice]}
            send_json(writer, 200, {**completion, "usage": usage}, keep_alive)
            return
        base["object"] = "chat.completion.chunk"

        def chunk(choice: dict[str, Any] | None, **extra: Any) -> bytes:
            return b"data: " + compact({**base, "choices": [choice] if choice else [], **extra})

        def delta(content: dict[str, str], finish: str | None = None) -> bytes:
            return chunk({"index": 0, "delta": content, "finish_reason": finish})

        last = [delta({}, "stop")]
        if (request.get("stream_options") or {}).get("include_usage"):
            last.append(chunk(None, usage=usage))
        last.append(b"data: [DONE]")
        await stream(
            writer,
            keep_alive,
            reply_s,
            first=[delta({"role": "assistant", "content": ""})],
            deltas=[delta({"content": text}) for text in self.deltas],
            last=last,
        )

    # ---- Anthropic Messages -------------------------------------------------------------------

    async def anthropic(
        self, request: dict[str, Any], size: int, writer: asyncio.StreamWriter, keep_alive: bool
    ) -> None:
        try:
            outcome = self.anthropic_cache.serve(request)
        except prompt_cache.TooManyBreakpoints as exc:
            error = {"type": "invalid_request_error", "message": str(exc)}
            send_json(writer, 400, {"type": "error", "error": error}, keep_alive)
            return
        self.bill(outcome)
        usage = {
            "input_tokens": outcome.uncached,
            "output_tokens": len(self.deltas),
            "cache_read_input_tokens": outcome.read,
            "cache_creation_input_tokens": outcome.written,
        }
        message = {
            "id": f"msg_fake_{self.seq}",
            "type": "message",
            "role": "assistant",
            "model": request.get("model") or self.model,
            "content": [{"type": "text", "text": self.reply}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": usage,
        }
        reply_s = self.reply_seconds(request)
        if not request.get("stream"):
            await asyncio.sleep(reply_s)
            send_json(writer, 200, message, keep_alive)
            return

        def event(name: str, data: dict[str, Any]) -> bytes:
            return b"event: %s\ndata: %s" % (name.encode(), compact({"type": name, **data}))

        started = {**message, "content": [], "stop_reason": None, "usage": {**usage}}
        started["usage"]["output_tokens"] = 1
        first = [
            event("message_start", {"message": started}),
            event(
                "content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}
            ),
        ]
        deltas = [
            event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": t}})
            for t in self.deltas
        ]
        end = {"stop_reason": "end_turn", "stop_sequence": None}
        last = [
            event("content_block_stop", {"index": 0}),
            event("message_delta", {"delta": end, "usage": usage}),
            event("message_stop", {}),
        ]
        await stream(writer, keep_alive, reply_s, first=first, deltas=deltas, last=last)


async def stream(
    writer: asyncio.StreamWriter,
    keep_alive: bool,
    reply_s: float,
    *,
    first: list[bytes],
    deltas: list[bytes],
    last: list[bytes],
) -> None:
    """An SSE response (chunked): `first` at once, `deltas` spread evenly over `reply_s`, then
    `last`. An instant reply goes out in one write."""
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
        b"transfer-encoding: chunked\r\nconnection: "
        + (b"keep-alive" if keep_alive else b"close")
        + b"\r\n\r\n"
    )
    if reply_s <= 0 or not deltas:
        writer.write(head + b"".join(map(chunked, [*first, *deltas, *last])) + b"0\r\n\r\n")
        return
    writer.write(head + b"".join(map(chunked, first)))
    pause = reply_s / len(deltas)
    for data in deltas:
        await writer.drain()
        await asyncio.sleep(pause)
        writer.write(chunked(data))
    writer.write(b"".join(map(chunked, last)) + b"0\r\n\r\n")


def chunked(event: bytes) -> bytes:
    data = event + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


def compact(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def send_json(writer: asyncio.StreamWriter, status: int, obj: Any, keep_alive: bool) -> None:
    payload = json.dumps(obj).encode()
    writer.write(
        f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n"
        f"content-length: {len(payload)}\r\n"
        f"connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n".encode()
        + payload
    )


def text_of(content: Any) -> str:
    """A message's text: a string, or the text of its text parts/blocks."""
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return " ".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))


def is_loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def serve(host: str, port: int, upstream: Upstream) -> None:
    # A backlog for the bench's thousand streams opening at once.
    server = await asyncio.start_server(upstream.handle, host, port, backlog=4096)
    slow = f", replies over {upstream.reply_s:g} s" if upstream.reply_s else ""
    print(f"upstream on http://{host}:{port}/v1 ({len(upstream.deltas)} deltas{slow})", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=18080)
    parser.add_argument("--deltas", type=int, default=20, help="content deltas per streamed reply")
    parser.add_argument("--model", default="fake-model")
    parser.add_argument(
        "--reply-s", type=float, default=0, help="seconds per reply unless a request names its own"
    )
    parser.add_argument("--record", action="store_true", help="keep every chat request body")
    args = parser.parse_args()
    if not is_loopback(args.host):
        sys.exit(f"refusing non-loopback host {args.host!r}")
    upstream = Upstream(args.deltas, args.model, reply_s=args.reply_s, record=args.record)
    asyncio.run(serve(args.host, args.port, upstream))


if __name__ == "__main__":
    main()
