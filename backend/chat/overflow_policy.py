"""When the overflow summarizer runs and what it writes: the policy (window, automatic write,
retries, leases), the range the automatic write distills, and the source of a job's line."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from backend.chat.window import WindowPolicy, WindowRow, within_one_job
from backend.memory.entries import with_origin
from backend.storage.overflow_jobs import OverflowJob

# The most one job distills, in summarizer calls of `memory.summarizer_input_tokens`: far above
# an everyday eviction (a batch of turns), so only a long history that arrived at once leaves
# in several jobs, none holding all of it in memory.
CALLS_PER_JOB = 8


@dataclass(frozen=True, slots=True)
class OverflowPolicy:
    window: WindowPolicy
    auto_min_messages: int = 30
    auto_min_chars: int = 15_000
    delete_evicted: bool = False
    scope_by_user: bool = False
    language: str = "en"
    retries_per_model: int = 3
    retry_base_s: float = 2.0
    retry_max_s: float = 300.0
    max_attempts: int = 6  # failed summaries before the range is kept as a raw line
    lease_s: float = 30.0  # renewed every third of it while a job runs; a crashed worker's
    # job is free again after this


def auto_write_range(
    window: Sequence[WindowRow],
    *,
    watermark: int,
    policy: OverflowPolicy,
    is_tail: bool = False,
) -> tuple[int, int] | None:
    """The (first, last) ids the automatic memory write should distill now, if due: once
    enough has been said, or (`is_tail`, a session left or quiet) whatever whole turns are
    left undistilled; at most one job's worth (the rest is next)."""
    fresh = [m for m in window if m.id > watermark]
    while fresh and fresh[-1].role != "assistant":  # whole turns only
        fresh.pop()
    chars = sum(m.chars for m in fresh)
    is_due = len(fresh) >= policy.auto_min_messages or chars >= policy.auto_min_chars
    if not fresh or not (is_due or is_tail):
        return None
    end = within_one_job(fresh, len(fresh), policy.window.job)
    return fresh[0].id, fresh[end - 1].id


def memory_source(job: OverflowJob, *, is_raw: bool) -> str:
    """The source a job's memory line is written with: which summarizer (or raw), and where
    its turns were said (`auto-overflow/telegram:helper:42`)."""
    writer = "auto-raw" if is_raw else "auto-overflow" if job.kind == "overflow" else "auto-summary"
    return with_origin(writer, job.origin)
