#!/usr/bin/env python3
"""An instant fake OpenAI Chat Completions upstream for `tally bench`, on plain asyncio.

    python bench/upstream.py --port 18080 [--deltas 20]

POST /v1/chat/completions   plain JSON, or with "stream": true an SSE stream of N content
                            deltas, a finish chunk, a usage chunk (when asked) and [DONE]
GET  /stats                 counters as JSON (calls, stream calls, prompt bytes and messages)

No framework and no artificial latency, so it costs little CPU next to the server under test.
Only loopback hosts are accepted.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import signal
import sys
import time
from typing import Any

MAX_BODY = 64 * 1024 * 1024


class Upstream:
    def __init__(self, deltas: int, model: str) -> None:
        self.model = model
        self.deltas = [f"tok{i} " for i in range(deltas)]
        self.reply = "".join(self.deltas).strip()
        self.seq = 0
        self.stats = {"chat_total": 0, "chat_stream": 0, "prompt_bytes": 0, "prompt_messages": 0}

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
            self.send_json(writer, 413, {"error": {"message": "body too large"}}, False)
            return False
        body = await reader.readexactly(length) if length else b""
        keep_alive = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        path = target.split("?", 1)[0]
        if method == "POST" and path in ("/v1/chat/completions", "/chat/completions"):
            self.chat(body, writer, keep_alive)
        elif method == "GET" and path == "/stats":
            self.send_json(writer, 200, self.stats, keep_alive)
        else:
            self.send_json(writer, 404, {"error": {"message": f"no {method} {path}"}}, keep_alive)
        await writer.drain()
        return keep_alive

    @staticmethod
    def send_json(writer: asyncio.StreamWriter, status: int, obj: Any, keep_alive: bool) -> None:
        payload = json.dumps(obj).encode()
        writer.write(
            f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n"
            f"content-length: {len(payload)}\r\n"
            f"connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n".encode()
            + payload
        )

    def chat(self, body: bytes, writer: asyncio.StreamWriter, keep_alive: bool) -> None:
        request = json.loads(body or b"{}")
        messages = request.get("messages") or []
        stats = self.stats
        stats["chat_total"] += 1
        stats["prompt_bytes"] += len(body)
        stats["prompt_messages"] += len(messages)
        self.seq += 1
        base = {
            "id": f"chatcmpl-fake-{self.seq}",
            "created": int(time.time()),
            "model": request.get("model") or self.model,
        }
        usage = {
            "prompt_tokens": len(body) // 4 + 1,
            "completion_tokens": len(self.deltas),
            "total_tokens": len(body) // 4 + 1 + len(self.deltas),
        }
        if not request.get("stream"):
            message = {"role": "assistant", "content": self.reply}
            choice = {"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}
            completion = {**base, "object": "chat.completion", "choices": [choice]}
            self.send_json(writer, 200, {**completion, "usage": usage}, keep_alive)
            return
        stats["chat_stream"] += 1
        base["object"] = "chat.completion.chunk"

        def chunk(choice: dict[str, Any] | None, **extra: Any) -> bytes:
            data = {**base, "choices": [choice] if choice else [], **extra}
            event = b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"
            return b"%x\r\n%s\r\n" % (len(event), event)

        def delta(content: dict[str, str], finish: str | None = None) -> bytes:
            return chunk({"index": 0, "delta": content, "finish_reason": finish})

        parts = [
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
            b"transfer-encoding: chunked\r\nconnection: "
            + (b"keep-alive" if keep_alive else b"close")
            + b"\r\n\r\n",
            delta({"role": "assistant", "content": ""}),
            *(delta({"content": text}) for text in self.deltas),
            delta({}, "stop"),
        ]
        if (request.get("stream_options") or {}).get("include_usage"):
            parts.append(chunk(None, usage=usage))
        parts.append(b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n")
        writer.write(b"".join(parts))


def is_loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def serve(host: str, port: int, deltas: int, model: str) -> None:
    upstream = Upstream(deltas, model)
    server = await asyncio.start_server(upstream.handle, host, port, backlog=1024)
    print(f"upstream on http://{host}:{port}/v1 ({deltas} deltas)", flush=True)
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
    args = parser.parse_args()
    if not is_loopback(args.host):
        sys.exit(f"refusing non-loopback host {args.host!r}")
    asyncio.run(serve(args.host, args.port, args.deltas, args.model))


if __name__ == "__main__":
    main()
