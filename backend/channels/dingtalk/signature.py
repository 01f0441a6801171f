"""The signature DingTalk puts on an HTTP callback: `sign` = base64(HMAC-SHA256(app secret,
f"{timestamp}\\n{app secret}")), `timestamp` in milliseconds. It covers the time, not the body,
so a callback is also refused when it is more than an hour off, or when its signature already
came with another message (a replay with a new body): the channel keeps each signature with
its message in the database (`ChannelUpdateRepository.claim_proof`), which every worker
process shares, and which a restart does not forget."""

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
    """One robot's check of callback signatures: DingTalk's, and within the hour."""

    def __init__(self, secret: str, *, clock: Callable[[], float] = time.time) -> None:
        self._secret = secret
        self._clock = clock

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
