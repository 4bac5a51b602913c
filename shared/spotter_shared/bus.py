"""NATS plumbing shared by all services: broker factory, contract-error handling, typed requests,
and idempotent JetStream provisioning."""

from __future__ import annotations

import json
import logging
from typing import Any, TypeVar

from faststream.middlewares import ExceptionMiddleware
from faststream.nats import JStream, NatsBroker, NatsMessage
from faststream.nats.opentelemetry import NatsTelemetryMiddleware
from faststream.response import Response
from nats.js.api import RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError
from pydantic import ValidationError

from .contracts.base import (
    DEAD_LETTER_PREFIX,
    ERROR_HEADER,
    TRACE_HEADER,
    Contract,
    DeadLetter,
    Endpoint,
    ErrorReply,
    dead_letter_subject,
)
from .contracts.commands import COMMAND_SUBJECTS, COMMANDS_STREAM
from .errors import ErrorCode, RemoteError, SpotterError

log = logging.getLogger(__name__)

R = TypeVar("R", bound=Contract)

DLQ_STREAM = "SPOTTER_DLQ"

# Commands are few and each is a user's turn: keep them long enough for a crashed replica's
# redelivery, and dedupe re-publication within 10 minutes.
STREAMS = [
    StreamConfig(
        name=COMMANDS_STREAM,
        subjects=COMMAND_SUBJECTS,
        retention=RetentionPolicy.WORK_QUEUE,
        storage=StorageType.FILE,
        duplicate_window=600.0,
        max_age=24 * 3600.0,
    ),
    StreamConfig(
        name=DLQ_STREAM,
        subjects=[f"{DEAD_LETTER_PREFIX}.>"],
        retention=RetentionPolicy.LIMITS,
        storage=StorageType.FILE,
        max_age=14 * 24 * 3600.0,
    ),
]

COMMANDS_JSTREAM = JStream(name=COMMANDS_STREAM, declare=False)


def _summarize(exc: ValidationError) -> str:
    parts = [f"{'.'.join(str(p) for p in e['loc'][1:]) or 'body'}: {e['msg']}" for e in exc.errors()[:5]]
    return "; ".join(parts)


def contract_errors(broker_ref: list[NatsBroker]) -> ExceptionMiddleware:
    """Invalid payloads never crash a consumer and are never silent: requests get a typed error
    reply, durable commands are parked on the dead-letter subject with the reason (and acked)."""
    mw = ExceptionMiddleware()

    @mw.add_handler(ValidationError, publish=True)
    async def on_invalid(exc: ValidationError, message: NatsMessage):
        reason = _summarize(exc)
        return await _reject(broker_ref[0], message, ErrorCode.INVALID_REQUEST, reason)

    # A body that cannot even be decoded (bad JSON under a JSON content type, bad UTF-8) fails
    # before validation; it must still be answered. ValidationError is itself a ValueError, so
    # these two are registered by their own types.
    @mw.add_handler(json.JSONDecodeError, publish=True)
    async def on_undecodable_json(exc: json.JSONDecodeError, message: NatsMessage):
        return await _reject(broker_ref[0], message, ErrorCode.INVALID_REQUEST, "body: not valid JSON")

    @mw.add_handler(UnicodeDecodeError, publish=True)
    async def on_undecodable_text(exc: UnicodeDecodeError, message: NatsMessage):
        return await _reject(broker_ref[0], message, ErrorCode.INVALID_REQUEST, "body: not valid UTF-8")

    @mw.add_handler(SpotterError, publish=True)
    async def on_expected(exc: SpotterError, message: NatsMessage):
        return await _reject(broker_ref[0], message, exc.code, exc.message)

    @mw.add_handler(Exception, publish=True)
    async def on_unexpected(exc: Exception, message: NatsMessage):
        # A requester gets a typed `internal` at once instead of waiting out its deadline. Durable
        # commands are not dead-lettered for this: they stay un-acked and are redelivered.
        if not message.reply_to:
            raise exc
        log.exception("handler failed on %s", message.raw_message.subject, exc_info=exc)
        return Response(ErrorReply(code=ErrorCode.INTERNAL, message="internal error").to_bytes(), headers={ERROR_HEADER: ErrorCode.INTERNAL})

    return mw


async def _reject(broker: NatsBroker, message: NatsMessage, code: str, reason: str) -> Response | None:
    if message.reply_to:
        return Response(ErrorReply(code=code, message=reason).to_bytes(), headers={ERROR_HEADER: code})
    await park(broker, message.raw_message, f"{code}: {reason}")
    return None


async def park(broker: NatsBroker, raw: Any, reason: str) -> None:
    """Put a durable message on its dead-letter subject (stream SPOTTER_DLQ) with the reason."""
    letter = DeadLetter(
        subject=raw.subject,
        reason=reason,
        payload=raw.data.decode("utf-8", errors="replace")[:65536],
        msg_id=(raw.headers or {}).get("Nats-Msg-Id"),
    )
    log.warning("dead-lettered message on %s: %s", raw.subject, letter.reason)
    await broker.publish(letter.to_bytes(), dead_letter_subject(raw.subject), stream=DLQ_STREAM)


def create_broker(nats_url: str, name: str) -> NatsBroker:
    ref: list[NatsBroker] = []
    broker = NatsBroker(
        nats_url,
        # Trace context travels in NATS headers, so one trace spans gateway → orchestrator → tools.
        middlewares=[NatsTelemetryMiddleware(include_messages_counters=False), contract_errors(ref)],
        name=name,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.5,
        log_level=logging.DEBUG,
    )
    ref.append(broker)
    return broker


async def ensure_streams(broker: NatsBroker, replicas: int = 1) -> None:
    """Create or update our streams; safe to run from every replica at every start."""
    js = broker.config.connection_state.stream
    for base in STREAMS:
        config = StreamConfig.from_response({**base.as_dict(), "num_replicas": replicas})
        try:
            await js.stream_info(config.name)
            await js.update_stream(config)
        except NotFoundError:
            await js.add_stream(config)


async def prune_consumers(broker: NatsBroker, stream: str, keep: set[str]) -> list[str]:
    """Delete durable consumers of `stream` that no current code uses. A work-queue stream allows one
    consumer per subject, so a consumer left by an older release would block the new one; its
    unacknowledged messages go to the new consumer."""
    js = broker.config.connection_state.stream
    removed = []
    for info in await js.consumers_info(stream):
        if info.name not in keep:
            await js.delete_consumer(stream, info.name)
            removed.append(info.name)
            log.warning("removed obsolete consumer %s on %s", info.name, stream)
    return removed


async def request(
    broker: NatsBroker,
    ep: Endpoint,
    payload: Contract,
    *,
    timeout: float,
    trace_id: str | None = None,
) -> Contract:
    """Typed request/reply. Raises RemoteError for a typed error reply, TimeoutError on deadline."""
    headers = {TRACE_HEADER: trace_id} if trace_id else None
    msg = await broker.request(payload.to_bytes(), ep.subject, timeout=timeout, headers=headers)
    body = msg.body
    code = (msg.headers or {}).get(ERROR_HEADER)
    if code:
        err = ErrorReply.model_validate_json(body)
        raise RemoteError(err.code, err.message)
    assert ep.reply is not None
    return ep.reply.model_validate_json(body)


def publish_headers(msg_id: str | None = None, trace_id: str | None = None) -> dict[str, str]:
    headers: dict[str, str] = {}
    if msg_id:
        # JetStream drops a second publish with the same id inside the duplicate window.
        headers["Nats-Msg-Id"] = msg_id
    if trace_id:
        headers[TRACE_HEADER] = trace_id
    return headers
