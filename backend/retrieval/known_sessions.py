"""Where each session's words are said and by whom, as the archive reads last told it: what a
message stored in this process needs to join the right indexes without a query."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

KNOWN = 10_000  # sessions remembered; one forgotten is read again with its next message


@dataclass(frozen=True, slots=True)
class KnownSession:
    origin: str  # as memory lines name it (`web`, `telegram:helper:42`)
    user_key: str | None


class KnownSessions:
    def __init__(self, capacity: int = KNOWN) -> None:
        self._capacity = capacity
        self._sessions: OrderedDict[str, KnownSession] = OrderedDict()

    def meet(self, session_id: str, origin: str, user_key: str | None) -> None:
        self._sessions[session_id] = KnownSession(origin, user_key)
        self._sessions.move_to_end(session_id)
        while len(self._sessions) > self._capacity:
            self._sessions.popitem(last=False)

    def get(self, session_id: str) -> KnownSession | None:
        return self._sessions.get(session_id)
