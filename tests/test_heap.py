"""A large table built from a file leaves little behind: its parsed garbage is collected and the
freed heap given back to the system (`backend/host/heap.py`), so it does not count in the
resident size of every process for as long as it runs."""

from __future__ import annotations

import gc
import re
import sys
import weakref
from pathlib import Path

import pytest

from backend.chat.token_table import TokenTable
from backend.host import heap


def resident_mb() -> float:
    status = Path("/proc/self/status").read_text(encoding="ascii")
    return int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) / 1024  # type: ignore[union-attr]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_the_token_table_leaves_a_few_megabytes_resident() -> None:
    before = resident_mb()
    table = TokenTable("cl100k_base")  # 100,000 tokens parsed; 15 MB left when kept as parsed

    assert table.count("hello world") == 2
    assert resident_mb() - before < 8


class Node:
    me: Node | None = None


def test_without_malloc_trim_the_garbage_is_still_collected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(heap, "_malloc_trim", lambda: None)  # a C library without the call
    node = Node()
    node.me = node  # a cycle: only a collection frees it
    collected = weakref.ref(node)
    del node
    gc.disable()  # no automatic collection in between
    try:
        heap.give_back_free_memory()
    finally:
        gc.enable()

    assert collected() is None
