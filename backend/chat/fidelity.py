"""The summary fidelity gate: identifiers a user gave must survive summarization.

Emails, URLs, phone numbers, numbers with units, ids and names the user introduced are
extracted from the evicted user messages; a summary that drops any of them is retried once
with the missing items named, and whatever is still missing is kept verbatim.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_UNITS = (
    r"kg|km|cm|mm|mg|ml|lbs?|g|m|l|%|°[CF]|USD|EUR|GBP|RMB|CNY|JPY|[$€£¥]|GB|MB|TB|KB|"
    r"ms|min|hours?|hrs?|days?|weeks?|months?|years?|元|美元|岁|公斤|公里|米|天|小时|分钟"
)
PATTERNS = (
    # An email starts where a run of its characters starts, and its local part has at most 64
    # (RFC 5321): unbounded, a 90,000-character word took 28 s of the event loop.
    re.compile(r"(?<![\w.+-])[\w.+-]{1,64}@[\w-]+(?:\.[\w-]+)+"),  # email
    re.compile(r"https?://[^\s<>\"')\]]+"),  # URL
    re.compile(r"\+?\d[\d ()-]{7,}\d"),  # phone number
    re.compile(rf"(?<![\w.])\d+(?:[.,]\d+)?\s?(?:{_UNITS})(?![A-Za-z])"),  # number with unit
    re.compile(
        r"\b(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)+\b"
    ),
    re.compile(r"#\d{3,}\b|\b[A-Z]{2,}\d{3,}\b"),  # ticket or order ids
)
NAME_PATTERNS = (
    re.compile(r"\b(?:my name is|call me|i am called)\s+([A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)*)"),
    re.compile(r"(?:我叫|我的名字是|叫我)\s*([\u4e00-\u9fff]{1,4}|[A-Za-z][\w'-]+)"),
)
_TRAILING = ".,;:!?。，；：！？"


def extract_identifiers(texts: Iterable[str], *, limit: int = 40) -> list[str]:
    """Identifiers in the order they first appear, without duplicates."""
    found: dict[str, None] = {}
    for text in texts:
        matches = sorted(
            (match.start(), _value(match))
            for pattern in (*PATTERNS, *NAME_PATTERNS)
            for match in pattern.finditer(text)
        )
        for _, value in matches:
            if len(value) >= 2:
                found.setdefault(value, None)
    return list(found)[:limit]


def _value(match: re.Match[str]) -> str:
    return (match.group(1) if match.groups() else match.group(0)).strip(_TRAILING).strip()


def missing_identifiers(identifiers: Iterable[str], text: str) -> list[str]:
    haystack = _normalise(text)
    return [item for item in identifiers if _normalise(item) not in haystack]


def _normalise(text: str) -> str:
    return " ".join(text.casefold().split())
