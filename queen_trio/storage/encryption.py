"""Encryption at rest: AES-256-GCM with QUEEN_ENCRYPTION_KEY (64 hex characters).

A stored encrypted payload is nonce (12 bytes) || ciphertext || tag. A malformed or
wrong-length key disables encryption with one warning; it never fails a boot or a push.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import attrs
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .frames import Fields, Undecodable

log = logging.getLogger("queen_trio.encryption")

NONCE_BYTES = 12


KEY_VARIABLE = "QUEEN_ENCRYPTION_KEY"
KEY_CHARACTERS = 64
HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


@attrs.frozen
class EncryptionStatus:
    """Whether payloads of encrypted queues are encrypted, and if not, why: no key (`reason`
    "no key: ..."), or a key that cannot be used (`malformed`, reason "bad key: ...")."""

    enabled: bool
    reason: str | None = None
    malformed: bool = False

    def to_wire(self) -> dict[str, Any]:
        return {"enabled": self.enabled, "reason": self.reason}


def key_problem(key_hex: str) -> str | None:
    """What is wrong with a key, never showing it; None when it is usable."""
    if len(key_hex) != KEY_CHARACTERS:
        return (f"{KEY_VARIABLE} has {len(key_hex)} characters; it must be {KEY_CHARACTERS} "
                "hexadecimal characters (32 bytes)")
    if not set(key_hex) <= HEX_DIGITS:
        return f"{KEY_VARIABLE} holds characters that are not hexadecimal digits"
    return None


class PayloadCipher:
    def __init__(self, key_hex: str | None) -> None:
        self._aead: AESGCM | None = None
        self.problem: str | None = None
        if not key_hex:
            self.problem = f"{KEY_VARIABLE} is not set"
            self.status = EncryptionStatus(False, f"no key: {self.problem}")
            return
        self.problem = key_problem(key_hex)
        if self.problem is not None:
            # Not a boot failure, not a push failure (the seed): said once, at start, and
            # shown by /health, /metrics, the dashboard and the queues it concerns.
            self.status = EncryptionStatus(False, f"bad key: {self.problem}", malformed=True)
            log.warning("encryption at rest disabled: bad key: %s; queues with "
                        "encryptionEnabled store plaintext", self.problem)
            return
        self._aead = AESGCM(bytes.fromhex(key_hex))
        self.status = EncryptionStatus(True)

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
