"""The token budget keeps a request inside the model's window without losing the new message."""

from __future__ import annotations

import pytest

from backend.chat.budget import Budget, fit_messages, repair_tool_pairing
from backend.domain.messages import ToolCall
from backend.domain.requests import RequestMessage
from backend.errors import ContextTooLong

BUDGET = Budget(context_window=1100, max_output_tokens=100, normal_ratio=0.7, emergency_ratio=0.95)


def conversation(turns: int) -> list[RequestMessage]:
    messages = []
    for i in range(turns):
        messages += [RequestMessage("user", f"q{i}"), RequestMessage("assistant", f"a{i}")]
    return [*messages, RequestMessage("user", "newest")]


def test_a_request_under_the_emergency_limit_is_untouched() -> None:
    messages = conversation(3)
    fitted = fit_messages(messages, [100] * 7, fixed_tokens=100, budget=BUDGET)
    assert fitted.messages == tuple(messages) and fitted.dropped == 0


def test_above_the_emergency_limit_the_oldest_turns_are_dropped() -> None:
    messages = conversation(6)  # 13 messages x 100 + 100 = 1,400 > 950
    fitted = fit_messages(messages, [100] * 13, fixed_tokens=100, budget=BUDGET)
    assert fitted.tokens_after <= BUDGET.emergency_limit
    assert fitted.messages[0].role == "user"
    assert fitted.messages[-1].content == "newest"
    assert fitted.dropped == 13 - len(fitted.messages)


def test_a_newest_message_that_alone_does_not_fit_is_refused() -> None:
    with pytest.raises(ContextTooLong):
        fit_messages(conversation(0), [1200], fixed_tokens=100, budget=BUDGET)


def test_tool_pairing_is_repaired() -> None:
    call = ToolCall(id="c1", name="now")
    messages = [
        RequestMessage("user", "time?"),
        RequestMessage("tool", "orphan", tool_call_id="zz"),
        RequestMessage("assistant", "", tool_calls=(call,)),
        RequestMessage("user", "again"),
    ]
    repaired = repair_tool_pairing(messages)
    assert [m.role for m in repaired] == ["user", "assistant", "tool", "user"]
    assert repaired[2].tool_call_id == "c1" and repaired[2].is_error


def test_estimates_for_other_models_learn_from_reported_usage() -> None:
    from backend.chat.tokens import TokenCounter

    exact = TokenCounter("gpt-4o-mini")
    estimate = TokenCounter("claude-test-model")
    text = "The quick brown fox jumps over the lazy dog. " * 20
    assert exact.is_exact and not estimate.is_exact
    first = estimate.count(text)
    for _ in range(30):  # the vendor keeps reporting 20 % more than estimated
        estimate.calibrate(estimate.count(text), round(first * 1.2))
    assert abs(estimate.count(text) - first * 1.2) <= first * 0.02
    exact.calibrate(exact.count(text), exact.count(text) * 2)
    assert exact.count(text) == first  # exact counts never drift
