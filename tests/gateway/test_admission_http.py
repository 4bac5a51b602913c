"""The gateway only translates the orchestrator's admission answers into HTTP: unit tests of that
translation, no servers."""

from __future__ import annotations

import pytest

from spotter_gateway.hitl import Busy, refusal
from spotter_shared.errors import ErrorCode, RemoteError, SpotterError


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (ErrorCode.TOOL_EXECUTION_NOT_FOUND, 404),
        (ErrorCode.TOOL_ALREADY_RESOLVED, 409),
        (ErrorCode.INVALID_PICK, 422),
        (ErrorCode.UNDO_UNAVAILABLE, 422),
        (ErrorCode.INVALID_REQUEST, 400),
        (ErrorCode.NOT_FOUND, 404),
    ],
)
def test_refusals_keep_their_stable_code_and_status(code: ErrorCode, status: int) -> None:
    error = refusal(RemoteError(code, "why"))
    assert isinstance(error, SpotterError)
    assert (error.code, error.http_status, error.message) == (code, status, "why")


def test_busy_is_not_an_http_error() -> None:
    # Seed 000: a busy conversation is answered with the SSE error `conversation_busy`.
    assert isinstance(refusal(RemoteError(ErrorCode.CONVERSATION_BUSY, "busy")), Busy)


def test_unknown_codes_become_internal_and_an_unreachable_judge_is_503() -> None:
    unknown = refusal(RemoteError("something_new", "?"))
    assert isinstance(unknown, SpotterError) and unknown.code == ErrorCode.INTERNAL
    unreachable = refusal(TimeoutError())
    assert isinstance(unreachable, SpotterError)
    assert (unreachable.code, unreachable.http_status) == (ErrorCode.INTERNAL, 503)
