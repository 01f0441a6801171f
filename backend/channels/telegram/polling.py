"""Telegram's long polling: `getUpdates` with the SDK's `Bot`, its answer taken raw."""

from __future__ import annotations

from collections.abc import Sequence

from telegram import Bot


class PollingBot(Bot):
    """The SDK's Bot, whose `getUpdates` answer is taken raw: each update is then read, or
    refused, on its own, so one that does not read never stops the polling (the SDK's own
    `get_updates` fails the whole batch, and would fail it again at every poll)."""

    async def raw_updates(
        self, *, offset: int | None, wait_s: int, allowed_updates: Sequence[str]
    ) -> list[object]:
        request_timeout = self._request[0].read_timeout or 0
        result = await self._post(
            "getUpdates",
            {"offset": offset, "timeout": wait_s, "allowed_updates": list(allowed_updates)},
            read_timeout=request_timeout + wait_s,
        )
        return list(result) if isinstance(result, list) else []
