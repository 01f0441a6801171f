"""`server:`, `auth:` and `database:` in config.yaml: where Tally listens, who may call, and
where its data lives."""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import Field, field_validator

from backend.domain.hosts import host_name
from backend.settings.base import Strict


def _is_host_name(name: str) -> bool:
    return host_name(name[2:] if name.startswith("*.") else name) is not None


class ServerSettings(Strict):
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    max_message_chars: int = Field(100_000, ge=1)
    max_body_bytes: int = Field(8 * 1024 * 1024, ge=1024)
    max_header_bytes: int = Field(32 * 1024, ge=1024)
    max_headers: int = Field(100, ge=10)
    # None: loopback names with auth.mode none, any host with keys. "*" allows any.
    allowed_hosts: list[str] | None = None
    public_docs: bool | None = None  # None: on with auth.mode none, off with keys
    sse_keepalive_s: float = Field(15.0, gt=0, le=300)  # a comment on a quiet stream
    # How long a streaming turn whose client went away runs on for a reconnect (Last-Event-ID)
    # before it is cancelled; 0 cancels it at once.
    sse_resume_s: float = Field(10.0, ge=0, le=300)

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, hosts: list[str] | None) -> list[str] | None:
        if hosts is not None and any(h != "*" and not _is_host_name(h) for h in hosts):
            raise ValueError('host names only (example.com, *.example.com, [::1]) or "*"')
        return hosts

    @property
    def is_loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


class AuthSettings(Strict):
    mode: Literal["none", "keys"] = "none"
    revocation_check_s: float = Field(5.0, gt=0, le=3600)  # how often a turn re-checks its key


class DatabaseSettings(Strict):
    """Where data lives. The pool sizes matter on PostgreSQL only: a worker holds at most
    `pool_size + max_overflow + lock_pool_size + lock_max_overflow` connections."""

    url: str = "sqlite+aiosqlite:///data/tally.db"
    pool_size: int = Field(5, ge=1, le=1000)
    max_overflow: int = Field(10, ge=0, le=1000)
    pool_timeout_s: float = Field(30.0, gt=0, le=600)  # waited for a connection, then 503
    # Connections that hold a session's advisory lock for a whole turn, one per turn running;
    # a turn beyond them waits for one to be free (turns end), then 503.
    lock_pool_size: int = Field(10, ge=1, le=1000)
    lock_max_overflow: int = Field(20, ge=0, le=1000)
    lock_pool_timeout_s: float = Field(300.0, gt=0, le=3600)
    processes: int = Field(1, ge=1, le=1000)  # workers on this database, all hosts together

    @property
    def connections_per_process(self) -> int:
        return self.pool_size + self.max_overflow + self.lock_pool_size + self.lock_max_overflow

    @field_validator("url")
    @classmethod
    def _supported(cls, url: str) -> str:
        if not url.startswith(("sqlite+aiosqlite://", "postgresql+asyncpg://")):
            raise ValueError("use sqlite+aiosqlite:///PATH or postgresql+asyncpg://...")
        return url
