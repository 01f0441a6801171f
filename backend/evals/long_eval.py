"""`tally eval memory --long`: whether what was said months ago reaches the model when asked.

The long script (`long_script`) is told session by session through the composed services'
ChatService, the clock moving from one session's day to the next, each session left quiet (its
tail distilled) before the next. Then each story's question is asked in a fresh session. The
chat model is a recording stand-in: a question's evidence reached the model when every needle
of it is in the memory lines of the request (standing, relevant or earlier messages), and for a
"when" question, on a line dated the day it was said.

Beside Tally, the same checks over two simple policies on the same final memory: "all memory"
(every current fact sent) and "recency only" (the newest facts within the memory budget).
"""

from __future__ import annotations

import asyncio
import re
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from datetime import time as day_time
from pathlib import Path

from sqlalchemy import func, select

from backend.chat.tokens import TokenCounter
from backend.composition.build import build_services
from backend.composition.services import Services
from backend.domain.requests import ChatRequest
from backend.evals.long_report import Answered, LongReport, Policy, render_long
from backend.evals.long_script import LongScript, build_long_script
from backend.evals.long_stories import REPLIES, Story
from backend.evals.memory_eval import (
    TENANT,
    Progress,
    SteppedClock,
    SummarizerChoice,
    SummarizerKind,
    _scope_key,
    _summarizer_model,
    _summarizer_usage,
    _turn,
    choose_summarizer,
    go_quiet,
    quiet_logs,
    scratch_settings,
)
from backend.memory.entries import format_line
from backend.providers.scripted import ScriptedProvider
from backend.settings import Settings
from backend.storage.tables import overflow_jobs

MEMORY_LINE = re.compile(r"^\d{4}-\d{2}-\d{2}\|.*$", re.MULTILINE)
BETWEEN_MESSAGES = timedelta(minutes=3)
CACHED_PRICE = 0.1  # of a token's price, for a prompt prefix served from the vendor's cache


async def evaluate_long(
    settings: Settings, script: LongScript, choice: SummarizerChoice, progress: Progress
) -> LongReport:
    recorder = ScriptedProvider(name="recorder", replies=[REPLIES[script.language]])
    summarizer = _summarizer_model(settings, choice)
    clock = SteppedClock(datetime.combine(script.sessions[0].day, day_time(19), UTC))
    counter = TokenCounter("gpt-4o-mini")  # cl100k/o200k: what a request costs
    try:
        async with build_services(
            settings, provider=recorder, summarizer_provider=summarizer, clock=clock
        ) as services:
            calls_before, _ = _summarizer_usage()
            turns = 0
            for number, session in enumerate(script.sessions, 1):
                clock.now = datetime.combine(session.day, day_time(19), UTC)
                session_id: str | None = None
                for text in session.said:
                    end = await _turn(services, text, session_id)
                    session_id = end.session_id if end is not None else session_id
                    turns += 1
                    clock.now += BETWEEN_MESSAGES
                    await services.runtimes.wait_idle()
                await go_quiet(services, clock)
                if number % 6 == 0:
                    progress.say(f"told {number} of {len(script.sessions)} sessions")
            calls = round(_summarizer_usage()[0] - calls_before)
            clock.now = datetime.combine(script.asked_on, day_time(10), UTC)
            answered = []
            for index, story in enumerate(script.stories):
                first = len(recorder.requests)
                await _turn(services, story.question, None)
                request = recorder.requests[first] if len(recorder.requests) > first else None
                answered.append(_answered(script, index, story, request, counter))
            progress.say(f"asked {len(answered)} questions")
            memory = await services.memory.read(tenant_id=TENANT, scope_key=_scope_key(settings))
            writes = await _writes(services)
    finally:
        await summarizer.aclose()
    facts = [
        format_line(entry.date, entry.source_kind, fact)
        for entry in memory.current_entries
        for number, fact in enumerate(entry.facts, 1)
        if number not in entry.hidden_facts
    ]
    budget = settings.memory.prompt_budget_tokens
    return LongReport(
        language=script.language,
        summarizer=choice.label,
        sessions=len(script.sessions),
        days=(script.sessions[-1].day - script.sessions[0].day).days,
        turns=turns,
        budget=budget,
        tally=tuple(answered),
        all_memory=_policy(script, facts, counter),
        recency=_policy(script, _newest_within(facts, budget, counter), counter),
        facts=len(facts),
        summarizer_calls=calls,
        calls_without_memory=max(0, calls - writes),
    )


