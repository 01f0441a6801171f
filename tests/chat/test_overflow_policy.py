"""The automatic memory write's range: whole undistilled turns, once enough is said (or a
session's tail), at most what the summarizer reads in one call."""

from __future__ import annotations

from backend.chat.overflow_policy import OverflowPolicy, auto_write_range
from backend.chat.window import JobBound, WindowPolicy
from tests.chat.test_window import turns


def policy(*, job: JobBound | None = None) -> OverflowPolicy:
    window = WindowPolicy(max_messages=-1, batch=10, job=job)
    return OverflowPolicy(window=window, auto_min_messages=30, auto_min_chars=15_000)


def test_the_write_is_due_once_enough_is_said_since_the_watermark() -> None:
    window = turns(20)  # ids 1..40
    assert auto_write_range(window, watermark=0, policy=policy()) == (1, 40)
    assert auto_write_range(window, watermark=20, policy=policy()) is None  # 20 fresh
    assert auto_write_range(window, watermark=20, policy=policy(), is_tail=True) == (21, 40)


def test_a_turn_still_unanswered_waits() -> None:
    window = turns(16)[:-1]  # 31 messages, the newest a user message
    assert auto_write_range(window, watermark=0, policy=policy()) == (1, 30)


def test_a_long_undistilled_stretch_is_written_one_calls_worth_at_a_time() -> None:
    window = turns(100, tokens=30)  # 200 messages, 60 tokens a turn
    job = JobBound(part_tokens=100, parts=2)  # 3 messages a part: 3 turns a job
    assert auto_write_range(window, watermark=0, policy=policy(job=job)) == (1, 6)
    assert auto_write_range(window, watermark=6, policy=policy(job=job)) == (7, 12)
