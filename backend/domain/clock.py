"""The wall clock, as the default of every `clock` parameter (tests and the bench pass theirs)."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now() -> datetime:
    return datetime.now(UTC)
