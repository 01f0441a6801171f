"""Identifiers: sessions are UUIDs, turns are short random ids."""

from __future__ import annotations

import secrets
import uuid


def new_session_id() -> str:
    return str(uuid.uuid4())


def new_turn_id() -> str:
    return "turn_" + secrets.token_hex(8)
