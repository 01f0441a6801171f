"""Counts in sentences people read: "1 line", "0 lines", "2 memories", never "line(s)"."""

from __future__ import annotations


def count(number: int, noun: str, plural: str | None = None) -> str:
    """`number` and `noun`, the noun in the plural unless the number is one (`plural` for the
    irregular ones: count(2, "memory", "memories"))."""
    return f"{number} {noun if number == 1 else plural or noun + 's'}"
