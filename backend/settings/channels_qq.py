"""A QQ bot of the QQ Bot Open Platform (official bots, API v2): its settings."""

from __future__ import annotations

import os
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from backend.settings.base import EnvName, Strict

# The platform's hosts differ between SDK versions (old botpy: api.sgroup.qq.com and
# bots.qq.com; qq-botpy-sdk 2.2: api.bot.qq.com for both), so both are settings.
QQ_API = "https://api.sgroup.qq.com"
QQ_TOKEN_API = "https://bots.qq.com"


class QQSettings(Strict):
    """A QQ bot: webhook (QQ posts signed events to `/channels/<tenant>/<bot>`) or websocket
    (Tally connects out to QQ's gateway; no public address needed). It answers group
    @-messages and private (C2C) messages."""

    IDENTITY: ClassVar[str] = "app id"

    kind: Literal["qq"]
    app_id: str = Field(min_length=1, max_length=64)  # the bot's AppID (not a secret)
    app_secret_env: EnvName  # its AppSecret: gets access tokens, signs webhook calls
    mode: Literal["webhook", "websocket"] = "webhook"
    markdown: bool = False  # QQ allows Markdown (msg_type 2) only to approved bots
    allow_from: list[str] = Field(default_factory=list)  # member/user openids; ["*"]: anyone
    # Group messages reach a bot only when they @-mention it: "mention" is all QQ allows.
    group_policy: Literal["mention"] = "mention"
    api_base_url: str = QQ_API
    token_base_url: str = QQ_TOKEN_API

    @model_validator(mode="after")
    def _urls_are_http(self) -> QQSettings:
        for key in ("api_base_url", "token_base_url"):
            if not getattr(self, key).startswith(("https://", "http://")):
                raise ValueError(f"{key} is an https:// address (QQ's by default)")
        return self

    def app_secret(self) -> str | None:
        return os.environ.get(self.app_secret_env)

    def identity(self) -> str | None:
        """Two bots of one app would split its events (and its passive-reply counts)."""
        return self.app_id

    def problems(self) -> list[str]:
        if not self.app_secret():
            return [f"app_secret_env: {self.app_secret_env} is not set"]
        return []

    def where_to_look(self) -> str:
        return (
            f"check app_id ({self.app_id}), {self.app_secret_env}, api_base_url "
            f"({self.api_base_url}) and token_base_url ({self.token_base_url})"
        )
