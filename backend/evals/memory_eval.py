"""`tally eval memory`: how much of a scripted conversation reaches the model later.

The script (`memory_facts`) runs through the real pipeline, the composed services' ChatService:
the real turn, rolling window, overflow summarizer, automatic memory write, memory store and
prompt builder. Only the chat model is a stand-in: it answers `REPLY` and records each request,
so recall is measured on what the model receives, not on how it words an answer. A fact is
recalled when its current value is in the request for a question about it; a stale recall is
the superseded value of a corrected fact in that request.

Each fact is asked about once the conversation has gone quiet (its tail distilled, as a
server does after `memory.distill_quiet_after_s`): in a fresh session of the same tenant (only
long-term memory can answer there), then, one question after another, in the original
session. The summarizer is the configured one or the built-in rule-based one. Everything runs
on a database and memory of its own in a temporary directory, never the operator's.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from backend.chat.builtin_summary_model import BuiltinSummaryModel
from backend.chat.prompts import PromptRenderer
from backend.composition.build import build_services
from backend.composition.model_choice import choose_model
from backend.composition.services import Services
from backend.domain.events import TurnCompleted
from backend.domain.inbound import InboundMessage
from backend.domain.messages import UserInput
from backend.domain.requests import ChatRequest
from backend.domain.tenants import DEFAULT_TENANT
from backend.errors import ConfigError, TallyError
from backend.evals.memory_facts import REPLY, Fact, Script, build_script, max_facts
from backend.evals.memory_report import ProbeOutcome, Report, render
from backend.evals.mentions import Haystack
from backend.metrics.registry import REGISTRY
from backend.providers.base import ChatProvider
from backend.providers.registry import build_chat_provider
from backend.providers.scripted import ScriptedProvider
from backend.settings import Settings, parse_settings

log = logging.getLogger("tally")

TENANT = DEFAULT_TENANT
USER_KEY = "memory-eval"  # the end user, for `memory.scope: user`
SummarizerKind = Literal["configured", "builtin"]
SUMMARIZER_CALLS = ("ok", "fallback", "failed")  # tally_summarizer_runs outcomes that called


class EvalFailed(TallyError):
    code = "eval_failed"


@dataclass(frozen=True, slots=True)
class SummarizerChoice:
    kind: SummarizerKind
    label: str  # for the report: which model, and why


def run_memory_eval(
    settings: Settings,
    *,
    window: int | None,
    facts: int,
    summarizer: SummarizerKind | None,
) -> int:
    """Run the eval on a scratch copy of `settings` and print its report; 0 once printed,
    2 for arguments that cannot run (ConfigError for a summarizer that cannot be built)."""
    if not 1 <= facts <= max_facts():
        print(f"tally eval memory: --facts must be 1 to {max_facts()}", file=sys.stderr)
        return 2
    choice = choose_summarizer(settings, summarizer)
    window = settings.persona.max_history_messages if window is None else window
    script = build_script(facts)
    print(
        f"tally eval memory: {len(script.messages)} turns, {facts} facts, window {window},"
        f" {choice.kind} summarizer; then {len(script.facts) + len(script.controls)} questions"
        " twice (on a scratch database)",
        file=sys.stderr,
        flush=True,
    )
    started = time.perf_counter()
    with quiet_logs(), tempfile.TemporaryDirectory(prefix="tally-eval-") as scratch:
        scratch_config = scratch_settings(
            settings, Path(scratch), window=window, is_builtin=choice.kind == "builtin"
        )
        report = asyncio.run(evaluate(scratch_config, script, choice))
    print(render(report, seconds=time.perf_counter() - started))
    return 0


@contextmanager
def quiet_logs() -> Iterator[None]:
    """Warnings only: a line per summary would bury the report's own lines."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.WARNING)
    try:
        yield
    finally:
        root.setLevel(level)


