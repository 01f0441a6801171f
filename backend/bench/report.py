"""The `tally bench` report: medians over repeats, Tally ÷ floor ratios, the scale targets,
Markdown."""

from __future__ import annotations

import os
import platform
import statistics
from datetime import UTC, datetime
from typing import Any

from backend.bench.scale import scale_checks

SEED_MESSAGES = 10_000

MEDIAN_METRICS = (
    "turns_per_s",
    "p50_ms",
    "p99_ms",
    "cpu_ms_per_turn",
    "peak_rss_mb",
    "llm_calls_per_turn",
    "prompt_kb_per_call",
    "drain_s",
    "driver_cpu_util",
    "first_turn_cpu_ms",  # seeded scenarios: the unmeasured first turn, drain included
    "first_turn_llm_calls",
    "start_rss_mb",  # the server's RSS when the measured phase began
    "wall_s",
    "first_byte_p50_ms",  # streamed: until the response began
    "first_byte_p99_ms",
)
RATIO_METRICS = {
    "turns_per_s": "turns/s",
    "p50_ms": "p50",
    "p99_ms": "p99",
    "cpu_ms_per_turn": "CPU ms/turn",
    "peak_rss_mb": "peak RSS",
}


def build_report(
    runs: list[dict[str, Any]], *, is_quick: bool, pinned: bool, repeats: int
) -> dict[str, Any]:
    results = [
        _median(runs, key) for key in dict.fromkeys((r["target"], r["scenario"]) for r in runs)
    ]

    def find(target: str, scenario: str) -> dict[str, Any] | None:
        return next(
            (r for r in results if (r["target"], r["scenario"]) == (target, scenario)), None
        )

    growth = {}
    for name in ("tally", "floor"):
        a, c = find(name, "a"), find(name, "c")
        if a and c:
            growth[name] = _ratio(c["cpu_ms_per_turn"], a["cpu_ms_per_turn"])
    ratios = []
    for key in dict.fromkeys(r["scenario"] for r in results):
        tally, floor = find("tally", key), find("floor", key)
        if tally and floor:
            values = {m: _ratio(tally[m], floor[m]) for m in RATIO_METRICS}
            ratios.append({"scenario": key, "label": tally["label"], **values})
    return {
        "date_utc": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "quick": is_quick,
        "pinned": pinned,
        "repeats": repeats,
        "results": results,
        "overhead_growth": growth,
        "tally_vs_floor": ratios,
        "scale": scale_checks(find),
        "runs": runs,
    }


def _median(runs: list[dict[str, Any]], key: tuple[str, str]) -> dict[str, Any]:
    mine = [r for r in runs if (r["target"], r["scenario"]) == key]
    merged = {k: mine[0][k] for k in ("target", "scenario", "label")}
    for metric in MEDIAN_METRICS:
        values = [r[metric] for r in mine if r.get(metric) is not None]
        merged[metric] = round(statistics.median(values), 3) if values else None
    for count in ("turns", "ok", "failed"):
        merged[count] = sum(r[count] for r in mine)
    merged["errors"] = [e for r in mine for e in r["errors"]][:5]
    return merged


def _ratio(x: float | None, y: float | None) -> float | None:
    return round(x / y, 2) if x is not None and y else None


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
    }


def _fmt(value: float | None, digits: int = 1, suffix: str = "") -> str:
    return "–" if value is None else f"{value:,.{digits}f}{suffix}"


def progress(r: dict[str, Any]) -> str:
    return (
        f"  {r['target']:5} {r['label']:44} {r['turns_per_s']:6.1f} turns/s, "
        f"CPU {_fmt(r['cpu_ms_per_turn'])} ms/turn, {r['failed']} failed"
    )


