"""DingTalk's HTTP side for one robot, with our own `httpx` client: the SDK's helpers read one
base URL per process from the environment, and make blocking calls without timeouts.

An access token is got from the app's client id and secret and cached until a few minutes
before it expires (one DingTalk calls invalid gets a fresh one, once). Rate limits (HTTP 429,
403 `QpsLimit…`, a session webhook's errcode 130101), 5xx answers and failed connections are
retried with backoff; a call that timed out after it was sent is not, since it may have been
delivered.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx

from backend.channels.access_token import AccessToken
from backend.channels.backoff import Backoff, Sleep
from backend.settings.channels import DingTalkRobotSettings

log = logging.getLogger(__name__)

TOKEN_EARLY_S = 300  # refresh a token this long before DingTalk says it expires
MAX_ATTEMPTS = 5
RETRY_MAX_S = 30.0  # between tries of one call: a reply should not wait minutes
TIMEOUT = httpx.Timeout(15.0, connect=10.0)
INVALID_TOKEN = "InvalidAuthentication"  # DingTalk answers it with HTTP 400, not 401
WEBHOOK_RATE_LIMITED = 130101  # a session webhook's "send too fast"
DINGTALK_HOSTS = frozenset({"api.dingtalk.com", "oapi.dingtalk.com"})

T = TypeVar("T")


class DingTalkError(Exception):
    """DingTalk refused a call, or could not be reached."""

    def __init__(self, message: str, *, code: str = "", status: int = 0, retry: bool = False):
        super().__init__(message)
        self.code = code
        self.status = status
        self.retry = retry  # worth trying again: a rate limit, DingTalk's own trouble


class DingTalkApi:
    def __init__(
        self,
        settings: DingTalkRobotSettings,
        *,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        attempts: int = MAX_ATTEMPTS,
    ) -> None:
        self._settings = settings
        self._attempts = attempts
        self._base = settings.openapi_base_url.rstrip("/")
        self._http = httpx.AsyncClient(timeout=TIMEOUT)
        self._sleep = sleep
        self._clock = clock
        self._token = AccessToken(self._fetch_token, early_s=TOKEN_EARLY_S, clock=clock)

    async def aclose(self) -> None:
        await self._http.aclose()

    def is_own_host(self, url: str) -> bool:
        """Whether `url` is DingTalk's (or the configured API's): a session webhook comes in the
        message's payload, and any other host is never called."""
        parts, base = urlsplit(url), urlsplit(self._base)
        if (parts.scheme, parts.netloc) == (base.scheme, base.netloc):
            return True
        return parts.scheme == "https" and parts.hostname in DINGTALK_HOSTS and not parts.port

    async def access_token(self) -> str:
        return await self._token.get()

    async def _fetch_token(self) -> tuple[str, float]:
        body = {
            "appKey": self._settings.client_id() or "",
            "appSecret": self._settings.client_secret() or "",
        }
        answer = await self._retried(lambda: self._post("/v1.0/oauth2/accessToken", body))
        token, lifetime = answer.get("accessToken"), answer.get("expireIn")
        if not isinstance(token, str) or not isinstance(lifetime, int):
            raise DingTalkError(f"DingTalk answered no access token: {answer}")
        return token, lifetime

    async def call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """An OpenAPI call with the robot's access token."""

        async def once() -> dict[str, Any]:
            try:
                return await self._post(path, body, token=await self.access_token())
            except DingTalkError as exc:
                if exc.code != INVALID_TOKEN and exc.status != 401:
                    raise
                self._token.forget()  # revoked or expired early: a fresh one, once
                return await self._post(path, body, token=await self.access_token())

        return await self._retried(once)

    async def send_markdown(self, target: Target, title: str, text: str) -> None:
        params = json.dumps({"title": title, "text": text}, ensure_ascii=False)
        body = {"robotCode": self._settings.robot(), "msgKey": "sampleMarkdown", "msgParam": params}
        if target.is_group:
            await self.call(
                "/v1.0/robot/groupMessages/send", body | {"openConversationId": target.id}
            )
        else:
            await self.call("/v1.0/robot/oToMessages/batchSend", body | {"userIds": [target.id]})

    async def post_session_webhook(self, url: str, title: str, text: str) -> None:
        """A reply through a message's session webhook (no token: the URL is the credential)."""
        if not self.is_own_host(url):
            raise DingTalkError("the session webhook is not on a DingTalk host", code="host")
        body = {"msgtype": "markdown", "markdown": {"title": title, "text": text}}

        async def once() -> None:
            answer = await self._post_url(url, body)
            errcode = answer.get("errcode", 0)
            if errcode:
                raise DingTalkError(
                    f"session webhook: {errcode} {answer.get('errmsg', '')}",
                    code=str(errcode),
                    retry=errcode == WEBHOOK_RATE_LIMITED,
                )

        await self._retried(once)

    async def download(self, download_code: str) -> bytes:
        """A picture a user sent, by the download code in their message."""
        answer = await self.call(
            "/v1.0/robot/messageFiles/download",
            {"robotCode": self._settings.robot(), "downloadCode": download_code},
        )
        url = answer.get("downloadUrl")
        if not isinstance(url, str):
            raise DingTalkError(f"DingTalk answered no download URL: {answer}")

        async def fetch() -> bytes:
            try:
                response = await self._http.get(url)
            except httpx.HTTPError as exc:
                raise DingTalkError(f"cannot fetch {urlsplit(url).netloc}: {exc}") from exc
            if response.status_code != 200:
                raise _refusal(response)
            return response.content

        return await self._retried(fetch)

    async def _retried(self, call: Callable[[], Awaitable[T]]) -> T:
        backoff = Backoff(sleep=self._sleep, most=RETRY_MAX_S)
        for attempt in range(1, self._attempts + 1):
            try:
                return await call()
            except DingTalkError as exc:
                if not exc.retry or attempt == self._attempts:
                    raise
                log.info("dingtalk: %s; trying again", exc)
                await backoff.wait()
        raise AssertionError("unreachable")

    async def _post(
        self, path: str, body: dict[str, Any], *, token: str | None = None
    ) -> dict[str, Any]:
        headers = {} if token is None else {"x-acs-dingtalk-access-token": token}
        return await self._post_url(self._base + path, body, headers)

    async def _post_url(
        self, url: str, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> dict[str, Any]:
        try:
            response = await self._http.post(url, json=body, headers=headers)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:  # not sent: safe to retry
            raise DingTalkError(f"cannot reach {urlsplit(url).netloc}: {exc}", retry=True) from exc
        except httpx.HTTPError as exc:
            raise DingTalkError(f"{urlsplit(url).netloc}: {type(exc).__name__}: {exc}") from exc
        if response.status_code != 200:
            raise _refusal(response)
        try:
            answer = response.json()
        except ValueError as exc:
            raise DingTalkError(f"{urlsplit(url).netloc} answered no JSON") from exc
        return answer if isinstance(answer, dict) else {}


@dataclass(frozen=True, slots=True)
class Target:
    """Where an OpenAPI reply goes: a group by its conversation id, a person by staff id."""

    id: str
    is_group: bool


def _refusal(response: httpx.Response) -> DingTalkError:
    try:
        body = response.json()
    except ValueError:
        body = {}
    body = body if isinstance(body, dict) else {}
    code = str(body.get("code", ""))
    limited = response.status_code == 429 or "QpsLimit" in code
    return DingTalkError(
        f"DingTalk answered {response.status_code} {code}: {body.get('message', '')}".strip(),
        code=code,
        status=response.status_code,
        retry=limited or response.status_code >= 500,
    )
