"""A Feishu (or Lark) bot: a self-built app's bot, receiving over the SDK's long connection
(Tally connects out; no public address) or as encrypted, signed HTTP event subscriptions
posted to `/channels/<tenant>/<bot>`. Secrets only through `*_env` keys."""

from __future__ import annotations

import os
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from backend.settings.base import EnvName, Strict

DOMAINS = {"feishu.cn": "https://open.feishu.cn", "larksuite.com": "https://open.larksuite.com"}


class FeishuSettings(Strict):
    IDENTITY: ClassVar[str] = "app id"

    kind: Literal["feishu"]
    app_id: str = Field(min_length=1, max_length=100)  # cli_...: not a secret
    app_secret_env: EnvName  # the app's App Secret: gets tenant access tokens
    encrypt_key_env: EnvName | None = None  # Encrypt Key: decrypts and signs HTTP events
    verification_token_env: EnvName | None = None  # Verification Token: in every HTTP event
    mode: Literal["websocket", "webhook"] = "websocket"
    domain: Literal["feishu.cn", "larksuite.com"] = "feishu.cn"  # Feishu (China) or Lark
    # The OpenAPI's origin when not the domain's (a self-hosted gateway, a test's fake).
    base_url: str | None = None
    allow_from: list[str] = Field(default_factory=list)  # open ids or user ids; ["*"]: anyone
    group_policy: Literal["mention", "all"] = "mention"

    @model_validator(mode="after")
    def _complete(self) -> FeishuSettings:
        if self.mode == "webhook" and not (self.encrypt_key_env and self.verification_token_env):
            raise ValueError(
                "webhook mode needs encrypt_key_env and verification_token_env (events are "
                "refused unless encrypted and signed)"
            )
        if self.base_url is not None and not self.base_url.startswith(("https://", "http://")):
            raise ValueError("base_url is an https:// origin (the domain's OpenAPI by default)")
        return self

    def api_base(self) -> str:
        return (self.base_url or DOMAINS[self.domain]).rstrip("/")

    def app_secret(self) -> str | None:
        return os.environ.get(self.app_secret_env)

    def encrypt_key(self) -> str | None:
        return os.environ.get(self.encrypt_key_env) if self.encrypt_key_env else None

    def verification_token(self) -> str | None:
        return os.environ.get(self.verification_token_env) if self.verification_token_env else None

    def identity(self) -> str | None:
        """Two bots of one app would split its events between them."""
        return self.app_id

    def problems(self) -> list[str]:
        keys = [("app_secret_env", self.app_secret_env)]
        if self.mode == "webhook":
            keys += [
                ("encrypt_key_env", self.encrypt_key_env or ""),
                ("verification_token_env", self.verification_token_env or ""),
            ]
        return [f"{key}: {name} is not set" for key, name in keys if not os.environ.get(name)]

    def where_to_look(self) -> str:
        return f"check app_id {self.app_id}, {self.app_secret_env} and {self.api_base()}"
