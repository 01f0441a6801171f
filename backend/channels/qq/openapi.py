"""QQ's HTTP API for one bot, with our own `httpx` client over the documented routes: the
SDK's client sends every passive reply through its own limiter and retry policy, where a
reply here must be counted by the channel (`turns.py`) and its `msg_seq` claimed in the
database before it is sent, so that a restart continues the sequence instead of repeating it.

An access token (`POST {token_base_url}/app/getAppAccessToken`) is cached until a minute
before it expires; one QQ refuses (401) is got again, once. Rate limits (HTTP 429), 5xx
answers and connections that could not be made are retried with bounded backoff; a call that
timed out after it was sent is not, since it may have been delivered.
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
from backend.settings.channels_qq import QQSettings

log = logging.getLogger(__name__)

TOKEN_EARLY_S = 60  # refresh a token this long before QQ says it expires
MAX_ATTEMPTS = 5
RETRY_MAX_S = 30.0  # between tries of one call: a passive reply's window is minutes
RETRY_AFTER_MAX_S = 60.0  # a Retry-After longer than this is not waited for in one call
TIMEOUT = httpx.Timeout(15.0, connect=10.0)
MAX_PICTURE_BYTES = 20 * 1024 * 1024
# Where QQ keeps the pictures users send (`multimedia.nt.qq.com.cn`, `gchat.qpic.cn`...): a
# picture's URL comes in the event, and no other host is ever called.
QQ_MEDIA_DOMAINS = ("qq.com", "qq.com.cn", "qpic.cn")

T = TypeVar("T")


class QQError(Exception):
    """QQ refused a call, or could not be reached."""

    def __init__(
        self,
        message: str,
        *,
        code: int = 0,
        status: int = 0,
        retry: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.status = status
        self.retry = retry  # worth trying again: a rate limit, QQ's own trouble
        self.retry_after = retry_after


class QQApi:
    def __init__(
        self,
        settings: QQSettings,
        *,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        attempts: int = MAX_ATTEMPTS,
    ) -> None:
        self._settings = settings
        self._attempts = attempts
        self._base = settings.api_base_url.rstrip("/")
        self._token_url = settings.token_base_url.rstrip("/") + "/app/getAppAccessToken"
        self._http = httpx.AsyncClient(timeout=TIMEOUT)
        self._sleep = sleep
        self._clock = clock
        self._token = AccessToken(self._fetch_token, early_s=TOKEN_EARLY_S, clock=clock)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def access_token(self) -> str:
        return await self._token.get()

    async def _fetch_token(self) -> tuple[str, float]:
        body = {"appId": self._settings.app_id, "clientSecret": self._settings.app_secret()}
        answer = await self._retried(lambda: self._request("POST", self._token_url, body))
        token, lifetime = answer.get("access_token"), answer.get("expires_in")
        if isinstance(lifetime, str) and lifetime.isdigit():  # QQ sends it as a string
            lifetime = int(lifetime)
        if not isinstance(token, str) or not token or not isinstance(lifetime, int):
            raise QQError(f"QQ answered no access token: {sorted(answer)}")
        return token, lifetime

    async def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """An API call with the bot's access token (`Authorization: QQBot <token>`)."""

        async def once() -> Any:
            token = await self.access_token()  # a refused app secret is said as it is
            try:
                return await self._authorized(token, method, path, body)
            except QQError as exc:
                if exc.status != 401:
                    raise
                self._token.forget()  # revoked or expired early: a fresh one, once
                return await self._authorized(await self.access_token(), method, path, body)

        return await self._retried(once)

    async def send(self, *, group: bool, openid: str, body: dict[str, Any]) -> Any:
        """A message to a group (`group_openid`) or a person (`openid`)."""
        where = "groups" if group else "users"
        return await self.call("POST", f"/v2/{where}/{openid}/messages", body)

    async def me(self) -> dict[str, Any]:
        answer = await self.call("GET", "/users/@me")
        return answer if isinstance(answer, dict) else {}

    async def gateway_url(self) -> str:
        answer = await self.call("GET", "/gateway")
        url = answer.get("url") if isinstance(answer, dict) else None
        if not isinstance(url, str) or not url.startswith(("wss://", "ws://")):
            raise QQError(f"QQ answered no gateway URL: {answer}")
        return url

    def is_media_host(self, url: str) -> bool:
        parts, base = urlsplit(url), urlsplit(self._base)
        if (parts.scheme, parts.netloc) == (base.scheme, base.netloc):
            return True
        host = parts.hostname or ""
        on_qq = any(host == d or host.endswith("." + d) for d in QQ_MEDIA_DOMAINS)
        return parts.scheme == "https" and on_qq and not parts.port

    async def download(self, url: str) -> bytes:
        """A picture a user sent, by the URL in their message (no token: QQ's media URLs
        carry their own)."""
        url = url if "://" in url else "https://" + url.removeprefix("//")
        if not self.is_media_host(url):
            raise QQError(f"a picture on {urlsplit(url).netloc}, not a QQ host, is not fetched")

        async def fetch() -> bytes:
            host = urlsplit(url).netloc
            try:
                response = await self._http.get(url)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                raise QQError(f"cannot reach {host}: {exc}", retry=True) from exc
            except httpx.HTTPError as exc:
                raise QQError(f"{host}: {type(exc).__name__}: {exc}") from exc
            if response.status_code != 200:
                raise _refusal(response)
            if len(response.content) > MAX_PICTURE_BYTES:
                raise QQError(f"a picture of more than {MAX_PICTURE_BYTES} bytes")
            return response.content

        return await self._retried(fetch)

    async def _authorized(
        self, token: str, method: str, path: str, body: dict[str, Any] | None
    ) -> Any:
        headers = {"Authorization": f"QQBot {token}"}
        return await self._request(method, self._base + path, body, headers)

    async def _retried(self, call: Callable[[], Awaitable[T]]) -> T:
        backoff = Backoff(sleep=self._sleep, most=RETRY_MAX_S)
        for attempt in range(1, self._attempts + 1):
            try:
                return await call()
            except QQError as exc:
                if not exc.retry or attempt == self._attempts:
                    raise
                log.info("qq: %s; trying again", exc)
                if exc.retry_after is not None:
                    await self._sleep(min(exc.retry_after, RETRY_AFTER_MAX_S))
                else:
                    await backoff.wait()
        raise AssertionError("unreachable")

    async def _request(
        self,
        method: str,
        url: str,
        body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        host = urlsplit(url).netloc
        try:
            response = await self._http.request(method, url, json=body, headers=headers)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:  # not sent: safe to retry
            raise QQError(f"cannot reach {host}: {exc}", retry=True) from exc
        except httpx.HTTPError as exc:
            raise QQError(f"{host}: {type(exc).__name__}: {exc}") from exc
        if response.status_code >= 300:
            raise _refusal(response)
        if not response.content:
            return {}
        try:
            return response.json()
        except ValueError as exc:
            raise QQError(f"{host} answered no JSON") from exc


def _refusal(response: httpx.Response) -> QQError:
    try:
        body = response.json()
    except ValueError:
        body = {}
    body = body if isinstance(body, dict) else {}
    raw_code = body.get("code")
    code = raw_code if isinstance(raw_code, int) else 0
    retry_after = response.headers.get("retry-after", "")
    status = response.status_code
    return QQError(
        f"QQ answered {status} {code}: {body.get('message', '')}".strip(),
        code=code,
        status=status,
        retry=status == 429 or status >= 500,
        retry_after=float(retry_after) if retry_after.isdigit() else None,
    )
