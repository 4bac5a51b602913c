"""Signatures for emitted thinking blocks, so edited history can be detected."""

from __future__ import annotations

import base64
import hashlib
import hmac


def sign_thinking(secret: str, thinking: str) -> str:
    mac = hmac.new(secret.encode(), thinking.encode(), hashlib.sha256).digest()
    return base64.b64encode(mac).decode()


def verify_thinking(secret: str, thinking: str, signature: object) -> bool:
    return isinstance(signature, str) and hmac.compare_digest(sign_thinking(secret, thinking), signature)
