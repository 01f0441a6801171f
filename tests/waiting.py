"""Waiting in tests: until a condition holds, polled, with a generous deadline.

A test never sleeps a fixed time hoping something happened meanwhile: it names the condition and
waits for it. The deadline is far above what a passing run needs on two busy cores, so only a
failing run pays it; then the failure says what was awaited, never a silent give-up.

    await until(lambda: job_is_done(app), "the summary job done")        # in a coroutine
    until_blocking(lambda: path.exists(), f"{path} written")             # in plain code

The condition may return any value: the wait ends when it is truthy and returns it, so a
condition can hand back what it found. In `until` it may also be a coroutine function. `what`
is a string, or a function that builds one when the wait fails (to show the last state seen).
An exception the condition raises ends the wait at once: that is how a condition says that
waiting longer is pointless (the process it waits on died).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar, cast

T = TypeVar("T")

DEADLINE_S = 60.0  # generous: a passing run needs a fraction of it, even on a loaded machine
POLL_S = 0.02


def _described(what: str | Callable[[], str]) -> str:
    return what if isinstance(what, str) else what()


async def until(
    condition: Callable[[], T | Awaitable[T]],
    what: str | Callable[[], str],
    *,
    timeout_s: float = DEADLINE_S,
    poll_s: float = POLL_S,
) -> T:
    """Waits, without blocking the event loop, until `condition()` is truthy; returns it."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = condition()
        if inspect.isawaitable(found):
            found = await found
        if found:
            return cast(T, found)
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout_s:g} s for: {_described(what)}")
        await asyncio.sleep(poll_s)


def until_blocking(
    condition: Callable[[], T],
    what: str | Callable[[], str],
    *,
    timeout_s: float = DEADLINE_S,
    poll_s: float = POLL_S,
) -> T:
    """Blocks the thread until `condition()` is truthy; returns it (outside an event loop)."""
    deadline = time.monotonic() + timeout_s
    while not (found := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout_s:g} s for: {_described(what)}")
        time.sleep(poll_s)
    return found
