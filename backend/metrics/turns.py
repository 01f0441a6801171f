"""Turn events into metrics, in one place: every turn's events pass through here."""

from __future__ import annotations

import time

from backend.domain.events import Compacted, RetryScheduled, TurnCompleted, TurnEvent, TurnFailed
from backend.metrics.registry import (
    COMPACTION_TOKENS,
    COMPACTIONS,
    PROVIDER_FAILURES,
    PROVIDER_FALLBACKS,
    TOKENS,
    TURN_SECONDS,
    TURNS,
)

PROVIDER_CODES = ("provider_", "empty_reply")


def observe_turn_event(tenant_id: str, event: TurnEvent, *, started_at: float) -> None:
    if isinstance(event, TurnCompleted):
        TURNS.labels(tenant_id, "completed").inc()
        TURN_SECONDS.labels(tenant_id).observe(time.perf_counter() - started_at)
        TOKENS.labels(tenant_id, "prompt").inc(event.usage.prompt_tokens)
        TOKENS.labels(tenant_id, "completion").inc(event.usage.completion_tokens)
        # Of the prompt tokens above, not beside them: a sum over kinds would count them twice.
        TOKENS.labels(tenant_id, "cached").inc(event.usage.cached_tokens)
        TOKENS.labels(tenant_id, "cache_write").inc(event.usage.cache_write_tokens)
    elif isinstance(event, TurnFailed):
        TURNS.labels(tenant_id, "failed").inc()
        TURN_SECONDS.labels(tenant_id).observe(time.perf_counter() - started_at)
        if event.code.startswith(PROVIDER_CODES):
            PROVIDER_FAILURES.labels(tenant_id, event.code).inc()
    elif isinstance(event, Compacted):
        COMPACTIONS.labels(tenant_id, event.reason).inc()
        COMPACTION_TOKENS.labels(tenant_id, "before").inc(event.tokens_before)
        COMPACTION_TOKENS.labels(tenant_id, "after").inc(event.tokens_after)
    elif isinstance(event, RetryScheduled) and event.reason == "fallback":
        PROVIDER_FALLBACKS.labels(tenant_id).inc()
