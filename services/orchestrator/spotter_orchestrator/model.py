"""The only place that knows the Anthropic Messages API: streaming one model call (the agent), creating
one (the summary model's summaries and titles), and mapping provider failures to seed 000's stable codes.
The HTTP and SSE work is messages_http's lean client; the SDK is no longer on this path."""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from opentelemetry import propagate, trace

from spotter_shared import metrics
from spotter_shared.contracts.billing import ModelUsage
from spotter_shared.errors import ErrorCode

from .messages_http import Message, MessagesHTTP, ProviderFailure
from .settings import OrchestratorSettings

_tracer = trace.get_tracer(__name__)

_GEN5 = re.compile(r"^claude-(sonnet|opus|haiku)-5")


@dataclass(frozen=True)
class ModelReply:
    content: list[dict[str, Any]]
    stop_reason: str | None
    usage: ModelUsage


class ProviderError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def is_gen5(model: str) -> bool:
    """The 5.x generation: adaptive thinking, and no forced tool choice, sampling knobs or prefill."""
    return bool(_GEN5.match(model))


def thinking_param(model: str) -> dict[str, str] | None:
    # 5.x models think adaptively when `thinking` is omitted and reject `disabled`; between_tools
    # is the lowest setting. Older models keep thinking off by omitting the parameter.
    return {"type": "between_tools"} if _GEN5.match(model) else None


class ModelClient:
    def __init__(self, settings: OrchestratorSettings) -> None:
        # Made at service start, outside the loop: the HTTP session itself is made on the first call.
        self._http = MessagesHTTP(settings.anthropic_base_url, settings.anthropic_api_key or "spotter-no-key",
                                  settings.spotter_provider_retries)

    async def close(self) -> None:
        await self._http.aclose()

    async def stream(self, params: dict[str, Any], on_text: Callable[[str], Awaitable[None]]) -> ModelReply:
        thinking = thinking_param(params["model"])
        if thinking:
            params = {**params, "thinking": thinking}
        with ModelCall(params, self._http) as call:
            try:
                # Only text blocks reach the user; thinking between tools stays server-side.
                message = await self._http.stream(params, call.headers(), call.chunk, on_text)
            except ProviderFailure as exc:
                raise call.failed(classify(exc), exc) from exc
            return call.done(reply_of(message), message)

    async def create(self, params: dict[str, Any]) -> ModelReply:
        """One non-streaming call, as the summary model's short answers need nothing streamed."""
        with ModelCall(params, self._http) as call:
            try:
                message = await self._http.create(params, call.headers())
            except ProviderFailure as exc:
                raise call.failed(classify(exc), exc) from exc
            return call.done(reply_of(message), message)


class ModelCall:
    """One model call as metrics and a span see it: the span follows OpenTelemetry's GenAI semantic
    conventions (operation, provider, models, usage with the cache split, finish reason, time to
    first chunk) and carries no prompt or reply text. It is the HTTP call's client span too: its trace
    context goes to the provider in `traceparent`, as the SDK's own span's did."""

    def __init__(self, params: dict[str, Any], http: MessagesHTTP) -> None:
        self.model = params["model"]
        self._attributes = {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic",
            "gen_ai.request.model": self.model, "gen_ai.request.max_tokens": params.get("max_tokens", 0),
            "server.address": http.host, "server.port": http.port,
        }
        self._first: float | None = None

    def __enter__(self) -> ModelCall:
        self._span_cm = _tracer.start_as_current_span(f"chat {self.model}", kind=trace.SpanKind.CLIENT, attributes=self._attributes)
        self.span = self._span_cm.__enter__()
        self.started = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self._span_cm.__exit__(*exc)

    def headers(self) -> dict[str, str]:
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        return carrier

    def chunk(self) -> None:
        if self._first is None:
            self._first = time.monotonic() - self.started
            metrics.MODEL_FIRST_CHUNK_SECONDS.labels(self.model).observe(self._first)
            self.span.set_attribute("gen_ai.response.time_to_first_chunk", self._first)

    def failed(self, error: ProviderError, failure: ProviderFailure) -> ProviderError:
        metrics.MODEL_CALL_SECONDS.labels(self.model, error.code).observe(time.monotonic() - self.started)
        self.span.set_attribute("error.type", str(error.code))
        if failure.status is not None:
            self.span.set_attribute("http.response.status_code", failure.status)
        if failure.request_id:
            self.span.set_attribute("anthropic.request.id", failure.request_id)
        self.span.set_status(trace.StatusCode.ERROR)
        return error

    def done(self, reply: ModelReply, message: Message) -> ModelReply:
        metrics.MODEL_CALL_SECONDS.labels(self.model, "ok").observe(time.monotonic() - self.started)
        u = reply.usage
        cache_write = u.cache_write_5m_tokens + u.cache_write_1h_tokens
        for kind, tokens in (("input", u.input_tokens), ("output", u.output_tokens), ("cache_read", u.cache_read_tokens),
                             ("cache_write", cache_write)):
            metrics.MODEL_TOKENS.labels(self.model, kind).inc(tokens)
        self.span.set_attributes({
            "gen_ai.response.model": message.model or self.model,
            "http.response.status_code": 200, "http.request.resend_count": message.retries,
            "gen_ai.response.finish_reasons": [reply.stop_reason or "unknown"],
            "gen_ai.usage.input_tokens": u.input_tokens, "gen_ai.usage.output_tokens": u.output_tokens,
            "gen_ai.usage.cache_read.input_tokens": u.cache_read_tokens,
            "gen_ai.usage.cache_creation.input_tokens": cache_write,
        })
        if message.id:
            self.span.set_attribute("gen_ai.response.id", message.id)
        if message.request_id:
            self.span.set_attribute("anthropic.request.id", message.request_id)
        return reply


