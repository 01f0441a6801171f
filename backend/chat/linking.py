"""One person across channels: an identity asks for a one-time code, another sends it back,
and from then on both read and write one memory (`memory.scope: user`). What each identity
remembered before is moved into the person's memory when they link; an identity unlinked
starts afresh, and what was remembered stays with the person (an account given away or lost
takes nobody's memory with it).

The one entry for linking: the API, the page and every bot's `/link` and `/unlink` call it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from limits.aio.storage import Storage

from backend.chat.runtime import RuntimeRegistry
from backend.domain.clock import utc_now
from backend.errors import Conflict, TallyError
from backend.memory.linked_scopes import PersonalMemory, move_entries
from backend.storage.identities import (
    Identity,
    LinkCode,
    NotLinked,
    Person,
)
from backend.tenancy.attempts import AttemptLimiter

log = logging.getLogger(__name__)

LINK_CODE_TTL = timedelta(minutes=10)
# Codes tried per API key and per chat: a person needs one or two; a guesser, about 10**12.
LINK_ATTEMPTS = 10
LINK_ATTEMPTS_WINDOW_S = 10 * 60


class MemoryNotPersonal(Conflict):
    code = "memory_not_personal"

    def __init__(self) -> None:
        super().__init__(
            "this tenant keeps one memory for everyone (memory.scope: tenant): "
            "there is nothing to link"
        )


class Linking:
    def __init__(
        self,
        memory: PersonalMemory,
        runtimes: RuntimeRegistry,
        *,
        attempts: Storage,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self._identities = memory.identities
        self._memory = memory
        self._runtimes = runtimes
        self._clock = clock
        self._attempts = AttemptLimiter(
            attempts, what="link code", attempts=LINK_ATTEMPTS, per_s=LINK_ATTEMPTS_WINDOW_S
        )

    async def code_for(self, *, tenant_id: str, user_key: str) -> LinkCode:
        """A one-time code for `user_key`, good for LINK_CODE_TTL inside this tenant."""
        await self._require_personal(tenant_id)
        return await self._identities.issue_code(
            tenant_id=tenant_id, user_key=user_key, ttl=LINK_CODE_TTL, now=self._clock()
        )

    async def link(
        self, *, tenant_id: str, user_key: str, code: str, tried_by: Sequence[str]
    ) -> Person:
        """Make `user_key` and the identity that asked for `code` one person; the memory each
        kept on its own becomes the person's. `tried_by` names where the code comes from (the
        API key, the chat): each may try LINK_ATTEMPTS codes per window, then RateLimited."""
        await self._require_personal(tenant_id)
        await self._attempts.count(tenant_id, tried_by)
        await self._identities.redeem(
            tenant_id=tenant_id, user_key=user_key, code=code, now=self._clock()
        )
        await self.finish_moves(tenant_id=tenant_id)
        person = await self._identities.person(tenant_id=tenant_id, user_key=user_key)
        if person is None:  # unlinked at once by another request: it is on its own
            raise NotLinked()
        return person

    async def finish_moves(self, *, tenant_id: str | None = None) -> int:
        """Move the memory links made into their people's (a tenant's, or all); how many
        moves are done. One memory cannot take now stays journaled for the next try (the
        next link, or the next start): the link holds meanwhile, and nothing is lost."""
        done = 0
        stopped: set[str] = set()  # a tenant's moves run in order: after one fails, none
        for move in await self._identities.memory_moves(tenant_id=tenant_id):
            if move.tenant_id in stopped:
                continue
            if not await self._identities.claim_move(move, now=self._clock()):
                stopped.add(move.tenant_id)  # another process runs this tenant's moves now
                continue
            try:
                moved = await move_entries(
                    self._memory.store,
                    tenant_id=move.tenant_id,
                    from_scope=move.from_scope,
                    into_scope=move.into_scope,
                )
            except TallyError as exc:  # memory unavailable: the move waits for the next try
                log.warning("linking: memory not moved yet: %s", exc.message)
                await self._identities.release_move(move)
                stopped.add(move.tenant_id)
                continue
            await self._identities.memory_moved(move)
            log.info("linking moved %d memory entries", moved, extra={"tenant": move.tenant_id})
            done += 1
        return done

    async def unlink(self, *, tenant_id: str, user_key: str) -> None:
        """`user_key` on its own again (NotLinked if it was not linked); the one identity an
        unlink leaves alone gets the person's memory back."""
        await self._identities.unlink(tenant_id=tenant_id, user_key=user_key, now=self._clock())
        await self.finish_moves(tenant_id=tenant_id)

    async def linked(self, *, tenant_id: str, user_key: str) -> Person | None:
        """The person `user_key` is, with all their identities; None when not linked."""
        return await self._identities.person(tenant_id=tenant_id, user_key=user_key)

    async def all_links(self, *, tenant_id: str) -> list[Identity]:
        """Every linked identity of the tenant, each person's together (for operators)."""
        return await self._identities.identities(tenant_id=tenant_id)

    async def _require_personal(self, tenant_id: str) -> None:
        runtime = await self._runtimes.get(tenant_id)
        if runtime.settings.memory.scope != "user":
            raise MemoryNotPersonal()
