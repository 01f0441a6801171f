"""A turn as an HTTP response, the same for `/api/chat/send` and `/v1/chat/completions`: a
failure before the answer begins is an HTTP error (with `Retry-After`, rounded up: a client told
to wait never comes back too early); a stream is SSE, with a comment every
`server.sse_keepalive_s` while the turn is quiet (a long tool call), so proxies and load
balancers keep the connection; a client that goes away is reported (`on_disconnect`): `/v1`
stops the model call, `/api/chat/send` waits for the client to reconnect (`turn_relay`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping

from fastapi.responses import JSONResponse, StreamingResponse

from backend.api.errors import error_response, retry_after_header
from backend.domain.events import TurnFailed
from backend.metrics.registry import ACTIVE_STREAMS

KEEPALIVE = b": keep-alive\n\n"  # an SSE comment: every client skips it
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def failure_response(end: TurnFailed, headers: Mapping[str, str] | None = None) -> JSONResponse:
    headers = {**(headers or {}), **retry_after_header(end.retry_after)}
    return error_response(end.status, end.code, end.message, headers or None)


def event_stream(
    body: AsyncGenerator[bytes, None],
    *,
    keepalive_s: float,
    on_disconnect: Callable[[], None],
    headers: Mapping[str, str] | None = None,
) -> StreamingResponse:
    """`body` (the route's encoding of the turn's events) as an SSE response."""
    return StreamingResponse(
        _guarded(body, keepalive_s, on_disconnect),
        media_type="text/event-stream",
        headers={**(headers or {}), **SSE_HEADERS},
    )


async def _guarded(
    body: AsyncGenerator[bytes, None], keepalive_s: float, on_disconnect: Callable[[], None]
) -> AsyncIterator[bytes]:
    is_finished = False
    ACTIVE_STREAMS.inc()
    try:
        async for chunk in with_keepalive(body, keepalive_s):
            yield chunk
        is_finished = True
    finally:
        ACTIVE_STREAMS.dec()
        if not is_finished:
            on_disconnect()


async def with_keepalive(
    chunks: AsyncGenerator[bytes, None], every_s: float
) -> AsyncIterator[bytes]:
    """`chunks`, with KEEPALIVE whenever none came for `every_s`; closes `chunks` at the end."""
    pending: asyncio.Future[bytes] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(chunks))
            done, _ = await asyncio.wait({pending}, timeout=every_s)
            if not done:
                yield KEEPALIVE
                continue
            try:
                chunk = pending.result()
            except StopAsyncIteration:
                pending = None
                return
            pending = None
            yield chunk
    finally:
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await pending
        await chunks.aclose()
