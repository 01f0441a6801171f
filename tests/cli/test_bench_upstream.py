"""The bench's fake upstream (bench/upstream.py), through the real SDKs: both wire formats, the
simulated prompt caches, slow replies and the recording of request bodies."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import anthropic
import httpx2
import openai
import pytest

from tests.conftest import ROOT
from tests.waiting import until_blocking

pytestmark = pytest.mark.process

LONG = "word " * 2_000  # about 2,500 tokens of 4 bytes: above every cache minimum


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cmd = [sys.executable, str(ROOT / "bench" / "upstream.py"), "--port", str(port), "--record"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        until_blocking(lambda: listening(port), "bench/upstream.py listening", poll_s=0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()  # else its garbage collection warns (ResourceWarning)


async def test_openai_reads_the_longest_cached_prefix_of_its_pool(upstream: str) -> None:
    client = openai.AsyncOpenAI(base_url=f"{upstream}/v1", api_key="x", max_retries=0)
    system = {"role": "system", "content": LONG}
    first = await client.chat.completions.create(
        model="m", messages=[system, {"role": "user", "content": "a"}], prompt_cache_key="p"
    )
    again = await client.chat.completions.create(
        model="m", messages=[system, {"role": "user", "content": "b"}], prompt_cache_key="p"
    )
    other_pool = await client.chat.completions.create(
        model="m", messages=[system, {"role": "user", "content": "c"}], prompt_cache_key="q"
    )
    short = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "short"}], prompt_cache_key="p"
    )
    cached = [
        r.usage.prompt_tokens_details.cached_tokens
        for r in (first, again, other_pool, short)
        if r.usage and r.usage.prompt_tokens_details
    ]
    assert cached[0] == 0 and cached[2] == 0 and cached[3] == 0
    assert cached[1] >= 1024 and cached[1] % 128 == 0
    assert again.usage is not None and cached[1] <= again.usage.prompt_tokens
    await client.close()


async def test_anthropic_reads_written_breakpoints_streamed_and_not(upstream: str) -> None:
    client = anthropic.AsyncAnthropic(base_url=upstream, api_key="x", max_retries=0)
    system = [{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}]

    def ask(text: str) -> list[anthropic.types.MessageParam]:
        return [{"role": "user", "content": [{"type": "text", "text": text}]}]

    first = await client.messages.create(model="c", max_tokens=10, system=system, messages=ask("a"))
    assert first.usage.cache_read_input_tokens == 0
    written = first.usage.cache_creation_input_tokens or 0
    assert written >= 1024
    async with client.messages.stream(
        model="c", max_tokens=10, system=system, messages=ask("b")
    ) as stream:
        final = await stream.get_final_message()
    assert final.content[0].type == "text" and final.content[0].text.startswith("tok0")
    assert final.usage.cache_read_input_tokens == written
    assert final.usage.cache_creation_input_tokens == 0 and final.usage.input_tokens > 0
    with pytest.raises(anthropic.BadRequestError, match="maximum of 4 blocks"):
        await client.messages.create(model="c", max_tokens=10, system=system * 5, messages=ask("c"))
    stats = httpx2.get(f"{upstream}/stats").json()
    assert stats["cached_tokens"] >= written and stats["cache_write_tokens"] >= written
    await client.close()


async def test_a_marked_request_streams_its_reply_over_the_seconds_asked(upstream: str) -> None:
    client = openai.AsyncOpenAI(base_url=f"{upstream}/v1", api_key="x", max_retries=0)
    start = time.perf_counter()
    chunks = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "slow [reply-s=1]"}], stream=True
    )
    arrivals = [time.perf_counter() - start async for _chunk in chunks]
    assert arrivals[0] < 0.5 and 0.9 < arrivals[-1] < 3
    await client.close()


def test_recording_keeps_every_chat_body_until_reset(upstream: str) -> None:
    httpx2.post(f"{upstream}/requests/reset")
    body = {"model": "m", "messages": [{"role": "user", "content": "recorded"}]}
    assert httpx2.post(f"{upstream}/v1/chat/completions", json=body).status_code == 200
    assert httpx2.get(f"{upstream}/requests").json() == [body]
    assert httpx2.post(f"{upstream}/requests/reset").json() == {"cleared": 1}
    assert httpx2.get(f"{upstream}/requests").json() == []
