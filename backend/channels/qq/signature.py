"""The ed25519 signatures of QQ's webhook calls, with the SDK's own functions (qq-botpy-sdk's
`webhook_verify`): the key pair's seed is the AppSecret repeated to 32 bytes.

- Callback validation (op 13): QQ sends `{plain_token, event_ts}` when the callback URL is set;
  the bot proves it holds the secret by answering `{plain_token, signature}`, the signature of
  `event_ts + plain_token`.
- Events (op 0): `X-Signature-Ed25519` (hex) signs `X-Signature-Timestamp + body`. A call more
  than `MAX_SKEW_S` off is refused; so is a signature already used (the channel claims each in
  the database, which every process shares and a restart does not forget).

The SDK's webhook transport is not used whole: it answers `{"op":12}` before the event is
handled and remembers signatures in one process's memory only.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from botpy.protocol.transport.webhook_verify import (
    sign_validation_response,
    verify_webhook_signature,
)

MAX_SKEW_S = 300  # the SDK's signature_max_age
PLAIN_TOKEN = re.compile(r"[A-Za-z0-9_+./=-]{1,256}")  # the SDK's bounds on the challenge
SIGNED_BY_VALIDATION = re.compile(rb"[A-Za-z0-9_+./=-]{1,300}")  # token and timestamp digits
EVENT_TS = re.compile(r"[0-9]{1,16}")


class WebhookSignatures:
    """One bot's check of QQ's signatures, and its answer to the callback validation."""

    def __init__(self, secret: str, *, clock: Callable[[], float] = time.time) -> None:
        self._secret = secret
        self._clock = clock

    def problem(self, timestamp: str, signature: str, body: bytes) -> str | None:
        """Why the call is refused, or None when QQ signed it within the window."""
        if not self._secret:
            return "the bot has no app secret"
        if not EVENT_TS.fullmatch(timestamp):
            return "the X-Signature-Timestamp header is missing or not a number"
        if abs(self._clock() - int(timestamp)) > MAX_SKEW_S:
            return f"the timestamp is more than {MAX_SKEW_S} s off"
        if not verify_webhook_signature(
            body=body, timestamp=timestamp, signature=signature, bot_secret=self._secret
        ):
            return "wrong or missing X-Signature-Ed25519"
        return None

    def validation(self, data: Any) -> dict[str, object] | None:
        """The answer to op 13's `d`, or None when it is no fresh, well-formed challenge (we
        sign only challenges of the platform's shape and time, never arbitrary text)."""
        if not isinstance(data, dict) or not self._secret:
            return None
        token, event_ts = data.get("plain_token"), data.get("event_ts")
        if not isinstance(token, str) or not PLAIN_TOKEN.fullmatch(token):
            return None
        if not isinstance(event_ts, str) or not EVENT_TS.fullmatch(event_ts):
            return None
        if abs(self._clock() - int(event_ts)) > MAX_SKEW_S:
            return None
        answer = sign_validation_response(
            plain_token=token, event_ts=event_ts, bot_secret=self._secret
        )
        return dict(answer)


def could_be_a_validation_answer(body: bytes) -> bool:
    """Whether a call's body could be the end of a message our op 13 answer signed."""
    return SIGNED_BY_VALIDATION.fullmatch(body) is not None
