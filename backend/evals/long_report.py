"""The long memory eval's report: evidence recall in the request and memory tokens per
question, by kind of question, for Tally beside "all memory" and "recency only"."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from backend.evals.long_stories import KINDS, Story

LANGUAGES = {"en": "English", "zh": "Chinese"}


@dataclass(frozen=True, slots=True)
class Answered:
    """One question, and what the request the model received for it carried."""

    story: Story
    is_recalled: bool  # every needle of its evidence was in the request's memory
    is_stale: bool  # a corrected value's old value was there
    memory_tokens: int  # of the memory lines in the request
    billed_tokens: float  # the same, the standing (cached) ones billed at a tenth
    request_tokens: int  # of the whole request


@dataclass(frozen=True, slots=True)
class Policy:
    """A simple policy over the final memory: per question, recalled and stale; its tokens."""

    recalled: tuple[bool, ...]
    stale: tuple[bool, ...]
    tokens: int  # the same lines for every question
    billed: float  # standing in the system prompt: billed at a tenth after the first turn


@dataclass(frozen=True, slots=True)
class LongReport:
    language: str
    summarizer: str
    sessions: int
    days: int
    turns: int
    budget: int
    tally: tuple[Answered, ...]
    all_memory: Policy
    recency: Policy
    facts: int
    summarizer_calls: int
    calls_without_memory: int


def render_long(report: LongReport, *, seconds: float) -> str:
    language = LANGUAGES.get(report.language, report.language)
    lines = [
        f"## tally eval memory --long ({language}): {report.sessions} sessions over"
        f" {report.days} days, {len(report.tally)} questions",
        "",
        f"Summarizer: {report.summarizer}. Memory budget: {report.budget:,} tokens.",
        "",
        "Each question is asked in a fresh session after the last one, so only memory can",
        "answer. Recall: the question's evidence (both statements, for two-fact questions; the",
        "day it was said, for when-questions) is in the memory the request carries. Tokens:",
        "memory tokens per question (cl100k/o200k); billed: the same with the standing lines",
        "(the cached system prompt) at a tenth. Beside Tally, the same final memory standing",
        "whole (all memory) and cut to its newest lines within the budget (recency only).",
        "",
        "| questions | count | Tally | tokens | billed | all memory | tokens | billed"
        " | recency only | tokens | billed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        _row("all", report, range(len(report.tally))),
    ]
    for kind in KINDS:
        chosen = [i for i, answered in enumerate(report.tally) if answered.story.kind == kind]
        if chosen:
            lines.append(_row(kind.replace("_", "-"), report, chosen))
    corrected = [i for i, a in enumerate(report.tally) if a.story.stale is not None]
    lines.append(_stale_row(report, corrected))
    calls = report.summarizer_calls
    lines += [
        "",
        "| run | |",
        "|---|---:|",
        f"| messages told | {report.turns:,} |",
        f"| whole request, mean per question | {_mean(a.request_tokens for a in report.tally)} |",
        f"| facts in memory at the end | {report.facts:,} |",
        f"| summarizer calls | {calls:,} |",
        f"| summarizer calls that wrote no memory | {report.calls_without_memory:,} |",
        f"| time | {seconds:,.1f} s |",
    ]
    return "\n".join(lines)


def _row(label: str, report: LongReport, chosen: Sequence[int]) -> str:
    tally = [report.tally[i] for i in chosen]
    cells = [
        _share(sum(a.is_recalled for a in tally), len(tally)),
        _mean(a.memory_tokens for a in tally),
        _mean(a.billed_tokens for a in tally),
    ]
    for policy in (report.all_memory, report.recency):
        cells += [
            _share(sum(policy.recalled[i] for i in chosen), len(chosen)),
            f"{policy.tokens:,}",
            f"{policy.billed:,.0f}",
        ]
    return f"| {label} | {len(chosen)} | {' | '.join(cells)} |"


def _stale_row(report: LongReport, chosen: Sequence[int]) -> str:
    tally = sum(report.tally[i].is_stale for i in chosen)
    cells = [_share(tally, len(chosen)), "", ""]
    for policy in (report.all_memory, report.recency):
        cells += [_share(sum(policy.stale[i] for i in chosen), len(chosen)), "", ""]
    return f"| stale: the old value came back | {len(chosen)} | {' | '.join(cells)} |"


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}% ({part})" if whole else "–"


def _mean(values: object) -> str:
    numbers = list(values)  # type: ignore[call-overload]
    return f"{sum(numbers) / len(numbers):,.0f}" if numbers else "–"
