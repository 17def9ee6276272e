"""Ed25519 signatures of table statements: what a center signs and what anyone verifies.

A center signs the :class:`~shared.protocol.LimitsStatement` of every table and refinement it
releases (``center_agent.gate.keys``); the next center refines only statements whose signature a
key it trusts verifies; the coordinator verifies each statement against the key the center showed
in ``/v1/info``, so a center whose statement does not verify is the one named. Pure functions:
no key storage, no I/O. Public keys and signatures travel as base64.
"""

from __future__ import annotations

import base64
import binascii

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from shared.protocol import LimitsStatement, SignedLimits


def encode_public_key(key: Ed25519PublicKey) -> str:
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode()


def decode_public_key(text: str) -> Ed25519PublicKey:
    """A public key from base64 of its 32 raw bytes (``ValueError`` naming what is wrong)."""
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("a public key must be base64 of 32 bytes") from None
    if len(raw) != 32:
        raise ValueError("a public key must be base64 of 32 bytes")
    return Ed25519PublicKey.from_public_bytes(raw)


def sign(key: Ed25519PrivateKey, statement: LimitsStatement) -> SignedLimits:
    signature = key.sign(statement.signing_bytes())
    return SignedLimits(statement=statement, signature=base64.b64encode(signature).decode())


def verifies(signed: SignedLimits, key: Ed25519PublicKey) -> bool:
    """Whether ``key`` verifies ``signed``'s signature of its statement."""
    try:
        signature = base64.b64decode(signed.signature, validate=True)
        key.verify(signature, signed.statement.signing_bytes())
    except (binascii.Error, ValueError, InvalidSignature):
        return False
    return True
