"""The memory eval's report: recall by kind of fact, stale recalls, and what the run cost."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from backend.evals.memory_facts import KINDS, Fact


@dataclass(frozen=True, slots=True)
class ProbeOutcome:
    """One question about a fact, and what the request the model received for it carried."""

    fact: Fact
    is_answered: bool  # the turn completed (a failed turn recalls nothing)
    is_recalled: bool  # the current value was in it
    is_stale: bool  # the value a correction superseded was in it


@dataclass(frozen=True, slots=True)
class Report:
    facts: tuple[Fact, ...]
    window: int
    batch: int
    summarizer: str
    turns: int
    failed_turns: int
    summarizer_calls: int
    summarizer_tokens: int
    memory_lines: int
    undistilled: int  # facts whose telling turn was not distilled into memory at the end
    fresh: tuple[ProbeOutcome, ...]  # asked in a fresh session of the same tenant
    same: tuple[ProbeOutcome, ...]  # asked in the original session, after the conversation
    fresh_controls: tuple[ProbeOutcome, ...]  # never told
    same_controls: tuple[ProbeOutcome, ...]
    is_word_count: bool = False  # the summarizer reports words, not tokens


def render(report: Report, *, seconds: float) -> str:
    """The report as Markdown: an explanation, the recall table and the run table."""
    window = "unlimited" if report.window < 0 else f"{report.window} messages"
    lines = [
        f"## tally eval memory: {len(report.facts)} facts, window {window}",
        "",
        f"Summarizer: {report.summarizer}.",
        "",
        "The chat model is a recording stand-in: a fact counts as recalled when its current value",
        "is in the request the model receives for a question about it (the system prompt, with",
        "the standing memory lines and session summary, the window, and the turn's context with",
        "the memory lines picked for the question). Fresh session: asked in a new",
        "session of the same tenant, so only long-term memory can answer. Same session: asked in",
        "the original session after the conversation, one question after another (so the",
        "questions take their turns in the window, and in memory, as well).",
        "",
        "| facts | count | recalled, fresh session | recalled, same session |",
        "|---|---:|---:|---:|",
        _row("all", report.fresh, report.same),
    ]
    for kind in KINDS:
        fresh = [o for o in report.fresh if o.fact.kind == kind]
        same = [o for o in report.same if o.fact.kind == kind]
        if fresh:
            lines.append(_row(kind, fresh, same))
    fresh_fixed = [o for o in report.fresh if o.fact.stale_value is not None]
    same_fixed = [o for o in report.same if o.fact.stale_value is not None]
    lines += [
        _row("corrected (new value)", fresh_fixed, same_fixed),
        _row("stale: the old value of a corrected fact", fresh_fixed, same_fixed, _is_stale),
        _row("never stated (control)", report.fresh_controls, report.same_controls),
    ]
    tokens = f"{report.summarizer_tokens:,}" + (" (words)" if report.is_word_count else "")
    asked = len(report.fresh) + len(report.fresh_controls)
    lines += [
        "",
        "| run | |",
        "|---|---:|",
        f"| turns | {report.turns:,}, then {asked:,} questions in each kind of session |",
        f"| window | {window}, overflow batch {report.batch} |",
        f"| summarizer calls (conversation) | {report.summarizer_calls:,} |",
        f"| summarizer tokens (conversation) | {tokens} |",
        f"| memory lines after the conversation | {report.memory_lines:,} |",
        f"| facts not yet distilled into memory when asked | {report.undistilled:,} |",
        f"| failed turns | {report.failed_turns:,} |",
        f"| time | {seconds:,.1f} s |",
    ]
    return "\n".join(lines)


def _is_recalled(outcome: ProbeOutcome) -> bool:
    return outcome.is_recalled


def _is_stale(outcome: ProbeOutcome) -> bool:
    return outcome.is_stale


def _row(
    label: str,
    fresh: Sequence[ProbeOutcome],
    same: Sequence[ProbeOutcome],
    counts: Callable[[ProbeOutcome], bool] = _is_recalled,
) -> str:
    """`label`, how many facts, and the share of them `counts` holds for in each session."""
    cells = (_share(sum(map(counts, group)), len(group)) for group in (fresh, same))
    return f"| {label} | {len(fresh)} | {' | '.join(cells)} |"


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}% ({part})" if whole else "–"
