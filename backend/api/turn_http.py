"""A turn as an HTTP response, the same for `/api/chat/send` and `/v1/chat/completions`: a
failure before the answer begins is an HTTP error (with `Retry-After`, rounded up: a client told
to wait never comes back too early); a stream is SSE, with a comment every
`server.sse_keepalive_s` while the turn is quiet (a long tool call), so proxies and load
balancers keep the connection; a client that goes away is reported (`on_disconnect`): `/v1`
stops the model call, `/api/chat/send` waits for the client to reconnect (`turn_relay`).

Before a stream answers, `open_turn` reads the turn's first events, so that a refusal is still
an HTTP status; each route says when the stream is committed. `/api/chat/send` commits at the
turn's first event, waiting at most a keep-alive: its own stream carries every event, and a turn
queued behind another of its session must start its stream before a proxy gives up. `/v1`
commits at the first output (text, thinking, a tool, the end), however long that takes: an
OpenAI client reads nothing else, and a fallback to another model before the first word can
still fail as an HTTP error.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from dataclasses import dataclass

from fastapi.responses import JSONResponse, StreamingResponse

from backend.api.errors import error_response, retry_after_header
from backend.domain.events import TurnEvent, TurnFailed
from backend.metrics.registry import ACTIVE_STREAMS

KEEPALIVE = b": keep-alive\n\n"  # an SSE comment: every client skips it
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


@dataclass(slots=True)
class TurnOpening:
    """What a route read of a turn before it answered HTTP: the events so far (`head`), and the
    read still under way when the route stopped waiting (`pending`)."""

    head: list[TurnEvent]
    pending: asyncio.Future[TurnEvent] | None = None

    @property
    def refusal(self) -> TurnFailed | None:
        """The turn's failure, when it failed before the stream was committed."""
        last = self.head[-1] if self.head else None
        return last if isinstance(last, TurnFailed) else None


async def open_turn(
    events: AsyncGenerator[TurnEvent, None],
    *,
    commits: Callable[[TurnEvent], bool],
    wait_s: float | None = None,
) -> TurnOpening:
    """The turn's `events` up to the first that `commits` the stream (or the last), read for at
    most `wait_s` (no limit: None); a read cut short stays pending, for `opened_events`."""
    loop = asyncio.get_running_loop()
    deadline = None if wait_s is None else loop.time() + wait_s
    head: list[TurnEvent] = []
    while not head or not commits(head[-1]):
        read = asyncio.ensure_future(anext(events))
        try:
            timeout = None if deadline is None else max(deadline - loop.time(), 0.0)
            done, _ = await asyncio.wait({read}, timeout=timeout)
        except asyncio.CancelledError:  # the client left: stop reading, as a plain read would
            read.cancel()
            raise
        if not done:
            return TurnOpening(head, pending=read)
        try:
            head.append(read.result())
        except StopAsyncIteration:
            break
    return TurnOpening(head)


async def opened_events(
    opening: TurnOpening, rest: AsyncGenerator[TurnEvent, None]
) -> AsyncGenerator[TurnEvent, None]:
    """The turn's events from its start: the opening's, then the `rest`, closed at the end."""
    try:
        for event in opening.head:
            yield event
        if opening.pending is not None:
            yield await opening.pending
        async for event in rest:
            yield event
    finally:
        pending = opening.pending
        if pending is not None and not pending.done():  # closed before the turn started
            pending.cancel()
            await asyncio.wait({pending})
        await rest.aclose()  # events_until_revoked's key watch with it


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
