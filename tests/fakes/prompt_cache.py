"""The vendors' prompt caches, simulated: pure bookkeeping that the fake servers feed with
each request's prompt, so tests can see whether Tally's requests are cacheable.

Tokens follow the fakes' convention (`count_words`): a billed token is a word of a string, the
values under a `"type"` key aside. Structure (roles, keys, tool definitions, numbers) still
shapes the prefix, so a changed tool or role breaks it, but bills nothing: the fakes never
counted it in `prompt_tokens`/`input_tokens`, and cached tokens must stay a part of those.

- `PrefixCache` plays OpenAI: every prompt is cached automatically; a later prompt in the same
  pool reads its longest common prefix with any earlier one, 0 below `min_tokens`, else rounded
  down to a multiple of `increment` (1024 and 128 on the real API).
- `BreakpointCache` plays Anthropic: only the prefixes through blocks marked `cache_control`
  are written (if at least `min_tokens`); a read is the longest prefix ending at a block
  boundary that an earlier request wrote, looked for at each breakpoint's own boundary and the
  boundaries before it, `LOOKBACK_BLOCKS` boundaries in all.

Entries never expire (a test runs well inside the 5-minute TTL); state lives on one fake server
and ends with it. `serve` runs on that server's thread only; `log` may be read from any thread.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

LOOKBACK_BLOCKS = 20  # boundaries checked per breakpoint, its own included


@dataclass(frozen=True)
class CacheOutcome:
    """What the cache did for one answered model call: `read_tokens` of the `prompt_tokens`
    came from the cache, `written_tokens` were written to it (Anthropic's cache creation;
    OpenAI bills no writes, so always 0 there). The rest were processed uncached."""

    prompt_tokens: int
    read_tokens: int
    written_tokens: int

    @property
    def uncached_tokens(self) -> int:
        return self.prompt_tokens - self.read_tokens - self.written_tokens


Token = tuple[str, int]  # a piece of the serialized prompt and the billed tokens it counts for


def tokens_of(value: object, *, is_billed: bool) -> list[Token]:
    """`value` as prompt tokens. With `is_billed`, its words weigh 1 exactly where
    `count_words` counts them, so the weights sum to `count_words(value)`."""
    weight = 1 if is_billed else 0
    if isinstance(value, str):
        return [(word, weight) for word in value.split()]
    if isinstance(value, Mapping):
        tokens: list[Token] = []
        for key, item in value.items():
            tokens.append((f"{key}:", 0))
            tokens += tokens_of(item, is_billed=is_billed and key != "type")
        return tokens
    if isinstance(value, list):
        items = [token for item in value for token in tokens_of(item, is_billed=is_billed)]
        return [("[", 0), *items, ("]", 0)]
    return [(json.dumps(value), 0)]


class _Log:
    """The outcomes of one server's calls; the server thread appends while a test reads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._outcomes: list[CacheOutcome] = []

    def add(self, outcome: CacheOutcome) -> CacheOutcome:
        with self._lock:
            self._outcomes.append(outcome)
        return outcome

    @property
    def outcomes(self) -> list[CacheOutcome]:
        with self._lock:
            return list(self._outcomes)


# ---- OpenAI: the longest common prefix, automatically -----------------------------------------

_Trie = dict[Token, "_Trie"]


class PrefixCache:
    """Earlier prompts per pool (a `prompt_cache_key` and a model), kept as a trie of tokens so
    finding the longest common prefix walks one path instead of every earlier prompt."""

    def __init__(self, *, min_tokens: int, increment: int, is_enabled: bool = True) -> None:
        if min_tokens < 0 or increment < 1:
            raise ValueError("min_tokens must be >= 0 and increment >= 1")
        self.min_tokens = min_tokens
        self.increment = increment
        self.is_enabled = is_enabled
        self._pools: dict[tuple[str | None, str], _Trie] = {}
        self._log = _Log()

    @property
    def log(self) -> list[CacheOutcome]:
        return self._log.outcomes

    def serve(self, pool: tuple[str | None, str], tokens: Sequence[Token]) -> CacheOutcome:
        """Reads what earlier prompts of `pool` share with `tokens`, then caches `tokens`."""
        prompt_tokens = sum(weight for _piece, weight in tokens)
        if not self.is_enabled:
            return self._log.add(CacheOutcome(prompt_tokens, 0, 0))
        root = self._pools.setdefault(pool, {})
        shared = _common_prefix_weight(root, tokens)
        _insert(root, tokens)
        cached = 0 if shared < self.min_tokens else shared - shared % self.increment
        return self._log.add(CacheOutcome(prompt_tokens, cached, 0))


