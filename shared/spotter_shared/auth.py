"""Bearer JWTs: HS256 with a shared secret in development, a JWKS URL in production."""

from __future__ import annotations

import time

import jwt

from .settings import AuthSettings


class TokenError(Exception):
    pass


class TokenVerifier:
    # Tokens already verified, by their exact text: (subject, expiry). A client sends the same token with
    # every request until it expires; decoding and checking its signature again each time cost a request
    # ~60 µs. Only a token that passed every check is kept, and only until its `exp`: nothing that only
    # time can change (`exp`; `nbf` and `iat` only ever become valid) is skipped.
    VERIFIED_MAX = 4096

    def __init__(self, settings: AuthSettings) -> None:
        self._settings = settings
        self._jwks = jwt.PyJWKClient(settings.spotter_jwks_url, cache_keys=True) if settings.spotter_jwks_url else None
        self._verified: dict[str, tuple[str, float]] = {}

    def subject(self, token: str) -> str:
        """Return the verified `sub` (the user id) or raise TokenError."""
        known = self._verified.get(token)
        if known is not None:
            if time.time() < known[1]:  # PyJWT: expired when exp <= now (no leeway)
                return known[0]
            del self._verified[token]
        sub, exp = self._verify(token)
        if len(self._verified) >= self.VERIFIED_MAX:
            del self._verified[next(iter(self._verified))]  # the oldest
        self._verified[token] = (sub, exp)
        return sub

    def _verify(self, token: str) -> tuple[str, float]:
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
        return sub, float(int(claims["exp"]))  # as PyJWT reads it


def issue_dev_token(settings: AuthSettings, user_id: str, ttl_seconds: int = 7 * 24 * 3600) -> str:
    now = int(time.time())
    claims = {"sub": user_id, "iat": now, "exp": now + ttl_seconds, "iss": settings.spotter_jwt_issuer}
    if settings.spotter_jwt_audience:
        claims["aud"] = settings.spotter_jwt_audience
    return jwt.encode(claims, settings.spotter_jwt_secret, algorithm="HS256")
