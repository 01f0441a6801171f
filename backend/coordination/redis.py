"""Several processes, through Redis (`coordination.redis_url`).

A turn's cancel finds its owner wherever the request lands: each process names itself (a random
id) and keeps, per session it runs turns of, its id in a Redis set; a cancel is published on
the channel of each id in the set. A process that died hears nothing: PUBLISH reaches no
subscriber, and its id is taken out of the set. The requests-per-minute windows are the `limits`
library's moving windows in Redis, exact across processes. Streaming turns' events are kept in
Redis streams (`redis_journal`). A turn waiting for approval of a tool call has a key saying so;
a decision is published to every process, and the one whose turn waits applies it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from typing import Any, Literal

import redis.asyncio as aioredis
from limits.aio.storage import RedisStorage, Storage
from redis.exceptions import RedisError

from backend.coordination.base import CancelHere, CoordinationUnavailable, DecideHere
from backend.coordination.journal import TurnJournal
from backend.coordination.redis_journal import RedisTurnJournal
from backend.domain.decisions import ToolDecision
from backend.domain.ids import approval_ref

log = logging.getLogger(__name__)

TIMEOUT_S = 5.0
TURN_SET_TTL_S = 24 * 3600  # a crashed process's entries go by themselves
LISTEN_RETRY_S = 1.0


class RedisCoordinator:
    kind: Literal["redis"] = "redis"

    def __init__(self, url: str, *, prefix: str = "tally", password: str | None = None) -> None:
        self.process_id = uuid.uuid4().hex
        self._prefix = prefix
        options: dict[str, float | str] = {
            "socket_timeout": TIMEOUT_S,
            "socket_connect_timeout": TIMEOUT_S,
        }
        if password is not None:
            options["password"] = password
        self._redis = aioredis.from_url(url, decode_responses=True, **options)
        self._storage = RedisStorage(  # the same options, for the limiter's own connections
            f"async+{url}",
            implementation="redispy",
            key_prefix=f"{prefix}:rate",
            # Its errors arrive as limits' StorageError, so callers never import redis.
            wrap_exceptions=True,
            **options,
        )
        self._journal = RedisTurnJournal(self._redis, prefix)
        self._listener: asyncio.Task[None] | None = None
        # This process's turns per session; one lock so that set entries are added and taken
        # out in the order turns start and end (a Redis call each, and only at 0 ↔ 1).
        self._turns: dict[str, int] = {}
        self._turns_lock = asyncio.Lock()

    @property
    def rate_storage(self) -> Storage:
        return self._storage

    @property
    def journal(self) -> TurnJournal:
        return self._journal

    async def open(self, cancel_here: CancelHere, decide_here: DecideHere) -> None:
        self._listener = asyncio.create_task(
            self._listen(cancel_here, decide_here), name="coordination"
        )

    async def turn_started(self, tenant_id: str, session_id: str) -> None:
        key = self._turns_key(tenant_id, session_id)
        async with self._turns_lock:
            self._turns[key] = self._turns.get(key, 0) + 1
            if self._turns[key] > 1:
                return
            try:
                async with self._redis.pipeline(transaction=True) as pipe:
                    pipe.sadd(key, self.process_id)
                    pipe.expire(key, TURN_SET_TTL_S)
                    await pipe.execute()
            except RedisError as exc:  # the turn runs on; only a cancel from elsewhere misses it
                log.warning("coordination: cannot record a running turn: %s", exc)

    async def turn_ended(self, tenant_id: str, session_id: str) -> None:
        key = self._turns_key(tenant_id, session_id)
        async with self._turns_lock:
            if key not in self._turns:  # its start was cut short (the server is stopping)
                return
            self._turns[key] -= 1
            if self._turns[key] > 0:
                return
            del self._turns[key]
            try:
                await self._redis.srem(key, self.process_id)
            except RedisError as exc:
                log.warning("coordination: cannot record a turn's end: %s", exc)

    async def cancel_elsewhere(self, tenant_id: str, session_id: str) -> bool:
        key = self._turns_key(tenant_id, session_id)
        message = json.dumps({"tenant": tenant_id, "session": session_id})
        try:
            owners = {str(owner) for owner in await self._redis.smembers(key)}
            reached = False
            for owner in owners - {self.process_id}:
                if await self._redis.publish(self._channel(owner), message):
                    reached = True
                else:  # nobody listens: the process is gone
                    await self._redis.srem(key, owner)
        except RedisError as exc:
            raise CoordinationUnavailable(f"Redis cannot be reached to cancel: {exc}") from exc
        return reached

    async def approval_waiting(
        self, tenant_id: str, session_id: str, turn_id: str, tool_call_id: str, *, waiting: bool
    ) -> None:
        key = self._waiting_key(tenant_id, turn_id, approval_ref(tool_call_id))
        try:
            if waiting:
                await self._redis.set(key, session_id, ex=TURN_SET_TTL_S)
            else:
                await self._redis.delete(key)
        except RedisError as exc:  # the turn waits on; only a decision sent elsewhere misses it
            log.warning("coordination: cannot record a call waiting for approval: %s", exc)

    async def decide_elsewhere(self, decision: ToolDecision) -> bool:
        """The decision claims the call's key (one decision wins), then every process hears
        it and the one whose turn waits applies it."""
        tenant_id, turn_id, call = decision.tenant_id, decision.turn_id, decision.tool_call_id
        message = json.dumps(
            {"tenant": tenant_id, "turn": turn_id, "call": call, "approved": decision.approved}
        )
        refs = {approval_ref(call), call}  # named by its id, or by its ref
        try:
            for ref in refs:
                key = self._waiting_key(tenant_id, turn_id, ref)
                waiting_in = await self._redis.get(key)
                if waiting_in is None or decision.session_id not in (None, waiting_in):
                    continue
                if await self._redis.delete(key):  # claimed: no other decision takes it
                    await self._redis.publish(self._approvals_channel(), message)
                    return True
        except RedisError as exc:
            raise CoordinationUnavailable(f"Redis cannot be reached to decide: {exc}") from exc
        return False

    async def problem(self) -> str | None:
        try:
            await self._redis.ping()
        except RedisError as exc:
            return f"Redis: {exc}"
        return None

    async def aclose(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            await asyncio.gather(self._listener, return_exceptions=True)
        await self._redis.aclose()
        # `limits` (5.x) offers no close: its client is the bridge's `storage`. Left open, its
        # sockets are closed by the garbage collector, with a ResourceWarning, after the app.
        limiter_client = getattr(getattr(self._storage, "bridge", None), "storage", None)
        if limiter_client is not None:
            await limiter_client.aclose()

    async def _listen(self, cancel_here: CancelHere, decide_here: DecideHere) -> None:
        """Cancels sent to this process, and decisions sent to every process, for as long as
        it runs (Redis lost: subscribed again)."""
        cancels, approvals = self._channel(self.process_id), self._approvals_channel()
        while True:
            pubsub = self._redis.pubsub()
            try:
                await pubsub.subscribe(cancels, approvals)
                while True:
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                    if message is not None:
                        _hear(message, approvals, cancel_here, decide_here)
            except RedisError as exc:
                log.warning("coordination: not hearing cancels (%s); retrying", exc)
                await asyncio.sleep(LISTEN_RETRY_S)
            finally:
                await pubsub.aclose()

    def _turns_key(self, tenant_id: str, session_id: str) -> str:
        return f"{self._prefix}:turns:{tenant_id}:{session_id}"

    def _channel(self, process_id: str) -> str:
        return f"{self._prefix}:cancel:{process_id}"

    def _approvals_channel(self) -> str:
        return f"{self._prefix}:approvals"

    def _waiting_key(self, tenant_id: str, turn_id: str, call_ref: str) -> str:
        return f"{self._prefix}:approval:{tenant_id}:{turn_id}:{call_ref}"


def _hear(
    message: dict[str, Any], approvals: str, cancel_here: CancelHere, decide_here: DecideHere
) -> None:
    """One message from another process; a bad one is logged, and the listening goes on."""
    try:
        asked = json.loads(message["data"])
        if message["channel"] == approvals:  # the key was claimed: apply it, in any session
            decide_here(
                ToolDecision(asked["tenant"], asked["turn"], asked["call"], asked["approved"])
            )
        else:
            cancel_here(asked["tenant"], asked["session"])
    except Exception:
        log.exception("coordination: a message from another process was not understood")
