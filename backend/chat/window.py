"""Window planning: which messages leave a session's window, and when. Pure functions.

The window holds the messages with id >= `sessions.window_start_id`. When it holds more than
`max_history_messages`, the oldest whole turns leave, down to `max_history_messages -
overflow_batch`, so the summarizer runs once per batch rather than once per turn. Eviction is
also driven by tokens: above `normal_ratio` of the budget the window is cut to half of that.
An eviction is a fixed id range; it never includes the newest turn, and holds at most what a
summarizer job reads in a few calls (`JobBound`, far above an everyday batch): a long history
that arrived at once leaves in several jobs one after another, none holding all of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

CHARS_PER_TOKEN = 4  # for messages stored without a token count


class WindowRow(Protocol):
    """What planning reads of a message: a stored message, or its shape alone."""

    @property
    def id(self) -> int: ...
    @property
    def role(self) -> str: ...
    @property
    def token_count(self) -> int | None: ...
    @property
    def chars(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Eviction:
    """Messages first_message_id..last_message_id leave; the window restarts at next_start_id."""

    first_message_id: int
    last_message_id: int
    next_start_id: int
    message_count: int
    reason: str  # "messages" or "tokens"


@dataclass(frozen=True, slots=True)
class JobBound:
    """The most one summarizer job holds: whole turns it reads in `parts` calls, each of at
    most `part_tokens` (the summarizer's input budget)."""

    part_tokens: int
    parts: int


@dataclass(frozen=True, slots=True)
class WindowPolicy:
    max_messages: int  # -1: unlimited
    batch: int
    normal_token_limit: int | None = None  # normal_ratio x budget; None: not token-driven
    job: JobBound | None = None  # None: an eviction of any size is one job


def tokens_of(row: WindowRow) -> int:
    """A message's tokens: as counted when it was stored, else estimated from its length."""
    return row.token_count if row.token_count is not None else row.chars // CHARS_PER_TOKEN + 1


def part_numbers(rows: Sequence[WindowRow], part_tokens: int) -> list[int]:
    """The part of a summary each row falls in: consecutive parts, each within `part_tokens`
    (a larger message alone)."""
    numbers, part, used, is_empty = [], 0, 0, True
    for row in rows:
        tokens = tokens_of(row)
        if not is_empty and used + tokens > part_tokens:
            part, used = part + 1, 0
        numbers.append(part)
        used, is_empty = used + tokens, False
    return numbers


def within_one_job(rows: Sequence[WindowRow], cut: int, job: JobBound | None) -> int:
    """`cut` moved back to the last turn boundary within `job`'s parts (at least the first
    turn): what one summarizer job holds, read in as many calls as one job holding more would
    spend on them."""
    if job is None:
        return cut
    numbers = part_numbers(rows[:cut], job.part_tokens)
    fitted = 0
    for end in range(1, cut + 1):
        if numbers[end - 1] >= job.parts and fitted:
            return fitted
        if end == cut or rows[end].role == "user":
            fitted = end  # a turn boundary
    return fitted


def plan_eviction(window: Sequence[WindowRow], policy: WindowPolicy) -> Eviction | None:
    """The eviction due for `window` (oldest first), or None while it fits."""
    cut, reason = _count_cut(window, policy), "messages"
    token_cut = _token_cut(window, policy)
    if token_cut > cut:
        cut, reason = token_cut, "tokens"
    cut = within_one_job(window, _turn_boundary(window, cut), policy.job)
    if cut <= 0:
        return None
    evicted = window[:cut]
    return Eviction(
        first_message_id=evicted[0].id,
        last_message_id=evicted[-1].id,
        next_start_id=window[cut].id,
        message_count=cut,
        reason=reason,
    )


def _count_cut(window: Sequence[WindowRow], policy: WindowPolicy) -> int:
    if policy.max_messages < 0 or len(window) <= policy.max_messages:
        return 0
    keep = max(policy.max_messages - policy.batch, 0)
    return len(window) - keep


def _token_cut(window: Sequence[WindowRow], policy: WindowPolicy) -> int:
    limit = policy.normal_token_limit
    tokens = [m.token_count or 0 for m in window]
    if limit is None or sum(tokens) <= limit:
        return 0
    remaining, cut = sum(tokens), 0
    while cut < len(window) and remaining > limit // 2:
        remaining -= tokens[cut]
        cut += 1
    return cut


def _turn_boundary(window: Sequence[WindowRow], cut: int) -> int:
    """Move the cut forward to the next user message; never past the newest turn's start."""
    user_indexes = [i for i, m in enumerate(window) if m.role == "user"]
    if not user_indexes or cut <= 0:
        return 0
    newest_turn = user_indexes[-1]
    for index in user_indexes:
        if index >= cut:
            return min(index, newest_turn)
    return newest_turn
