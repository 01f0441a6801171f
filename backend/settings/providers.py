"""The `providers:` rows (vendors as data) and the `model:` that runs on them, with its
fallbacks. Part of `config.yaml`'s settings; `backend.settings` re-exports them."""

from __future__ import annotations

import os
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, ValidationInfo, field_validator

from backend.settings.base import EnvName, Strict

OPENAI_HOST = "api.openai.com"  # where `prompt_cache_key` is known to be accepted


class ProviderSettings(Strict):
    """One vendor endpoint. Vendors are rows like this one, not classes."""

    kind: Literal["openai_compatible", "anthropic", "scripted"]
    base_url: str | None = None
    api_key_env: EnvName | None = None
    timeout_s: float = Field(60.0, gt=0)
    connect_timeout_s: float = Field(10.0, gt=0)
    max_retries: int = Field(2, ge=0, le=10)
    max_retry_wait_s: float = Field(30.0, ge=0)
    replies: list[str] = Field(default_factory=list)  # scripted only: replies to cycle through
    # openai_compatible only: send a tool-calling step's reasoning back as `reasoning_content`
    # within the tool loop. Off by default because OpenAI and DeepSeek's older reasoner reject
    # the field; turn it on for vendors that require it (DeepSeek thinking mode, Kimi thinking).
    reasoning_in_tool_loop: bool = False
    # openai_compatible only: name each session to the vendor's prompt cache with
    # `prompt_cache_key`, so its turns reach the machine holding their prefix. Null: on for
    # OpenAI itself (api.openai.com), off for other vendors, some of which refuse unknown fields.
    prompt_cache_key: bool | None = None

    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) if self.api_key_env else None

    def sends_prompt_cache_key(self, base_url: str) -> bool:
        if self.prompt_cache_key is not None:
            return self.prompt_cache_key
        return urlsplit(base_url).hostname == OPENAI_HOST

    @field_validator("reasoning_in_tool_loop")
    @classmethod
    def _openai_compatible_only(cls, is_on: bool, info: ValidationInfo) -> bool:
        if is_on and info.data.get("kind", "openai_compatible") != "openai_compatible":
            raise ValueError(
                "for kind openai_compatible only (the anthropic kind always sends thinking back"
                " within a tool loop)"
            )
        return is_on

    @field_validator("prompt_cache_key")
    @classmethod
    def _openai_only(cls, is_on: bool | None, info: ValidationInfo) -> bool | None:
        if is_on and info.data.get("kind", "openai_compatible") != "openai_compatible":
            raise ValueError(
                "for kind openai_compatible only (the anthropic kind marks its cache breakpoints"
                " in the request itself)"
            )
        return is_on


class ModelSettings(Strict):
    provider: str
    name: str
    context_window: int = Field(128_000, ge=256)
    max_output_tokens: int = Field(4096, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    supports_vision: bool = True  # false: images are kept in storage but not sent
    fallbacks: list[ModelRef] = Field(default_factory=list)
    # Anthropic extended thinking, in tokens of reasoning per call (they count toward
    # max_output_tokens); null: off. With it on, temperature is not sent (the API refuses both).
    thinking_budget_tokens: int | None = None

    @field_validator("thinking_budget_tokens")
    @classmethod
    def _thinking_budget_fits(cls, budget: int | None, info: ValidationInfo) -> int | None:
        if budget is None:
            return None
        if budget < 1024:
            raise ValueError("at least 1024 tokens (Anthropic's smallest thinking budget)")
        max_output_tokens = info.data.get("max_output_tokens")
        if isinstance(max_output_tokens, int) and budget >= max_output_tokens:
            raise ValueError(
                f"must be below max_output_tokens ({max_output_tokens}): thinking counts"
                " toward the reply's maximum"
            )
        return budget


class ModelRef(Strict):
    provider: str
    name: str
