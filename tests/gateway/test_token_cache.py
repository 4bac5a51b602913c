"""The verifier remembers a token it verified, by its exact text, only until the token's `exp`."""

from __future__ import annotations

import time
import uuid

import pytest

from spotter_shared.auth import TokenError, TokenVerifier, issue_dev_token
from spotter_shared.settings import AuthSettings


def test_a_verified_token_is_remembered_until_it_expires() -> None:
    settings = AuthSettings(spotter_jwt_secret="s" * 32)
    verifier = TokenVerifier(settings)
    user = str(uuid.uuid4())
    token = issue_dev_token(settings, user, ttl_seconds=2)
    assert verifier.subject(token) == user
    assert verifier.subject(token) == user  # remembered
    time.sleep(max(0.0, int(time.time()) + 2 - time.time() + 0.05) + 1)
    with pytest.raises(TokenError):
        verifier.subject(token)
    with pytest.raises(TokenError):
        verifier.subject(token)  # not remembered as good either


def test_only_a_token_that_passed_is_remembered() -> None:
    settings = AuthSettings(spotter_jwt_secret="s" * 32)
    verifier = TokenVerifier(settings)
    token = issue_dev_token(settings, str(uuid.uuid4()))
    forged = issue_dev_token(AuthSettings(spotter_jwt_secret="x" * 32), str(uuid.uuid4()))
    for _ in range(2):
        with pytest.raises(TokenError):
            verifier.subject(forged)
    assert verifier.subject(token)
    verifier.VERIFIED_MAX = 1
    other = issue_dev_token(settings, str(uuid.uuid4()), ttl_seconds=60)
    assert verifier.subject(other) and verifier.subject(token)  # the oldest made room