def render(report: dict[str, Any]) -> str:
    m = report["machine"]
    placement = "server on CPU 0, upstream and driver on CPU 1" if report["pinned"] else "unpinned"
    medians = f", medians of {report['repeats']} runs" if report["repeats"] > 1 else ""
    lines = [
        f"## tally bench, {report['date_utc']}{' (quick)' if report['quick'] else ''}",
        "",
        f"{m['cores']} cores ({m['cpu']}), Python {m['python']}, {m['os']}; {placement}{medians}.",
        "",
        "| scenario | target | turns/s | p50 ms | p99 ms | CPU ms/turn | peak RSS MB | failed "
        "| LLM calls/turn | prompt KB/call |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["results"]:
        lines.append(
            f"| {r['label']} | {r['target']} | {_fmt(r['turns_per_s'])} | {_fmt(r['p50_ms'])} "
            f"| {_fmt(r['p99_ms'])} | {_fmt(r['cpu_ms_per_turn'])} | {_fmt(r['peak_rss_mb'])} "
            f"| {r['failed']} of {r['turns']} | {_fmt(r['llm_calls_per_turn'], 3)} "
            f"| {_fmt(r['prompt_kb_per_call'], 2)} |"
        )
    lines += ["", "CPU ms/turn is the figure to compare: turns/s and latency also move with load."]
    lines += ["CPU and peak RSS count every process of the server (with --workers, each worker)."]
    growth = ", ".join(f"{k} {_fmt(v, 2, '×')}" for k, v in report["overhead_growth"].items())
    if growth:
        lines += [f"Overhead growth (CPU ms/turn with {SEED_MESSAGES:,} messages ÷ a): {growth}"]
    first = [r for r in report["results"] if r["first_turn_cpu_ms"] is not None]
    if first:
        costs = ", ".join(
            f"{r['target']} {r['scenario'].replace('-sse', ' SSE')} "
            f"{_fmt(r['first_turn_cpu_ms'], 0)} ms CPU and {_fmt(r['first_turn_llm_calls'], 0)} "
            "LLM calls"
            for r in first
        )
        lines += [f"First turn after seeding (unmeasured, one-off work on the history): {costs}"]
    if report["tally_vs_floor"]:
        lines += ["", "Tally ÷ floor, same run:", ""]
        lines += ["| scenario | " + " | ".join(RATIO_METRICS.values()) + " |"]
        lines += ["|---" + "|---:" * len(RATIO_METRICS) + "|"]
        for q in report["tally_vs_floor"]:
            cells = " | ".join(_fmt(q[metric], 2, "×") for metric in RATIO_METRICS)
            lines.append(f"| {q['label']} | {cells} |")
    if report.get("scale"):
        lines += ["", "Scale targets:", "", "| scenario | figure | measured | target | met |"]
        lines += ["|---|---|---:|---:|---|"]
        for row in report["scale"]:
            met = {True: "yes", False: "**no**", None: ""}[row["is_met"]]
            lines.append(
                f"| {row['label']} | {row['figure']} | {row['value']} | {row['target']} | {met} |"
            )
    lines += _prefix_lines(report.get("prefix") or [])
    build = report["prompt_build"]
    lines += [
        "",
        f"Prompt build with a {build['memory_lines']:,}-line MEMORY.md and a "
        f"{build['window_messages']}-message window: p50 {build['p50_ms']} ms, "
        f"p99 {build['p99_ms']} ms.",
    ]
    summaries = [
        f"{r['label']}: {_fmt(r['llm_calls_per_turn'] - 1, 3)}"
        for r in report["results"]
        if r["target"] == "tally" and r["llm_calls_per_turn"] is not None
    ]
    lines += ["Summarizer calls per turn (LLM calls beyond the chat call): " + "; ".join(summaries)]
    errors = [f"{r['target']} {r['scenario']}: {e}" for r in report["results"] for e in r["errors"]]
    if errors:
        lines += ["", "First failures:", *(f"- {e}" for e in errors[:10])]
    return "\n".join(lines)


def _prefix_lines(prefix: list[dict[str, Any]]) -> list[str]:
    if not prefix:
        return []
    first = prefix[0]
    lines = [
        "",
        f"Reusable prefix: one session of {first['turns']} turns at window {first['window']} / "
        f"batch {first['batch']}, the clock two minutes a turn; "
        f"the share of each request's tokens equal to a prefix of the request before, over the "
        f"{first['steady_turns']} turns after the window first filled:",
        "",
        "| target | protocol | median | mean | turns ≥ 85 % | cached ÷ prompt tokens "
        "| cache writes |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in prefix:
        prompt, cached = row.get("prompt_tokens"), row.get("cached_tokens")
        billed = f"{cached:,} ÷ {prompt:,} ({cached / prompt:.0%})" if prompt else "–"
        writes = f"{row['cache_write_tokens']:,}" if prompt else "–"
        lines.append(
            f"| {row['target']} | {row['protocol']} | {row['reusable_prefix_median']:.1%} "
            f"| {row['reusable_prefix_mean']:.1%} "
            f"| {row['turns_reusing_85']} of {row['steady_turns']} | {billed} | {writes} |"
        )
    lines += [
        f"The mean counts the eviction turns (one in {first['batch'] // 2}): the window's start "
        "moves, and only the start of the system prompt can be reused then. The floor's window "
        "is its last 50 messages.",
    ]
    return lines
