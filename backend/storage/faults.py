"""Which errors mean "the database cannot serve now" rather than "a bug": a read-only or full
database file, a server that is unreachable, restarting or out of connections, a pool with no
free connection. Those become 503 `storage_unavailable` with `Retry-After`; the rest stay 500.
"""

from __future__ import annotations

from sqlalchemy import exc as sa

from backend.errors import StorageUnavailable

# PostgreSQL SQLSTATE classes: 08 connection exception, 53 insufficient resources (disk full,
# out of memory, too many connections), 57P operator intervention (shutdown, restart).
FAULT_SQLSTATES = ("08", "53", "57P")


def as_storage_fault(error: BaseException) -> StorageUnavailable | None:
    """The 503 to answer for `error`, or None when it is not a storage fault."""
    if isinstance(error, StorageUnavailable):
        return error
    if not _is_fault(error):
        return None
    return StorageUnavailable(f"the database cannot serve now ({_reason(error)}); retry soon")


def _is_fault(error: BaseException) -> bool:
    if isinstance(error, sa.TimeoutError | sa.OperationalError | sa.InterfaceError):
        return True  # pool exhausted; SQLite read-only, full, I/O error; connection closed
    if isinstance(error, sa.DBAPIError) and error.connection_invalidated:
        return True
    if isinstance(error, OSError):  # refused, reset, no space left
        return True
    return any(str(getattr(e, "sqlstate", "")).startswith(FAULT_SQLSTATES) for e in _chain(error))


def _chain(error: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen and len(seen) < 8:
        seen.append(current)
        orig = getattr(current, "orig", None)
        current = orig if isinstance(orig, BaseException) else current.__cause__
    return seen


def _reason(error: BaseException) -> str:
    """The driver's own words, first line only (never a query's parameters)."""
    innermost = _chain(error)[-1]
    words = str(innermost).strip().splitlines()
    return words[0][:200] if words and words[0] else type(innermost).__name__
