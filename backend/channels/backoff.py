"""Waiting out a platform that cannot be reached: waits that double after each failure, from a
second up to a limit, and start short again once a call works."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]

FIRST_S = 1.0
MOST_S = 60.0


class Backoff:
    def __init__(
        self, *, sleep: Sleep = asyncio.sleep, first: float = FIRST_S, most: float = MOST_S
    ) -> None:
        self._sleep = sleep
        self._first = first
        self._most = most
        self._delay = first

    async def wait(self) -> None:
        await self._sleep(self._delay)
        self._delay = min(self._delay * 2, self._most)

    def reset(self) -> None:
        self._delay = self._first


async def until_it_works(
    call: Callable[[], Awaitable[T]],
    *,
    what: str,
    errors: tuple[type[BaseException], ...],
    on_error: Callable[[str, BaseException], None],
    sleep: Sleep = asyncio.sleep,
) -> T:
    """`call`'s result, retried with backoff for as long as it fails with `errors` (each noted
    as a failure of `what`)."""
    backoff = Backoff(sleep=sleep)
    while True:
        try:
            return await call()
        except errors as exc:
            on_error(what, exc)
            await backoff.wait()
