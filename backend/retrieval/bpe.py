"""The built-in embedding model's tokenizer: Llama 2's byte-fallback BPE, read from the
`tokenizers` JSON file the `wordllama` wheel ships, giving the ids the `tokenizers` library
gives for it (`add_special_tokens=False`), in a megabyte instead of the library's 15.

What the file asks for, and what this does:
- its special tokens (`<unk>`, `<s>`, `</s>`) are cut out of the text first, wherever they
  stand; each remaining piece is normalised on its own: "▁" put before it, spaces made "▁";
- no pre-tokenizer: a piece is one word to the BPE. No token of this vocabulary holds a "▁"
  after another character, so no merge crosses the start of a "▁" run, and the piece is
  split there into short chunks, each merged alone (and remembered) with the same result;
- a chunk starts as its characters, a character outside the vocabulary as its UTF-8 bytes
  (`<0xE4>`…); the pair of lowest merge rank is merged first, the leftmost of equal ones, a
  pair whose merge no longer yields the queued token skipped, as the library's queue does.

A merge is one 64-bit number, (left id, right id) above (rank, new id), in a sorted array
searched by bisection: 61,249 merges in 0.5 MB, where a dict of pairs would take 10.
"""

from __future__ import annotations

import heapq
import json
import re
from array import array
from bisect import bisect_left
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

SPACE = "▁"  # U+2581: how the vocabulary writes a space
ID_BITS = 16  # ids and ranks under 65,536 (the vocabulary has 32,000 tokens, 61,249 merges)
ID_MASK = (1 << ID_BITS) - 1
PAIR_SHIFT = 2 * ID_BITS
MERGE_MASK = (1 << PAIR_SHIFT) - 1  # a merge's (rank, new id), below its pair
CHUNKS_KEPT = 10_000  # chunks remembered with their ids (at most ~2 MB): the words repeated
_CHUNK = re.compile(f"{SPACE}*[^{SPACE}]+|{SPACE}+")
SMALL_VALUE = 4096  # bytes enough for any section but the vocabulary and the merges
_STRING = rb'"((?:[^"\\]|\\.)*)"'
_VOCAB_ENTRY = re.compile(rb"\s*" + _STRING + rb"\s*:\s*(\d+)\s*,?")
_MERGE_ENTRY = re.compile(rb"\s*" + _STRING + rb"\s*,?")
_EXPECTED = {  # the parts of the file this reading relies on
    "normalizer": {
        "type": "Sequence",
        "normalizers": [
            {"type": "Prepend", "prepend": SPACE},
            {"type": "Replace", "pattern": {"String": " "}, "content": SPACE},
        ],
    },
    "pre_tokenizer": None,
}
_EXPECTED_MODEL = {
    "type": "BPE",
    "dropout": None,
    "continuing_subword_prefix": None,
    "end_of_word_suffix": None,
    "byte_fallback": True,
    "ignore_merges": False,
}


class BpeTokenizer:
    def __init__(
        self,
        *,
        specials: dict[str, int],
        characters: dict[str, int],
        byte_ids: list[int],
        merges: array[int],
    ) -> None:
        self._specials = specials
        longest_first = sorted(specials, key=len, reverse=True)
        self._special = re.compile("|".join(map(re.escape, longest_first)) or "(?!)")
        self._characters = characters
        self._byte_ids = byte_ids
        self._merges = merges
        self._chunks: dict[str, tuple[int, ...]] = {}

    @classmethod
    def from_file(cls, path: Path) -> BpeTokenizer:
        return _read(path.read_bytes(), path.name)

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for piece, special in self._pieces(text):
            if special is not None:
                ids.append(special)
                continue
            for chunk in _CHUNK.findall(SPACE + piece.replace(" ", SPACE)):
                known = self._chunks.get(chunk)
                if known is None:
                    known = tuple(self._merged(self._symbols(chunk)))
                    if len(self._chunks) >= CHUNKS_KEPT:
                        self._chunks.clear()
                    self._chunks[chunk] = known
                ids.extend(known)
        return ids

    def _pieces(self, text: str) -> Iterator[tuple[str, int | None]]:
        """The text's non-empty pieces between special tokens, and the special tokens."""
        start = 0
        for match in self._special.finditer(text):
            if match.start() > start:
                yield text[start : match.start()], None
            yield match[0], self._specials[match[0]]
            start = match.end()
        if start < len(text):
            yield text[start:], None

    def _symbols(self, chunk: str) -> list[int]:
        symbols: list[int] = []
        for character in chunk:
            known = self._characters.get(character)
            if known is not None:
                symbols.append(known)
            else:
                symbols.extend(self._byte_ids[byte] for byte in character.encode("utf-8"))
        return symbols

    def _merge(self, left: int, right: int) -> int | None:
        """The merge of the pair, as (rank << ID_BITS | new id); None when none."""
        pair = (left << ID_BITS | right) << PAIR_SHIFT
        at = bisect_left(self._merges, pair)
        if at < len(self._merges) and self._merges[at] >> PAIR_SHIFT == pair >> PAIR_SHIFT:
            return self._merges[at] & MERGE_MASK
        return None

    def _merged(self, symbols: list[int]) -> list[int]:
        count = len(symbols)
        if count < 2:
            return symbols
        after = [*range(1, count), -1]
        before = list(range(-1, count - 1))
        is_alive = [True] * count
        queue: list[tuple[int, int]] = []  # (rank << ID_BITS | new id, position)
        for position in range(count - 1):
            merge = self._merge(symbols[position], symbols[position + 1])
            if merge is not None:
                queue.append((merge, position))
        heapq.heapify(queue)  # the lowest rank first, then the leftmost
        while queue:
            merge, position = heapq.heappop(queue)
            right = after[position]
            if not is_alive[position] or right == -1:
                continue
            now = self._merge(symbols[position], symbols[right])
            if now is None or now & ID_MASK != merge & ID_MASK:
                continue  # the pair changed since it was queued
            symbols[position] = merge & ID_MASK
            is_alive[right] = False
            following = after[right]
            after[position] = following
            if following != -1:
                before[following] = position
                queued = self._merge(symbols[position], symbols[following])
                if queued is not None:
                    heapq.heappush(queue, (queued, position))
            previous = before[position]
            if previous != -1:
                queued = self._merge(symbols[previous], symbols[position])
                if queued is not None:
                    heapq.heappush(queue, (queued, previous))
        return [symbol for symbol, alive in zip(symbols, is_alive, strict=True) if alive]


