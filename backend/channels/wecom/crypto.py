"""WeCom's callback encryption (企业微信 "加解密方案"), with `cryptography`'s AES:

- `msg_signature` = sha1 of the sorted, joined (Token, timestamp, nonce, Encrypt); checked in
  constant time. It covers the ciphertext, so a signed callback cannot carry another body.
- Encrypt = base64(AES-256-CBC(key, IV = key[:16], PKCS#7 padded to 32-byte blocks)) of
  16 random bytes + the message's length (4 bytes, big-endian) + the message + the corp id,
  key = base64(EncodingAESKey + "="). A message for another corp is refused.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import struct

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

BLOCK = 32  # WeCom pads to 32 bytes, not AES's 16
RANDOM_BYTES = 16


class CryptoError(ValueError):
    """A callback that does not decrypt to a message for this corp."""


def signature(token: str, timestamp: str, nonce: str, encrypted: str) -> str:
    return hashlib.sha1("".join(sorted([token, timestamp, nonce, encrypted])).encode()).hexdigest()


def signature_matches(token: str, timestamp: str, nonce: str, encrypted: str, offered: str) -> bool:
    expected = signature(token, timestamp, nonce, encrypted)
    return hmac.compare_digest(expected.encode(), offered.encode("utf-8", "replace"))


class CallbackCipher:
    """One app's cipher: its EncodingAESKey and corp id."""

    def __init__(self, aes_key: str, corp_id: str) -> None:
        try:
            self._key = base64.b64decode(aes_key + "=", validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError("the EncodingAESKey is not base64") from exc
        if len(self._key) != 32:
            raise ValueError("the EncodingAESKey is not 43 characters (32 bytes)")
        self._corp_id = corp_id.encode()

    def decrypt(self, encrypted: str) -> bytes:
        """The message `encrypted` carries; CryptoError when it is not one for this corp."""
        try:
            data = base64.b64decode(encrypted, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise CryptoError("Encrypt is not base64") from exc
        if not data or len(data) % 16:
            raise CryptoError("Encrypt is not whole AES blocks")
        decryptor = self._cipher().decryptor()
        plain = decryptor.update(data) + decryptor.finalize()
        pad = plain[-1]
        if not 1 <= pad <= BLOCK or plain[-pad:] != bytes([pad]) * pad:
            raise CryptoError("Encrypt's padding is wrong")
        plain = plain[:-pad]
        if len(plain) < RANDOM_BYTES + 4:
            raise CryptoError("Encrypt is too short")
        (length,) = struct.unpack(">I", plain[RANDOM_BYTES : RANDOM_BYTES + 4])
        message = plain[RANDOM_BYTES + 4 : RANDOM_BYTES + 4 + length]
        receiver = plain[RANDOM_BYTES + 4 + length :]
        if len(message) != length:
            raise CryptoError("Encrypt's length is wrong")
        if not hmac.compare_digest(receiver, self._corp_id):
            raise CryptoError("the message is for another corp id")
        return message

    def encrypt(self, message: bytes, *, random: bytes | None = None) -> str:
        """What WeCom would send for `message` (the tests' side; also a passive reply's)."""
        plain = (random or os.urandom(RANDOM_BYTES)) + struct.pack(">I", len(message))
        plain += message + self._corp_id
        pad = BLOCK - len(plain) % BLOCK
        plain += bytes([pad]) * pad
        encryptor = self._cipher().encryptor()
        return base64.b64encode(encryptor.update(plain) + encryptor.finalize()).decode("ascii")

    def _cipher(self) -> Cipher[modes.CBC]:
        return Cipher(algorithms.AES(self._key), modes.CBC(self._key[:16]))
