"""Which identities are one person, and the one-time codes that say so.

An identity is a user key of one tenant (`telegram:<id>`, `dingtalk:<staff>`, a tenant's own
key for one of its users). Linking two makes them one person; a person's identities share the
memory of `person:<person_id>`. Codes are stored as hashes: one redeemed is marked used in the
same transaction that links, so a code links once, whatever races it.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.errors import Conflict, NotFound, TallyError
from backend.storage.database import Database
from backend.storage.tables import identity_links, link_codes, memory_moves
from backend.storage.timestamps import aware

PERSON_SCOPE_PREFIX = "person:"
MOVE_LEASE = timedelta(minutes=5)  # a move's claim: a crashed process's move is retried after
CODE_KEPT = timedelta(days=1)  # an expired code is still told apart from an unknown one
CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I/L: read aloud or retyped
CODE_LENGTH = 8  # 31**8 ≈ 8.5e11 codes, against at most minutes of guessing


class LinkCodeInvalid(NotFound):
    code = "link_code_invalid"

    def __init__(self) -> None:
        super().__init__("this link code does not exist: ask for a new one")


class LinkCodeUsed(Conflict):
    code = "link_code_used"

    def __init__(self) -> None:
        super().__init__("this link code was used already: ask for a new one")


class LinkCodeExpired(TallyError):
    code = "link_code_expired"
    status = 410

    def __init__(self) -> None:
        super().__init__("this link code has expired: ask for a new one")


class LinkCodeOwn(Conflict):
    code = "link_code_own"

    def __init__(self) -> None:
        super().__init__("this code was asked for here: send it from your other account")


class LinkRaced(Conflict):
    code = "link_conflict"

    def __init__(self) -> None:
        super().__init__("this account was being linked elsewhere at the same moment: try again")


class NotLinked(NotFound):
    code = "not_linked"

    def __init__(self) -> None:
        super().__init__("this identity is not linked to another")


@dataclass(frozen=True, slots=True)
class LinkCode:
    code: str  # shown once, as XXXX-XXXX
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class MemoryMove:
    """Memory of a scope that became a person's, to be moved into the person's scope."""

    id: int
    tenant_id: str
    from_scope: str
    into_scope: str


@dataclass(frozen=True, slots=True)
class Person:
    id: str
    identities: list[str]  # every identity of the person (user keys)


@dataclass(frozen=True, slots=True)
class Identity:
    user_key: str
    person_id: str
    linked_at: datetime


def person_scope(person_id: str) -> str:
    return PERSON_SCOPE_PREFIX + person_id


def normalise_code(text: str) -> str:
    """A code as typed: any case, with or without its dash or spaces."""
    return "".join(ch for ch in text.upper() if ch not in " -")


def _hash(code: str) -> str:
    return hashlib.sha256(normalise_code(code).encode()).hexdigest()


class IdentityRepository:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def person_of(self, *, tenant_id: str, user_key: str) -> str | None:
        async with self._db.read() as conn:
            found = await conn.scalar(
                select(identity_links.c.person_id).where(
                    identity_links.c.tenant_id == tenant_id,
                    identity_links.c.user_key == user_key,
                )
            )
        return None if found is None else str(found)

    async def person(self, *, tenant_id: str, user_key: str) -> Person | None:
        """The person `user_key` is, with all their identities; None when it is not linked."""
        mine = identity_links.c.tenant_id == tenant_id
        async with self._db.read() as conn:
            person = await conn.scalar(
                select(identity_links.c.person_id).where(
                    mine, identity_links.c.user_key == user_key
                )
            )
            if person is None:
                return None
            keys = await conn.scalars(
                select(identity_links.c.user_key)
                .where(mine, identity_links.c.person_id == person)
                .order_by(identity_links.c.linked_at, identity_links.c.user_key)
            )
            return Person(str(person), list(keys))

    async def issue_code(
        self, *, tenant_id: str, user_key: str, ttl: timedelta, now: datetime
    ) -> LinkCode:
        raw = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
        expires_at = now + ttl
        async with self._db.write() as conn:
            # Codes long past their time go as new ones come (an expired one is still told
            # "expired" for a day).
            await conn.execute(
                delete(link_codes).where(
                    link_codes.c.tenant_id == tenant_id, link_codes.c.expires_at < now - CODE_KEPT
                )
            )
            await conn.execute(
                link_codes.insert().values(
                    code_hash=_hash(raw),
                    tenant_id=tenant_id,
                    user_key=user_key,
                    created_at=now,
                    expires_at=expires_at,
                )
            )
        return LinkCode(f"{raw[:4]}-{raw[4:]}", expires_at)

    async def redeem(self, *, tenant_id: str, user_key: str, code: str, now: datetime) -> None:
        """Link `user_key` with the identity that asked for `code`, in one transaction that
        also journals the memory moves it calls for. Two links of one identity at the same
        moment: one is LinkRaced, and its code stays unused."""
        try:
            await self._redeem(tenant_id, user_key, code, now)
        except IntegrityError as exc:
            raise LinkRaced() from exc

    async def _redeem(self, tenant_id: str, user_key: str, code: str, now: datetime) -> None:
        async with self._db.write() as conn:
            await self._serialize_links(conn, tenant_id)
            row = (
                await conn.execute(
                    select(link_codes).where(
                        link_codes.c.code_hash == _hash(code), link_codes.c.tenant_id == tenant_id
                    )
                )
            ).first()
            if row is None:  # also another tenant's code: its existence is not told
                raise LinkCodeInvalid()
            if row.used_at is not None:
                raise LinkCodeUsed()
            if aware(row.expires_at) <= now:
                raise LinkCodeExpired()
            if row.user_key == user_key:
                raise LinkCodeOwn()
            claimed = await conn.execute(
                update(link_codes)
                .where(link_codes.c.code_hash == row.code_hash, link_codes.c.used_at.is_(None))
                .values(used_at=now)
            )
            if claimed.rowcount != 1:
                raise LinkCodeUsed()
            person, joined = await _join(conn, tenant_id, row.user_key, user_key, now)
            for scope in joined:
                await conn.execute(
                    memory_moves.insert().values(
                        tenant_id=tenant_id,
                        from_scope=scope,
                        into_scope=person_scope(person),
                        created_at=now,
                    )
                )

    async def memory_moves(self, *, tenant_id: str | None = None) -> list[MemoryMove]:
        """The moves not done yet (a tenant's, or every tenant's), in the order journaled."""
        query = select(memory_moves).order_by(memory_moves.c.id)
        if tenant_id is not None:
            query = query.where(memory_moves.c.tenant_id == tenant_id)
        async with self._db.read() as conn:
            rows = await conn.execute(query)
            return [MemoryMove(r.id, r.tenant_id, r.from_scope, r.into_scope) for r in rows]

    async def claim_move(self, move: MemoryMove, *, now: datetime) -> bool:
        """Whether this process may run `move` now: no other one holds it."""
        free = memory_moves.c.claimed_until.is_(None) | (memory_moves.c.claimed_until < now)
        async with self._db.write() as conn:
            claimed = await conn.execute(
                update(memory_moves)
                .where(memory_moves.c.tenant_id == move.tenant_id, memory_moves.c.id == move.id)
                .where(free)
                .values(claimed_until=now + MOVE_LEASE)
            )
        return claimed.rowcount == 1

    async def release_move(self, move: MemoryMove) -> None:
        """A move that failed, free for the next try at once."""
        async with self._db.write() as conn:
            await conn.execute(
                update(memory_moves)
                .where(memory_moves.c.tenant_id == move.tenant_id, memory_moves.c.id == move.id)
                .values(claimed_until=None)
            )

    async def memory_moved(self, move: MemoryMove) -> None:
        async with self._db.write() as conn:
            await conn.execute(
                delete(memory_moves).where(
                    memory_moves.c.tenant_id == move.tenant_id, memory_moves.c.id == move.id
                )
            )

    async def unlink(self, *, tenant_id: str, user_key: str, now: datetime) -> None:
        """`user_key` is on its own again; NotLinked when it was not linked. The person's
        memory stays with the identities left; when one is left, it is no person any more and
        that memory moves back to it (journaled, as a link's)."""
        async with self._db.write() as conn:
            await self._serialize_links(conn, tenant_id)
            mine = identity_links.c.tenant_id == tenant_id
            person = await conn.scalar(
                select(identity_links.c.person_id).where(
                    mine, identity_links.c.user_key == user_key
                )
            )
            if person is None:
                raise NotLinked()
            await conn.execute(
                delete(identity_links).where(mine, identity_links.c.user_key == user_key)
            )
            left = list(
                await conn.scalars(
                    select(identity_links.c.user_key).where(
                        mine, identity_links.c.person_id == person
                    )
                )
            )
            if len(left) <= 1:  # no person any more: the one identity left takes its memory
                heir = left[0] if left else user_key
                await conn.execute(
                    delete(identity_links).where(mine, identity_links.c.user_key == heir)
                )
                await conn.execute(
                    memory_moves.insert().values(
                        tenant_id=tenant_id,
                        from_scope=person_scope(person),
                        into_scope=heir,
                        created_at=now,
                    )
                )

    async def _serialize_links(self, conn: AsyncConnection, tenant_id: str) -> None:
        """One link or unlink of a tenant at a time on PostgreSQL (SQLite writes one at a
        time anyway): two at once could read a person the other is merging away."""
        if not self._db.is_sqlite:
            await conn.execute(
                text("SELECT pg_advisory_xact_lock(hashtext(:key))"),
                {"key": f"tally-links:{tenant_id}"},
            )

    async def identities(self, *, tenant_id: str) -> list[Identity]:
        """The tenant's linked identities, each person's together."""
        async with self._db.read() as conn:
            rows = await conn.execute(
                select(identity_links)
                .where(identity_links.c.tenant_id == tenant_id)
                .order_by(
                    identity_links.c.person_id,
                    identity_links.c.linked_at,
                    identity_links.c.user_key,
                )
            )
            return [Identity(r.user_key, r.person_id, aware(r.linked_at)) for r in rows]


async def _join(
    conn: AsyncConnection, tenant_id: str, issuer: str, redeemer: str, now: datetime
) -> tuple[str, list[str]]:
    """Make `issuer` and `redeemer` one person: the issuer's when it has one, else the
    redeemer's, else a new one. Two people become one (the redeemer's joins the issuer's).
    The person, and the memory scopes that became theirs."""
    mine = identity_links.c.tenant_id == tenant_id
    rows = await conn.execute(
        select(identity_links.c.user_key, identity_links.c.person_id).where(
            mine, identity_links.c.user_key.in_([issuer, redeemer])
        )
    )
    people = {row.user_key: row.person_id for row in rows}
    person = people.get(issuer) or people.get(redeemer) or secrets.token_hex(8)
    joined: list[str] = []
    for key in (issuer, redeemer):
        if key not in people:
            await conn.execute(
                identity_links.insert().values(
                    tenant_id=tenant_id, user_key=key, person_id=person, linked_at=now
                )
            )
            joined.append(key)
        elif people[key] != person:  # the redeemer's person: every identity of it moves
            await conn.execute(
                update(identity_links)
                .where(mine, identity_links.c.person_id == people[key])
                .values(person_id=person)
            )
            joined.append(person_scope(people[key]))
    return person, joined