def _read(text: bytes, name: str) -> BpeTokenizer:
    """The tokenizer of a `tokenizers` JSON file, read section by section: its vocabulary and
    merges are scanned entry by entry into the compact tables, never held as a whole (a
    `json.load` of the file peaks at 18 MB)."""
    section = {key: _value(text, key) for key in ("added_tokens", *_EXPECTED)}
    model_at = _after_key(text, "model", 0)
    model_settings = {key: _value(text, key, model_at) for key in _EXPECTED_MODEL}
    if any(section[key] != value for key, value in _EXPECTED.items()) or (
        model_settings != _EXPECTED_MODEL
    ):
        raise ValueError(f"{name}: not the byte-fallback BPE tokenizer this reader knows")
    vocab: dict[bytes, int] = {}
    at = _after_key(text, "vocab", model_at) + 1  # past the "{"
    while match := _VOCAB_ENTRY.match(text, at):
        vocab[_unescaped(match[1])] = int(match[2])
        at = match.end()
    _expect_end(text, at, b"}", name)
    if max(vocab.values(), default=0) > ID_MASK:
        raise ValueError(f"{name}: more tokens than {ID_BITS} bits hold")
    packed = array("Q")
    at = _after_key(text, "merges", model_at) + 1  # past the "["
    while match := _MERGE_ENTRY.match(text, at):
        left, right = _unescaped(match[1]).split(b" ")
        pair = vocab[left] << ID_BITS | vocab[right]
        packed.append((pair << ID_BITS | len(packed)) << ID_BITS | vocab[left + right])
        at = match.end()
    _expect_end(text, at, b"]", name)  # merges written as lists are another format
    if len(packed) > ID_MASK:
        raise ValueError(f"{name}: more merges than {ID_BITS} bits hold")
    ordered = np.sort(np.frombuffer(packed, dtype=np.uint64))
    # A pair listed twice keeps its last rank, as the library's map does.
    pairs = ordered >> np.uint64(PAIR_SHIFT)
    is_last = np.append(pairs[1:] != pairs[:-1], True) if len(pairs) else pairs.astype(bool)
    specials = {token["content"]: token["id"] for token in section["added_tokens"]}
    return BpeTokenizer(
        specials=specials,
        characters={
            token.decode("utf-8"): id
            for token, id in vocab.items()
            if len(token) <= 4 and len(token.decode("utf-8", "replace")) == 1
        },
        byte_ids=[vocab[b"<0x%02X>" % byte] for byte in range(256)],
        merges=array("Q", ordered[is_last].tobytes()),
    )


def _after_key(text: bytes, key: str, start: int = 0) -> int:
    """Where the value of the first `"key":` at or after `start` begins."""
    found = re.compile(rb'"%s"\s*:\s*' % re.escape(key.encode())).search(text, start)
    if found is None:
        raise ValueError(f"no {key!r} in the tokenizer file")
    return found.end()


def _expect_end(text: bytes, at: int, closing: bytes, name: str) -> None:
    if text[at : at + 64].lstrip()[:1] != closing:
        raise ValueError(f"{name}: an entry at byte {at} is not in the form this reader knows")


def _value(text: bytes, key: str, start: int = 0) -> Any:
    """The JSON value of the first `"key":` at or after `start` (a small one)."""
    at = _after_key(text, key, start)
    value, _ = json.JSONDecoder().raw_decode(text[at : at + SMALL_VALUE].decode("utf-8", "replace"))
    return value


def _unescaped(string: bytes) -> bytes:
    if b"\\" not in string:
        return string
    return str(json.loads(b'"' + string + b'"')).encode("utf-8")
