"""The bench's reusable-prefix figure: Tally's requests against the bench's recording upstream,
in both vendors' protocols, and the measure itself."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from backend.bench.prefix_bench import QUICK, measure_tally, reusable_shares
from backend.bench.run_config import free_port
from tests.conftest import ROOT
from tests.waiting import until_blocking


@pytest.fixture(scope="module")
def recording_upstream() -> Iterator[str]:
    port = free_port()
    command = [sys.executable, str(ROOT / "bench" / "upstream.py"), "--port", str(port)]
    upstream = subprocess.Popen([*command, "--record"], stderr=subprocess.PIPE)

    def listening() -> bool:  # or an error once it died
        assert upstream.poll() is None, upstream.stderr and upstream.stderr.read()
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", port)) == 0

    try:
        until_blocking(listening, "the upstream's port open", timeout_s=120, poll_s=0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        upstream.terminate()
        upstream.wait(timeout=30)
        if upstream.stderr is not None:
            upstream.stderr.close()  # else its garbage collection warns (ResourceWarning)


@pytest.mark.process
@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_between_evictions_each_request_reuses_the_previous_ones_prefix(
    recording_upstream: str, protocol: str
) -> None:
    figures = measure_tally(recording_upstream, protocol, QUICK)

    assert figures["turns"] == QUICK.turns
    assert figures["reusable_prefix_median"] >= 0.85
    # Four turns in five reuse it; an eviction (every batch / 2 turns) moves the window.
    assert figures["turns_reusing_85"] >= figures["steady_turns"] // 2
    assert 0 < figures["cached_tokens"] < figures["prompt_tokens"]  # as the fake vendor billed
    if protocol == "anthropic":
        assert figures["cache_write_tokens"] > 0


def test_the_measure_ignores_moved_cache_marks_and_sees_a_changed_start() -> None:
    mark = {"type": "ephemeral"}
    first = {
        "system": [{"type": "text", "text": "You are Tally.", "cache_control": mark}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hello there"}]}],
    }
    extended = {
        "system": [{"type": "text", "text": "You are Tally."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hello there"}]},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "hi", "cache_control": mark}],
            },
        ],
    }
    restarted = {**extended, "system": [{"type": "text", "text": "It is 09:02. You are Tally."}]}

    kept, broken = reusable_shares([first, extended, restarted])

    assert 0.5 < kept < 1  # all of `first` again, then the new message
    assert broken < 0.2  # the system prompt's start changed: almost nothing is reusable
