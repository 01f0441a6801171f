"""A Slack bot in `config.yaml` (`kind: slack`): Socket Mode (Tally connects out with an
app-level token; no public address needed) or the Events API (Slack posts signed events to
`/channels/<tenant>/<bot>`). Secrets only through `*_env` keys."""

from __future__ import annotations

import os
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from backend.settings.base import EnvName, Strict

SLACK_API = "https://slack.com/api/"


class SlackSettings(Strict):
    IDENTITY: ClassVar[str] = "bot token"

    kind: Literal["slack"]
    bot_token_env: EnvName  # xoxb-...: the Web API (auth.test, chat.postMessage, files)
    app_token_env: EnvName | None = None  # xapp-... with connections:write: Socket Mode
    signing_secret_env: EnvName | None = None  # the app's Signing Secret: the Events API
    mode: Literal["socket", "events"] = "socket"
    allow_from: list[str] = Field(default_factory=list)  # Slack user ids (U...); ["*"]: anyone
    group_policy: Literal["mention", "all"] = "mention"
    # The Web API's address (slack_sdk's base_url); tests point it at a fake Slack.
    api_base_url: str = SLACK_API

    @model_validator(mode="after")
    def _mode_is_complete(self) -> SlackSettings:
        if self.mode == "socket" and not self.app_token_env:
            raise ValueError("socket mode needs app_token_env (an xapp- app-level token)")
        if self.mode == "events" and not self.signing_secret_env:
            raise ValueError("events mode needs signing_secret_env (the app's Signing Secret)")
        if not self.api_base_url.startswith(("https://", "http://")):
            raise ValueError("api_base_url is an https:// address (https://slack.com/api/)")
        return self

    def bot_token(self) -> str | None:
        return os.environ.get(self.bot_token_env)

    def app_token(self) -> str | None:
        return os.environ.get(self.app_token_env) if self.app_token_env else None

    def signing_secret(self) -> str | None:
        return os.environ.get(self.signing_secret_env) if self.signing_secret_env else None

    def base_url(self) -> str:
        return self.api_base_url.rstrip("/") + "/"

    def identity(self) -> str | None:
        """Two bots on one app token would split its Socket Mode events between them."""
        return self.bot_token()

    def problems(self) -> list[str]:
        wanted = [("bot_token_env", self.bot_token_env)]
        if self.mode == "socket" and self.app_token_env:
            wanted.append(("app_token_env", self.app_token_env))
        if self.mode == "events" and self.signing_secret_env:
            wanted.append(("signing_secret_env", self.signing_secret_env))
        return [f"{key}: {name} is not set" for key, name in wanted if not os.environ.get(name)]

    def where_to_look(self) -> str:
        return f"check {self.bot_token_env} and api_base_url ({self.api_base_url})"
