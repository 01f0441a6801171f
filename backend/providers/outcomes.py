"""The last outcome of each provider's calls, kept in process so that `/api/health` can say
whether a provider works without calling it.

Every real call is recorded (each retry attempt, chat turns and summaries alike) under the
provider's configured name. One process keeps one record: with several workers, each reports
the calls it made itself.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from backend.domain.events import ProviderEvent
from backend.domain.requests import ChatRequest
from backend.errors import ProviderError
from backend.providers.base import ChatProvider
from backend.providers.resilience import closing_stream

Clock = Callable[[], datetime]


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a provider's latest finished call went: ok, or the error's code and message."""

    is_ok: bool
    at: datetime
    error_code: str | None = None
    error: str | None = None


class ProviderOutcomes:
    """The latest `Outcome` by provider name. A call's outcome replaces the previous one."""

    def __init__(self, clock: Clock = _utc_now) -> None:
        self._clock = clock
        self._latest: dict[str, Outcome] = {}

    def record_ok(self, provider: str) -> None:
        self._latest[provider] = Outcome(is_ok=True, at=self._clock())

    def record_error(self, provider: str, error: ProviderError) -> None:
        self._latest[provider] = Outcome(
            is_ok=False, at=self._clock(), error_code=error.code, error=error.message
        )

    def latest(self, provider: str) -> Outcome | None:
        """None while the provider has made no call in this process."""
        return self._latest.get(provider)


class RecordedProvider:
    """Records the outcome of each call to `inner`, a bare adapter.

    A call that raised a `ProviderError` is an error; one that finished, or that its caller
    stopped after the provider had answered, is ok. A call stopped before any answer (a turn
    cancelled while connecting) tells nothing and is not recorded.
    """

    def __init__(self, inner: ChatProvider, outcomes: ProviderOutcomes) -> None:
        self.name = inner.name
        self.inner = inner
        self._outcomes = outcomes

    async def stream(self, request: ChatRequest) -> AsyncIterator[ProviderEvent]:
        has_answer = False
        try:
            async with closing_stream(self.inner.stream(request)) as events:
                async for event in events:
                    has_answer = True
                    yield event
        except ProviderError as exc:
            self._outcomes.record_error(self.name, exc)
            raise
        except BaseException:  # the caller stopped early, or the task was cancelled
            if has_answer:
                self._outcomes.record_ok(self.name)
            raise
        self._outcomes.record_ok(self.name)

    async def aclose(self) -> None:
        await self.inner.aclose()
