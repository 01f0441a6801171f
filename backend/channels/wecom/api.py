"""WeCom's server API for one self-built app, with our own `httpx` client (wechatpy is not
maintained, synchronous, fetches tokens from a hard-coded host and retries an expired token
without end).

`GET cgi-bin/gettoken?corpid&corpsecret` gives an access token, cached until a few minutes
before it expires; one WeCom calls invalid or expired (errcode 40014, 42001, 40001) is fetched
again once, never more. Rate limits (errcode 45009, 45033), WeCom's "system busy" (-1), 5xx
answers and failed connections are retried with backoff; a call that timed out after it was
sent is not, since it may have been delivered. Every answer is `{"errcode", "errmsg", ...}`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx

from backend.channels.access_token import AccessToken
from backend.channels.backoff import Backoff, Sleep
from backend.settings.channels_wecom import WeComSettings

log = logging.getLogger(__name__)

TOKEN_EARLY_S = 300  # fetch a token this long before WeCom says it expires
MAX_ATTEMPTS = 5
RETRY_MAX_S = 30.0
TIMEOUT = httpx.Timeout(15.0, connect=10.0)
TOKEN_REFUSED = frozenset({40001, 40014, 42001})  # invalid, not valid, expired
RATE_LIMITED = frozenset({45009, 45033, -1})  # the API's frequency limits; "system busy"

T = TypeVar("T")


class WeComError(Exception):
    """WeCom refused a call, or could not be reached."""

    def __init__(self, message: str, *, errcode: int = 0, status: int = 0, retry: bool = False):
        super().__init__(message)
        self.errcode = errcode
        self.status = status
        self.retry = retry  # worth trying again: a rate limit, WeCom's own trouble

    @property
    def answered(self) -> bool:
        """WeCom answered (and refused), as opposed to not being reached."""
        return bool(self.errcode or self.status)


class WeComApi:
    def __init__(
        self,
        settings: WeComSettings,
        *,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        attempts: int = MAX_ATTEMPTS,
    ) -> None:
        self._settings = settings
        self._base = settings.api_base_url.rstrip("/") + "/cgi-bin/"
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
        params = {
            "corpid": self._settings.corp_id or "",
            "corpsecret": self._settings.secret() or "",
        }
        answer = await self._retried(lambda: self._request("GET", "gettoken", params))
        token, lifetime = answer.get("access_token"), answer.get("expires_in")
        if not isinstance(token, str) or not token or not isinstance(lifetime, int):
            raise WeComError("WeCom answered no access token")
        return token, lifetime

    async def call(
        self, method: str, path: str, *, params: dict[str, str] | None = None, body: Any = None
    ) -> dict[str, Any]:
        """An API call with the app's access token, fetched again once if WeCom refuses it."""

        async def once() -> dict[str, Any]:
            token = await self.access_token()
            try:
                return await self._request(method, path, params, body, token=token)
            except WeComError as exc:
                if exc.errcode not in TOKEN_REFUSED:
                    raise
                log.info("wecom: access token refused (%s); fetching another, once", exc.errcode)
                self._token.forget(token)
                return await self._request(
                    method, path, params, body, token=await self.access_token()
                )

        return await self._retried(once)

    async def send(self, to_user: str, message: dict[str, Any]) -> None:
        """`message` (`{"msgtype": ..., <msgtype>: {...}}`) to one person, as the app."""
        body = {"touser": to_user, "agentid": self._settings.agent_id, **message}
        answer = await self.call("POST", "message/send", body=body)
        if answer.get("invaliduser"):
            raise WeComError(f"WeCom did not deliver to {answer['invaliduser']}", errcode=81013)

    async def agent(self) -> dict[str, Any]:
        """The app as WeCom knows it (`agent/get`): its name, who may see it."""
        params = {"agentid": str(self._settings.agent_id)}
        return await self.call("GET", "agent/get", params=params)

    async def download(self, media_id: str) -> bytes:
        """A picture a person sent, by its media id (`media/get`: the file, or an error)."""

        async def once() -> bytes:
            token = await self.access_token()
            host = urlsplit(self._base).netloc
            params = {"access_token": token, "media_id": media_id}
            try:
                response = await self._http.get(self._base + "media/get", params=params)
            except httpx.HTTPError as exc:
                raise WeComError(f"cannot fetch from {host}: {exc}") from exc
            if response.status_code != 200:
                raise WeComError(f"{host} answered HTTP {response.status_code}", status=200)
            if response.headers.get("content-type", "").startswith(("application/json", "text/")):
                raise WeComError(f"WeCom media/get: {response.text[:200]}", status=200)
            return response.content

        return await self._retried(once)

    async def _retried(self, call: Callable[[], Awaitable[T]]) -> T:
        backoff = Backoff(sleep=self._sleep, most=RETRY_MAX_S)
        for attempt in range(1, self._attempts + 1):
            try:
                return await call()
            except WeComError as exc:
                if not exc.retry or attempt == self._attempts:
                    raise
                log.info("wecom: %s; trying again", exc)
                await backoff.wait()
        raise AssertionError("unreachable")

    async def _request(
        self,
        method: str,
        path: str,
        params: dict[str, str] | None = None,
        body: Any = None,
        *,
        token: str | None = None,
    ) -> dict[str, Any]:
        query = dict(params or {})
        if token is not None:
            query["access_token"] = token
        host = urlsplit(self._base).netloc
        try:
            response = await self._http.request(method, self._base + path, params=query, json=body)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:  # not sent: safe to retry
            raise WeComError(f"cannot reach {host}: {exc}", retry=True) from exc
        except httpx.HTTPError as exc:
            raise WeComError(f"{host}: {type(exc).__name__}: {exc}") from exc
        if response.status_code != 200:
            raise WeComError(
                f"{host} answered HTTP {response.status_code}",
                status=response.status_code,
                retry=response.status_code >= 500,
            )
        try:
            answer = response.json()
        except ValueError as exc:
            raise WeComError(f"{host} answered no JSON", status=200) from exc
        if not isinstance(answer, dict):
            raise WeComError(f"{host} answered no JSON object", status=200)
        errcode = answer.get("errcode", 0)
        if errcode:
            code = errcode if isinstance(errcode, int) else -2
            raise WeComError(
                f"WeCom {path}: errcode {errcode}: {str(answer.get('errmsg', ''))[:200]}",
                errcode=code,
                retry=code in RATE_LIMITED,
            )
        return answer
