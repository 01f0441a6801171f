"""`coordination:` in config.yaml: what several Tally processes share besides the database."""

from __future__ import annotations

import os

from pydantic import Field, model_validator

from backend.settings.base import EnvName, Strict


class CoordinationSettings(Strict):
    """What several Tally processes share besides the database (docs/operations.md: Deployment)."""

    redis_url: str | None = None  # redis://host:6379/0; required for several workers or hosts
    redis_password_env: EnvName | None = None  # the password, never in the URL
    key_prefix: str = Field("tally", pattern=r"^[A-Za-z0-9_.:-]{1,64}$")  # to share a Redis
    # How long a chat update a dead process had in hand waits before another answers it.
    lease_s: float = Field(30.0, ge=1, le=600)

    @model_validator(mode="after")
    def _url_is_redis(self) -> CoordinationSettings:
        url = self.redis_url
        if url is not None and not url.startswith(("redis://", "rediss://")):
            raise ValueError("redis_url is a redis:// (or rediss://) URL")
        if url is not None and "@" in url.split("/")[2]:
            raise ValueError("keep the password out of redis_url: name it in redis_password_env")
        return self

    def redis_password(self) -> str | None:
        return os.environ.get(self.redis_password_env) if self.redis_password_env else None
