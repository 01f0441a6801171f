"""The token budget of one request (docs/memory.md, token budget). Pure functions.

Budget = context_window - max_output_tokens. Above `emergency_ratio` of it, the oldest
window messages are dropped from the request (never from storage), whole turns at a time, and
a notice says so; when the newest user message alone does not fit, the turn is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from backend.domain.requests import RequestMessage
from backend.errors import ContextTooLong

COMPACTION_NOTICE = (
    "Note: earlier messages of this conversation were left out of this request to fit the "
    "model's context window. Their gist may be in the session context above."
)


@dataclass(frozen=True, slots=True)
class Budget:
    context_window: int
    max_output_tokens: int
    normal_ratio: float
    emergency_ratio: float

    @property
    def tokens(self) -> int:
        return max(self.context_window - self.max_output_tokens, 1)

    @property
    def normal_limit(self) -> int:
        return int(self.tokens * self.normal_ratio)

    @property
    def emergency_limit(self) -> int:
        return int(self.tokens * self.emergency_ratio)


@dataclass(frozen=True, slots=True)
class Fitted:
    messages: tuple[RequestMessage, ...]
    tokens_before: int
    tokens_after: int
    dropped: int


def fit_messages(
    messages: Sequence[RequestMessage],
    counts: Sequence[int],
    *,
    fixed_tokens: int,
    budget: Budget,
) -> Fitted:
    """Drop the oldest turns until the request fits `budget.emergency_limit`.

    `counts[i]` is the token count of `messages[i]`; `fixed_tokens` covers the system prompt
    and tool definitions. The last message (the new user message) is never dropped.
    """
    total = fixed_tokens + sum(counts)
    if total <= budget.emergency_limit:
        return Fitted(tuple(messages), total, total, 0)
    if fixed_tokens + counts[-1] > budget.tokens:
        raise ContextTooLong(
            f"the message needs about {fixed_tokens + counts[-1]} tokens with the system prompt;"
            f" the model accepts {budget.tokens}"
        )
    remaining, cut = total, 0
    while cut < len(messages) - 1 and remaining > budget.emergency_limit:
        remaining -= counts[cut]
        cut += 1
    while cut < len(messages) - 1 and messages[cut].role != "user":  # start at a whole turn
        remaining -= counts[cut]
        cut += 1
    return Fitted(tuple(messages[cut:]), total, remaining, cut)


def repair_tool_pairing(messages: Sequence[RequestMessage]) -> list[RequestMessage]:
    """Every tool call answered by exactly one result, every result after its call.

    Vendors reject a request with an unanswered call or an orphan result; a missing result
    becomes an error result so the model knows the call did not complete.
    """
    repaired: list[RequestMessage] = []
    open_calls: dict[str, str] = {}
    for message in messages:
        if message.role == "tool":
            if message.tool_call_id in open_calls:
                open_calls.pop(message.tool_call_id)
                repaired.append(message)
            continue
        repaired.extend(_missing_results(open_calls))
        open_calls = {call.id: call.name for call in message.tool_calls}
        repaired.append(message)
    repaired.extend(_missing_results(open_calls))
    return repaired


def _missing_results(open_calls: dict[str, str]) -> list[RequestMessage]:
    results = [
        RequestMessage(
            role="tool",
            content=f"error: the {name} call was interrupted and has no result",
            tool_call_id=call_id,
            is_error=True,
        )
        for call_id, name in open_calls.items()
    ]
    open_calls.clear()
    return results
