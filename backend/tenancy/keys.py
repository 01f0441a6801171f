"""API keys: shown once, stored as a prefix and a SHA-256 hash, checked in constant time.

A key reads `tly_<prefix>_<secret>`: the prefix finds the row, the hash of the whole key must
match. Keys carry 256 random bits, so a plain hash is as strong as a slow one here.

A key stops working at once: a request after the revocation is a 401 (the same as for a key
that never existed), after its tenant was disabled a 403 `tenant_disabled` (only the key's
holder can learn it), and a turn in flight is ended by `wait_until_revoked`, which re-reads the
key row periodically (several processes share the database) and at once when this process
revoked a key or disabled a tenant.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from backend.errors import TallyError, TenantDisabled, Unauthorized
from backend.storage.tenants import ApiKeyRecord, ApiKeyRepository

log = logging.getLogger(__name__)

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
    key_id: str | None = None  # None: the operator's key, or anyone with auth.mode none
    key_prefix: str | None = None

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
    """Turns an `Authorization` header into a Principal, or raises Unauthorized: every
    failure (missing, malformed, unknown, revoked) says the same thing. A valid key of a
    disabled tenant raises TenantDisabled."""

    def __init__(self, keys: ApiKeyRepository, *, admin_key: str | None) -> None:
        self._keys = keys
        self._admin_hash = hash_key(admin_key) if admin_key else None
        self._touched: dict[str, datetime] = {}
        self._revoked = asyncio.Event()  # replaced by a fresh one each time it is set

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
                return Principal(record.tenant_id, scope, record.id, record.prefix)
        for record in await self._keys.disabled_by_prefix(match.group(1)):
            if hmac.compare_digest(record.hash, digest):  # only its holder learns this
                raise TenantDisabled(_disabled(record.tenant_id))
        raise Unauthorized(UNAUTHORIZED)

    async def refusal(self, principal: Principal) -> TallyError | None:
        """Why the principal's key no longer works (revoked: Unauthorized; its tenant
        disabled: TenantDisabled), or None while it does. The operator's key, which has no
        row, always works."""
        if principal.key_id is None or principal.key_prefix is None:
            return None
        candidates = await self._keys.active_by_prefix(principal.key_prefix)
        if any(record.id == principal.key_id for record in candidates):
            return None
        disabled = await self._keys.disabled_by_prefix(principal.key_prefix)
        if any(record.id == principal.key_id for record in disabled):
            return TenantDisabled(_disabled(principal.tenant_id))
        return Unauthorized(UNAUTHORIZED)

    def notice_revocation(self) -> None:
        """A key was revoked or a tenant disabled in this process: turns re-check now."""
        revoked, self._revoked = self._revoked, asyncio.Event()
        revoked.set()

    async def wait_until_revoked(self, principal: Principal, *, every_s: float) -> TallyError:
        """Once the principal's key no longer authenticates, why (`refusal`); checked every
        `every_s` seconds and on each `notice_revocation`; never for a key without a row."""
        if principal.key_id is None:
            await asyncio.Event().wait()
        while True:
            revoked = self._revoked
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(revoked.wait(), every_s)
            try:
                refusal = await self.refusal(principal)
            except Exception:  # the database is busy or away: the next check tries again
                log.warning("could not re-check an API key", exc_info=True)
            else:
                if refusal is not None:
                    return refusal

    async def _touch(self, key_id: str) -> None:
        # last_used_at at minute resolution: a write per request would cost more than auth.
        now = datetime.now(UTC)
        if now - self._touched.get(key_id, datetime.min.replace(tzinfo=UTC)) >= TOUCH_EVERY:
            self._touched[key_id] = now
            await self._keys.touch(key_id=key_id, at=now)


def _disabled(tenant_id: str) -> str:
    return (
        f"tenant {tenant_id!r} is disabled: its keys work again once an operator enables it"
        f" (`tally tenants enable {tenant_id}`, or PATCH /api/admin/tenants/{tenant_id}"
        ' {"disabled": false})'
    )


def _bearer(authorization: str | None) -> str:
    scheme, _, key = (authorization or "").partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key or not key.isascii() or len(key) > 200:
        raise Unauthorized(UNAUTHORIZED)
    return key
