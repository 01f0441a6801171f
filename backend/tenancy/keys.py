"""API keys: shown once, stored as a prefix and a SHA-256 hash, checked in constant time.

A key reads `tly_<prefix>_<secret>`: the prefix finds the row, the hash of the whole key must
match. Keys carry 256 random bits, so a plain hash is as strong as a slow one here.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from backend.errors import Unauthorized
from backend.storage.tenants import ApiKeyRecord, ApiKeyRepository

Scope = Literal["chat", "admin"]
KEY_FORMAT = re.compile(r"tly_([a-z0-9]{8})_[A-Za-z0-9_-]{43}")
ADMIN_TENANT = "*"
TOUCH_EVERY = timedelta(minutes=1)
UNAUTHORIZED = "a valid API key is required (Authorization: Bearer <key>)"


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: a tenant with a scope, or the operator (`tenant_id == "*"`)."""

    tenant_id: str
    scope: Scope
    key_id: str | None = None

    @property
    def is_operator(self) -> bool:
        return self.tenant_id == ADMIN_TENANT


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def new_key(*, tenant_id: str, scope: Scope, label: str) -> tuple[ApiKeyRecord, str]:
    """A fresh key and the record to store; the plain key exists only in the return value."""
    prefix = "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(8))
    key = f"tly_{prefix}_{secrets.token_urlsafe(32)}"
    record = ApiKeyRecord(
        id="key_" + secrets.token_hex(8),
        tenant_id=tenant_id,
        prefix=prefix,
        hash=hash_key(key),
        scope=scope,
        label=label,
        created_at=datetime.now(UTC),
        last_used_at=None,
        revoked_at=None,
    )
    return record, key


class Authenticator:
    """Turns an `Authorization` header into a Principal, or raises Unauthorized. Every
    failure (missing, malformed, unknown, revoked, disabled tenant) says the same thing."""

    def __init__(self, keys: ApiKeyRepository, *, admin_key: str | None) -> None:
        self._keys = keys
        self._admin_hash = hash_key(admin_key) if admin_key else None
        self._touched: dict[str, datetime] = {}

    async def authenticate(self, authorization: str | None) -> Principal:
        key = _bearer(authorization)
        if self._admin_hash is not None and hmac.compare_digest(hash_key(key), self._admin_hash):
            return Principal(ADMIN_TENANT, "admin")
        match = KEY_FORMAT.fullmatch(key)
        if match is None:
            raise Unauthorized(UNAUTHORIZED)
        digest = hash_key(key)
        for record in await self._keys.active_by_prefix(match.group(1)):
            if hmac.compare_digest(record.hash, digest):
                await self._touch(record.id)
                scope: Scope = "admin" if record.scope == "admin" else "chat"
                return Principal(record.tenant_id, scope, record.id)
        raise Unauthorized(UNAUTHORIZED)

    async def _touch(self, key_id: str) -> None:
        # last_used_at at minute resolution: a write per request would cost more than auth.
        now = datetime.now(UTC)
        if now - self._touched.get(key_id, datetime.min.replace(tzinfo=UTC)) >= TOUCH_EVERY:
            self._touched[key_id] = now
            await self._keys.touch(key_id=key_id, at=now)


def _bearer(authorization: str | None) -> str:
    scheme, _, key = (authorization or "").partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key or not key.isascii() or len(key) > 200:
        raise Unauthorized(UNAUTHORIZED)
    return key
