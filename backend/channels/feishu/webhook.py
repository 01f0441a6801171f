"""Feishu's HTTP event subscription, checked: the body `{"encrypt": ...}` decrypted with the
app's Encrypt Key (AES-256-CBC, key sha256(Encrypt Key), the IV the first 16 bytes: the SDK's
`AESCipher`), the signature `X-Lark-Signature` = sha256(timestamp + nonce + Encrypt Key +
body) checked, and the Verification Token in the event compared.

The SDK checks no time: here a request more than `MAX_SKEW_S` off is stale, and the channel
remembers each signature (in the database every process shares) so that the same request
delivered again is refused too (Feishu's own retries are signed afresh).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Callable
from typing import Any

from lark_oapi.core.utils.decryptor import AESCipher

from backend.channels.base import WebhookCall
from backend.channels.platform_body import RefusedUpdate, read_body

MAX_SKEW_S = 60 * 60
TIMESTAMP = "x-lark-request-timestamp"
NONCE = "x-lark-request-nonce"
SIGNATURE = "x-lark-signature"


def signature(timestamp: str, nonce: str, encrypt_key: str, body: bytes) -> str:
    material = (timestamp + nonce + encrypt_key).encode() + body
    return hashlib.sha256(material).hexdigest()


class EventSignatures:
    """One bot's check of the events Feishu posts it."""

    def __init__(
        self, encrypt_key: str, verification_token: str, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._key = encrypt_key
        self._token = verification_token
        self._cipher = AESCipher(encrypt_key)
        self._clock = clock

    def problem(self, call: WebhookCall) -> str | None:
        """Why the request is not Feishu's, signed within the hour; None when it is."""
        timestamp = call.headers.get(TIMESTAMP, "")
        if not timestamp.isdigit():
            return "the timestamp header is missing or not a number"
        if abs(self._clock() - int(timestamp)) > MAX_SKEW_S:
            return "the timestamp is more than an hour off"
        expected = signature(timestamp, call.headers.get(NONCE, ""), self._key, call.body)
        if not hmac.compare_digest(call.headers.get(SIGNATURE, "").encode(), expected.encode()):
            return "wrong or missing signature"
        return None

    def token_matches(self, token: str) -> bool:
        return hmac.compare_digest(token.encode(), self._token.encode())

    def decrypted(self, body: bytes) -> bytes:
        """The event inside `body`; RefusedUpdate when it is not one encrypted with our key."""
        outer = read_body(body)
        encrypted = outer.get("encrypt")
        if not isinstance(encrypted, str):
            raise RefusedUpdate("the body is not encrypted (no encrypt field)")
        try:
            plain: str = self._cipher.decrypt_str(encrypted)
            return plain.encode()
        except (ValueError, UnicodeDecodeError) as exc:
            raise RefusedUpdate(f"the body does not decrypt: {exc}") from exc


def proof(call: WebhookCall) -> str:
    """What makes one request Feishu signed unlike any other."""
    return call.headers.get(SIGNATURE, "")


def challenge_of(payload: dict[str, Any]) -> str | None:
    """The challenge of the URL check Feishu makes when the address is saved."""
    if payload.get("type") != "url_verification":
        return None
    value = payload.get("challenge")
    return value if isinstance(value, str) else json.dumps(value)
