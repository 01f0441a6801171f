"""What a chat platform sends, read with limits before anything else looks at it.

A platform proves who it is (Telegram's secret token, DingTalk's signature); what it then
sends is input like any other. A body is read into a JSON object only when it is at most
`MAX_BODY_BYTES`, UTF-8, JSON, nested at most `MAX_DEPTH` levels, and every number in it is an
integer within ±2**63 or a finite decimal; its strings are made storable (`domain/text.py`).
Anything else is a `RefusedUpdate`: the channel records it as refused and answers the platform
so it stops retrying (`Inbox.refuse`), never a 500. Each platform then reads the fields it
uses into typed values (`telegram/inbound.py`, `dingtalk/inbound.py`).
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from backend.domain.text import storable_json

MAX_BODY_BYTES = 1024 * 1024  # Telegram's and DingTalk's updates are a few kilobytes
MAX_DEPTH = 32  # an update nests under ten levels
MAX_INTEGER = 2**63 - 1  # ids and timestamps in milliseconds fit; a database column too
MAX_NUMBER_CHARS = 40  # no integer within range is longer; a longer one is never converted


class RefusedUpdate(ValueError):
    """A platform's update this bot cannot read; `reason` says why, for the record and the log."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def read_body(body: bytes) -> dict[str, Any]:
    """`body` as a JSON object within the limits, its strings storable; else RefusedUpdate."""
    if len(body) > MAX_BODY_BYTES:
        raise RefusedUpdate(f"the body has more than {MAX_BODY_BYTES} bytes")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RefusedUpdate("the body is not UTF-8") from exc
    try:
        value = json.loads(
            text, parse_int=_integer, parse_float=_decimal, parse_constant=_no_constant
        )
    except RecursionError as exc:
        raise RefusedUpdate(f"the body nests deeper than {MAX_DEPTH} levels") from exc
    except RefusedUpdate:
        raise
    except ValueError as exc:
        raise RefusedUpdate(f"the body is not JSON: {exc}") from exc
    return checked_update(value)


def checked_update(value: object) -> dict[str, Any]:
    """A JSON object already parsed (by a platform's SDK) held to the same limits."""
    if not isinstance(value, dict):
        raise RefusedUpdate("the body is not a JSON object")
    _check(value)
    cleaned = storable_json(value)
    assert isinstance(cleaned, dict)
    return cleaned


def fingerprint(body: bytes) -> str:
    """A name for an update that has no readable id of its own: the same body, the same name."""
    return "refused:" + hashlib.sha256(body).hexdigest()[:40]


def _check(value: object) -> None:
    """Depth and numbers, walked without recursion (a parsed value may nest deep)."""
    pending: list[tuple[object, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict | list):
            if depth > MAX_DEPTH:
                raise RefusedUpdate(f"the body nests deeper than {MAX_DEPTH} levels")
            children = item.values() if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children)
        elif isinstance(item, float):
            _decimal_in_range(item)
        elif isinstance(item, int) and not isinstance(item, bool):
            _integer_in_range(item)


def _integer(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        raise RefusedUpdate(f"a number has more than {MAX_NUMBER_CHARS} digits")
    return _integer_in_range(int(text))


def _integer_in_range(number: int) -> int:
    if abs(number) > MAX_INTEGER:
        raise RefusedUpdate("a number is out of range (beyond ±2**63)")
    return number


def _decimal(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS * 2:
        raise RefusedUpdate("a number is too long")
    return _decimal_in_range(float(text))


def _decimal_in_range(number: float) -> float:
    if not math.isfinite(number):
        raise RefusedUpdate("a number is out of range (not finite)")
    return number


def _no_constant(name: str) -> object:
    raise RefusedUpdate(f"a number is {name}, which JSON does not have")
