"""Gathers what one turn's request needs (window, memory, summary) and compiles it in budget.

The request is ordered for the vendor's prompt cache: the system prompt holds only what changes
rarely (instructions, the date, standing memory, the session summary), and what changes every
turn (the time, memory picked for this message) travels after the history, with the new
message. Between two evictions each request then starts with the previous one.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from backend.chat.budget import COMPACTION_NOTICE, Budget, fit_messages
from backend.chat.compiler import ModelLimits, compile_request
from backend.chat.memory_context import MemoryContext, PromptMemory, Window
from backend.chat.prompts import TURN_CONTEXT_TEMPLATE, PromptRenderer, TemplateProblem
from backend.chat.tokens import MESSAGE_OVERHEAD, TokenCounter
from backend.domain.events import Compacted
from backend.domain.messages import Session, StoredMessage
from backend.domain.requests import ChatRequest, RequestMessage
from backend.memory.entries import neutralise
from backend.metrics.registry import PROMPT_BUILD_SECONDS
from backend.settings import PersonaSettings
from backend.tools.registry import ToolRegistry


@dataclass(frozen=True, slots=True)
class BuiltRequest:
    request: ChatRequest
    compaction: Compacted | None
    estimated_tokens: int


@dataclass(frozen=True, slots=True)
class RequestSettings:
    persona: PersonaSettings
    model: ModelLimits
    budget: Budget
    scope_by_user: bool


class RequestBuilder:
    def __init__(
        self,
        *,
        prompts: PromptRenderer,
        tools: ToolRegistry,
        memory: MemoryContext | None,
        counter: TokenCounter,
        settings: RequestSettings,
        clock: Callable[[], datetime],
    ) -> None:
        self._prompts = prompts
        self._tools = tools
        self._memory = memory
        self._counter = counter
        self._settings = settings
        self._clock = clock

    @property
    def budget_tokens(self) -> int:
        return self._settings.budget.tokens

    @property
    def window_limit(self) -> int | None:
        """How many stored messages a request may carry besides the new one."""
        limit = self._settings.persona.max_history_messages
        return None if limit < 0 else limit

    async def build(self, session: Session, window: list[StoredMessage]) -> BuiltRequest:
        """The request for `window`, which ends with the turn's user message."""
        await self._tools.ready()  # a tenant's first turn waits for its MCP servers' tools
        with PROMPT_BUILD_SECONDS.time():
            return await self._build(session, window)

    async def _build(self, session: Session, window: list[StoredMessage]) -> BuiltRequest:
        settings = self._settings
        user_message = window[-1]
        memory = PromptMemory()
        if self._memory is not None:
            scope_key = (session.user_key or "") if settings.scope_by_user else ""
            memory = await self._memory.lines(
                tenant_id=session.tenant_id,
                scope_key=scope_key,
                query=user_message.content,
                window=Window(session.id, frozenset(message.id for message in window)),
            )
        now = self._clock()
        request = compile_request(
            system=self._render_system(session, memory.standing, now),
            window=window,
            tools=self._tools.specs,
            model=settings.model,
            turn_context=self._prompts.render(
                TURN_CONTEXT_TEMPLATE,
                now=now.isoformat(timespec="seconds"),
                memory=memory.relevant,
                earlier=memory.earlier,
            ),
            cache_key=cache_key_of(session),
        )
        return self._fit(request, window)

    def check_template(self) -> None:
        """Render the system template once with sample values (ConfigError if it fails)."""
        sample_memory = ["2026-01-01|manual|a sample fact"]
        try:
            self._prompts.check(
                self._settings.persona.system_template,
                **self._system_variables("api", sample_memory, "A summary.", self._clock()),
            )
        except TemplateProblem as exc:
            raise exc.at("persona.system_template") from exc
        self._prompts.check(
            TURN_CONTEXT_TEMPLATE,
            now="2026-01-01T00:00:00",
            memory=sample_memory,
            earlier=["2026-01-01|web, user|a sample message"],
        )

    def _render_system(self, session: Session, memory_lines: list[str], now: datetime) -> str:
        return self._prompts.render(
            self._settings.persona.system_template,
            **self._system_variables(session.channel, memory_lines, session.summary, now),
        )

    def _system_variables(
        self, channel: str, memory_lines: list[str], summary: str, now: datetime
    ) -> dict[str, object]:
        settings = self._settings
        today = now.date().isoformat()
        return {
            "persona": settings.persona,
            "today": today,
            # Older templates show `now`; it is the date too, as a time would change the
            # prompt's start every turn (the time is in the turn's context instead).
            "now": today,
            "channel": channel,
            "model": settings.model.name,
            "tools": [spec.name for spec in self._tools.specs],
            "memory": memory_lines,
            "summary": quoted_summary(summary),
        }

    def _fit(self, request: ChatRequest, window: list[StoredMessage]) -> BuiltRequest:
        """Apply the emergency budget: drop the oldest turns from the request, not storage."""
        sent_from = window[len(window) - len(request.messages) :]
        counts = [
            self._count(stored, sent)
            for stored, sent in zip(sent_from, request.messages, strict=True)
        ]
        fixed = self._counter.count_request(dataclasses.replace(request, messages=()))
        fitted = fit_messages(
            request.messages, counts, fixed_tokens=fixed, budget=self._settings.budget
        )
        if not fitted.dropped:
            return BuiltRequest(request, None, fitted.tokens_after)
        compacted = dataclasses.replace(
            request,
            system=request.system + "\n" + COMPACTION_NOTICE + "\n",
            messages=fitted.messages,
        )
        event = Compacted(
            reason="emergency",
            tokens_before=fitted.tokens_before,
            tokens_after=fitted.tokens_after,
            dropped_messages=fitted.dropped,
        )
        return BuiltRequest(compacted, event, fitted.tokens_after)

    def _count(self, stored: StoredMessage, sent: RequestMessage) -> int:
        # Counts stored at write time spare a re-count of the whole window every turn, and the
        # context's lines were counted when memory chose them.
        if stored.token_count is not None and not sent.images:
            context = self._counter.count_by_line(sent.context) if sent.context else 0
            return stored.token_count + MESSAGE_OVERHEAD + context
        return self._counter.count_message(sent)


def cache_key_of(session: Session) -> str:
    """The session's name for the vendor's prompt cache: stable, and naming neither the tenant
    nor the session to the vendor."""
    digest = hashlib.sha256(f"{session.tenant_id}/{session.id}".encode()).hexdigest()
    return f"tally-{digest[:32]}"


def quoted_summary(summary: str) -> str:
    """The session summary as quoted data for the system prompt: each line neutralised (no
    control character, no `|`) and prefixed with `> `, so no summary, however it was written,
    can start a heading or forge a memory line there."""
    lines = [neutralise(line) for line in summary.splitlines()]
    return "\n".join(f"> {line}" for line in lines if line)
