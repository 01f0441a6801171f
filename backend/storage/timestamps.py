"""Timestamps as read back: SQLite hands back naive datetimes; everything stored is UTC."""

from __future__ import annotations

from datetime import UTC, datetime


def aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def aware_or_none(value: datetime | None) -> datetime | None:
    return None if value is None else aware(value)
