"""Trace id (the OpenTelemetry request span's), body-size guard and request metrics as a plain ASGI middleware: unlike
BaseHTTPMiddleware it does not copy every SSE chunk through an extra memory stream."""

from __future__ import annotations

import uuid
from prometheus_client import Counter
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from spotter_shared import telemetry
from spotter_shared.errors import ErrorCode

from . import errors


class RequestGuard:
    def __init__(self, app: ASGIApp, *, max_body_bytes: int, requests_total: Counter) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.requests_total = requests_total

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # The request's W3C trace id (from its `traceparent`, or new), so that the traceId in an error,
        # in a log line and in the trace backend is one id.
        trace = telemetry.current_trace_id() or uuid.uuid4().hex
        scope.setdefault("state", {})["trace_id"] = trace
        # The last content-length, as a dict of the headers would have kept (no dict built per request).
        length = ""
        for name, value in scope["headers"]:
            if name == b"content-length":
                length = value.decode("latin-1")
        if length.isdigit() and int(length) > self.max_body_bytes:
            response = errors.error_response(Request(scope), 413, ErrorCode.INVALID_REQUEST, "Request body too large.")
            await response(scope, receive, send)
            self.requests_total.labels(scope["method"], "413").inc()
            return

        async def send_with_trace(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"x-trace-id", trace.encode())]
                self.requests_total.labels(scope["method"], str(message["status"])).inc()
            await send(message)

        await self.app(scope, receive, send_with_trace)
