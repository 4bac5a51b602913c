"""Anthropic-shaped error bodies and responses."""

from __future__ import annotations

import secrets
from typing import Any

from fastapi.responses import JSONResponse

# HTTP status -> `error.type`, as documented for the Messages API.
ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}

DEFAULT_MESSAGES: dict[str, str] = {
    "rate_limit_error": "Number of request tokens has exceeded your per-minute rate limit (simulated).",
    "overloaded_error": "Overloaded",
    "api_error": "Internal server error",
    "timeout_error": "Request timed out",
}


def new_request_id() -> str:
    return f"req_sim_{secrets.token_hex(12)}"


class APIErrorResponse(Exception):
    """Raised inside request handling; rendered as the real API's error JSON."""

    def __init__(self, status: int, message: str, error_type: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.error_type = error_type or ERROR_TYPES.get(status, "api_error")


class InvalidRequest(APIErrorResponse):
    def __init__(self, message: str) -> None:
        super().__init__(400, message, "invalid_request_error")


def error_body(error_type: str, message: str, request_id: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": error_type, "message": message},
        "request_id": request_id,
    }


def error_response(
    status: int,
    error_type: str,
    message: str,
    request_id: str,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    return JSONResponse(
        error_body(error_type, message, request_id),
        status_code=status,
        headers={"request-id": request_id, **(headers or {})},
    )
