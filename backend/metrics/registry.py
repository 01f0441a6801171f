"""Prometheus metrics, in a registry of Tally's own (`GET /metrics` renders it).

Labels hold tenant ids, provider names, error codes and reasons: never message text.

With several workers on one host (`tally serve --workers`), `PROMETHEUS_MULTIPROC_DIR` is set
before any worker imports `prometheus_client`, which then keeps each process's values in files
there; `render()` adds up every worker's, whichever of them answers the scrape.
"""

from __future__ import annotations

import os

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"
REGISTRY = CollectorRegistry(auto_describe=True)

TURNS = Counter(
    "tally_turns", "Chat turns, by tenant and outcome", ["tenant", "outcome"], registry=REGISTRY
)
TURN_SECONDS = Histogram(
    "tally_turn_seconds",
    "Turn latency from start to the final event",
    ["tenant"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120),
    registry=REGISTRY,
)
TOKENS = Counter(
    "tally_tokens",
    "Tokens used, by tenant and kind (prompt, completion, summarizer; cached and cache_write "
    "are the prompt tokens read from and written to the vendor's prompt cache)",
    ["tenant", "kind"],
    registry=REGISTRY,
)
SUMMARIZER_RUNS = Counter(
    "tally_summarizer_runs",
    "Overflow summarizer calls, by tenant and outcome (ok, failed, fallback)",
    ["tenant", "outcome"],
    registry=REGISTRY,
)
PROVIDER_FAILURES = Counter(
    "tally_provider_failures",
    "Turns that ended in a provider error, by error code",
    ["tenant", "code"],
    registry=REGISTRY,
)
PROVIDER_FALLBACKS = Counter(
    "tally_provider_fallbacks", "Switches to a fallback model", ["tenant"], registry=REGISTRY
)
COMPACTIONS = Counter(
    "tally_compactions",
    "Emergency compactions of a request",
    ["tenant", "reason"],
    registry=REGISTRY,
)
COMPACTION_TOKENS = Counter(
    "tally_compaction_tokens",
    "Request tokens before and after emergency compactions",
    ["tenant", "stage"],
    registry=REGISTRY,
)
ACTIVE_STREAMS = Gauge(
    "tally_active_streams",
    "SSE streams open now",
    multiprocess_mode="livesum",  # the live workers' streams, added up
    registry=REGISTRY,
)
MEMORY_DEGRADED = Gauge(
    "tally_memory_degraded",
    "Sessions whose summaries keep failing, and memories that cannot be read, per tenant",
    ["tenant"],
    multiprocess_mode="livesum",  # each live worker counts what it sees
    registry=REGISTRY,
)
PROMPT_BUILD_SECONDS = Histogram(
    "tally_prompt_build_seconds",
    "Time to gather window and memory and compile one request",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25),
    registry=REGISTRY,
)
CHANNEL_EVENTS = Counter(
    "tally_channel_events",
    "Chat-channel bots: updates received, replies sent, errors, by tenant and bot",
    ["tenant", "bot", "event"],
    registry=REGISTRY,
)


def is_multiprocess() -> bool:
    return bool(os.environ.get(MULTIPROCESS_ENV))


def render() -> bytes:
    """The Prometheus text of this process, or of every worker's on this host."""
    if not is_multiprocess():
        return generate_latest(REGISTRY)
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    return generate_latest(registry)


def process_stopped() -> None:
    """A worker that stops: its live gauges (streams open) no longer count."""
    if is_multiprocess():
        multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]
