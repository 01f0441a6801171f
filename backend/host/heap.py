"""Giving the heap's free memory back to the system, after a large table was built.

Building a table from a file (the tokenizer's ranks, the embedding model's vocabulary) leaves
tens of megabytes of parsed objects behind. Python lets go of much of it only at a full
collection, and glibc's malloc keeps what is freed for the process's next allocations, so it
would count in the resident size for as long as the process runs; `malloc_trim` returns it.
Elsewhere (another C library, another system) there is no such call, and only the collection
is done.
"""

from __future__ import annotations

import ctypes
import functools
import gc
from collections.abc import Callable


def give_back_free_memory() -> None:
    """Collect garbage, and return the heap's free pages to the system where the C library can.
    A full collection: for after a table was built (at start, or once on first use)."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:  # the symbols the process has loaded already, the C library's among them
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc: there is no such call
        return None
    return trim
