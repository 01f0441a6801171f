"""Counts read as English: "1 line", "0 lines", "2 memories"."""

from __future__ import annotations

import pytest

from backend.domain.wording import count


@pytest.mark.parametrize(
    ("number", "noun", "plural", "said"),
    [
        (0, "line", None, "0 lines"),
        (1, "line", None, "1 line"),
        (2, "raw line", None, "2 raw lines"),
        (1, "memory", "memories", "1 memory"),
        (3, "memory", "memories", "3 memories"),
    ],
)
def test_a_count_takes_the_plural_unless_it_is_one(
    number: int, noun: str, plural: str | None, said: str
) -> None:
    assert count(number, noun, plural) == said
