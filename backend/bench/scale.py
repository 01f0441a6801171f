"""The scale scenarios of `tally bench` and their targets: many sessions at once (d), a long
history (e), many streams open at once against a slow model (f).

Each target is checked against a run's medians and reported beside its figure; a missed target
is reported, not an error (failed turns are: they make `tally bench` exit 1).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from backend.host.open_files import raise_open_files_limit

ARCHIVED_MESSAGES = 100_000  # scenario e's stored history, all but the window archived
MAX_GROWTH = 1.2  # e's CPU per turn ÷ a fresh session's (a)
MAX_FLOOR_RATIO = 1.2  # CPU per turn ÷ the floor's, same scenario
MAX_STREAM_RSS_MB = 300.0  # f: the server's peak RSS with every stream open
# What one process needs per stream: the client's socket and the one to the model.
FILES_PER_STREAM = 2


def raise_bench_files_limit(streams: int) -> str | None:
    """Raise this process's soft open-file limit to the hard one (the bench's servers inherit
    it); what is wrong if the hard limit cannot carry `streams`, else None."""
    wanted = raise_open_files_limit()
    needed = streams * FILES_PER_STREAM + 256
    if wanted < needed:
        return (
            f"{streams:,} streams need about {needed:,} open files in the server, but the hard "
            f"limit is {wanted:,} (raise it: ulimit -Hn, or LimitNOFILE= in a systemd unit)"
        )
    return None


Find = Callable[[str, str], dict[str, Any] | None]


def scale_checks(find: Find) -> list[dict[str, Any]]:
    """One row per figure of d, e and f that has a target or must be shown, for the report and
    the JSON: scenario, label, figure, value (text), target (text), is_met (None: no target)."""
    rows: list[dict[str, Any]] = []

    def add(key: str, figure: str, value: str, target: str, is_met: bool | None) -> None:
        run = find("tally", key)
        label = run["label"] if run else key
        rows.append(
            {
                "scenario": key,
                "label": label,
                "figure": figure,
                "value": value,
                "target": target,
                "is_met": is_met,
            }
        )

    def completed(key: str, run: dict[str, Any], noun: str) -> None:
        add(
            key,
            f"completed {noun}",
            f"{run['ok']:,} of {run['turns']:,} ({run['failed']} failed)",
            f"{run['turns']:,}, 0 failed",
            run["ok"] == run["turns"] and run["failed"] == 0,
        )

    def floor_ratio(key: str, run: dict[str, Any]) -> None:
        floor = find("floor", key)
        ratio = _ratio(run["cpu_ms_per_turn"], floor["cpu_ms_per_turn"] if floor else None)
        if ratio is not None:
            met = ratio <= MAX_FLOOR_RATIO
            add(key, "CPU ms/turn ÷ floor", f"{ratio:.2f}×", f"≤ {MAX_FLOOR_RATIO}×", met)

    d, e, f, a = (find("tally", key) for key in ("d", "e", "f", "a"))
    if d:
        completed("d", d, "turns")
        add("d", "p50 / p99 ms", f"{_num(d['p50_ms'])} / {_num(d['p99_ms'])}", "–", None)
        add("d", "turns/s", _num(d["turns_per_s"]), "–", None)
        floor_ratio("d", d)
    if e:
        completed("e", e, "turns")
        growth = _ratio(e["cpu_ms_per_turn"], a["cpu_ms_per_turn"] if a else None)
        value = "–" if growth is None else f"{growth:.2f}×"
        is_met = None if growth is None else growth <= MAX_GROWTH
        add("e", "CPU ms/turn ÷ a (fresh session)", value, f"≤ {MAX_GROWTH}×", is_met)
        floor_ratio("e", e)
    if f:
        completed("f", f, "streams")
        rss = f["peak_rss_mb"]
        is_met = None if rss is None else rss < MAX_STREAM_RSS_MB
        value = f"{_num(rss)} (at start {_num(f.get('start_rss_mb'))})"
        add("f", "peak RSS MB", value, f"< {MAX_STREAM_RSS_MB:g}", is_met)
        add("f", "p50 / p99 ms", f"{_num(f['p50_ms'])} / {_num(f['p99_ms'])}", "–", None)
        first_bytes = f"{_num(f.get('first_byte_p50_ms'))} / {_num(f.get('first_byte_p99_ms'))}"
        add("f", "first byte p50 / p99 ms", first_bytes, "–", None)
        add("f", "wall s", _num(f.get("wall_s")), "–", None)
    return rows


def _ratio(x: float | None, y: float | None) -> float | None:
    return round(x / y, 2) if x is not None and y else None


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"
