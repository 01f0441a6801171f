"""Retries, fallbacks, and the classification of vendor failures they rely on.

A call is retried or handed to a fallback only while it has produced no content: once a text
delta or a tool call reached the caller, repeating the call would duplicate output.
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime

from backend.domain.events import ProviderEvent, RetryScheduled
from backend.domain.requests import ChatRequest
from backend.errors import (
    ProviderAuthFailed,
    ProviderBadRequest,
    ProviderError,
    ProviderRateLimited,
    ProviderTimeout,
    ProviderUnavailable,
)
from backend.providers.base import ChatProvider

Sleep = Callable[[float], Awaitable[None]]

FIRST_BACKOFF_S = 0.5


def parse_retry_after(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """Seconds the vendor asked us to wait, from `retry-after-ms` or `Retry-After` (seconds or
    an HTTP date). None when the headers say nothing usable. `headers` should be
    case-insensitive, as `httpx2.Headers` is."""
    milliseconds = _finite_float(headers.get("retry-after-ms"))
    if milliseconds is not None:
        return max(milliseconds / 1000, 0.0)
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _finite_float(value)
    if seconds is not None:
        return max(seconds, 0.0)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)


def _finite_float(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def error_for_status(
    provider: str,
    status: int,
    message: str,
    *,
    retry_after: float | None = None,
    url: str | None = None,
) -> ProviderError:
    """The error for an HTTP status a vendor answered with; shared by every adapter so that a
    429 or a 503 means the same thing whichever SDK saw it."""
    if status == 429:
        return ProviderRateLimited(provider, message, retry_after=retry_after, url=url)
    if status in (401, 403):
        return ProviderAuthFailed(provider, message, url=url)
    if status == 408:
        return ProviderTimeout(provider, message, retry_after=retry_after, url=url)
    if status >= 500:  # 529 (Anthropic overloaded) included
        return ProviderUnavailable(provider, message, retry_after=retry_after, url=url)
    return ProviderBadRequest(provider, message, url=url)


@asynccontextmanager
async def closing_stream(
    events: AsyncIterator[ProviderEvent],
) -> AsyncIterator[AsyncIterator[ProviderEvent]]:
    """Close a provider stream when the caller stops early, so a cancelled turn releases the
    vendor connection now rather than whenever the generator is garbage-collected."""
    try:
        yield events
    finally:
        aclose: Callable[[], Awaitable[object]] | None = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()


class RetryingProvider:
    """Retries a call that failed with a retryable error before yielding anything.

    The wait is the vendor's `retry_after` when given (a wait longer than `max_wait_s` is not
    waited: the error is raised), else exponential backoff with jitter: 0.5 s, 1 s, 2 s, ...
    capped at `max_wait_s`. Each retry is announced with a `RetryScheduled` event.
    """

    def __init__(
        self,
        inner: ChatProvider,
        max_retries: int,
        max_wait_s: float,
        sleep: Sleep = asyncio.sleep,
        *,
        rng: random.Random | None = None,
    ) -> None:
        self.name = inner.name
        self.inner = inner
        self._max_retries = max_retries
        self._max_wait_s = max_wait_s
        self._sleep = sleep
        self._rng = rng or random.Random()

    async def stream(self, request: ChatRequest) -> AsyncIterator[ProviderEvent]:
        attempt = 0
        while True:
            has_content = False
            try:
                async with closing_stream(self.inner.stream(request)) as events:
                    async for event in events:
                        has_content = has_content or not isinstance(event, RetryScheduled)
                        yield event
                return
            except ProviderError as exc:
                delay = None if has_content else self._delay_before_retry(exc, attempt)
                if delay is None:
                    raise
                failure = exc
            attempt += 1
            yield RetryScheduled(
                attempt=attempt,
                delay_s=delay,
                reason=failure.code,
                provider=self.name,
                message=failure.message,
            )
            await self._sleep(delay)

    def _delay_before_retry(self, error: ProviderError, attempt: int) -> float | None:
        if not error.is_retryable or attempt >= self._max_retries:
            return None
        if error.retry_after is not None:
            return error.retry_after if error.retry_after <= self._max_wait_s else None
        backoff = FIRST_BACKOFF_S * 2.0**attempt
        # Jitter spreads the retries of many sessions hit by the same outage.
        return min(backoff * self._rng.uniform(0.75, 1.25), self._max_wait_s)

    async def aclose(self) -> None:
        await self.inner.aclose()


class FallbackProvider:
    """Tries each `(provider, model name)` link in turn.

    The next link is tried when a link fails with a retryable error before yielding content
    (`RetryScheduled` is not content); a `RetryScheduled(reason="fallback")` naming the next
    provider announces the switch. The request's `model` is replaced by each link's model name.
    A non-retryable error, or any error after content, is raised at once; when every link
    fails, the last link's error is raised.
    """

    def __init__(self, chain: Sequence[tuple[ChatProvider, str]]) -> None:
        if not chain:
            raise ValueError("a fallback chain needs at least one provider")
        self.chain = list(chain)
        self.name = self.chain[0][0].name

    async def stream(self, request: ChatRequest) -> AsyncIterator[ProviderEvent]:
        failure: ProviderError | None = None
        for position, (provider, model) in enumerate(self.chain):
            if failure is not None:
                yield RetryScheduled(
                    attempt=position,
                    delay_s=0.0,
                    reason="fallback",
                    provider=provider.name,
                    message=f"{failure.message}; falling back to {provider.name} ({model})",
                )
            has_content = False
            try:
                async with closing_stream(provider.stream(replace(request, model=model))) as events:
                    async for event in events:
                        has_content = has_content or not isinstance(event, RetryScheduled)
                        yield event
                return
            except ProviderError as exc:
                is_last = position == len(self.chain) - 1
                if has_content or not exc.is_retryable or is_last:
                    raise
                failure = exc

    async def aclose(self) -> None:
        for provider, _model in self.chain:
            await provider.aclose()
