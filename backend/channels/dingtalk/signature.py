"""The signature DingTalk puts on an HTTP callback: `sign` = base64(HMAC-SHA256(app secret,
f"{timestamp}\\n{app secret}")), `timestamp` in milliseconds. It covers the time, not the body,
so a callback is also refused when it is more than an hour off, or when its signature already
came with another message (a replay with a new body); the message id itself is deduplicated
persistently by the bot's inbox."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Callable

MAX_SKEW_MS = 60 * 60 * 1000


def sign(timestamp: str, secret: str) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}\n{secret}".encode(), hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


class CallbackSignatures:
    """One robot's check of callback signatures, remembering those it accepted for an hour."""

    def __init__(self, secret: str, *, clock: Callable[[], float] = time.time) -> None:
        self._secret = secret
        self._clock = clock
        self._seen: dict[str, tuple[int, str]] = {}  # sign -> (timestamp ms, message id)

    def problem(self, timestamp: str, signature: str) -> str | None:
        """Why the callback is refused, or None when DingTalk signed it within the hour."""
        if not timestamp.isdigit():
            return "the timestamp header is missing or not a number"
        now_ms = int(self._clock() * 1000)
        if abs(now_ms - int(timestamp)) > MAX_SKEW_MS:
            return "the timestamp is more than an hour off"
        if not hmac.compare_digest(signature.encode(), sign(timestamp, self._secret).encode()):
            return "wrong or missing sign"
        return None

    def is_replay(self, signature: str, message_id: str) -> bool:
        """Whether the signature was accepted before with another message (the same message
        again is a redelivery: the inbox answers it once)."""
        seen = self._seen.get(signature)
        return seen is not None and seen[1] != message_id

    def accepted(self, timestamp: str, signature: str, message_id: str) -> None:
        """Remember a kept callback's signature (until it is too old to be accepted anyway)."""
        now_ms = int(self._clock() * 1000)
        self._seen = {s: v for s, v in self._seen.items() if now_ms - v[0] <= MAX_SKEW_MS}
        self._seen[signature] = (int(timestamp), message_id)
