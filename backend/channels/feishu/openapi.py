"""Feishu's OpenAPI for one bot, with our own `httpx` client: the SDK's client fetches tokens
with blocking `requests` calls into a cache shared by the whole process, never retries, and
keeps a token Feishu has called invalid.

A tenant access token is got from the app id and secret and cached until a few minutes before
it expires; one Feishu calls invalid or expired is got afresh, once, and the call tried once
more. Rate limits (HTTP 429, code 99991400 and kin), 5xx answers and failed connections are
retried with backoff; a call that timed out after it was sent is not, since it may have been
delivered.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import quote

import httpx

from backend.channels.access_token import AccessToken
from backend.channels.backoff import Backoff, Sleep
from backend.settings.channels_feishu import FeishuSettings

log = logging.getLogger(__name__)

TOKEN_EARLY_S = 300  # refresh a token this long before Feishu says it expires
MAX_ATTEMPTS = 5
RETRY_MAX_S = 30.0  # between tries of one call: a reply should not wait minutes
TIMEOUT = httpx.Timeout(15.0, connect=10.0)
TOKEN_PATH = "/open-apis/auth/v3/tenant_access_token/internal"
# Codes the platform answers a token with that is missing, invalid or expired.
TOKEN_INVALID = frozenset({99991661, 99991663, 99991664, 99991665, 99991666, 99991668})
# Rate limits: the app's (99991400), the API's, and "sending too fast" to one chat.
RATE_LIMITED = frozenset({99991400, 99991402, 11020, 11021, 11232, 230020})

T = TypeVar("T")


class FeishuError(Exception):
    """Feishu refused a call, or could not be reached."""

    def __init__(self, message: str, *, code: int = 0, status: int = 0, retry: bool = False):
        super().__init__(message)
        self.code = code
        self.status = status
        self.retry = retry  # worth trying again: a rate limit, Feishu's own trouble


class FeishuApi:
    def __init__(
        self,
        settings: FeishuSettings,
        *,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        attempts: int = MAX_ATTEMPTS,
    ) -> None:
        self._settings = settings
        self._base = settings.api_base()
        self._http = httpx.AsyncClient(timeout=TIMEOUT)
        self._sleep = sleep
        self._clock = clock
        self._attempts = attempts
        self._token = AccessToken(self._fetch_token, early_s=TOKEN_EARLY_S, clock=clock)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def access_token(self) -> str:
        return await self._token.get()

    async def _fetch_token(self) -> tuple[str, float]:
        body = {"app_id": self._settings.app_id, "app_secret": self._settings.app_secret()}
        answer = await self._retried(lambda: self._json("POST", TOKEN_PATH, body=body))
        token, lifetime = answer.get("tenant_access_token"), answer.get("expire")
        if not isinstance(token, str) or not isinstance(lifetime, int):
            raise FeishuError(f"Feishu answered no tenant access token: {answer}")
        return token, lifetime

    async def bot_info(self) -> dict[str, Any]:
        """The bot as Feishu knows it: `open_id` (how mentions name it), `app_name`."""
        answer = await self._call("GET", "/open-apis/bot/v3/info")
        bot = answer.get("bot")
        if not isinstance(bot, dict) or not isinstance(bot.get("open_id"), str):
            raise FeishuError(f"Feishu answered no bot: {answer}")
        return bot

    async def reply(self, message_id: str, msg_type: str, content: dict[str, Any]) -> str:
        """A message in reply to `message_id` (shown with it, in its thread); the new id."""
        body = {"msg_type": msg_type, "content": json.dumps(content, ensure_ascii=False)}
        answer = await self._call(
            "POST", f"/open-apis/im/v1/messages/{quote(message_id, safe='')}/reply", body=body
        )
        data = answer.get("data")
        return str(data.get("message_id", "")) if isinstance(data, dict) else ""

    async def resource(self, message_id: str, key: str, kind: str = "image") -> bytes:
        """A picture (or file) of a user's message, by its key."""
        path = (
            f"/open-apis/im/v1/messages/{quote(message_id, safe='')}"
            f"/resources/{quote(key, safe='')}"
        )
        response = await self._call("GET", path, params={"type": kind}, raw=True)
        assert isinstance(response, httpx.Response)
        return response.content

    async def _call(
        self,
        method: str,
        path: str,
        *,
        body: dict[str, Any] | None = None,
        params: dict[str, str] | None = None,
        raw: bool = False,
    ) -> Any:
        """A call with the bot's tenant access token, refreshed once if Feishu refuses it."""

        async def once() -> Any:
            try:
                token = await self.access_token()
                return await self._request(method, path, body, params, token, raw)
            except FeishuError as exc:
                if exc.code not in TOKEN_INVALID:
                    raise
                log.info("feishu: token refused (%s); getting a new one", exc.code)
                self._token.forget()  # revoked or expired early: a fresh one, once
                token = await self.access_token()
                return await self._request(method, path, body, params, token, raw)

        return await self._retried(once)

    async def _retried(self, call: Callable[[], Awaitable[T]]) -> T:
        backoff = Backoff(sleep=self._sleep, most=RETRY_MAX_S)
        for attempt in range(1, self._attempts + 1):
            try:
                return await call()
            except FeishuError as exc:
                if not exc.retry or attempt == self._attempts:
                    raise
                log.info("feishu: %s; trying again", exc)
                await backoff.wait()
        raise AssertionError("unreachable")

    async def _json(self, method: str, path: str, *, body: dict[str, Any]) -> dict[str, Any]:
        answer = await self._request(method, path, body, None, None, False)
        assert isinstance(answer, dict)
        return answer

    async def _request(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None,
        params: dict[str, str] | None,
        token: str | None,
        raw: bool,
    ) -> dict[str, Any] | httpx.Response:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        try:
            response = await self._http.request(
                method, self._base + path, json=body, params=params, headers=headers
            )
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:  # not sent: safe to retry
            raise FeishuError(f"cannot reach {self._base}: {exc}", retry=True) from exc
        except httpx.HTTPError as exc:
            raise FeishuError(f"{self._base}: {type(exc).__name__}: {exc}") from exc
        is_json = response.headers.get("content-type", "").startswith("application/json")
        if response.status_code == 200 and raw and not is_json:
            return response
        answer = _json_of(response) if is_json else {}
        code = answer.get("code", 0)
        code = code if isinstance(code, int) else -1
        if response.status_code != 200 or code != 0:
            raise FeishuError(
                f"Feishu answered {response.status_code} code {code}: {answer.get('msg', '')}",
                code=code,
                status=response.status_code,
                retry=response.status_code == 429
                or response.status_code >= 500
                or code in RATE_LIMITED,
            )
        return answer


def _json_of(response: httpx.Response) -> dict[str, Any]:
    try:
        answer = response.json()
    except ValueError:
        return {"code": -1, "msg": "no JSON"}
    return answer if isinstance(answer, dict) else {"code": -1, "msg": "no JSON object"}
