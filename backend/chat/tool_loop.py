"""The tool loop: call the model, run the tools it asks for, feed results back, repeat.

Intermediate assistant tool-call messages and tool results exist only in the request built
during this turn; each executed call is handed to `record` as soon as it finishes, so it is
stored even if the turn fails later. A step's reasoning blocks travel on its tool-call message,
so the adapter can send them back within this loop; they are never stored.

What the model and the tools hand over is made storable as it enters the turn
(`domain/text.py`): a NUL or a lone surrogate in a reply, its reasoning, a tool call or a tool's
result becomes U+FFFD, so the stream, the stored turn and the next request carry the same text
on every backend.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from backend.chat.approvals import ApprovalPolicy, Approvals, Decision, not_run_note
from backend.chat.budget import repair_tool_pairing
from backend.domain.events import (
    ProviderEvent,
    RetryScheduled,
    TextDelta,
    ThinkingBlockDone,
    ThinkingDelta,
    ToolApprovalRequested,
    ToolCallRecord,
    ToolCallRequested,
    ToolFinished,
    ToolStarted,
    TurnEvent,
    UsageReported,
)
from backend.domain.messages import ToolCall, Usage
from backend.domain.requests import ChatRequest, RequestMessage
from backend.domain.text import storable_object, storable_text
from backend.domain.thinking import ThinkingBlock
from backend.providers.base import ChatProvider
from backend.tools.base import ToolContext
from backend.tools.registry import ToolRegistry

NO_APPROVAL = ApprovalPolicy()  # no tool waits for a person

FINAL_ANSWER_NOTE = (
    "You have used all the tool calls allowed for this message. "
    "Answer now with what you know, without calling tools."
)


@dataclass(slots=True)
class LoopOutcome:
    """What the loop produced so far; complete once the final answer arrived."""

    reply_parts: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    is_complete: bool = False
    context_tokens: int = 0
    is_compacted: bool = False  # the request was compacted to fit the context
    memory_problem: str | None = None  # why memory did not work for this turn
    thinking: str = ""  # the reasoning streamed before and between the reply's parts

    @property
    def reply(self) -> str:
        return "\n\n".join(part for part in self.reply_parts if part.strip())


async def run_tool_loop(
    provider: ChatProvider,
    request: ChatRequest,
    *,
    tools: ToolRegistry,
    context: ToolContext,
    max_iterations: int,
    record: Callable[[ToolCallRecord], Awaitable[None]],
    outcome: LoopOutcome,
    max_result_chars: int = 20_000,
    approval: ApprovalPolicy = NO_APPROVAL,
    approvals: Approvals | None = None,
) -> AsyncIterator[TurnEvent]:
    """Stream the turn's events, filling `outcome` as it goes. A call that `approval` names
    runs only once `approvals` has a person's yes."""
    approvals = approvals or Approvals()
    messages = list(request.messages)
    for iteration in range(max_iterations + 1):
        step = _step_request(request, messages, is_last=iteration == max_iterations)
        calls: list[ToolCall] = []
        thinking: list[ThinkingBlock] = []
        outcome.reply_parts.append("")
        async for received in provider.stream(step):
            event = _storable(received)
            if isinstance(event, TextDelta):
                outcome.reply_parts[-1] += event.text
                yield event
            elif isinstance(event, ThinkingDelta):
                outcome.thinking += event.text
                yield event
            elif isinstance(event, ThinkingBlockDone):  # for the next step, never the client
                thinking.append(event.block)
            elif isinstance(event, RetryScheduled):
                yield event
            elif isinstance(event, ToolCallRequested):
                calls.append(event.call)
            elif isinstance(event, UsageReported):
                outcome.usage.add(event.usage)
        if not calls:
            outcome.is_complete = True
            return
        messages.append(
            RequestMessage(
                "assistant",
                outcome.reply_parts[-1],
                tool_calls=tuple(calls),
                thinking=tuple(thinking),
            )
        )
        for call in calls:
            yield ToolStarted(call=call)
            decision = Decision.APPROVED
            is_asked = approval.requires(call.name)
            if is_asked and not approval.can_ask:
                decision = Decision.UNASKABLE
            elif is_asked:
                await approvals.ask(call.id)
                try:
                    yield ToolApprovalRequested(
                        call.id, call.name, call.arguments, approval.timeout_s
                    )
                    decision = await approvals.wait(call.id, approval.timeout_s)
                finally:  # also when the turn ends while it waits
                    await approvals.close(call.id)
            if decision is Decision.APPROVED:
                result = _storable_result(await tools.execute(call, context))
            else:
                result = _not_run(call, not_run_note(decision, approval.timeout_s))
            await record(result)
            outcome.tool_calls.append(result)
            yield ToolFinished(
                tool_call_id=result.tool_call_id,
                tool_name=result.tool_name,
                result=result.result,
                is_error=result.is_error,
                duration_ms=result.duration_ms,
            )
            messages.append(
                RequestMessage(
                    "tool",
                    cut_result(result.result, max_result_chars),
                    tool_call_id=call.id,
                    is_error=result.is_error,
                )
            )


def _step_request(
    request: ChatRequest, messages: list[RequestMessage], *, is_last: bool
) -> ChatRequest:
    return dataclasses.replace(
        request,
        messages=tuple(repair_tool_pairing(messages)),
        # Tools stay declared (Anthropic requires it once tool blocks are in the history); the
        # last call only forbids using them.
        tool_choice="none" if is_last else request.tool_choice,
        system=request.system + ("\n" + FINAL_ANSWER_NOTE if is_last else ""),
    )


def _storable(event: ProviderEvent) -> ProviderEvent:
    """`event` with the model's text made storable (the rest passes as it is)."""
    if isinstance(event, TextDelta):
        return TextDelta(storable_text(event.text))
    if isinstance(event, ThinkingDelta):
        return ThinkingDelta(storable_text(event.text))
    if isinstance(event, ToolCallRequested):
        call = event.call
        return ToolCallRequested(
            dataclasses.replace(
                call,
                id=storable_text(call.id),
                name=storable_text(call.name),
                arguments=storable_object(call.arguments),
                raw_arguments=storable_text(call.raw_arguments),
            )
        )
    return event


def _storable_result(record: ToolCallRecord) -> ToolCallRecord:
    return dataclasses.replace(record, result=storable_text(record.result))


def cut_result(text: str, max_chars: int) -> str:
    """A tool's result as the model reads it: at most `max_chars`, saying when it was cut
    (storage keeps the whole result)."""
    if len(text) <= max_chars:
        return text
    return (
        f"{text[:max_chars]}\n[cut: the result has {len(text):,} characters; "
        f"the first {max_chars:,} are shown]"
    )


def _not_run(call: ToolCall, note: str) -> ToolCallRecord:
    return ToolCallRecord(
        tool_call_id=call.id,
        tool_name=call.name,
        arguments=call.arguments,
        result=note,
        is_error=True,
        duration_ms=0,
    )