def choose_summarizer(settings: Settings, wanted: SummarizerKind | None) -> SummarizerChoice:
    """`wanted`, or by default the configured summarizer when the config names a model that
    can answer (its key is set), else the built-in one. ConfigError when `configured` was
    asked for and cannot be built."""
    builtin = SummarizerChoice("builtin", "built-in (DemoSummarizer, rule-based)")
    if wanted == "builtin":
        return builtin
    try:
        choice = choose_model(settings)
    except ConfigError:
        if wanted == "configured":
            raise
        return _defaulted(builtin, "the configured model cannot be built")
    if choice.is_demo:
        reason = (
            f"{choice.missing_key_env} is not set"
            if choice.missing_key_env
            else "the config names no model"
        )
        if wanted == "configured":
            raise ConfigError(
                f"--summarizer configured: the config names no model that can answer ({reason})"
            )
        return _defaulted(builtin, reason)
    model = choice.model
    own = settings.summarizer
    if own.provider is not None and own.name is not None:
        label = f"{own.provider} {own.name}, falling back to {model.provider} {model.name}"
    else:
        label = f"{model.provider} {model.name} (the chat model: the config names no summarizer)"
    return SummarizerChoice("configured", label)


def _defaulted(builtin: SummarizerChoice, reason: str) -> SummarizerChoice:
    return SummarizerChoice("builtin", f"{builtin.label}; chosen because {reason}")


def scratch_settings(
    settings: Settings, scratch: Path, *, window: int, is_builtin: bool
) -> Settings:
    """`settings` on a fresh SQLite database and memory in `scratch`, at `window`, for the
    default tenant alone: no bots, other tenants, request limits or shared Redis."""
    raw: dict[str, Any] = settings.model_dump()
    raw["database"] = {"url": f"sqlite+aiosqlite:///{scratch / 'tally-eval.db'}"}
    raw["memory"] = {**raw["memory"], "path": str(scratch / "MEMORY.md")}
    raw["data_dir"] = str(scratch / "data")
    raw["persona"] = {**raw["persona"], "max_history_messages": window}
    raw.update(quotas={}, coordination={}, channels={}, tenants={})
    if is_builtin:
        raw["summarizer"] = {}
    return parse_settings(raw, source=settings.source, base_dir=scratch)


async def evaluate(settings: Settings, script: Script, choice: SummarizerChoice) -> Report:
    """Tell the script, wait for the summarizer, then ask about every fact: each in a fresh
    session, then each in the original session."""
    recorder = ScriptedProvider(name="recorder", replies=[REPLY])
    summarizer = _summarizer_model(settings, choice)
    clock = SteppedClock()
    try:
        async with build_services(
            settings, provider=recorder, summarizer_provider=summarizer, clock=clock
        ) as services:
            calls_before, tokens_before = _summarizer_usage()
            progress = Progress()
            told = await _tell(services, script, progress)
            await go_quiet(services, clock)
            calls_after, tokens_after = _summarizer_usage()
            session = await services.sessions.get(tenant_id=TENANT, session_id=told.session_id)
            memory = await services.memory.read(tenant_id=TENANT, scope_key=_scope_key(settings))
            asked = [*script.facts, *script.controls]
            fresh = [await _probe(services, recorder, fact, None) for fact in asked]
            progress.say(f"asked {len(asked)} questions in fresh sessions")
            same = [await _probe(services, recorder, fact, told.session_id) for fact in asked]
            progress.say("asked them in the original session")
    finally:
        await summarizer.aclose()
    count = len(script.facts)
    told_ids = [told.message_ids[at] for at in script.told_at]
    return Report(
        facts=script.facts,
        window=settings.persona.max_history_messages,
        batch=settings.memory.overflow_batch,
        summarizer=choice.label,
        turns=len(script.messages),
        failed_turns=told.failed + sum(not p.is_answered for p in (*fresh, *same)),
        summarizer_calls=round(calls_after - calls_before),
        summarizer_tokens=round(tokens_after - tokens_before),
        memory_lines=len(memory.entries),
        undistilled=sum(1 for i in told_ids if i is None or i > session.memory_watermark_id),
        fresh=tuple(fresh[:count]),
        same=tuple(same[:count]),
        fresh_controls=tuple(fresh[count:]),
        same_controls=tuple(same[count:]),
        is_word_count=choice.kind == "builtin",
    )


@dataclass
class Progress:
    """Prints a line now and then (to stderr, beside the report), so a minute of work is
    never silent."""

    started: float = field(default_factory=time.perf_counter)

    def say(self, text: str) -> None:
        elapsed = time.perf_counter() - self.started
        print(f"  {elapsed:5.0f} s  {text}", file=sys.stderr, flush=True)


@dataclass
class SteppedClock:
    """The eval's time: the conversation's turns, then an hour of quiet."""

    now: datetime = field(default_factory=lambda: datetime.now(UTC))

    def __call__(self) -> datetime:
        return self.now


