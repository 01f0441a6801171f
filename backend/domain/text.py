"""Text every backend can store and every JSON encoder can write.

PostgreSQL refuses a NUL in a text column (SQLite keeps it), and no UTF-8 encoder writes a lone
surrogate (a JSON `\\ud800` escape decodes to one). A client's text with either is refused
(`text_problem`, 422 `invalid_text`); text from the model side (replies, reasoning, tool calls
and results, facts, summaries) and from chat platforms cannot be refused without losing a user's
words, so it is made storable instead (`storable_text`, `storable_json`): each NUL and each lone
surrogate becomes U+FFFD, a surrogate pair split across pieces is joined, and JSON nested deeper
than `MAX_JSON_DEPTH` is cut. The same text is then stored on every backend, and read back the
same way, whatever was stored before.
"""

from __future__ import annotations

import math

REPLACEMENT = "\ufffd"
MAX_JSON_DEPTH = 64  # far beyond any tool's arguments or platform update; far below recursion
CUT_JSON = f"[cut: nested more than {MAX_JSON_DEPTH} levels deep]"


def text_problem(text: str) -> str | None:
    """Why `text` cannot be stored as text, or None when it can."""
    if "\x00" in text:
        return "contains a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode text (a lone surrogate)"
    return None


def storable_text(text: str) -> str:
    """`text` with each NUL and lone surrogate replaced by U+FFFD; unchanged when it has none."""
    if "\x00" in text:
        text = text.replace("\x00", REPLACEMENT)
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # UTF-16 joins the pairs and replaces what is left alone
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def storable_json(value: object, *, depth: int = 0) -> object:
    """A JSON value every backend stores and every encoder writes: strings (keys too) made
    storable, NaN and infinities as strings, anything below `MAX_JSON_DEPTH` levels cut."""
    if isinstance(value, str):
        return storable_text(value)
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if depth >= MAX_JSON_DEPTH:
        return CUT_JSON
    if isinstance(value, dict):
        return {
            storable_text(str(key)): storable_json(item, depth=depth + 1)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [storable_json(item, depth=depth + 1) for item in value]
    return storable_text(str(value))


def storable_object(value: dict[str, object]) -> dict[str, object]:
    """`storable_json` of a JSON object, typed as one (tool arguments, platform updates)."""
    cleaned = storable_json(value)
    return cleaned if isinstance(cleaned, dict) else {}
