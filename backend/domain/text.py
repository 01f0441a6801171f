"""Text every backend can store: no NUL (PostgreSQL refuses it in text columns; SQLite keeps
it), and valid Unicode (no lone surrogates from JSON `\\ud800` escapes)."""

from __future__ import annotations


def text_problem(text: str) -> str | None:
    """Why `text` cannot be stored as text, or None when it can."""
    if "\x00" in text:
        return "contains a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode text (a lone surrogate)"
    return None
