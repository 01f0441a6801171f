"""Cosine search over one memory scope's item vectors: a float32 matrix of normalised rows,
searched by brute force (a ten-thousand-row scope takes well under a millisecond), grown by
doubling and compacted when half of it is removed rows."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from backend.retrieval.embedders import Vectors


class VectorIndex:
    def __init__(self) -> None:
        self._matrix: Vectors | None = None
        self._keys: list[int | None] = []  # the row's key; None for a removed row
        self._rows: dict[int, int] = {}  # key -> row

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, key: int) -> bool:
        return key in self._rows

    def add(self, keys: list[int], vectors: Vectors) -> None:
        """Add one normalised row per key; a key already present keeps its first vector."""
        fresh = [(i, key) for i, key in enumerate(keys) if key not in self._rows]
        if not fresh:
            return
        rows = vectors[[i for i, _ in fresh]]
        if self._matrix is None:
            self._matrix = np.zeros((max(64, len(fresh)), rows.shape[1]), dtype=np.float32)
        used = len(self._keys)
        if used + len(fresh) > len(self._matrix):
            size = max(2 * len(self._matrix), used + len(fresh))
            grown = np.zeros((size, rows.shape[1]), dtype=np.float32)
            grown[:used] = self._matrix[:used]
            self._matrix = grown
        self._matrix[used : used + len(fresh)] = rows
        for offset, (_, key) in enumerate(fresh):
            self._keys.append(key)
            self._rows[key] = used + offset

    def remove(self, keys: Iterable[int]) -> None:
        for key in keys:
            row = self._rows.pop(key, None)
            if row is not None and self._matrix is not None:
                self._keys[row] = None
                self._matrix[row] = 0.0  # a zero row scores 0 against any query
        if self._keys and len(self._rows) * 2 < len(self._keys):
            self._compact()

    def search(self, query: Vectors, limit: int, *, floor: float) -> list[tuple[int, float]]:
        """(key, cosine) of the `limit` rows nearest `query` (one normalised row), best first,
        leaving out rows below `floor`."""
        if self._matrix is None or not self._rows or limit <= 0:
            return []
        used = len(self._keys)
        scores = self._matrix[:used] @ query.reshape(-1)
        count = min(limit, used)
        best = np.argpartition(-scores, count - 1)[:count]
        best = best[np.argsort(-scores[best])]
        best = best[scores[best] >= floor]  # a removed row's zeros score 0: below any floor
        keys = self._keys
        return [
            (key, score)
            for row, score in zip(best.tolist(), scores[best].tolist(), strict=True)
            if (key := keys[row]) is not None
        ]

    def _compact(self) -> None:
        assert self._matrix is not None
        kept = [row for row, key in enumerate(self._keys) if key is not None]
        self._matrix = np.ascontiguousarray(self._matrix[kept])
        self._keys = [self._keys[row] for row in kept]
        self._rows = {key: row for row, key in enumerate(self._keys) if key is not None}
