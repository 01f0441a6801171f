"""The bad updates every chat platform's webhook is probed with (`test_bad_updates.py`).

A platform joins the family with one `Platform` entry: how to serve one of its bots taking
webhooks, how to deliver a raw body as the platform would (its secret or signature valid: what
comes after the proof is under test), a valid update saying a text, and which fields of that
update hold integers, string ids and the user's text. The family builds the cases from those:
bodies that are no JSON object, too large or nested too deep; each integer field given a number
JSON cannot carry or a value of another type; each id too long or of another type; the text
holding a NUL or a lone surrogate (answered, stored storable) or something that is no text.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx

Outcome = Literal["refused", "answered"]
FieldPath = tuple[str, ...]


@dataclass(frozen=True)
class Served:
    """A platform's bot served by Tally, as the family needs it."""

    app: Any
    client: httpx.AsyncClient
    replies: Callable[[], int]  # how many replies the bot sent so far (the fake counts)
    wait_replies: Callable[[int], Awaitable[None]]  # until it sent that many


@dataclass(frozen=True)
class Platform:
    name: str
    fake: str  # the fixture that runs the platform's fake server
    serve: Callable[[Any, Path, str], AbstractAsyncContextManager[Served]]
    deliver: Callable[[Served, bytes, int], Awaitable[httpx.Response]]  # (body, n-th delivery)
    update: Callable[[Any, str, int], dict[str, Any]]  # (fake, text, n): a valid update
    integers: tuple[FieldPath, ...]
    ids: tuple[FieldPath, ...]
    text: FieldPath


@dataclass(frozen=True)
class Case:
    name: str
    body: bytes
    expected: Outcome
    said: str = ""  # what an answered case's user said, as stored


RAW = "\u0001raw\u0001"  # a placeholder whose JSON string is replaced by raw JSON text

NUMBERS_JSON_CANNOT_CARRY = {
    "1e400": "1e400",
    "minus_1e400": "-1e400",
    "nan": "NaN",
    "infinity": "Infinity",
    "beyond_2_63": "1" + "0" * 30,
    "5000_digits": "7" * 5_000,
}
OTHER_TYPES = {"string": '"12"', "boolean": "true", "list": "[1]", "object": '{"n": 1}'}
OTHER_TYPES |= {"null": "null", "fraction": "1.5"}
BAD_IDS = {"too_long": json.dumps("x" * 1_000), "number": "12", "null": "null"}
BAD_IDS |= {"object": '{"a": 1}', "empty": '""'}
ODD_TEXTS = {
    "nul": ("hi \x00 there", "hi \ufffd there"),
    "lone_surrogate": ("hi \ud800 there", "hi \ufffd there"),
}
NOT_TEXT = {"object": '{"x": 1}', "number": "7", "nested": "[" * 40 + "]" * 40}


def _with_raw(update: dict[str, Any], path: FieldPath, raw: str) -> bytes:
    """`update` as JSON with the field at `path` set to the raw JSON text `raw`."""
    target = update
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = RAW
    return json.dumps(update).replace(json.dumps(RAW), raw).encode()


def cases(platform: Platform, fake: Any) -> Iterator[Case]:
    """Every probe of the family for `platform`, each with a fresh update (its own id)."""
    counter = iter(range(1, 10_000))

    def fresh(text: str = "hello") -> dict[str, Any]:
        return platform.update(fake, text, next(counter))

    yield Case("not_json", b"{nope", "refused")
    yield Case("not_utf8", b'{"a": "\xff\xfe"}', "refused")
    yield Case("empty", b"", "refused")
    yield Case("an_array", b"[1, 2]", "refused")
    yield Case("nested_5000", b"[" * 5_000 + b"]" * 5_000, "refused")
    deep = fresh()
    deep["extra"] = json.loads("[" * 40 + "]" * 40)
    yield Case("nested_40_inside_an_update", json.dumps(deep).encode(), "refused")
    large = fresh()
    large["extra"] = "x" * (1024 * 1024 + 1)
    yield Case("over_1_mib", json.dumps(large).encode(), "refused")
    for path in platform.integers:
        for kind, raw in {**NUMBERS_JSON_CANNOT_CARRY, **OTHER_TYPES}.items():
            yield Case(f"{'.'.join(path)}={kind}", _with_raw(fresh(), path, raw), "refused")
    for path in platform.ids:
        for kind, raw in BAD_IDS.items():
            yield Case(f"{'.'.join(path)}={kind}", _with_raw(fresh(), path, raw), "refused")
    for kind, raw in NOT_TEXT.items():
        name = f"{'.'.join(platform.text)}={kind}"
        yield Case(name, _with_raw(fresh(), platform.text, raw), "refused")
    for kind, (said, stored) in ODD_TEXTS.items():
        body = json.dumps(fresh(said)).encode()
        yield Case(f"{'.'.join(platform.text)}={kind}", body, "answered", stored)
