"""The signature Slack puts on each Events API call: `X-Slack-Signature` =
`v0=` + hex(HMAC-SHA256(signing secret, f"v0:{timestamp}:{raw body}")), with
`X-Slack-Request-Timestamp` in seconds. It covers the body, so a captured call cannot carry
another; one older than five minutes is refused (a replay), and one within them is the same
event again (its `event_id`), which the inbox answers once."""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable

from slack_sdk.signature import Clock, SignatureVerifier

MAX_SKEW_S = 5 * 60


class _Clock(Clock):
    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now

    def now(self) -> float:
        return self._now()


class EventSignatures:
    """One app's check of Events API calls: signed with its secret, within five minutes."""

    def __init__(self, secret: str, *, clock: Callable[[], float] = time.time) -> None:
        # None without a secret (a Socket Mode bot): every call is then refused.
        self._verifier = SignatureVerifier(secret, clock=_Clock(clock)) if secret else None
        self._clock = clock

    def problem(self, body: bytes, timestamp: str, signature: str) -> str | None:
        """Why the call is refused, or None when Slack signed it within five minutes."""
        if not timestamp.isdigit():
            return "X-Slack-Request-Timestamp is missing or not a number"
        if abs(self._clock() - int(timestamp)) > MAX_SKEW_S:
            return "the request is more than five minutes old (or ahead)"
        if self._verifier is None or not self._is_valid(body, timestamp, signature):
            return "wrong or missing X-Slack-Signature"
        return None

    def _is_valid(self, body: bytes, timestamp: str, signature: str) -> bool:
        assert self._verifier is not None
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:  # the SDK decodes the body first; the bytes are signed
            base = f"v0:{timestamp}:".encode() + body
            digest = hmac.new(self._verifier.signing_secret.encode(), base, hashlib.sha256)
            return hmac.compare_digest(f"v0={digest.hexdigest()}", signature)
        return self._verifier.is_valid(body, timestamp, signature)
