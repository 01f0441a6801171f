"""Named failpoints for crash tests: `TALLY_FAILPOINTS=overflow.summarized,...`.

At a named point the process kills itself with SIGKILL, exactly like `kill -9` between two
durable steps. Unset in production; the set is read once at start-up.
"""

from __future__ import annotations

import os
import signal


class Failpoints:
    def __init__(self, names: frozenset[str] = frozenset()) -> None:
        self._names = names

    @classmethod
    def from_environment(cls) -> Failpoints:
        raw = os.environ.get("TALLY_FAILPOINTS", "")
        return cls(frozenset(name.strip() for name in raw.split(",") if name.strip()))

    def hit(self, name: str) -> None:
        if name in self._names:
            os.kill(os.getpid(), signal.SIGKILL)
