"""Chat-channel bots in `config.yaml`: `channels:` for the `default` tenant and
`tenants.<id>.channels:` for others, each a mapping of bot name to settings with a `kind`
(a platform of `backend/channels/registry.py`). Secrets only through `*_env` keys."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Annotated, ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import Field, model_validator

from backend.domain.tenants import DEFAULT_TENANT, TENANT_ID
from backend.settings.base import EnvName, Strict
from backend.settings.channels_discord import DiscordSettings
from backend.settings.channels_feishu import FeishuSettings
from backend.settings.channels_qq import QQSettings
from backend.settings.channels_slack import SlackSettings
from backend.settings.channels_wecom import WeComSettings

BOT_NAME = TENANT_ID  # a slug too: it names a key path (`channels.<name>`) and a webhook URL
TELEGRAM_API = "https://api.telegram.org"
DINGTALK_API = "https://api.dingtalk.com"
WEBHOOK_SECRET = re.compile(r"[A-Za-z0-9_-]{1,256}")  # what Telegram takes as a secret token


class TelegramBotSettings(Strict):
    """A Telegram bot: long polling (no public address needed) or a webhook Telegram calls."""

    IDENTITY: ClassVar[str] = "bot token"

    kind: Literal["telegram"]
    token_env: EnvName  # the bot token from @BotFather
    mode: Literal["polling", "webhook"] = "polling"
    webhook_url: str | None = None  # the public https address Telegram posts updates to
    webhook_secret_env: EnvName | None = None  # Telegram sends it in a header; we check it
    allow_from: list[str] = Field(default_factory=list)  # user ids or usernames; ["*"]: anyone
    group_policy: Literal["mention", "all"] = "mention"
    # The Bot API's address, without /bot<token>: Tally calls <api_base_url>/bot<token>/<method>
    # (files: <api_base_url>/file/bot<token>/...); another for a self-hosted Bot API server.
    api_base_url: str = TELEGRAM_API
    poll_timeout_s: int = Field(30, ge=1, le=50)

    @model_validator(mode="after")
    def _webhook_is_complete(self) -> TelegramBotSettings:
        if self.mode == "webhook" and not (self.webhook_url and self.webhook_secret_env):
            raise ValueError("webhook mode needs webhook_url and webhook_secret_env")
        if self.webhook_url and not self.webhook_url.startswith(("https://", "http://")):
            raise ValueError("webhook_url is the public https:// address Telegram calls")
        address = urlsplit(self.api_base_url)
        if address.scheme not in ("https", "http") or address.path.startswith("/bot"):
            raise ValueError(
                "api_base_url is the Bot API's address without /bot<token> (by default "
                f"{TELEGRAM_API}; http://127.0.0.1:8081 for a local telegram-bot-api server)"
            )
        return self

    def token(self) -> str | None:
        return os.environ.get(self.token_env)

    def webhook_secret(self) -> str | None:
        return os.environ.get(self.webhook_secret_env) if self.webhook_secret_env else None

    def identity(self) -> str | None:
        """The credential no two bots may share (they would take each other's updates)."""
        return self.token()

    def problems(self) -> list[str]:
        """Why the bot could not run here, each `<key>: <reason>`."""
        if not self.token():
            return [f"token_env: {self.token_env} is not set"]
        secret = self.webhook_secret()
        if self.mode == "webhook" and not secret:
            return [f"webhook_secret_env: {self.webhook_secret_env} is not set"]
        if secret and not WEBHOOK_SECRET.fullmatch(secret):
            return [
                "webhook_secret_env: Telegram takes 1-256 characters of "
                "A-Z, a-z, 0-9, _ and - as a secret"
            ]
        return []

    def where_to_look(self) -> str:
        return f"check {self.token_env} and api_base_url ({self.api_base_url})"


class DingTalkRobotSettings(Strict):
    """A DingTalk robot of an internal app: Stream mode (Tally connects out; no public address)
    or HTTP callbacks, which DingTalk posts to `/channels/<tenant>/<bot>`."""

    IDENTITY: ClassVar[str] = "client id"

    kind: Literal["dingtalk"]
    client_id_env: EnvName  # the app's Client ID (AppKey)
    client_secret_env: EnvName  # its Client Secret (AppSecret): gets tokens, signs callbacks
    mode: Literal["stream", "callback"] = "stream"
    robot_code: str | None = None  # the robot's code; DingTalk gives an app's robot its Client ID
    allow_from: list[str] = Field(default_factory=list)  # staff or sender ids; ["*"]: anyone
    group_policy: Literal["mention", "all"] = "mention"
    openapi_base_url: str = DINGTALK_API

    @model_validator(mode="after")
    def _url_is_http(self) -> DingTalkRobotSettings:
        if not self.openapi_base_url.startswith(("https://", "http://")):
            raise ValueError("openapi_base_url is an https:// address (DingTalk's by default)")
        return self

    def client_id(self) -> str | None:
        return os.environ.get(self.client_id_env)

    def client_secret(self) -> str | None:
        return os.environ.get(self.client_secret_env)

    def robot(self) -> str:
        return self.robot_code or self.client_id() or ""

    def identity(self) -> str | None:
        """Two robots of one app in Stream mode would split its messages between them."""
        return self.client_id()

    def problems(self) -> list[str]:
        return [
            f"{key}: {name} is not set"
            for key, name in (
                ("client_id_env", self.client_id_env),
                ("client_secret_env", self.client_secret_env),
            )
            if not os.environ.get(name)
        ]

    def where_to_look(self) -> str:
        return (
            f"check {self.client_id_env}, {self.client_secret_env} "
            f"and openapi_base_url ({self.openapi_base_url})"
        )


ChannelSettings = Annotated[
    TelegramBotSettings
    | DingTalkRobotSettings
    | QQSettings
    | DiscordSettings
    | SlackSettings
    | WeComSettings
    | FeishuSettings,
    Field(discriminator="kind"),
]


def bot_name_problems(channels: dict[str, ChannelSettings], prefix: str) -> list[str]:
    return [
        f"{prefix}{name}: a bot name is a lowercase slug (letters, digits, - and _)"
        for name in channels
        if not BOT_NAME.fullmatch(name)
    ]


def bot_key_path(tenant_id: str, name: str) -> str:
    """Where config.yaml sets a bot up: `channels.<name>`, or `tenants.<id>.channels.<name>`."""
    prefix = "" if tenant_id == DEFAULT_TENANT else f"tenants.{tenant_id}."
    return f"{prefix}channels.{name}"


def check_bots(bots: Iterable[tuple[str, str, ChannelSettings]]) -> list[str]:
    """Problems with a set of (tenant, bot name, settings): a credential variable that is not
    set, or one bot's credentials configured twice (two processes would steal each other's
    updates)."""
    problems: list[str] = []
    seen: dict[str, str] = {}
    for tenant_id, name, settings in bots:
        where = bot_key_path(tenant_id, name)
        problems += [f"{where}.{problem}" for problem in settings.problems()]
        identity = settings.identity()
        if not identity:
            continue
        if identity in seen:
            problems.append(f"{where}: the same {settings.IDENTITY} as {seen[identity]}")
        seen.setdefault(identity, where)
    return problems
