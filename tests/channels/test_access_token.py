"""A platform's access token, shared by every reply that needs it at once and renewed before it
expires or when the platform refuses it (backend/channels/access_token.py)."""

from __future__ import annotations

import asyncio

from backend.channels.access_token import AccessToken


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_one_fetch_serves_many_callers_until_shortly_before_it_expires() -> None:
    clock, fetched = Clock(), []

    async def fetch() -> tuple[str, float]:
        fetched.append(clock.now)
        await asyncio.sleep(0)  # others ask meanwhile
        return f"token-{len(fetched)}", 7200

    token = AccessToken(fetch, early_s=300, clock=clock)
    assert set(await asyncio.gather(*(token.get() for _ in range(20)))) == {"token-1"}
    clock.now += 7200 - 300 - 1
    assert await token.get() == "token-1"
    clock.now += 1
    assert await token.get() == "token-2"
    assert len(fetched) == 2


async def test_a_refused_token_is_fetched_again_but_not_one_fetched_since() -> None:
    count = 0

    async def fetch() -> tuple[str, float]:
        nonlocal count
        count += 1
        return f"token-{count}", 7200

    token = AccessToken(fetch, early_s=300)
    first = await token.get()
    token.forget(first)
    second = await token.get()
    token.forget(first)  # a late refusal of the old token keeps the new one
    assert (first, second, await token.get()) == ("token-1", "token-2", "token-2")
    token.forget()
    assert await token.get() == "token-3"
