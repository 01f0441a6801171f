"""The vendors' prompt caches, simulated for the bench's fake upstream (standard library only).

A token here is 4 bytes of the prompt's compact JSON (UTF-8, keys in the order sent): close to
the chars/4 estimate, and it lets any change of content, role, key or tool break a prefix.
Entries never expire (a bench run stays well inside a real cache's lifetime); the state lives
in the upstream process and ends with it.

- `PrefixCache` plays OpenAI: every prompt is cached automatically, per pool (its
  `prompt_cache_key`, absent counting as one pool, and its model). The prompt is the tools'
  JSON followed by the messages' JSON; a later prompt reads its longest common prefix with any
  earlier prompt of the pool, 0 below 1,024 tokens, else rounded down to a multiple of 128.
  The pool holds a digest of every prompt's prefix at each 128-token (512-byte) boundary, so a
  look-up is one pass over the prompt and gives the rounded figure exactly.
- `BreakpointCache` plays Anthropic: the prompt is blocks in the order tools, system, messages
  (each tool, each system block, each content block; a string content is one text block).
  Blocks with `cache_control` are breakpoints, at most 4. A breakpoint's prefix (every block
  through it) is written if it holds at least 1,024 tokens. The read is the longest prefix
  that an earlier request wrote, ending at a block boundary at most 20 boundaries back from a
  breakpoint (its own included); the creation runs from there through the last breakpoint;
  `input_tokens` are the rest. Digests are per model.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

TOKEN_BYTES = 4
MIN_TOKENS = 1024  # both vendors' smallest cacheable prefix (Claude Sonnet and Opus; OpenAI)
OPENAI_INCREMENT = 128
LOOKBACK_BLOCKS = 20
MAX_BREAKPOINTS = 4


class TooManyBreakpoints(ValueError):
    """Anthropic answers 400 to a request with more than 4 `cache_control` blocks."""

    def __init__(self, found: int) -> None:
        super().__init__(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {found}."
        )


@dataclass(frozen=True, slots=True)
class CacheOutcome:
    """One call: `read` of its `prompt` tokens came from the cache, `written` were written to
    it (Anthropic's cache creation; OpenAI reports no writes, so 0 there)."""

    prompt: int
    read: int
    written: int

    @property
    def uncached(self) -> int:
        return self.prompt - self.read - self.written


def compact(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


class PrefixCache:
    def __init__(self, *, min_tokens: int = MIN_TOKENS, increment: int = OPENAI_INCREMENT) -> None:
        self.min_tokens = min_tokens
        self.increment = increment
        self._pools: dict[tuple[str, str], set[bytes]] = {}

    def serve(self, request: Mapping[str, Any], *, prompt_tokens: int) -> CacheOutcome:
        """The cached tokens of `request` (at most `prompt_tokens`), then caches its prompt."""
        prompt = compact(request.get("tools") or []) + compact(request.get("messages") or [])
        pool_key = (str(request.get("prompt_cache_key") or ""), str(request.get("model") or ""))
        pool = self._pools.setdefault(pool_key, set())
        step = self.increment * TOKEN_BYTES
        running = hashlib.blake2b(digest_size=16)
        shared, is_shared = 0, True
        for start in range(0, len(prompt) - step + 1, step):
            running.update(prompt[start : start + step])
            digest = running.copy().digest()
            if is_shared and digest in pool:
                shared += self.increment
            else:
                is_shared = False
                pool.add(digest)
        cached = min(shared, prompt_tokens) if shared >= self.min_tokens else 0
        return CacheOutcome(prompt_tokens, cached - cached % self.increment, 0)


@dataclass(frozen=True, slots=True)
class Block:
    identity: bytes  # where it sits and its JSON without `cache_control`
    size: int  # bytes
    is_breakpoint: bool


class BreakpointCache:
    def __init__(self, *, min_tokens: int = MIN_TOKENS) -> None:
        self.min_tokens = min_tokens
        self._written: set[bytes] = set()

    def serve(self, request: Mapping[str, Any]) -> CacheOutcome:
        """Reads the longest earlier-written prefix in reach, then writes each breakpoint's.
        Raises TooManyBreakpoints (before touching the cache)."""
        blocks = list(anthropic_blocks(request))
        breakpoints = [index for index, block in enumerate(blocks) if block.is_breakpoint]
        if len(breakpoints) > MAX_BREAKPOINTS:
            raise TooManyBreakpoints(len(breakpoints))
        through = [size // TOKEN_BYTES for size in itertools.accumulate(b.size for b in blocks)]
        total = max(through[-1] if through else 0, 1)
        if not breakpoints:
            return CacheOutcome(total, 0, 0)
        running = hashlib.blake2b(str(request.get("model") or "").encode(), digest_size=16)
        digests = []
        for block in blocks:
            running.update(b"%d:" % len(block.identity) + block.identity)
            digests.append(running.copy().digest())
        hits = [
            index
            for breakpoint in breakpoints
            for index in range(max(0, breakpoint - LOOKBACK_BLOCKS + 1), breakpoint + 1)
            if digests[index] in self._written
        ]
        for index in breakpoints:  # after reading: a request never reads its own writes
            if through[index] >= self.min_tokens:
                self._written.add(digests[index])
        read = through[max(hits)] if hits else 0
        last = through[breakpoints[-1]]
        written = last - read if last >= self.min_tokens and last > read else 0
        return CacheOutcome(total, read, written)


def anthropic_blocks(request: Mapping[str, Any]) -> Iterator[Block]:
    """The request's blocks in prefix order: tools, system, then each message's content."""
    for tool in request.get("tools") or []:
        yield _block("tools", tool)
    system = request.get("system")
    for block in [{"type": "text", "text": system}] if isinstance(system, str) else system or []:
        yield _block("system", block)
    for message in request.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for position, block in enumerate(content or []):
            # A message's first block marks where it starts: merging two messages changes it.
            yield _block(f"{message.get('role')}{'+' if position else ''}", block)


def _block(place: str, block: Any) -> Block:
    is_breakpoint = isinstance(block, Mapping) and bool(block.get("cache_control"))
    if isinstance(block, Mapping):
        block = {key: value for key, value in block.items() if key != "cache_control"}
    body = compact(block)
    return Block(place.encode() + b"\0" + body, len(body), is_breakpoint)
