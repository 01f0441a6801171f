"""The overflow summarizer's model call: evicted messages in, memory facts and summary out.

The answer is asked for in two sections (`## Memory`, `## Summary`). An answer that ignores
the format is still used: its text becomes both the memory fact and the summary, so nothing
the model wrote is dropped. "Nothing to record" (or the seed's 无需记录) means no memory line.
A failed or empty call raises `SummaryFailed`; the caller evicts nothing and retries later.

A range larger than the summarizer's input budget is summarized in parts, each with the
summary so far (so the last part's summary covers them all), and the parts' facts are joined;
a single message larger than the budget is cut in the prompt (its identifiers are still kept).
When every attempt failed, `raw_output` stands in: the identifiers and a pointer to the range.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass

from backend.chat.fidelity import extract_identifiers, missing_identifiers
from backend.chat.prompts import PromptRenderer, TemplateProblem
from backend.chat.window import CHARS_PER_TOKEN, part_numbers, tokens_of
from backend.domain.events import TextDelta, UsageReported
from backend.domain.messages import StoredMessage, Usage
from backend.domain.requests import ChatRequest, RequestMessage
from backend.errors import ProviderError, TallyError
from backend.memory.corrections import without_overridden
from backend.memory.entries import FACT_SEPARATOR, MemoryEntry
from backend.memory.relevance import FactRef, current_facts
from backend.providers.base import ChatProvider

NOTHING_TO_RECORD = re.compile(r"^\W*(nothing to record|无需记录)\W*$", re.IGNORECASE)
# A fact that replaces current memory lines: `(replaces L1, L2) the new fact`.
REPLACES = re.compile(r"^\(\s*replaces\s+(L\d+(?:\s*,\s*L\d+)*)\s*\)\s*(.+)$", re.IGNORECASE)
SECTION = re.compile(r"^#{1,3}\s*(memory|summary|记忆|摘要)\s*[:：]?\s*$", re.I | re.M)
SUMMARY_MAX_CHARS = 4000
SYSTEM_TEMPLATE = "overflow_summary_system.md.j2"
REPLACEABLE_FACTS = 50  # current facts the summarizer is shown, that a new fact may replace


class SummaryFailed(TallyError):
    code = "summary_failed"
    status = 503


@dataclass(frozen=True, slots=True)
class SummaryOutput:
    facts: tuple[str, ...]  # empty: nothing to record
    summary: str
    usage: Usage
    supersedes: tuple[str, ...] = ()  # ids of the memory entries the facts replace

    @property
    def memory_text(self) -> str:
        return FACT_SEPARATOR.join(self.facts)


def parse_output(text: str) -> tuple[tuple[str, ...], str]:
    """(facts, summary) from the model's answer, whatever shape it took."""
    sections: dict[str, str] = {}
    matches = list(SECTION.finditer(text))
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        name = "memory" if match.group(1).lower() in ("memory", "记忆") else "summary"
        sections[name] = text[match.end() : end].strip()
    if not sections:  # the format was ignored: keep everything it said
        flat = " ".join(text.split())
        if NOTHING_TO_RECORD.match(flat):
            return (), ""
        return (flat,), text.strip()
    memory = sections.get("memory", "")
    facts = tuple(
        line.strip().lstrip("-*•").strip()
        for line in memory.splitlines()
        if line.strip() and not NOTHING_TO_RECORD.match(line.strip())
    )
    return tuple(f for f in facts if f), sections.get("summary", "").strip()


@dataclass(frozen=True, slots=True)
class SummaryModel:
    provider: ChatProvider
    name: str


@dataclass(frozen=True, slots=True)
class SummaryPrompt:
    """What one summary attempt asks: the `messages` (from `memory_from_id` on, for memory; the
    ones before, context), the summary so far, the language, the identifiers to `keep` and those
    an earlier try dropped (`missing`), and the current lines a fact may replace
    (`replaceable`, shown labelled L1, L2, …)."""

    messages: Sequence[StoredMessage]
    memory_from_id: int
    previous_summary: str
    language: str
    replaceable: Sequence[MemoryEntry] = ()
    keep: Sequence[str] = ()
    missing: Sequence[str] = ()


