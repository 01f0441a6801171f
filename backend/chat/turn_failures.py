"""A failed turn's outcome, kept on its user message until the turn is answered: the page, the
API and the terminal show it after a reload, and the key kept with it resumes the turn (the
page's Retry sends it as `Idempotency-Key`, so no second user message is stored)."""

from __future__ import annotations

import logging

from backend.domain.messages import StoredMessage, TurnFailure
from backend.errors import TallyError
from backend.storage.faults import as_storage_fault
from backend.storage.messages import MessageRepository

log = logging.getLogger(__name__)


async def keep_failure(
    messages: MessageRepository, tenant_id: str, user_message: StoredMessage, error: TallyError
) -> None:
    """Record how the turn of `user_message` failed. A database that cannot take the record
    (it may be why the turn failed) leaves it unrecorded: the client is told all the same."""
    try:
        await messages.record_failure(
            tenant_id=tenant_id,
            message_id=user_message.id,
            failure=TurnFailure(error.code, error.message),
            resume_key=f"resume-{user_message.turn_id}",
        )
    except Exception as exc:
        fault = as_storage_fault(exc)
        if fault is None:
            raise
        log.warning("a failed turn's outcome was not kept: %s", fault.message)


async def forget_failure(
    messages: MessageRepository, tenant_id: str, user_message: StoredMessage
) -> None:
    """The turn was answered after all (resumed): its message shows no failure any more."""
    if user_message.failure is not None:
        await messages.clear_failure(tenant_id=tenant_id, message_id=user_message.id)
