"""A Discord bot's settings (`kind: discord`): the bot token through an environment variable,
who may talk to it, when it answers in a server's channels, and the addresses of Discord's
REST API and gateway (tests point them at a fake on 127.0.0.1)."""

from __future__ import annotations

import os
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from backend.settings.base import EnvName, Strict

DISCORD_API = "https://discord.com/api/v10"
DISCORD_GATEWAY = "wss://gateway.discord.gg/"


class DiscordSettings(Strict):
    """A Discord bot: Tally holds its gateway connection (no public address needed) and
    replies over the REST API. Discord has no webhook that delivers messages to a bot."""

    IDENTITY: ClassVar[str] = "bot token"

    kind: Literal["discord"]
    token_env: EnvName  # the bot's token from the Developer Portal (Bot > Reset Token)
    mode: Literal["gateway"] = "gateway"
    allow_from: list[str] = Field(default_factory=list)  # user ids (snowflakes); ["*"]: anyone
    group_policy: Literal["mention", "all"] = "mention"  # in a server's channels
    # The privileged "Message Content Intent" (Developer Portal > Bot): without it Discord
    # sends a server message's text only when the bot is mentioned in it.
    message_content_intent: bool = True
    api_base_url: str = DISCORD_API  # the REST API with its version, without a trailing slash
    gateway_url: str = DISCORD_GATEWAY

    @model_validator(mode="after")
    def _urls_are_urls(self) -> DiscordSettings:
        if not self.api_base_url.startswith(("https://", "http://")):
            raise ValueError(f"api_base_url is an https:// address ({DISCORD_API} by default)")
        if not self.gateway_url.startswith(("wss://", "ws://")):
            raise ValueError(f"gateway_url is a wss:// address ({DISCORD_GATEWAY} by default)")
        return self

    def token(self) -> str | None:
        return os.environ.get(self.token_env)

    def identity(self) -> str | None:
        """Two bots on one token would split (and resume) one gateway session between them."""
        return self.token()

    def problems(self) -> list[str]:
        return [] if self.token() else [f"token_env: {self.token_env} is not set"]

    def where_to_look(self) -> str:
        return f"check {self.token_env} and api_base_url ({self.api_base_url})"
