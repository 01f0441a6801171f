"""The one entry for every turn. The HTTP routes, `/v1`, `tally chat` and every chat channel
hand it an `InboundMessage`; it checks the input, applies the tenant's request limit, finds the
session and starts the turn, so no entry point does any of that on its own."""

from __future__ import annotations

from backend.chat.runtime import RuntimeRegistry
from backend.chat.turn import TurnRunner
from backend.chat.turn_handle import TurnHandle, TurnRequest, normalise_idempotency_key
from backend.chat.user_input import check_user_input
from backend.domain.decisions import ToolDecision
from backend.domain.inbound import InboundMessage
from backend.storage.messages import MessageRepository
from backend.storage.sessions import SessionRepository
from backend.tenancy.quotas import RequestRateLimiter


class ChatService:
    def __init__(
        self,
        *,
        sessions: SessionRepository,
        messages: MessageRepository,
        turns: TurnRunner,
        runtimes: RuntimeRegistry,
        rate_limiter: RequestRateLimiter,
        max_message_chars: int,
    ) -> None:
        self._sessions = sessions
        self._messages = messages
        self._turns = turns
        self._runtimes = runtimes
        self._rate_limiter = rate_limiter
        self._max_message_chars = max_message_chars

    async def start(self, inbound: InboundMessage) -> TurnHandle:
        """Start the turn `inbound` asks for; its handle streams the events. Refusals (bad
        input, the request limit, an unknown session named) raise before anything is stored."""
        user_input = check_user_input(inbound.user_input, max_chars=self._max_message_chars)
        runtime = await self._runtimes.get(inbound.tenant_id)
        await self.admit(inbound.tenant_id, per_minute=runtime.settings.quotas.requests_per_minute)
        key = idempotency_key(inbound)
        session_id = await self._session_id(inbound, key)
        return self._turns.start(
            TurnRequest(
                tenant_id=inbound.tenant_id,
                session_id=session_id,
                user_input=user_input,
                idempotency_key=key,
                stream=inbound.stream,
                can_approve=inbound.can_approve,
                user_key=inbound.user_key if inbound.session_id is not None else None,
                channel=inbound.channel,
            )
        )

    async def admit(self, tenant_id: str, *, per_minute: int | None) -> None:
        """Count one request against the tenant's requests-per-minute limit (RateLimited)."""
        await self._rate_limiter.admit(tenant_id, per_minute=per_minute)

    async def cancel(self, *, tenant_id: str, session_id: str) -> bool:
        return await self._turns.cancel(tenant_id=tenant_id, session_id=session_id)

    async def decide(self, decision: ToolDecision) -> bool:
        """Apply a decision on a tool call waiting in a turn; False when none waits so."""
        return await self._turns.decide(decision)

    async def _session_id(self, inbound: InboundMessage, key: str | None) -> str:
        """The session named, else the one a retried message landed in, else the platform
        chat's (by tenant, channel and exact key), else a new one. A named session that does
        not exist is the turn's 404, read under its lock."""
        if inbound.session_id is not None:
            return inbound.session_id
        if key is not None:
            earlier = await self._messages.by_idempotency_key(
                tenant_id=inbound.tenant_id, idempotency_key=key
            )
            if earlier:
                return earlier[0].session_id
        if inbound.external_key is not None:
            session = await self._sessions.find_or_create(
                tenant_id=inbound.tenant_id,
                channel=inbound.channel,
                external_key=inbound.external_key,
                user_key=inbound.user_key,
                title=inbound.title,
            )
            return session.id
        created = await self._sessions.create(
            tenant_id=inbound.tenant_id,
            channel=inbound.channel,
            title=inbound.title,
            user_key=inbound.user_key,
        )
        return created.id


def idempotency_key(inbound: InboundMessage) -> str | None:
    """The client's key, or one made of the platform's message id: the same message delivered
    twice is one turn. Channel keys are scoped by channel and chat, so they never meet."""
    if inbound.message_id is not None:
        return f"{inbound.channel}:{inbound.external_key}:{inbound.message_id}"
    return normalise_idempotency_key(inbound.idempotency_key)
