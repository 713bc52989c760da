"""Encryption at rest: AES-256-GCM with QUEEN_ENCRYPTION_KEY (64 hex characters).

A stored encrypted payload is nonce (12 bytes) || ciphertext || tag. A malformed or
wrong-length key disables encryption with one warning; it never fails a boot or a push.
"""

from __future__ import annotations

import logging
import os

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .frames import Fields, Undecodable

log = logging.getLogger("queen_trio.encryption")

NONCE_BYTES = 12


class PayloadCipher:
    def __init__(self, key_hex: str | None) -> None:
        self._aead: AESGCM | None = None
        self.problem: str | None = None
        if not key_hex:
            self.problem = "QUEEN_ENCRYPTION_KEY is not set"
            return
        try:
            key = bytes.fromhex(key_hex)
        except ValueError:
            key = b""
        if len(key) != 32 or len(key_hex) != 64:
            self.problem = "QUEEN_ENCRYPTION_KEY must be 64 hexadecimal characters (32 bytes)"
            log.warning(
                "encryption at rest disabled: %s; queues with encryptionEnabled store plaintext",
                self.problem,
            )
            return
        self._aead = AESGCM(key)

    @property
    def enabled(self) -> bool:
        return self._aead is not None

    def encrypt(self, plaintext: bytes) -> bytes:
        assert self._aead is not None
        nonce = os.urandom(NONCE_BYTES)
        return nonce + self._aead.encrypt(nonce, plaintext, None)

    def read_payload(self, fields: Fields | Undecodable) -> tuple[bytes | None, str | None]:
        """A stored frame's payload, decrypted; or None and why it cannot be read."""
        if isinstance(fields, Undecodable):
            return None, fields.reason
        if not fields[4]:
            return fields[5], None
        try:
            return self.decrypt(fields[5]), None
        except Exception:  # a changed or missing key (InvalidTag, or ValueError naming why)
            return None, "its payload does not decrypt with this broker's key"

    def decrypt(self, stored: bytes) -> bytes:
        if self._aead is None:
            raise ValueError(f"cannot decrypt a stored payload: {self.problem}")
        return self._aead.decrypt(stored[:NONCE_BYTES], stored[NONCE_BYTES:], None)
