"""Every error a client sees is `{"error": {"code", "message", "traceId"}}` with a stable code."""

from __future__ import annotations

import logging
import uuid

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from spotter_shared.errors import ErrorCode, SpotterError

log = logging.getLogger(__name__)

_BY_STATUS = {
    400: ErrorCode.INVALID_REQUEST,
    401: ErrorCode.UNAUTHORIZED,
    403: ErrorCode.FORBIDDEN,
    404: ErrorCode.NOT_FOUND,
    405: ErrorCode.INVALID_REQUEST,
    413: ErrorCode.INVALID_REQUEST,
    415: ErrorCode.INVALID_REQUEST,
}


def trace_id(request: Request) -> str:
    if not hasattr(request.state, "trace_id"):
        request.state.trace_id = str(uuid.uuid4())
    return request.state.trace_id


def error_response(request: Request, status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse(
        status_code=status,
        content={"error": {"code": code, "message": message, "traceId": trace_id(request)}},
    )


def install(app: FastAPI) -> None:
    @app.exception_handler(SpotterError)
    async def on_spotter(request: Request, exc: SpotterError) -> JSONResponse:
        response = error_response(request, exc.http_status, exc.code, exc.message)
        if (retry_after := getattr(exc, "retry_after_s", None)) is not None:
            response.headers["Retry-After"] = str(retry_after)
        return response

    @app.exception_handler(RequestValidationError)
    async def on_invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        parts = []
        for err in exc.errors()[:5]:
            loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
            parts.append(f"{loc}: {err.get('msg')}" if loc else str(err.get("msg")))
        return error_response(request, 400, ErrorCode.INVALID_REQUEST, "; ".join(parts) or "Invalid request.")

    @app.exception_handler(StarletteHTTPException)
    async def on_http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _BY_STATUS.get(exc.status_code, ErrorCode.INVALID_REQUEST)
        return error_response(request, exc.status_code, code, str(exc.detail))

    @app.exception_handler(Exception)
    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error (trace %s)", trace_id(request))
        return error_response(request, 500, ErrorCode.INTERNAL, "Something went wrong on our side.")
