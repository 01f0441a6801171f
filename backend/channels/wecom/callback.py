"""A WeCom callback checked and opened: the URL verification (`GET ?msg_signature&timestamp&
nonce&echostr`, answered with the decrypted echostr) and each message (`POST` of
`<xml><Encrypt>…</Encrypt></xml>` with the same query).

A call is WeCom's when its `msg_signature` is right for the app's Token (checked in constant
time) and its timestamp is within `MAX_SKEW_S`; anything else is `Forged` (401, nothing kept).
A call WeCom signed whose message does not decrypt for this corp or read is a `RefusedUpdate`
(recorded, and answered so WeCom stops delivering it). The channel also remembers each
signature with its message (`claim_proof`), as DingTalk's callbacks do.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from backend.channels.platform_body import RefusedUpdate
from backend.channels.wecom.crypto import CallbackCipher, CryptoError, signature_matches
from backend.channels.wecom.xmlbody import MAX_BYTES, read_xml

MAX_SKEW_S = 300  # WeCom calls back at once and retries within seconds
# The envelope carries the message in base64 (4/3 of its size): room for a message as large
# as one that would be refused for its size, so that it is refused (and recorded) as such.
ENVELOPE_BYTES = MAX_BYTES * 2


class Forged(Exception):
    """A call that is not WeCom's (or too old to tell)."""


class Callbacks:
    """One app's callbacks: its Token, EncodingAESKey and corp id."""

    def __init__(
        self, token: str, aes_key: str, corp_id: str, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._token = token
        self._cipher = CallbackCipher(aes_key, corp_id)
        self._clock = clock

    def echo(self, query: Mapping[str, str]) -> str:
        """The URL verification's answer: `echostr` decrypted; Forged when it is not WeCom's."""
        echostr = query.get("echostr", "")
        self._check(query, echostr)
        try:
            return self._cipher.decrypt(echostr).decode("utf-8")
        except (CryptoError, UnicodeDecodeError) as exc:
            raise Forged(f"echostr does not decrypt: {exc}") from exc

    def open(self, query: Mapping[str, str], body: bytes) -> bytes:
        """The message a callback carries (its XML, to be read); Forged or RefusedUpdate."""
        try:
            outer = read_xml(body, limit=ENVELOPE_BYTES)
        except RefusedUpdate as exc:  # without its Encrypt, no signature can be checked
            raise Forged(exc.reason) from exc
        encrypted = outer.get("Encrypt")
        if not isinstance(encrypted, str) or not encrypted:
            raise Forged("the body has no Encrypt")
        self._check(query, encrypted)
        try:
            return self._cipher.decrypt(encrypted)
        except CryptoError as exc:
            raise RefusedUpdate(str(exc)) from exc

    def _check(self, query: Mapping[str, str], encrypted: str) -> None:
        timestamp, nonce = query.get("timestamp", ""), query.get("nonce", "")
        if not (timestamp.isdigit() and len(timestamp) <= 12):
            raise Forged("the timestamp is missing or not a number")
        if abs(self._clock() - int(timestamp)) > MAX_SKEW_S:
            raise Forged(f"the timestamp is more than {MAX_SKEW_S} s off")
        offered = query.get("msg_signature", "")
        if not signature_matches(self._token, timestamp, nonce, encrypted, offered):
            raise Forged("wrong or missing msg_signature")
