"""Slack's Web API for one bot, on slack_sdk's `AsyncWebClient`: who the bot is
(`auth.test`), a message into a thread (`chat.postMessage`), a message changed
(`chat.update`), a note to one person (`chat.postEphemeral`), and a file a user shared
(`url_private`, with the bot token). Slack's rate limit (HTTP 429 with `Retry-After`) is waited
out here, a bounded number of times for a bounded time; every failure is a `SlackError`, so the
SDK's types stay in this package.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import httpx
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from backend.channels.backoff import Sleep
from backend.settings.channels_slack import SlackSettings

log = logging.getLogger(__name__)

TIMEOUT_S = 30
MAX_RATE_LIMIT_WAITS = 5
MAX_RATE_LIMIT_WAIT_S = 120.0
DEFAULT_RETRY_AFTER_S = 30.0  # Slack's advice when a 429 carries no Retry-After
MAX_FILE_BYTES = 20 * 1024 * 1024
SLACK_FILE_HOSTS = frozenset({"files.slack.com"})


class SlackError(Exception):
    """Slack refused a call (`code`: its `error`, e.g. `invalid_auth`), or was not reached."""

    def __init__(self, message: str, *, code: str = "", status: int = 0) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


class SlackApi:
    def __init__(self, settings: SlackSettings, *, sleep: Sleep = asyncio.sleep) -> None:
        self._settings = settings
        self._sleep = sleep
        self.client = AsyncWebClient(
            token=settings.bot_token() or "", base_url=settings.base_url(), timeout=TIMEOUT_S
        )
        self._identity: dict[str, Any] | None = None

    async def auth_test(self) -> dict[str, Any]:
        """Who the bot is (`user_id`, `team`, `bot_id`); remembered once Slack said."""
        if self._identity is None:
            self._identity = await self._call(self.client.auth_test)
        return self._identity

    @property
    def bot_user(self) -> str:
        """The bot's user id, once `auth_test` asked ("" before)."""
        return str((self._identity or {}).get("user_id", ""))

    async def post(
        self,
        channel: str,
        text: str,
        *,
        thread_ts: str | None = None,
        blocks: list[dict[str, Any]] | None = None,
    ) -> str:
        """A message (mrkdwn) in `channel`, in the thread `thread_ts`; its ts."""
        options: dict[str, Any] = {"channel": channel, "text": text, "mrkdwn": True}
        if thread_ts:
            options["thread_ts"] = thread_ts
        if blocks:
            options["blocks"] = blocks
        answer = await self._call(self.client.chat_postMessage, **options)
        return str(answer.get("ts", ""))

    async def update(self, channel: str, ts: str, text: str) -> None:
        """The message `ts` now says `text`, its buttons gone."""
        await self._call(self.client.chat_update, channel=channel, ts=ts, text=text, blocks=[])

    async def post_ephemeral(self, channel: str, user: str, text: str) -> None:
        await self._call(self.client.chat_postEphemeral, channel=channel, user=user, text=text)

    async def download(self, url: str) -> bytes:
        """A file a user shared, by its `url_private`; only from Slack's file host (or the
        configured API's), since the bot token goes with it."""
        parts, base = urlsplit(url), urlsplit(self._settings.base_url())
        own = (parts.scheme, parts.netloc) == (base.scheme, base.netloc)
        if not own and not (parts.scheme == "https" and parts.hostname in SLACK_FILE_HOSTS):
            raise SlackError(f"a file on {parts.hostname} is not Slack's: not fetched", code="host")
        headers = {"Authorization": f"Bearer {self._settings.bot_token() or ''}"}
        try:
            async with httpx.AsyncClient(timeout=TIMEOUT_S) as http:
                response = await http.get(url, headers=headers)
        except httpx.HTTPError as exc:
            raise SlackError(f"cannot fetch {parts.hostname}: {exc}") from exc
        if response.status_code != 200:
            raise SlackError(
                f"{parts.hostname} answered {response.status_code}", status=response.status_code
            )
        if len(response.content) > MAX_FILE_BYTES:
            raise SlackError("the file is larger than 20 MB", code="too_large")
        if response.headers.get("content-type", "").startswith("text/html"):
            raise SlackError("Slack answered a sign-in page, not the file", code="no_access")
        return response.content

    async def _call(self, method: Any, **options: Any) -> dict[str, Any]:
        """`method(**options)`, waiting out Slack's rate limit a few times at most."""
        for attempt in range(MAX_RATE_LIMIT_WAITS + 1):
            try:
                answer = await method(**options)
                return dict(answer.data) if isinstance(answer.data, dict) else {}
            except SlackApiError as exc:
                response = exc.response
                code = str(response.get("error", "")) if isinstance(response.data, dict) else ""
                if response.status_code != 429:
                    raise SlackError(
                        f"Slack answered {response.status_code} {code}".strip(),
                        code=code,
                        status=response.status_code,
                    ) from exc
                wait = _retry_after(response.headers)
                if attempt == MAX_RATE_LIMIT_WAITS or wait > MAX_RATE_LIMIT_WAIT_S:
                    raise SlackError("Slack's rate limit", code="ratelimited", status=429) from exc
                log.info("slack rate limit: waiting %.0f s", wait)
                await self._sleep(wait)
            except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
                raise SlackError(f"Slack: {type(exc).__name__}: {exc}") from exc
        raise AssertionError("unreachable")


def _retry_after(headers: Any) -> float:
    for name, value in dict(headers or {}).items():
        if str(name).casefold() == "retry-after":
            try:
                return max(float(value if not isinstance(value, list) else value[0]), 0.0)
            except ValueError:
                break
    return DEFAULT_RETRY_AFTER_S
