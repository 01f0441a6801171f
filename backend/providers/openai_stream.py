"""A streamed Chat Completions answer, as the JSON of each server-sent event.

The SDK's `AsyncStream` built a `ChatCompletionChunk` per event and decoded SSE line by line in
Python; under load that was a third of the server's CPU. This reads the raw body instead, splits
it into lines on CR, LF and CRLF only (as SSE does: `str.splitlines` would also split on U+2028
inside a JSON string), and parses each event's data with `json.loads`.

Outcomes are the SDK's: the stream ends at `[DONE]` or with the body, an `{"error": ...}`
payload raises `openai.APIError`, a failure to read the body raises `openai.APITimeoutError` or
`openai.APIConnectionError`, and data that is not JSON raises `json.JSONDecodeError`, so that
the adapter's `map_error` translates all of them as before.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

import httpx2
import openai

# The SDK's own definitions of a failed read (httpx2's errors, and the TLS and AnyIO errors
# httpx2 does not wrap yet) and of the drain that lets an HTTP/1.1 connection be reused.
from openai._httpx2 import request_exceptions, timeout_exceptions
from openai._streaming_cleanup import drain_response_async

DONE = b"[DONE]"
DEFAULT_STREAM_ERROR = "An error occurred during streaming"  # the SDK's words


async def event_payloads(response: httpx2.Response) -> AsyncGenerator[Any, None]:
    """The parsed data of each event of `response`, in order; the response is closed when the
    iteration ends, however it ends.

    An event is the `data:` lines before a blank line, joined by newlines. Comments (`:` lines,
    keep-alives), `event:`, `id:` and `retry:` fields are ignored, as the SDK ignored them for
    chat; an event without data is skipped (the SDK parsed it as empty JSON and failed)."""
    data: list[bytes] = []
    partial = b""  # the start of a line whose end has not arrived
    ends_in_cr = False  # the last block ended in CR: a LF opening the next one is its CRLF
    try:
        async for block in response.aiter_bytes():
            if ends_in_cr and block.startswith(b"\n"):
                block = block[1:]
            ends_in_cr = block.endswith(b"\r")
            text = partial + block if partial else block
            if b"\r" in text:
                text = text.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            lines = text.split(b"\n")
            partial = lines.pop()
            for line in lines:
                if line:
                    if line.startswith(b"data:"):
                        value = line[5:]
                        data.append(value[1:] if value.startswith(b" ") else value)
                    elif line == b"data":
                        data.append(b"")
                    continue
                if not data:
                    continue
                event = data[0] if len(data) == 1 else b"\n".join(data)
                data = []
                if event.startswith(DONE):
                    if response.http_version == "HTTP/1.1":
                        await drain_response_async(response)
                    return
                payload = json.loads(event)
                if isinstance(payload, dict) and payload.get("error"):
                    raise _stream_error(response, payload["error"])
                yield payload
        # An event still open when the body ends was never dispatched (nor by the SDK).
    except timeout_exceptions() as exc:
        raise openai.APITimeoutError(request=response.request) from exc
    except request_exceptions() as exc:
        raise openai.APIConnectionError(request=response.request) from exc
    finally:
        await response.aclose()


def _stream_error(response: httpx2.Response, error: object) -> openai.APIError:
    """The vendor's error inside a stream that began well, as the SDK raised it."""
    message = error.get("message") if isinstance(error, dict) else None
    if not isinstance(message, str) or not message:
        message = DEFAULT_STREAM_ERROR
    return openai.APIError(message, response.request, body=error)
