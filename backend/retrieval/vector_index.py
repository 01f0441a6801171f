"""Cosine search over one memory scope's item vectors: float32 normalised rows, searched by
brute force (a ten-thousand-row scope takes well under a millisecond), compacted when half of
it is removed rows.

The rows live in blocks of BLOCK_ROWS, so that a growing scope never copies what it holds:
one matrix grown by doubling held its old and its new copy at once (24 MB for a moment at
10,000 rows, and up to twice the rows it used ever after). A small scope's only block grows
by doubling up to a full block, so that each of many small scopes costs little.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from backend.retrieval.embedders import Vectors

BLOCK_ROWS = 1024  # a block of 256 dimensions is 1 MB
FIRST_ROWS = 64


class VectorIndex:
    def __init__(self) -> None:
        self._blocks: list[Vectors] = []
        self._keys: list[int | None] = []  # the row's key; None for a removed row
        self._rows: dict[int, int] = {}  # key -> row

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, key: int) -> bool:
        return key in self._rows

    def memory_bytes(self) -> int:
        """What its rows take, used or not."""
        return sum(block.nbytes for block in self._blocks)

    def add(self, keys: list[int], vectors: Vectors) -> None:
        """Add one normalised row per key; a key already present keeps its first vector."""
        fresh = [(i, key) for i, key in enumerate(keys) if key not in self._rows]
        if not fresh:
            return
        self._write(vectors[[i for i, _ in fresh]])
        for _, key in fresh:
            self._rows[key] = len(self._keys)
            self._keys.append(key)

    def remove(self, keys: Iterable[int]) -> None:
        for key in keys:
            row = self._rows.pop(key, None)
            if row is not None:
                self._keys[row] = None
                self._blocks[row // BLOCK_ROWS][row % BLOCK_ROWS] = 0.0  # scores 0 against any
        if self._keys and len(self._rows) * 2 < len(self._keys):
            self._compact()

    def search(self, query: Vectors, limit: int, *, floor: float) -> list[tuple[int, float]]:
        """(key, cosine) of the `limit` rows nearest `query` (one normalised row), best first,
        leaving out rows below `floor`."""
        if not self._rows or limit <= 0:
            return []
        used = len(self._keys)
        vector = query.reshape(-1)
        scores = np.concatenate([block @ vector for block in self._blocks])[:used]
        count = min(limit, used)
        best = np.argpartition(-scores, count - 1)[:count]
        best = best[np.argsort(-scores[best])]
        best = best[scores[best] >= floor]  # a removed row's zeros score 0: below any floor
        keys = map(self._keys.__getitem__, best.tolist())
        hits = zip(keys, scores[best].tolist(), strict=True)
        return [(key, score) for key, score in hits if key is not None]

    def _write(self, rows: Vectors) -> None:
        """Put `rows` after the rows used, in the blocks (adding or growing them)."""
        at, written = len(self._keys), 0
        while written < len(rows):
            block_at, offset = divmod(at + written, BLOCK_ROWS)
            if block_at == len(self._blocks):
                self._blocks.append(self._new_block(len(rows) - written, rows.shape[1]))
            block = self._blocks[block_at]
            if offset + (len(rows) - written) > len(block) and len(block) < BLOCK_ROWS:
                block = self._blocks[block_at] = self._grown(block, offset + len(rows) - written)
            count = min(len(block) - offset, len(rows) - written)
            block[offset : offset + count] = rows[written : written + count]
            written += count

    def _new_block(self, wanted: int, dimensions: int) -> Vectors:
        """The first block as small as will do; later ones whole."""
        size = BLOCK_ROWS if self._blocks else min(BLOCK_ROWS, max(FIRST_ROWS, wanted))
        return np.zeros((size, dimensions), dtype=np.float32)

    @staticmethod
    def _grown(block: Vectors, wanted: int) -> Vectors:
        size = min(BLOCK_ROWS, max(2 * len(block), wanted))
        grown = np.zeros((size, block.shape[1]), dtype=np.float32)
        grown[: len(block)] = block
        return grown

    def _compact(self) -> None:
        kept = [row for row, key in enumerate(self._keys) if key is not None]
        rows = [self._blocks[row // BLOCK_ROWS][row % BLOCK_ROWS] for row in kept]
        keys = [self._keys[row] for row in kept]
        self._blocks, self._keys, self._rows = [], [], {}
        if rows:
            self._write(np.stack(rows))
        self._keys = keys
        self._rows = {key: row for row, key in enumerate(keys) if key is not None}
