"""One chat turn (docs/architecture.md, a turn's path): serialize, store the user message,
compile, loop, store the reply.

Invariants: the user message is committed before the model is called; only the final reply is
stored as an assistant message, `incomplete` when the turn did not finish; an error is never
stored as a message; every turn ends with exactly one `TurnCompleted` or `TurnFailed`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from datetime import UTC, datetime

from backend.chat.approvals import ApprovalPolicy, Approvals
from backend.chat.running_turns import RunningTurns
from backend.chat.runtime import RuntimeRegistry, TenantRuntime
from backend.chat.tool_loop import LoopOutcome, run_tool_loop
from backend.chat.turn_failures import forget_failure, keep_failure
from backend.chat.turn_handle import TurnHandle, TurnRequest
from backend.chat.turn_lock import SessionLocks
from backend.coordination.base import Coordinator
from backend.domain.decisions import ToolDecision
from backend.domain.events import (
    MemoryDegraded,
    ToolCallRecord,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)
from backend.domain.inbound import origin_of
from backend.domain.messages import Session, StoredMessage, Usage, UserInput
from backend.errors import Conflict, EmptyReply, InvalidInput, TallyError, TurnCancelled
from backend.settings.pricing import charge
from backend.storage.faults import as_storage_fault
from backend.storage.messages import MessageRepository
from backend.storage.tool_conversations import ToolConversationRepository
from backend.storage.usage import UsageDay
from backend.tenancy.quotas import TokenQuota
from backend.tools.base import ToolContext

log = logging.getLogger(__name__)


class TurnRunner:
    def __init__(
        self,
        *,
        messages: MessageRepository,
        tool_conversations: ToolConversationRepository,
        locks: SessionLocks,
        runtimes: RuntimeRegistry,
        token_quota: TokenQuota,
        coordinator: Coordinator,
    ) -> None:
        self._messages = messages
        self._coordinator = coordinator
        self._tool_conversations = tool_conversations
        self._locks = locks
        self._runtimes = runtimes
        self._token_quota = token_quota
        self._tasks: set[asyncio.Task[None]] = set()
        self.running = RunningTurns()  # what cancels and decisions find, from any process

    def start(self, request: TurnRequest) -> TurnHandle:
        handle = TurnHandle(
            request,
            Approvals(  # reads the turn's id when it waits: a resumed turn takes its old one
                lambda call_id, waiting: self._coordinator.approval_waiting(
                    request.tenant_id, request.session_id, handle.turn_id, call_id, waiting=waiting
                )
            ),
        )
        handle.hold_final()  # until the turn is no longer running (the end of `_run`)
        self.running.add(handle)
        task = asyncio.create_task(self._run(handle), name=f"turn {handle.turn_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return handle

    async def cancel(self, *, tenant_id: str, session_id: str) -> bool:
        """Cancel the turn in flight in a session (or the next, while it waits for the lock),
        in this process or in the one that runs it; False when there is none."""
        if self.running.cancel(tenant_id, session_id):
            return True
        return await self._coordinator.cancel_elsewhere(tenant_id, session_id)

    async def decide(self, decision: ToolDecision) -> bool:
        """Apply a decision on a tool call waiting in a turn, in this process or the one running
        it; False when no such call waits (unknown, another tenant's or session's, answered,
        timed out)."""
        here = self.running.decide(decision)
        if here is not None:
            return here
        return await self._coordinator.decide_elsewhere(decision)

    async def aclose(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _run(self, handle: TurnHandle) -> None:
        request = handle.request
        key = (request.tenant_id, request.session_id)
        try:
            await self._coordinator.turn_started(*key)
            async with self._locks.hold(tenant_id=key[0], session_id=key[1]):
                await self._run_locked(handle)
        except TallyError as exc:
            retry_after = getattr(exc, "retry_after", None)
            handle.emit(TurnFailed(exc.code, exc.message, exc.status, retry_after))
        except asyncio.CancelledError:
            handle.emit(TurnFailed("shutting_down", "the server is stopping", status=503))
            raise
        except Exception as exc:
            fault = as_storage_fault(exc)
            if fault is None:
                log.exception("turn failed unexpectedly", extra=handle.log_fields())
                handle.emit(TurnFailed("internal_error", "the turn failed unexpectedly", 500))
            else:  # TurnFailed's log line says what failed
                handle.emit(TurnFailed(fault.code, fault.message, fault.status, fault.retry_after))
        finally:
            self.running.remove(handle)
            try:
                await self._coordinator.turn_ended(*key)
            finally:
                handle.release()

    async def _run_locked(self, handle: TurnHandle) -> None:
        request = handle.request
        runtime = await self._runtimes.get(request.tenant_id)
        session, window = await self._messages.session_with_window(
            tenant_id=request.tenant_id,
            session_id=request.session_id,
            limit=runtime.builder.window_limit,
        )
        if request.user_key is not None and request.user_key != session.user_key:
            raise Conflict(  # one end user's turn must never read or write another's memory
                "this session belongs to another end user (or to none): send without `user`, "
                "or start a session for this user",
                code="session_user_mismatch",
            )
        await self._token_quota.check(
            request.tenant_id, per_day=runtime.settings.quotas.tokens_per_day
        )
        user_message = await self._store_user_message(handle, session, runtime)
        if user_message is None:
            return  # an idempotent replay: already answered
        handle.emit(
            TurnStarted(
                session_id=session.id, turn_id=handle.turn_id, user_message_id=user_message.id
            )
        )
        outcome = LoopOutcome()
        # A resumed turn's user message is stored already, maybe with an incomplete reply
        # after it: the request ends with the user message either way.
        window = [m for m in window if m.id < user_message.id] + [user_message]
        try:
            if handle.is_cancel_requested:
                raise TurnCancelled("the turn was cancelled before the model was called")
            error = await self._call_model(handle, runtime, session, window, outcome)
        except TallyError as exc:  # before the model answered: too long for the context
            await keep_failure(self._messages, session.tenant_id, user_message, exc)
            raise
        reply = await self._finish(handle, runtime, session, user_message, outcome, error)
        if reply is not None:
            runtime.overflow.after_turn(session, [*window, reply])

    async def _store_user_message(
        self, handle: TurnHandle, session: Session, runtime: TenantRuntime
    ) -> StoredMessage | None:
        request = handle.request
        if request.idempotency_key:
            earlier = await self._messages.by_idempotency_key(
                tenant_id=request.tenant_id, idempotency_key=request.idempotency_key
            )
            if earlier and earlier[0].session_id != session.id:
                raise Conflict(
                    "this Idempotency-Key was used for a turn in another session",
                    code="idempotency_key_reused",
                )
            if earlier and not _is_same_input(earlier[0], request.user_input):
                # As payment APIs do: a key names one request; another body is a client bug.
                raise InvalidInput(
                    "this Idempotency-Key was used with a different message; send a new "
                    "message with a new key",
                    code="idempotency_key_mismatch",
                )
            if earlier:
                return await self._replay(handle, earlier)
        return await self._messages.add_user(
            tenant_id=request.tenant_id,
            session_id=session.id,
            turn_id=handle.turn_id,
            user_input=request.user_input,
            token_count=runtime.counter.count(request.user_input.text),
            idempotency_key=request.idempotency_key,
        )

    async def _replay(
        self, handle: TurnHandle, earlier: list[StoredMessage]
    ) -> StoredMessage | None:
        """A retried request: answer with the stored reply, or resume the unanswered turn, as
        long as no newer turn came since (its answer would then reply out of context)."""
        user_message, replies = earlier[0], [m for m in earlier if m.role == "assistant"]
        handle.turn_id = user_message.turn_id
        if not replies or replies[-1].status != "complete":
            newest = await self._messages.window(
                tenant_id=handle.request.tenant_id,
                session_id=user_message.session_id,
                start_id=0,
                limit=1,
            )
            if newest and newest[-1].id not in {m.id for m in earlier}:
                raise Conflict(
                    "newer turns were answered since this request failed; send it again "
                    "with a new Idempotency-Key",
                    code="turn_superseded",
                )
            return user_message
        reply = replies[-1]
        handle.emit(TurnStarted(user_message.session_id, handle.turn_id, user_message.id))
        handle.emit(
            TurnCompleted(
                session_id=user_message.session_id,
                turn_id=handle.turn_id,
                user_message_id=user_message.id,
                assistant_message_id=reply.id,
                reply=reply.content,
                usage=Usage(),
            )
        )
        return None

    async def _call_model(
        self,
        handle: TurnHandle,
        runtime: TenantRuntime,
        session: Session,
        window: list[StoredMessage],
        outcome: LoopOutcome,
    ) -> TallyError | None:
        """Run the tool loop as a cancellable subtask; return the error that ended it, if any."""
        request = handle.request
        user_message = window[-1]
        built = await runtime.builder.build(session, window)
        outcome.context_tokens = built.estimated_tokens
        scope_key = (session.user_key or "") if runtime.settings.memory.scope == "user" else ""
        problem = runtime.memory_health.problem_for(request.tenant_id, session.id, scope_key)
        if problem is not None:  # said before the reply, which may then miss what it forgot
            handle.emit(MemoryDegraded(problem.code, problem.reason))
            outcome.memory_problem = problem.reason
        if built.compaction is not None:  # the event says so, and a flag on the reply: the
            handle.emit(built.compaction)  # reply's text is only what the model said
            outcome.is_compacted = True
        chat = origin_of(session.channel, session.external_key)
        context = ToolContext(
            request.tenant_id, session.id, handle.turn_id, session.user_key, chat=chat
        )

        async def record(call: ToolCallRecord) -> None:
            await self._tool_conversations.add(
                tenant_id=request.tenant_id,
                session_id=session.id,
                turn_id=handle.turn_id,
                record=call,
                user_message=user_message.content,
            )

        tools = runtime.settings.tools

        async def stream() -> None:
            async for event in run_tool_loop(
                runtime.provider,
                dataclasses.replace(built.request, stream=request.stream),
                tools=runtime.tools,
                context=context,
                max_iterations=tools.max_tool_iterations,
                record=record,
                outcome=outcome,
                max_result_chars=tools.max_result_chars,
                approval=ApprovalPolicy(
                    tuple(tools.approval.required),
                    tools.approval.timeout_s,
                    can_ask=request.can_approve,
                ),
                approvals=handle.approvals,
            ):
                handle.emit(event)

        handle._llm_task = asyncio.create_task(stream())
        if handle.is_cancel_requested:  # asked while the request was being built
            handle._llm_task.cancel()
        try:
            await handle._llm_task
        except TallyError as exc:
            return exc
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # the server is stopping, not the user
            return TurnCancelled("the turn was cancelled")
        finally:
            handle._llm_task = None
        if not outcome.tool_calls:  # one model call: its reported prompt size is comparable
            runtime.counter.calibrate(built.estimated_tokens, outcome.usage.prompt_tokens)
        return None

    async def _finish(
        self,
        handle: TurnHandle,
        runtime: TenantRuntime,
        session: Session,
        user_message: StoredMessage,
        outcome: LoopOutcome,
        error: TallyError | None,
    ) -> StoredMessage | None:
        """Store the reply (`incomplete` unless the turn finished) and emit the final event."""
        reply = outcome.reply
        is_complete = error is None and outcome.is_complete and bool(reply)
        stored = None
        if reply.strip():  # the user saw these words: keep them, marked if unfinished
            # at the configured model's prices, also when a fallback answered
            priced = charge(runtime.settings.pricing, runtime.model.name, outcome.usage)
            stored = await self._messages.add_reply(
                tenant_id=session.tenant_id,
                session_id=session.id,
                turn_id=handle.turn_id,
                content=reply,
                status="complete" if is_complete else "incomplete",
                token_count=runtime.counter.count(reply),
                has_tool_calls=bool(outcome.tool_calls),
                compacted=outcome.is_compacted,
                thinking=outcome.thinking,
                usage=UsageDay(
                    session.tenant_id,
                    datetime.now(UTC).date(),
                    turns=1,
                    prompt_tokens=outcome.usage.prompt_tokens,
                    completion_tokens=outcome.usage.completion_tokens,
                    cached_tokens=outcome.usage.cached_tokens,
                    cache_write_tokens=outcome.usage.cache_write_tokens,
                    **dataclasses.asdict(priced),
                ),
            )
        if is_complete and stored is not None:
            await forget_failure(self._messages, session.tenant_id, user_message)
            handle.emit(
                TurnCompleted(
                    session_id=session.id,
                    turn_id=handle.turn_id,
                    user_message_id=user_message.id,
                    assistant_message_id=stored.id,
                    reply=reply,
                    usage=outcome.usage,
                    tool_calls=tuple(outcome.tool_calls),
                    context_tokens=outcome.context_tokens,
                    context_budget=runtime.builder.budget_tokens,
                    memory_problem=outcome.memory_problem,
                )
            )
            return stored
        failure = error or EmptyReply("model", "the model stopped without a reply")
        await keep_failure(self._messages, session.tenant_id, user_message, failure)
        handle.emit(
            TurnFailed(
                code=failure.code,
                message=failure.message,
                status=failure.status,
                retry_after=getattr(failure, "retry_after", None),
                incomplete_message_id=stored.id if stored else None,
            )
        )
        return stored


def _is_same_input(stored: StoredMessage, user_input: UserInput) -> bool:
    return stored.content == user_input.text and stored.images == user_input.images
