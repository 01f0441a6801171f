"""Chat-channel bots in `config.yaml`: `channels:` for the `default` tenant and
`tenants.<id>.channels:` for others, each a mapping of bot name to settings with a `kind`.
Secrets only through `*_env` keys."""

from __future__ import annotations

import os
import re
from typing import Literal

from pydantic import Field, model_validator

from backend.settings_base import EnvName, Strict

BOT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
TELEGRAM_API = "https://api.telegram.org"


class TelegramBotSettings(Strict):
    """A Telegram bot: long polling (no public address needed) or a webhook Telegram calls."""

    kind: Literal["telegram"]
    token_env: EnvName  # the bot token from @BotFather
    mode: Literal["polling", "webhook"] = "polling"
    webhook_url: str | None = None  # the public https address Telegram posts updates to
    webhook_secret_env: EnvName | None = None  # Telegram sends it in a header; we check it
    allow_from: list[str] = Field(default_factory=list)  # user ids or usernames; ["*"]: anyone
    group_policy: Literal["mention", "all"] = "mention"
    api_base_url: str = TELEGRAM_API  # or a self-hosted Bot API server
    poll_timeout_s: int = Field(30, ge=1, le=50)

    @model_validator(mode="after")
    def _webhook_is_complete(self) -> TelegramBotSettings:
        if self.mode == "webhook" and not (self.webhook_url and self.webhook_secret_env):
            raise ValueError("webhook mode needs webhook_url and webhook_secret_env")
        if self.webhook_url and not self.webhook_url.startswith(("https://", "http://")):
            raise ValueError("webhook_url is the public https:// address Telegram calls")
        return self

    def token(self) -> str | None:
        return os.environ.get(self.token_env)

    def webhook_secret(self) -> str | None:
        return os.environ.get(self.webhook_secret_env) if self.webhook_secret_env else None


ChannelSettings = TelegramBotSettings  # DingTalk joins as a union discriminated by `kind`


def bot_name_problems(channels: dict[str, ChannelSettings], prefix: str) -> list[str]:
    return [
        f"{prefix}{name}: a bot name is a lowercase slug (letters, digits, - and _)"
        for name in channels
        if not BOT_NAME.fullmatch(name)
    ]
