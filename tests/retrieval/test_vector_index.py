"""The meaning side of memory retrieval: cosine over normalised rows, best first, within a
floor, with rows added and removed as memory changes."""

from __future__ import annotations

import numpy as np

from backend.retrieval.embedders import normalised
from backend.retrieval.vector_index import BLOCK_ROWS, FIRST_ROWS, VectorIndex


def rows(*vectors: list[float]) -> np.ndarray:
    return normalised(vectors)


def test_nearest_first_and_none_below_the_floor() -> None:
    index = VectorIndex()
    index.add([1, 2, 3], rows([1, 0, 0], [0.8, 0.6, 0], [0, 0, 1]))

    found = index.search(rows([1, 0, 0])[0], 3, floor=0.5)

    assert [key for key, _ in found] == [1, 2]
    assert found[0][1] > found[1][1] > 0.5


def test_removed_rows_are_never_found_and_the_matrix_compacts() -> None:
    index = VectorIndex()
    index.add(list(range(10)), rows(*[[1.0, float(i)] for i in range(10)]))
    index.remove(range(8))

    assert len(index) == 2
    assert {key for key, _ in index.search(rows([1, 9])[0], 10, floor=-1)} == {8, 9}
    index.add([10], rows([1, 10]))
    assert {key for key, _ in index.search(rows([1, 9])[0], 10, floor=-1)} == {8, 9, 10}


def test_a_key_added_twice_keeps_its_first_vector() -> None:
    index = VectorIndex()
    index.add([1], rows([1, 0]))
    index.add([1], rows([0, 1]))

    assert index.search(rows([1, 0])[0], 1, floor=0.9) == [(1, 1.0)]


def test_rows_across_blocks_are_all_found_and_removed() -> None:
    rng = np.random.default_rng(7)
    vectors = normalised(rng.normal(size=(2 * BLOCK_ROWS + 100, 8)))
    index = VectorIndex()
    for start in range(0, len(vectors), 300):  # batches that straddle the blocks' edges
        batch = list(range(start, min(start + 300, len(vectors))))
        index.add(batch, vectors[batch])

    for key in (0, BLOCK_ROWS - 1, BLOCK_ROWS, 2 * BLOCK_ROWS + 99):
        assert index.search(vectors[key], 1, floor=0.99)[0][0] == key
    index.remove(range(BLOCK_ROWS + 200))  # more than half: compacted into fresh blocks
    assert len(index) == len(vectors) - (BLOCK_ROWS + 200)
    assert index.search(vectors[5], 1, floor=0.99) == []
    assert index.search(vectors[2 * BLOCK_ROWS + 99], 1, floor=0.99)[0][0] == 2 * BLOCK_ROWS + 99


def test_a_small_scope_holds_a_small_block() -> None:
    index = VectorIndex()
    index.add([1, 2, 3], rows([1, 0], [0, 1], [1, 1]))

    assert index.memory_bytes() <= FIRST_ROWS * 2 * 4