def _common_prefix_weight(root: _Trie, tokens: Sequence[Token]) -> int:
    node, weight = root, 0
    for token in tokens:
        if token not in node:
            break
        node, weight = node[token], weight + token[1]
    return weight


def _insert(root: _Trie, tokens: Sequence[Token]) -> None:
    node = root
    for token in tokens:
        node = node.setdefault(token, {})


# ---- Anthropic: explicit breakpoints, read back within a lookback window ----------------------


@dataclass(frozen=True)
class Block:
    """One cacheable block of a request in prefix order: `identity` is what must match for a
    prefix to be the same (where it sits, and its JSON without `cache_control`)."""

    identity: str
    tokens: int
    is_breakpoint: bool = False


class BreakpointCache:
    """Digests of the prefixes written so far, shared by every request to one server."""

    def __init__(self, *, min_tokens: int, is_enabled: bool = True) -> None:
        self.min_tokens = min_tokens
        self.is_enabled = is_enabled
        self._written: set[str] = set()
        self._log = _Log()

    @property
    def log(self) -> list[CacheOutcome]:
        return self._log.outcomes

    def serve(self, model: str, blocks: Sequence[Block]) -> CacheOutcome:
        """Reads the longest earlier-written prefix in reach, then writes each breakpoint's."""
        through = list(itertools.accumulate(block.tokens for block in blocks))
        breakpoints = [index for index, block in enumerate(blocks) if block.is_breakpoint]
        total = through[-1] if through else 0
        if not self.is_enabled or not breakpoints:
            return self._log.add(CacheOutcome(total, 0, 0))
        digests = _prefix_digests(model, blocks)
        read_end = self._read_end(digests, breakpoints)  # before writing: only EARLIER writes
        for index in breakpoints:
            if through[index] >= self.min_tokens:
                self._written.add(digests[index])
        read = through[read_end] if read_end is not None else 0
        last = breakpoints[-1]
        is_written = read_end != last and through[last] >= self.min_tokens
        return self._log.add(CacheOutcome(total, read, through[last] - read if is_written else 0))

    def _read_end(self, digests: Sequence[str], breakpoints: Sequence[int]) -> int | None:
        """The last block of the longest written prefix in any breakpoint's window."""
        hits = [
            index
            for breakpoint in breakpoints
            for index in range(max(0, breakpoint - LOOKBACK_BLOCKS + 1), breakpoint + 1)
            if digests[index] in self._written
        ]
        return max(hits, default=None)


def _prefix_digests(model: str, blocks: Sequence[Block]) -> list[str]:
    """A digest of each prefix (the model and the blocks through it): a cache is per model."""
    running = hashlib.sha256(model.encode())
    digests: list[str] = []
    for block in blocks:
        running.update(b"\0" + block.identity.encode())
        digests.append(running.copy().hexdigest())
    return digests


def identity_of(place: str, block: object) -> str:
    """A block's identity: where it sits (`tools`, `system`, a message role) and its JSON,
    keys sorted and `cache_control` left out, as moving a breakpoint changes no content."""
    return place + ":" + json.dumps(without_cache_control(block), sort_keys=True)


def without_cache_control(block: object) -> object:
    if isinstance(block, Mapping):
        return {key: value for key, value in block.items() if key != "cache_control"}
    return block