async def go_quiet(services: Services, clock: SteppedClock) -> None:
    """Let the conversation go quiet for longer than `memory.distill_quiet_after_s`, as a
    conversation that ended does, and wait for its tail to be distilled."""
    quiet = services.settings.memory.distill_quiet_after_s or 0.0
    clock.now += timedelta(seconds=quiet + 60)
    await services.quiet_sessions.sweep()
    await services.runtimes.wait_idle()


def _summarizer_model(settings: Settings, choice: SummarizerChoice) -> ChatProvider:
    """The summarizer model handed to the services: the built-in rules, or the configured chat
    model's provider chain (a `summarizer:` model of its own is built by the services, with
    this as its fallback, exactly as when serving)."""
    if choice.kind == "builtin":
        return BuiltinSummaryModel(PromptRenderer(settings.prompts_dir))
    assert settings.model is not None, "choose_summarizer chose `configured` for a model"
    return build_chat_provider(settings.providers, settings.model)


@dataclass(frozen=True, slots=True)
class _Told:
    session_id: str
    message_ids: list[int | None]  # each script message's id (None: its turn failed)
    failed: int


async def _tell(services: Services, script: Script, progress: Progress) -> _Told:
    """Send the script's messages in one session, each once the summarizer is idle (as from a
    user who types slower than it summarizes), and wait for it after the last."""
    session_id: str | None = None
    ids: list[int | None] = []
    for number, text in enumerate(script.messages, 1):
        if number % 100 == 0:
            progress.say(f"told {number} of {len(script.messages)} turns")
        end = await _turn(services, text, session_id)
        ids.append(end.user_message_id if end is not None else None)
        session_id = end.session_id if end is not None else session_id
        await services.runtimes.wait_idle()
    if session_id is None:
        raise EvalFailed("no turn of the conversation succeeded")
    return _Told(session_id, ids, failed=ids.count(None))


async def _probe(
    services: Services, recorder: ScriptedProvider, fact: Fact, session_id: str | None
) -> ProbeOutcome:
    """Ask `fact.question` (in a new session when `session_id` is None) and look for its
    values in what the model received for it."""
    first = len(recorder.requests)
    end = await _turn(services, fact.question, session_id)
    await services.runtimes.wait_idle()
    received = Haystack("\n".join(_request_text(r) for r in recorder.requests[first:]))
    stale = fact.stale_value
    return ProbeOutcome(
        fact=fact,
        is_answered=end is not None,
        is_recalled=received.has(fact.kind, fact.current_value),
        is_stale=stale is not None and received.has(fact.kind, stale),
    )


async def _turn(services: Services, text: str, session_id: str | None) -> TurnCompleted | None:
    inbound = InboundMessage(
        tenant_id=TENANT,
        channel="api",
        user_input=UserInput(text=text),
        session_id=session_id,
        user_key=USER_KEY,
        title="memory eval",
        stream=False,
    )
    end = await (await services.chat.start(inbound)).result()
    if isinstance(end, TurnCompleted):
        return end
    log.warning(
        "memory eval: a turn failed: %s (%s)",
        end.code,
        end.message,
        extra={"tenant": TENANT, "session": session_id or "new"},
    )
    return None


def _request_text(request: ChatRequest) -> str:
    """All the model reads of a request: the system prompt (standing memory, session summary),
    the window's messages and the turn's context (memory picked for the message)."""
    parts = [request.system]
    for message in request.messages:
        parts += [message.content, message.context]
    return "\n".join(parts)


def _scope_key(settings: Settings) -> str:
    return USER_KEY if settings.memory.scope == "user" else ""


def _summarizer_usage() -> tuple[float, float]:
    """(summarizer calls, summarizer tokens) the default tenant has made in this process, as
    `/metrics` counts them (`tally_summarizer_runs`, `tally_tokens{kind="summarizer"}`)."""
    calls = sum(
        REGISTRY.get_sample_value(
            "tally_summarizer_runs_total", {"tenant": TENANT, "outcome": outcome}
        )
        or 0.0
        for outcome in SUMMARIZER_CALLS
    )
    tokens = REGISTRY.get_sample_value(
        "tally_tokens_total", {"tenant": TENANT, "kind": "summarizer"}
    )
    return calls, tokens or 0.0
