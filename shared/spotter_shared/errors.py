"""Stable error codes (seed 000's list plus ours) and the exception that carries them."""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    AGENT_DISABLED = "agent_disabled"
    AGENT_BUDGET_EXCEEDED = "agent_budget_exceeded"
    RATE_LIMITED = "rate_limited"
    REPLAY_INTEGRITY_VIOLATION = "replay_integrity_violation"
    TOOL_EXECUTION_NOT_FOUND = "tool_execution_not_found"
    TOOL_ALREADY_RESOLVED = "tool_already_resolved"
    INVALID_PICK = "invalid_pick"
    ABORTED = "aborted"
    PROVIDER_INVALID_REQUEST = "provider_invalid_request"
    PROVIDER_UNAUTHORIZED = "provider_unauthorized"
    PROVIDER_OVERLOADED = "provider_overloaded"
    PROVIDER_RATE_LIMITED = "provider_rate_limited"
    PROVIDER_UNAVAILABLE = "provider_unavailable"
    INTERNAL = "internal"
    # Spotter additions (SPEC decision 14); `unauthorized` answers a missing or bad bearer token.
    CONVERSATION_BUSY = "conversation_busy"
    NOT_FOUND = "not_found"
    FORBIDDEN = "forbidden"
    INVALID_REQUEST = "invalid_request"
    UNAUTHORIZED = "unauthorized"
    UNDO_UNAVAILABLE = "undo_unavailable"
    # Seed 004: a human session's events are only taken while it runs.
    SESSION_NOT_RUNNING = "session_not_running"


HTTP_STATUS: dict[ErrorCode, int] = {
    ErrorCode.INVALID_REQUEST: 400,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.FORBIDDEN: 403,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.TOOL_EXECUTION_NOT_FOUND: 404,
    ErrorCode.CONVERSATION_BUSY: 409,
    ErrorCode.TOOL_ALREADY_RESOLVED: 409,
    ErrorCode.SESSION_NOT_RUNNING: 409,
    ErrorCode.INVALID_PICK: 422,
    ErrorCode.UNDO_UNAVAILABLE: 422,
    ErrorCode.AGENT_BUDGET_EXCEEDED: 429,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.AGENT_DISABLED: 503,
}


class SpotterError(Exception):
    """An expected failure with a stable code; surfaces to clients as-is."""

    def __init__(self, code: ErrorCode, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self._status = status

    @property
    def http_status(self) -> int:
        return self._status or HTTP_STATUS.get(self.code, 500)


class RemoteError(Exception):
    """A service answered a request with a typed error reply."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    def as_spotter(self) -> SpotterError:
        """The same failure for a client: its stable code when it has one, `internal` otherwise."""
        code = ErrorCode(self.code) if self.code in ErrorCode._value2member_map_ else ErrorCode.INTERNAL
        return SpotterError(code, self.message)