class Summarizer:
    def __init__(
        self,
        models: Sequence[SummaryModel],
        prompts: PromptRenderer,
        *,
        input_budget_tokens: int = 8_000,
    ) -> None:
        self._models = list(models)
        self._prompts = prompts
        self._budget = input_budget_tokens

    def check_template(self, language: str) -> None:
        """Render the summary prompt once with sample values (ConfigError if it fails)."""
        sample = {
            "role": "user",
            "content": "My name is Ada.",
            "is_for_memory": True,
            "said_on": "2026-01-01",
        }
        try:
            self._prompts.check(SYSTEM_TEMPLATE)
            self._prompts.check(
                summary_template(language),
                messages=[sample],
                previous_summary="",
                keep=["Ada"],
                missing=[],
                has_memory_part=True,
                replaceable=[{"label": "L1", "content": "The user is called Ada."}],
            )
        except TemplateProblem as exc:
            raise exc.at("prompts_dir") from exc

    @property
    def has_fallback(self) -> bool:
        return len(self._models) > 1

    def model_for(self, attempt: int, *, retries_per_model: int) -> SummaryModel:
        """The summarizer's own model first; its fallback after `retries_per_model` failures."""
        return self._models[min(attempt // retries_per_model, len(self._models) - 1)]

    async def summarize(
        self,
        model: SummaryModel,
        *,
        messages: Sequence[StoredMessage],
        memory_from_id: int,
        previous_summary: str,
        language: str,
        replaceable: Sequence[MemoryEntry] = (),
    ) -> SummaryOutput:
        """The range's facts and the updated summary, in parts when it is too large. Facts
        may replace `replaceable` entries (current lines about the same things)."""
        facts: list[str] = []
        supersedes: list[str] = []
        usage = Usage()
        summary = previous_summary
        for part in split_by_budget(messages, self._budget):
            asked = SummaryPrompt(
                messages=[cut_to_budget(m, self._budget) for m in part],
                memory_from_id=memory_from_id,
                previous_summary=summary,
                language=language,
                replaceable=replaceable,
                # What the user took back later in the range is not to be kept.
                keep=extract_identifiers(
                    without_overridden(
                        [m.content for m in part if m.role == "user" and m.id >= memory_from_id]
                    )
                ),
            )
            output = await self._summarize_part(model, asked)
            facts += output.facts
            supersedes += output.supersedes
            usage.add(output.usage)
            summary = output.summary
        return SummaryOutput(tuple(facts), summary, usage, tuple(dict.fromkeys(supersedes)))

    async def _summarize_part(self, model: SummaryModel, asked: SummaryPrompt) -> SummaryOutput:
        for_memory = [m for m in asked.messages if m.id >= asked.memory_from_id]
        output = await self.distill(model, asked)
        missing = missing_identifiers(asked.keep, output.memory_text) if output.facts else []
        if missing:
            retry = await self.distill(model, dataclasses.replace(asked, missing=missing))
            retry.usage.add(output.usage)
            output = retry
            still_missing = missing_identifiers(asked.keep, output.memory_text)
            if still_missing:  # keep them verbatim rather than lose them
                kept = "kept verbatim: " + ", ".join(still_missing)
                output = dataclasses.replace(output, facts=(*output.facts, kept))
        if not for_memory:
            output = SummaryOutput((), output.summary, output.usage)
        return output

    async def distill(self, model: SummaryModel, asked: SummaryPrompt) -> SummaryOutput:
        """One attempt: the model's facts (from the messages for memory) and its updated
        summary."""
        messages, memory_from_id = asked.messages, asked.memory_from_id
        said_each = [m.content for m in messages if m.role == "user" and m.id >= memory_from_id]
        shown = current_facts(asked.replaceable, limit=REPLACEABLE_FACTS, queries=said_each)
        prompt = self._prompts.render(
            summary_template(asked.language),
            messages=[
                {
                    "role": m.role,
                    "content": m.content,
                    "is_for_memory": m.id >= memory_from_id,
                    "said_on": m.created_at.date().isoformat(),
                }
                for m in messages
            ],
            previous_summary=asked.previous_summary,
            keep=list(asked.keep),
            missing=list(asked.missing),
            has_memory_part=any(m.id >= memory_from_id for m in messages),
            replaceable=[
                {"label": f"L{n}", "content": fact.text} for n, fact in enumerate(shown, 1)
            ],
        )
        request = ChatRequest(
            model=model.name,
            system=self._prompts.render(SYSTEM_TEMPLATE).strip(),
            messages=(RequestMessage(role="user", content=prompt),),
            max_output_tokens=1024,
        )
        text, usage = await _complete(model.provider, request)
        facts, summary = parse_output(text)
        facts, supersedes = replaced_facts(facts, shown)
        summary = summary[:SUMMARY_MAX_CHARS] or asked.previous_summary
        return SummaryOutput(facts, summary, usage, supersedes)


def replaced_facts(
    facts: Sequence[str], shown: Sequence[FactRef]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the facts without their `(replaces L…)` marks, the refs of the facts they replace);
    a label that names no fact shown is ignored."""
    ids: dict[str, None] = {}
    plain = []
    for fact in facts:
        match = REPLACES.match(fact)
        if match is None:
            plain.append(fact)
            continue
        for label in re.findall(r"\d+", match[1]):
            if 1 <= int(label) <= len(shown):
                ids.setdefault(shown[int(label) - 1].ref, None)
        plain.append(match[2].strip())
    return tuple(plain), tuple(ids)


def raw_output(
    messages: Sequence[StoredMessage], *, memory_from_id: int, previous_summary: str
) -> SummaryOutput:
    """What a range leaves in memory when no summarizer attempt succeeded: a line with the
    identifiers its user messages hold (what the fidelity gate keeps) and where the messages
    are, for `tally memory resummarize`; the summary stays as it was."""
    for_memory = [m for m in messages if m.id >= memory_from_id]
    if not for_memory:
        return SummaryOutput((), previous_summary, Usage())
    identifiers = extract_identifiers(m.content for m in for_memory if m.role == "user")
    where = f"not summarized yet: messages #{for_memory[0].id}–#{for_memory[-1].id}"
    line = f"{where}; they mention {', '.join(identifiers)}" if identifiers else where
    return SummaryOutput((line,), previous_summary, Usage())


def split_by_budget(
    messages: Sequence[StoredMessage], budget_tokens: int
) -> list[list[StoredMessage]]:
    """Consecutive parts of whole messages, each within the budget (a larger message alone)."""
    parts: list[list[StoredMessage]] = []
    for message, number in zip(messages, part_numbers(messages, budget_tokens), strict=True):
        if number == len(parts):
            parts.append([])
        parts[-1].append(message)
    return parts


def cut_to_budget(message: StoredMessage, budget_tokens: int) -> StoredMessage:
    """The message as the summarizer reads it: cut, with a note, when it alone is too large."""
    limit = budget_tokens * CHARS_PER_TOKEN
    if tokens_of(message) <= budget_tokens or len(message.content) <= limit:
        return message
    cut = len(message.content) - limit
    content = f"{message.content[:limit]} […{cut:,} more characters not shown]"
    return dataclasses.replace(message, content=content)


def summary_template(language: str) -> str:
    return "overflow_summary.zh.md.j2" if language == "zh" else "overflow_summary.md.j2"


async def _complete(provider: ChatProvider, request: ChatRequest) -> tuple[str, Usage]:
    parts: list[str] = []
    usage = Usage()
    try:
        async for event in provider.stream(request):
            if isinstance(event, TextDelta):
                parts.append(event.text)
            elif isinstance(event, UsageReported):
                usage.add(event.usage)
    except ProviderError as exc:
        raise SummaryFailed(f"the summarizer call failed: {exc.message}") from exc
    text = "".join(parts).strip()
    if not text:
        raise SummaryFailed("the summarizer returned an empty answer")
    return text, usage
