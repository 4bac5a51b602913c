"""Bearer JWTs: HS256 with a shared secret in development, a JWKS URL in production."""

from __future__ import annotations

import time

import jwt

from .settings import AuthSettings


class TokenError(Exception):
    pass


class TokenVerifier:
    def __init__(self, settings: AuthSettings) -> None:
        self._settings = settings
        self._jwks = jwt.PyJWKClient(settings.spotter_jwks_url, cache_keys=True) if settings.spotter_jwks_url else None

    def subject(self, token: str) -> str:
        """Return the verified `sub` (the user id) or raise TokenError."""
        options = {"require": ["sub", "exp"], "verify_aud": self._settings.spotter_jwt_audience is not None}
        try:
            if self._jwks is not None:
                key = self._jwks.get_signing_key_from_jwt(token).key
                claims = jwt.decode(token, key, algorithms=["RS256", "ES256"], audience=self._settings.spotter_jwt_audience, options=options)
            else:
                claims = jwt.decode(
                    token, self._settings.spotter_jwt_secret, algorithms=["HS256"],
                    audience=self._settings.spotter_jwt_audience, options=options,
                )
        except (jwt.PyJWTError, jwt.PyJWKClientError) as exc:
            raise TokenError(str(exc)) from exc
        sub = claims.get("sub")
        if not isinstance(sub, str) or not sub:
            raise TokenError("token has no subject")
        return sub


def issue_dev_token(settings: AuthSettings, user_id: str, ttl_seconds: int = 7 * 24 * 3600) -> str:
    now = int(time.time())
    claims = {"sub": user_id, "iat": now, "exp": now + ttl_seconds, "iss": settings.spotter_jwt_issuer}
    if settings.spotter_jwt_audience:
        claims["aud"] = settings.spotter_jwt_audience
    return jwt.encode(claims, settings.spotter_jwt_secret, algorithm="HS256")