def reply_of(message: Message) -> ModelReply:
    """The reply as stored and replayed: content blocks as the SDK's models dumped them, byte for byte."""
    return ModelReply(content=message.content, stop_reason=message.stop_reason, usage=usage_of(message.usage))


def usage_of(usage: dict[str, Any]) -> ModelUsage:
    created = usage.get("cache_creation_input_tokens") or 0
    split = usage.get("cache_creation")
    five = split.get("ephemeral_5m_input_tokens") if isinstance(split, dict) else None
    hour = split.get("ephemeral_1h_input_tokens") if isinstance(split, dict) else None
    if five is None and hour is None:
        # No breakdown: bill at the dearer 1-hour rate rather than under-charge.
        five, hour = 0, created
    return ModelUsage(
        input_tokens=usage.get("input_tokens") or 0,
        output_tokens=usage.get("output_tokens") or 0,
        cache_read_tokens=usage.get("cache_read_input_tokens") or 0,
        cache_write_5m_tokens=five or 0,
        cache_write_1h_tokens=hour or 0,
    )


_BODY_TYPES = {
    "overloaded_error": ErrorCode.PROVIDER_OVERLOADED,
    "rate_limit_error": ErrorCode.PROVIDER_RATE_LIMITED,
    "api_error": ErrorCode.PROVIDER_UNAVAILABLE,
    "invalid_request_error": ErrorCode.PROVIDER_INVALID_REQUEST,
    "authentication_error": ErrorCode.PROVIDER_UNAUTHORIZED,
    "permission_error": ErrorCode.PROVIDER_UNAUTHORIZED,
}

_MESSAGES = {
    ErrorCode.PROVIDER_OVERLOADED: "The AI provider is overloaded. Retry in a moment.",
    ErrorCode.PROVIDER_RATE_LIMITED: "The AI provider is rate limiting us. Retry in a moment.",
    ErrorCode.PROVIDER_UNAVAILABLE: "The AI provider is unavailable right now.",
    ErrorCode.PROVIDER_INVALID_REQUEST: "The AI provider rejected the request.",
    ErrorCode.PROVIDER_UNAUTHORIZED: "The AI provider refused our credentials.",
}


def classify(failure: ProviderFailure) -> ProviderError:
    code = _classify_code(failure)
    return ProviderError(code, _MESSAGES[code])


def _classify_code(failure: ProviderFailure) -> ErrorCode:
    status = failure.status
    if status is None:
        return ErrorCode.PROVIDER_UNAVAILABLE  # never answered, or cut off mid-stream
    # An `event: error` after HTTP 200 comes with status 200: classify by body type first.
    body = failure.body if isinstance(failure.body, dict) else {}
    err = body.get("error") if isinstance(body.get("error"), dict) else body
    by_type = _BODY_TYPES.get(str(err.get("type", "")))
    if by_type is not None:
        return by_type
    if status == 429:
        return ErrorCode.PROVIDER_RATE_LIMITED
    if status in (401, 403):
        return ErrorCode.PROVIDER_UNAUTHORIZED
    if status == 529:
        return ErrorCode.PROVIDER_OVERLOADED
    if status >= 500:
        return ErrorCode.PROVIDER_UNAVAILABLE
    if 400 <= status < 500:
        return ErrorCode.PROVIDER_INVALID_REQUEST
    return ErrorCode.PROVIDER_UNAVAILABLE
