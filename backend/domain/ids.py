"""Identifiers: sessions are UUIDs, turns are short random ids, and a tool call waiting for
approval has a short ref."""

from __future__ import annotations

import hashlib
import secrets
import uuid


def new_session_id() -> str:
    return str(uuid.uuid4())


def new_turn_id() -> str:
    return "turn_" + secrets.token_hex(8)


def approval_ref(tool_call_id: str) -> str:
    """A short stand-in for a tool call's id, for a chat button's data (Telegram allows 64
    bytes, and vendors' ids can be long); a decision may name the call by either."""
    return hashlib.sha256(tool_call_id.encode()).hexdigest()[:12]
