"""Secrets kept in the database (a tool pack's API key headers), encrypted with Fernet (AES-128-CBC
and HMAC-SHA256, from `cryptography`) under SPOTTER_PACK_SECRET_KEY. Outside production a fixed
development key is used; production refuses to run without a key of its own."""

from __future__ import annotations

import base64
import hashlib
import json

from cryptography.fernet import Fernet, InvalidToken
from pydantic_settings import SettingsConfigDict

from .settings import CommonSettings

_DEV_KEY = base64.urlsafe_b64encode(hashlib.sha256(b"spotter development pack key - not a secret").digest())


class SecretSettings(CommonSettings):
    model_config = SettingsConfigDict(extra="ignore", case_sensitive=False)

    spotter_pack_secret_key: str | None = None


class SecretError(ValueError):
    pass


def cipher(settings: SecretSettings | None = None) -> Fernet:
    settings = settings or SecretSettings()
    if settings.spotter_pack_secret_key:
        try:
            return Fernet(settings.spotter_pack_secret_key.encode())
        except ValueError:
            raise SecretError("SPOTTER_PACK_SECRET_KEY is not a Fernet key (32 url-safe base64 bytes)") from None
    if settings.spotter_env == "production":
        raise SecretError("SPOTTER_PACK_SECRET_KEY must be set in production")
    return Fernet(_DEV_KEY)


def seal(values: dict[str, str], fernet: Fernet) -> str:
    return fernet.encrypt(json.dumps(values).encode()).decode()


def unseal(token: str, fernet: Fernet) -> dict[str, str]:
    try:
        return json.loads(fernet.decrypt(token.encode()))
    except InvalidToken:
        raise SecretError("the stored headers cannot be decrypted with this SPOTTER_PACK_SECRET_KEY") from None
