"""What this process changed in messages, told to what keeps copies of them (memory's search
indexes): a message said, messages deleted. On a database only this process writes (SQLite),
the notices are the whole story, and a copy kept in step with them needs no query; where
several processes share the database (PostgreSQL), copies read it instead."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from backend.domain.messages import StoredMessage


@dataclass(frozen=True, slots=True)
class Deleted:
    """A session's messages deleted: all of them, or those from `first_id` to `last_id`."""

    tenant_id: str
    session_id: str
    first_id: int | None = None
    last_id: int | None = None

    def covers(self, session_id: str | None, message_id: int) -> bool:
        if session_id != self.session_id:
            return False
        if self.first_id is None or self.last_id is None:
            return True
        return self.first_id <= message_id <= self.last_id


class Listener(Protocol):
    """What a keeper of copies implements; both are called once the change is committed."""

    def said(self, tenant_id: str, message: StoredMessage) -> None: ...

    def deleted(self, deleted: Deleted) -> None: ...


class MessageNotices:
    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    def listen(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def said(self, tenant_id: str, message: StoredMessage) -> None:
        for listener in self._listeners:
            listener.said(tenant_id, message)

    def deleted(self, deleted: Deleted) -> None:
        for listener in self._listeners:
            listener.deleted(deleted)
