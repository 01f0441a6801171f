"""A WeCom (企业微信) bot in `config.yaml`: a self-built application (`mode: app`), which WeCom
calls back at `/channels/<tenant>/<bot>` with encrypted XML and which answers through the
`message/send` API; or an intelligent robot (`mode: robot`), which holds a long connection
to WeCom. Secrets only through `*_env` keys."""

from __future__ import annotations

import base64
import binascii
import os
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from backend.settings.base import EnvName, Strict

WECOM_API = "https://qyapi.weixin.qq.com"
WECOM_ROBOT_WS = "wss://openws.work.weixin.qq.com"
AES_KEY_CHARS = 43  # WeCom's EncodingAESKey: 32 bytes in base64 without its "="


class WeComSettings(Strict):
    """A WeCom bot: a self-built app (`app`) or an intelligent robot (`robot`)."""

    IDENTITY: ClassVar[str] = "agent or robot id"

    kind: Literal["wecom"]
    mode: Literal["app", "robot"] = "app"
    # app mode: the corp's id (我的企业 → 企业ID), the app's AgentId and Secret, and the
    # callback's Token and EncodingAESKey (接收消息 → 设置API接收).
    corp_id: str | None = None
    agent_id: int | None = Field(None, ge=0, le=2**31 - 1)
    secret_env: EnvName | None = None
    token_env: EnvName | None = None
    aes_key_env: EnvName | None = None
    # robot mode: the intelligent robot's BotID and its long connection's Secret.
    bot_id: str | None = None
    bot_secret_env: EnvName | None = None
    allow_from: list[str] = Field(default_factory=list)  # WeCom user ids; ["*"]: anyone
    group_policy: Literal["mention", "all"] = "mention"
    # app mode: replies as markdown (the WeCom client renders it) or text (WeChat shows no
    # app markdown: for corps whose people read the app in WeChat).
    markdown: bool = True
    # WeCom's API (a private deployment's, or a test's fake) and the robot's websocket.
    api_base_url: str = WECOM_API
    ws_url: str = WECOM_ROBOT_WS

    @model_validator(mode="after")
    def _complete(self) -> WeComSettings:
        if self.mode == "app":
            missing = [
                key
                for key in ("corp_id", "agent_id", "secret_env", "token_env", "aes_key_env")
                if getattr(self, key) is None
            ]
            if missing:
                raise ValueError(f"app mode needs {', '.join(missing)}")
        elif not (self.bot_id and self.bot_secret_env):
            raise ValueError("robot mode needs bot_id and bot_secret_env")
        if not self.api_base_url.startswith(("https://", "http://")):
            raise ValueError("api_base_url is an https:// address (WeCom's by default)")
        if not self.ws_url.startswith(("wss://", "ws://")):
            raise ValueError("ws_url is a wss:// address (WeCom's by default)")
        return self

    def secret(self) -> str | None:
        return self._env(self.secret_env)

    def token(self) -> str | None:
        return self._env(self.token_env)

    def aes_key(self) -> str | None:
        return self._env(self.aes_key_env)

    def bot_secret(self) -> str | None:
        return self._env(self.bot_secret_env)

    def identity(self) -> str | None:
        """Two bots of one app would answer each message twice; of one robot, split them."""
        if self.mode == "app":
            return f"{self.corp_id}/{self.agent_id}"
        return self.bot_id

    def problems(self) -> list[str]:
        names: tuple[tuple[str, str | None], ...] = (
            ("secret_env", self.secret_env),
            ("token_env", self.token_env),
            ("aes_key_env", self.aes_key_env),
        )
        if self.mode == "robot":
            names = (("bot_secret_env", self.bot_secret_env),)
        problems = [f"{key}: {name} is not set" for key, name in names if not self._env(name)]
        key = self.aes_key() if self.mode == "app" else None
        if key and not _is_aes_key(key):
            problems.append(f"aes_key_env: {self.aes_key_env} is not a 43-character EncodingAESKey")
        return problems

    def where_to_look(self) -> str:
        if self.mode == "app":
            return (
                f"check corp_id, agent_id, {self.secret_env} and api_base_url ({self.api_base_url})"
            )
        return f"check bot_id, {self.bot_secret_env} and ws_url ({self.ws_url})"

    @staticmethod
    def _env(name: str | None) -> str | None:
        return os.environ.get(name) if name else None


def _is_aes_key(key: str) -> bool:
    if len(key) != AES_KEY_CHARS:
        return False
    try:
        return len(base64.b64decode(key + "=", validate=True)) == 32
    except (binascii.Error, ValueError):
        return False
