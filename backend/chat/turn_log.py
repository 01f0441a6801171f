"""One log line a turn, when it ends: whose, where, how it ended, its tokens and its time.

Never the message or the reply: the failure's message is Tally's own (a provider failure
names the provider, its URL and the cause), and fields are ids and figures.
"""

from __future__ import annotations

import logging

from backend.domain.events import RetryScheduled, TurnCompleted, TurnFailed
from backend.errors import TurnCancelled

log = logging.getLogger("tally.turns")


def log_turn_end(
    fields: dict[str, str], end: TurnCompleted | TurnFailed, *, seconds: float
) -> None:
    extra: dict[str, object] = dict(fields)
    if isinstance(end, TurnCompleted):
        usage = end.usage
        extra |= {
            "outcome": "completed",
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "cached_tokens": usage.cached_tokens,
            "duration_ms": round(seconds * 1000),
        }
        log.info("turn completed", extra=extra)
        return
    outcome = "cancelled" if end.code == TurnCancelled.code else "failed"
    extra |= {"outcome": outcome, "code": end.code, "duration_ms": round(seconds * 1000)}
    if outcome == "cancelled":
        log.info("turn cancelled", extra=extra)
    else:
        log.warning("turn failed: %s", end.message, extra=extra)


def log_retry(fields: dict[str, str], event: RetryScheduled) -> None:
    """A provider call that failed before any output and is tried again, or falls back."""
    what = event.message or event.reason
    if event.reason == "fallback":
        log.warning("falling back to provider %s: %s", event.provider, what, extra=fields)
    else:
        log.warning(
            "provider call failed (%s); retry %s in %.1f s",
            what,
            event.attempt,
            event.delay_s,
            extra=fields,
        )