def _answered(
    script: LongScript,
    index: int,
    story: Story,
    request: ChatRequest | None,
    counter: TokenCounter,
) -> Answered:
    if request is None:  # the turn failed: nothing reached the model
        return Answered(story, False, False, 0, 0.0, 0)
    lines = memory_lines(request)
    standing = MEMORY_LINE.findall(request.system)
    memory_tokens = counter.count("\n".join(lines))
    standing_tokens = counter.count("\n".join(standing))
    return Answered(
        story=story,
        is_recalled=has_evidence(script, index, lines),
        is_stale=story.stale is not None and _holds(lines, story.stale),
        memory_tokens=memory_tokens,
        billed_tokens=billed(standing_tokens, memory_tokens - standing_tokens),
        request_tokens=counter.count_request(request),
    )


def billed(cached: int, fresh: int) -> float:
    """What tokens cost, in full-price tokens, when the cached ones are billed at a tenth (as
    vendors bill a prompt prefix they served from their cache)."""
    return cached * CACHED_PRICE + fresh


def memory_lines(request: ChatRequest) -> list[str]:
    """The memory lines a request carries: in the system prompt and in the turn's context."""
    texts = [request.system, *(message.context for message in request.messages)]
    return [line for text in texts for line in MEMORY_LINE.findall(text)]


def has_evidence(script: LongScript, index: int, lines: list[str]) -> bool:
    """Every needle of the story in some line; for "when", on a line dated the day said."""
    story = script.stories[index]
    if story.kind == "when":
        said = script.said_on(index, 0).isoformat()
        return any(_holds([line], story.needles[0]) and line.startswith(said) for line in lines)
    return all(_holds(lines, needle) for needle in story.needles)


def _holds(lines: list[str], needle: str) -> bool:
    wanted = needle.casefold()
    return any(wanted in line.casefold() for line in lines)


def _policy(script: LongScript, lines: list[str], counter: TokenCounter) -> Policy:
    """What sending `lines` to every question recalls, and what it costs per question."""
    recalled = tuple(has_evidence(script, index, lines) for index in range(len(script.stories)))
    stale = tuple(s.stale is not None and _holds(lines, s.stale) for s in script.stories)
    tokens = counter.count("\n".join(lines))
    return Policy(recalled, stale, tokens, billed(tokens, 0))  # standing: cached


def _newest_within(lines: list[str], budget: int, counter: TokenCounter) -> list[str]:
    chosen: list[str] = []
    used = 0
    for line in reversed(lines):
        cost = counter.count(line) + 1
        if used + cost > budget:
            break
        chosen.append(line)
        used += cost
    return chosen[::-1]


async def _writes(services: Services) -> int:
    """Summarizer jobs that wrote a memory line (each made one call)."""
    async with services.database.read() as conn:
        return int(
            await conn.scalar(
                select(func.count())
                .select_from(overflow_jobs)
                .where(overflow_jobs.c.memory_line.is_not(None))
            )
            or 0
        )


def run_long_eval(
    settings: Settings,
    *,
    window: int | None,
    summarizer: SummarizerKind | None,
    language: str | None,
) -> int:
    """Run the long eval on a scratch copy of `settings` and print its report; 0 once
    printed (ConfigError for a summarizer that cannot be built)."""
    if window is not None:
        persona = settings.persona.model_copy(update={"max_history_messages": window})
        settings = settings.model_copy(update={"persona": persona})
    started = time.perf_counter()
    choice = choose_summarizer(settings, summarizer)
    with quiet_logs():
        report = run_long(settings, choice, language or settings.persona.language)
    print(render_long(report, seconds=time.perf_counter() - started))
    return 0


def run_long(settings: Settings, choice: SummarizerChoice, language: str) -> LongReport:
    """Run the long script on a scratch copy of `settings` (its window)."""
    script = build_long_script(language)
    said = sum(len(session.said) for session in script.sessions)
    print(
        f"tally eval memory --long: {len(script.sessions)} sessions over"
        f" {(script.sessions[-1].day - script.sessions[0].day).days} days, {said} messages,"
        f" {len(script.stories)} questions, {choice.kind} summarizer (on a scratch database)",
        file=sys.stderr,
        flush=True,
    )
    progress = Progress()
    window = settings.persona.max_history_messages
    with tempfile.TemporaryDirectory(prefix="tally-eval-") as scratch:
        scratch_config = scratch_settings(
            settings, Path(scratch), window=window, is_builtin=choice.kind == "builtin"
        )
        return asyncio.run(evaluate_long(scratch_config, script, choice, progress))
