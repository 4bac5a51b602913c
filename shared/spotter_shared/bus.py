"""NATS plumbing shared by all services: broker factory, contract-error handling, typed requests,
and idempotent JetStream provisioning."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import weakref
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic

from faststream.middlewares import AckPolicy, ExceptionMiddleware
from faststream.nats import JStream, NatsBroker, NatsMessage, NatsRouter, PullSub
from faststream.nats.publisher.usecase import LogicPublisher as Publisher
from faststream.nats.opentelemetry import NatsTelemetryMiddleware
from faststream.response import Response
from nats.aio.msg import Msg
from nats.js.api import Header, RetentionPolicy, StorageType, StreamConfig
from nats.errors import NoRespondersError
from nats.js.errors import NotFoundError
from opentelemetry import context as otel_context, trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from pydantic import ValidationError

from . import metrics, telemetry
from .contracts.base import (
    DEAD_LETTER_PREFIX,
    ERROR_HEADER,
    TRACE_HEADER,
    Contract,
    DeadLetter,
    Endpoint,
    ErrorReply,
    P,
    R,
    dead_letter_subject,
)
from .contracts.commands import COMMAND_SUBJECTS, COMMANDS_STREAM, TurnCommand
from .contracts.rag import ENTITIES_CHANGED, RAG_STREAM
from .errors import ErrorCode, RemoteError, SpotterError

log = logging.getLogger(__name__)

DLQ_STREAM = "SPOTTER_DLQ"
JS_ACK_PREFIX = "$JS.ACK."

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
    # Index announcements: rag's indexer takes each once; a lost one is caught up by its sweep.
    StreamConfig(
        name=RAG_STREAM,
        subjects=[ENTITIES_CHANGED.subject],
        retention=RetentionPolicy.WORK_QUEUE,
        storage=StorageType.FILE,
        duplicate_window=120.0,
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


def _summarize(exc: ValidationError, skip: int = 1) -> str:
    """The first errors as `field.path: message`; `skip` drops the parameter name fast_depends puts
    first in each location (a bare model's locations start at its fields)."""
    parts = [f"{'.'.join(str(p) for p in e['loc'][skip:]) or 'body'}: {e['msg']}" for e in exc.errors()[:5]]
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
    raw = message.raw_message
    await park(broker, raw, f"{code}: {reason}")
    if (raw.reply or "").startswith(JS_ACK_PREFIX):
        # Parked, so done with: un-acked it would come back every ack wait and be parked again,
        # for ever. Double ack, as for a handled command.
        await raw.ack_sync()
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


def consumer_lag(broker: NatsBroker, stream: str, consumers: list[str]) -> "metrics.Sample":
    """A gauge sample of the durable consumers' backlog (what KEDA's nats-jetstream scaler reads)."""

    async def sample() -> None:
        await metrics.sample_consumers(broker.config.connection_state.stream, stream, consumers)

    return sample


async def request(
    broker: NatsBroker,
    ep: Endpoint[P, R],
    payload: P,
    *,
    timeout: float,
    trace_id: str | None = None,
) -> R:
    """Typed request/reply on a bare broker (tests and tools); services ask through their declared
    `Requester`s. Raises RemoteError for a typed error reply, TimeoutError on deadline."""
    msg = await broker.request(payload.to_bytes(), ep.subject, timeout=timeout, headers=_trace(trace_id))
    return _reply(ep, msg)


def _trace(trace_id: str | None) -> dict[str, str] | None:
    return {TRACE_HEADER: trace_id} if trace_id else None


def _reply(ep: Endpoint[P, R], msg: NatsMessage) -> R:
    return _answer(ep, msg.headers, msg.body)


def _answer(ep: Endpoint[P, R], headers: dict[str, str] | None, body: bytes) -> R:
    if ep.reply is None:
        raise TypeError(f"{ep.subject} is a {ep.pattern}, not a request")
    code = (headers or {}).get(ERROR_HEADER)
    if code:
        err = ErrorReply.model_validate_json(body)
        raise RemoteError(err.code, err.message)
    return ep.reply.model_validate_json(body)


@dataclass(frozen=True)
class Requester(Generic[P, R]):
    """A declared request edge: asking `endpoint` returns its reply type, and because it goes out
    through a declared publisher the AsyncAPI document shows who asks, not only who answers."""

    endpoint: Endpoint[P, R]
    publisher: Publisher

    async def __call__(self, payload: P, *, timeout: float, trace_id: str | None = None) -> R:
        """Ask on the bare NATS connection of the broker the publisher belongs to: a turn asks a dozen
        questions, and FastStream's publish path (middleware, a message object per reply) cost more
        than the answer. One producer span, named as FastStream names it, carries the trace on."""
        subject = self.endpoint.subject
        headers = _trace(trace_id) or {}
        with _TRACER.start_as_current_span(f"{subject} publish", kind=trace.SpanKind.PRODUCER,
                                           attributes={"messaging.system": "nats",
                                                       "messaging.destination.name": subject,
                                                       "messaging.operation": "publish"}):
            _TRACE_PROPAGATOR.inject(headers)
            # The broker's connection, as FastStream's own request reaches it (a pinned version's
            # internals: tests/infra/test_responder.py asks through a Requester).
            connection = self.publisher._outer_config.connection_state.connection
            msg = await connection.request(subject, payload.to_bytes(), timeout=timeout, headers=headers or None)
        return _answer(self.endpoint, msg.headers, msg.data)

    async def patiently(self, payload: P, *, timeout: float, attempts: int, trace_id: str | None = None,
                        backoff_s: float = 0.3) -> R:
        """For idempotent endpoints: a timeout, or a moment with no responder connected (a
        restart), is answered by asking again, backing off a little more each time."""
        subject = self.endpoint.subject
        for attempt in range(1, attempts + 1):
            try:
                return await self(payload, timeout=timeout, trace_id=trace_id)
            except TimeoutError:
                log.warning("%s timed out (attempt %d of %d)", subject, attempt, attempts)
            except NoRespondersError:
                log.warning("no responder on %s (attempt %d of %d)", subject, attempt, attempts)
                await asyncio.sleep(backoff_s * attempt)
        raise TimeoutError(f"no answer on {subject} after {attempts} attempts")


def requester(router: NatsRouter, ep: Endpoint[P, R]) -> Requester[P, R]:
    if ep.reply is None:
        raise TypeError(f"{ep.subject} is a {ep.pattern}, not a request")
    return Requester(ep, router.publisher(ep.subject, schema=ep.payload, description=f"Asks: {ep.description}"))


def subscriber(router: NatsRouter, ep: Endpoint[P, R], **options: Any) -> Any:
    """A declared subscriber for a request or event endpoint: subject, queue group and description
    come from the endpoint, the handler's parameter is its payload contract."""
    if ep.queue and "queue" not in options:
        options["queue"] = ep.queue
    return router.subscriber(ep.subject, description=ep.description, **options)


def publisher(router: NatsRouter, ep: Endpoint[P, R]) -> Publisher:
    """A declared publisher: the AsyncAPI document shows who publishes what. A wildcard subject
    (per-conversation events) is given concretely at publish time."""
    stream = JStream(name=ep.stream, declare=False) if ep.stream else None
    return router.publisher(ep.subject, stream=stream, schema=ep.payload, description=ep.description)


async def publish(pub: Publisher, message: Contract, *, subject: str = "", headers: dict[str, str] | None = None) -> None:
    """Publish a contract through its declared publisher, as the same camelCase JSON every
    consumer validates (`subject` fills in a wildcard endpoint such as per-conversation events)."""
    await pub.publish(message.to_bytes(), subject=subject, headers=headers)


async def publish_command(pub: Publisher, command: TurnCommand) -> None:
    """Publish a durable turn command and wait for JetStream to have stored it (its ack); JetStream drops
    a re-publication with the same command id. On the bare connection's JetStream, as `Requester` asks:
    FastStream's publish path (its middleware, a span and a message object each time) cost the gateway
    more than the publish. One producer span, named as FastStream names it, carries the trace on."""
    subject = pub.subject.broker_address  # a command's subject has no parameters: the declared one
    headers = {"content-type": "application/json",
               **publish_headers(msg_id=command.command_id, trace_id=command.trace_id)}
    with _TRACER.start_as_current_span(f"{subject} publish", kind=trace.SpanKind.PRODUCER,
                                       attributes={"messaging.system": "nats", "messaging.destination.name": subject,
                                                   "messaging.operation": "publish"}):
        _TRACE_PROPAGATOR.inject(headers)
        await _jetstream(pub).publish(subject, command.to_bytes(), stream=pub.stream.name if pub.stream else None,
                                      headers=headers)


_JETSTREAMS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def _jetstream(pub: Publisher) -> Any:
    """The JetStream context of the connection of the broker the publisher belongs to (a pinned
    version's internals, as `Requester` reaches the connection), made once per connection."""
    connection = pub._outer_config.connection_state.connection
    js = _JETSTREAMS.get(connection)
    if js is None:
        js = _JETSTREAMS[connection] = connection.jetstream()
    return js


class LivePublisher:
    """Live fan-out (a conversation's events, every ~100 ms while a reply streams) with the bare NATS
    client: none of the broker's per-message middleware (a span, a log line, a model dump), which
    made up most of what each event cost. The events are already stored; a subscriber that misses
    one re-reads the log, so these carry no trace context. `declared` is the endpoint's declared
    publisher (the AsyncAPI document shows it), whose subject template the subjects fill in."""

    def __init__(self, broker: NatsBroker, declared: Publisher) -> None:
        self._broker = broker
        self.declared = declared

    async def publish(self, subject: str, payload: bytes) -> None:
        await self._broker.connection.publish(subject, payload)


def publish_headers(msg_id: str | None = None, trace_id: str | None = None) -> dict[str, str]:
    headers: dict[str, str] = {}
    if msg_id:
        # JetStream drops a second publish with the same id inside the duplicate window.
        headers["Nats-Msg-Id"] = msg_id
    if trace_id:
        headers[TRACE_HEADER] = trace_id
    return headers


# ---------------------------------------------------------------------------- bare responders

_TRACE_PROPAGATOR = TraceContextTextMapPropagator()
_TRACER = trace.get_tracer("spotter.bus")


class Responders:
    """Hot request endpoints (billing's reserve and settle, thousands a second) answered on the bare
    NATS connection instead of FastStream's per-message path (a telemetry middleware, logging, the
    exception middleware and fast_depends: about half of what each request cost). Each handler is
    declared on `router` as usual, so the AsyncAPI document shows it, its parameter is the contract,
    and the tests can call it; `start` takes that router off the broker, so FastStream never
    subscribes it, and answers the endpoints itself:

    - one task per message, at most `max_in_flight` at once across the group (then the subscription
      waits: backpressure instead of an unbounded pile of tasks);
    - the payload validated by its contract model, the reply its contract's bytes;
    - bad input and failures answered exactly as `contract_errors` answers them (same code, same
      summary, same error header); nothing a handler raises ends the subscription;
    - the caller's W3C trace context continued: one consumer span per request, named as
      FastStream's telemetry middleware names it (`<subject> process`)."""

    def __init__(self, router: NatsRouter, *, max_in_flight: int = 512) -> None:
        self.router = router
        self._max_in_flight = max_in_flight
        self._declared: list[tuple[Endpoint[Any, Any], Callable[..., Awaitable[Contract]]]] = []

    def __call__(self, ep: Endpoint[P, R]) -> Callable[[Callable[..., Awaitable[R]]], Callable[..., Awaitable[R]]]:
        """Declare `handler(payload, *context)` as the responder of request endpoint `ep`."""
        if ep.reply is None:
            raise TypeError(f"{ep.subject} is a {ep.pattern}, not a request")

        def declare(handler: Callable[..., Awaitable[R]]) -> Callable[..., Awaitable[R]]:
            subscriber(self.router, ep)(handler)
            self._declared.append((ep, handler))
            return handler

        return declare

    async def start(self, broker: NatsBroker, *context: Any) -> "Serving":
        """Answer every declared endpoint on the broker's connection; each handler is called as
        `handler(payload, *context)`. Call after connecting and before the broker starts."""
        if self.router.parent is broker:
            # Taken off the way FastStream moves a router (so it can be included again, e.g. by
            # the AsyncAPI build): into a router of its own, which nothing starts.
            NatsRouter().include_router(self.router)
        serving = Serving(broker.connection, asyncio.Semaphore(self._max_in_flight))
        for ep, handler in self._declared:
            await serving.answer(ep, _bind(handler, context))
        return serving


def _bind(handler: Callable[..., Awaitable[R]], context: tuple[Any, ...]) -> Callable[[Any], Awaitable[R]]:
    async def call(payload: Any) -> R:
        return await handler(payload, *context)

    return call


class Serving:
    """Started responders: their subscriptions and the requests they have in flight."""

    def __init__(self, connection: Any, slots: asyncio.Semaphore) -> None:
        self._connection = connection
        self._slots = slots
        self._subscriptions: list[Any] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def answer(self, ep: Endpoint[P, R], handler: Callable[[P], Awaitable[R]]) -> None:
        responder = _Responder(ep, handler, self._connection, self._slots, self._tasks)
        self._subscriptions.append(await self._connection.subscribe(ep.subject, queue=ep.queue or "", cb=responder.on_message))

    async def stop(self, grace_s: float = 10.0) -> None:
        """Stop taking requests, then let the ones in flight finish (their replies still go out)."""
        for sub in self._subscriptions:
            with contextlib.suppress(Exception):  # the connection may already be closed
                await sub.unsubscribe()
        self._subscriptions.clear()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=grace_s)


@dataclass(frozen=True)
class _Responder(Generic[P, R]):
    endpoint: Endpoint[P, R]
    handler: Callable[[P], Awaitable[R]]
    connection: Any
    slots: asyncio.Semaphore
    tasks: set[asyncio.Task[None]]

    async def on_message(self, msg: Msg) -> None:
        # The subscription hands over messages one at a time; the answer runs in its own task so
        # the next message is taken at once (a settle waits on Postgres, not on the CPU).
        await self.slots.acquire()
        task = asyncio.create_task(self._answer(msg))
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        self.slots.release()

    async def _answer(self, msg: Msg) -> None:
        try:
            with consuming(msg):
                data, reply_headers = await self._outcome(msg, msg.headers or {})
            if msg.reply:
                await self.connection.publish(msg.reply, data, headers=reply_headers)
        except Exception:  # noqa: BLE001 — e.g. the connection closed under a reply: never the subscription's end
            log.exception("could not answer on %s", msg.subject)

    async def _outcome(self, msg: Msg, headers: dict[str, str]) -> tuple[bytes, dict[str, str] | None]:
        try:
            payload = _decode(self.endpoint, msg.data, headers.get("content-type", ""))
            reply = await self.handler(payload)
        except _Undecodable as exc:
            return _error(ErrorCode.INVALID_REQUEST, exc.reason)
        except ValidationError as exc:
            return _error(ErrorCode.INVALID_REQUEST, _summarize(exc, skip=0))
        except SpotterError as exc:
            return _error(exc.code, exc.message)
        except Exception:  # noqa: BLE001 — a typed `internal` at once instead of the caller's deadline
            log.exception("handler failed on %s", msg.subject)
            return _error(ErrorCode.INTERNAL, "internal error")
        return reply.to_bytes(), None


@contextlib.contextmanager
def consuming(msg: Msg) -> Iterator[None]:
    """The context a bare consumer handles `msg` in: the producer's W3C trace continued. A consumer
    span, named as FastStream's telemetry middleware names it (`<subject> process`), only when this
    process records spans; otherwise the producer's context alone, so trace ids in logs and in the
    requests the handler makes stay the producer's (a span nobody records costs ~13 µs a message, and
    billing answers two requests per model call)."""
    headers = msg.headers or {}
    parent = _TRACE_PROPAGATOR.extract(headers) if "traceparent" in headers else None
    if telemetry.spans_recorded():
        with _TRACER.start_as_current_span(
            f"{msg.subject} process", context=parent, kind=trace.SpanKind.CONSUMER,
            attributes={"messaging.system": "nats", "messaging.destination_publish.name": msg.subject,
                        "messaging.operation": "process", "messaging.message.payload_size_bytes": len(msg.data)},
        ):
            yield
        return
    token = otel_context.attach(parent) if parent is not None else None
    try:
        yield
    finally:
        if token is not None:
            otel_context.detach(token)


class _Undecodable(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _decode(ep: Endpoint[P, R], data: bytes, content_type: str) -> P:
    """The payload as its contract, or the reason it is not one in FastStream's words: a JSON content
    type that is not JSON (or not UTF-8) is said so; any other body that is not a JSON object is
    "not a valid dictionary" of the contract."""
    try:
        return ep.payload.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        if first["loc"] or first["type"] not in ("json_invalid", "model_type"):
            raise
        if "json" in content_type and first["type"] == "json_invalid":
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                raise _Undecodable("body: not valid UTF-8") from None
            raise _Undecodable("body: not valid JSON") from None
        raise _Undecodable(f"body: Input should be a valid dictionary or instance of {ep.payload.__name__}") from None


def _error(code: str, message: str) -> tuple[bytes, dict[str, str]]:
    return ErrorReply(code=code, message=message).to_bytes(), {ERROR_HEADER: code}


# A pull request's fate is known this long after it expires (its 408, or nothing: it is gone).
_PULL_MARGIN_S = 1.0
_PENDING_MESSAGES = "Nats-Pending-Messages"  # nats-py names no constant for it


class Pullers:
    """Durable command endpoints (the orchestrator's turn commands) consumed with nats-py's pull API on
    the bare connection instead of FastStream's pull subscriber, for the reason `Responders` exists:
    FastStream's fetch loop hands each message through an in-memory queue to a worker task and then
    through its middleware stack, about 1.2 ms more from JetStream's store to the handler than a bare
    pull on this machine — on every turn's way to its first token. Each handler is declared on
    `router` with the same subscriber options as before (subject, stream, durable, consumer config,
    manual ack, worker limit), so the AsyncAPI document and the durable consumers do not change, and
    its context parameters are FastStream's (it can still be called through a broker). `start` takes
    the router off the broker and consumes:

    - one durable pull consumer per endpoint, created or bound with its config as FastStream did, and
      shared by the replicas;
    - at most `max_workers` messages of an endpoint in its handler at once: a message is asked for
      only when a worker is free, so the rest wait in JetStream for another replica;
    - the payload validated by its contract; a message that is not one is parked on the dead-letter
      subject with its reason and acknowledged, as `contract_errors` does, and so is one whose handler
      raises a SpotterError; any other failure is logged and the message left unacknowledged, so
      JetStream delivers it again after its ack wait (FastStream's behaviour under manual acks);
    - acknowledging is the handler's own (`handler(payload, raw_msg, *context)`);
    - the producer's trace context continued (`consuming`).

    At shutdown the handlers still running are cancelled and their messages given back at once (nak),
    so another replica takes them over without waiting out the ack wait."""

    def __init__(self, router: NatsRouter) -> None:
        self.router = router
        self._declared: list[_Pull] = []

    def __call__(self, ep: Endpoint[P, R], *, stream: JStream, durable: str, config: Any, max_workers: int,
                 poll_s: float) -> Callable[[Callable[..., Awaitable[None]]], Callable[..., Awaitable[None]]]:
        """Declare `handler(payload, raw_msg, *context)` as the consumer of durable endpoint `ep`."""

        def declare(handler: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
            self.router.subscriber(ep.subject, stream=stream, durable=durable, config=config, max_workers=max_workers,
                                   pull_sub=PullSub(timeout=poll_s), ack_policy=AckPolicy.MANUAL,
                                   description=ep.description)(handler)
            self._declared.append(_Pull(ep, handler, stream.name, durable, config, max_workers, poll_s))
            return handler

        return declare

    async def start(self, broker: NatsBroker, *context: Any) -> "Pulling":
        """Consume every declared endpoint on the broker's connection; each handler is called as
        `handler(payload, raw_msg, *context)`. Call after connecting and before the broker starts."""
        if self.router.parent is broker:
            NatsRouter().include_router(self.router)  # as Responders.start: FastStream never subscribes it
        pulling = Pulling(broker)
        for pull in self._declared:
            await pulling.consume(pull, context)
        return pulling


@dataclass(frozen=True)
class _Pull:
    endpoint: Endpoint[Any, Any]
    handler: Callable[..., Awaitable[None]]
    stream: str
    durable: str
    config: Any
    max_workers: int
    poll_s: float


class Pulling:
    """Started pullers: each endpoint's pull loop and the messages in their handlers."""

    def __init__(self, broker: NatsBroker) -> None:
        self._broker = broker
        self._pullers: list[Puller] = []
        self._handling: dict[asyncio.Task[None], Msg] = {}

    async def consume(self, pull: _Pull, context: tuple[Any, ...]) -> None:
        puller = Puller(self._broker.connection, stream=pull.stream, durable=pull.durable, subject=pull.endpoint.subject,
                        config=pull.config, max_workers=pull.max_workers, poll_s=pull.poll_s,
                        deliver=lambda msg, done: self._start(pull, msg, context, done))
        await puller.start()
        self._pullers.append(puller)

    def _start(self, pull: _Pull, msg: Msg, context: tuple[Any, ...], done: Callable[[], None]) -> None:
        task = asyncio.create_task(self._handle(pull, msg, context))
        self._handling[task] = msg

        def finished(task: asyncio.Task[None]) -> None:
            self._handling.pop(task, None)
            done()

        task.add_done_callback(finished)

    async def _handle(self, pull: _Pull, msg: Msg, context: tuple[Any, ...]) -> None:
        with consuming(msg):
            try:
                payload = _decode(pull.endpoint, msg.data, (msg.headers or {}).get("content-type", ""))
                await pull.handler(payload, msg, *context)
            except _Undecodable as exc:
                await self._reject(msg, f"{ErrorCode.INVALID_REQUEST}: {exc.reason}")
            except ValidationError as exc:
                await self._reject(msg, f"{ErrorCode.INVALID_REQUEST}: {_summarize(exc, skip=0)}")
            except SpotterError as exc:
                await self._reject(msg, f"{exc.code}: {exc.message}")
            except Exception:  # noqa: BLE001 — left unacknowledged: JetStream delivers it again
                log.exception("handler failed on %s", msg.subject)

    async def _reject(self, msg: Msg, reason: str) -> None:
        try:
            await park(self._broker, msg, reason)
            await msg.ack_sync()  # parked, so done with (see _reject)
        except Exception:  # noqa: BLE001 — not parked: it comes back after its ack wait and is tried again
            log.exception("could not park a message on %s", msg.subject)

    async def stop(self, grace_s: float = 10.0) -> None:
        """Ask for no more messages; cancel the handlers still running and give their messages back."""
        for puller in self._pullers:
            await puller.stop()
        self._pullers.clear()
        running = dict(self._handling)
        for task in running:
            task.cancel()
        if running:
            await asyncio.wait(list(running), timeout=grace_s)
        for msg in running.values():
            if not msg.is_acked:
                with contextlib.suppress(Exception):  # the connection may already be closed
                    await msg.nak()


class Puller:
    """A durable pull consumer's messages, as they arrive, at most `max_workers` in hand: it asks JetStream for
    as many as it has free workers in one pull request, answered on an inbox of its own, and hands each
    message to `deliver(msg, done)`, whose `done()` frees its worker. A burst of commands comes in one go
    rather than a request's round trip apart (nats-py's `fetch(n)` returns only once it has n, or at its
    timeout, so this was `fetch(1)` in a loop: ~4 ms a command while the loop was busy with the ones
    before). The consumer is created as nats-py's `pull_subscribe` creates it, or bound when it exists.

    What was asked for and not yet delivered is counted: a request lives `poll_s` and then expires, and the
    server says so (status 408) with how many it still owed (`Nats-Pending-Messages`), so the count falls
    back and it asks again; at rest, one request a `poll_s`. A status without that count (409: the
    consumer deleted, a leader change) and a request lost with its connection are covered by time: once
    `poll_s` and a margin have passed since the last request, every request has expired and nothing is
    owed. Should a request counted as expired still deliver, the message is handed on all the same (never
    dropped): one worker more than `max_workers` for a while."""

    def __init__(self, nc: Any, *, stream: str, durable: str, subject: str, config: Any, max_workers: int,
                 poll_s: float, deliver: Callable[[Msg, Callable[[], None]], None]) -> None:
        self._nc = nc
        self._stream, self._durable, self._subject, self._config = stream, durable, subject, config
        self._poll_s = poll_s
        self._deliver = deliver
        self._free = max_workers
        self._owed = 0  # asked for in live requests, not delivered yet
        self._asked_at = 0.0
        self._wake = asyncio.Event()
        self._sub: Any = None
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._next = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}"

    async def start(self) -> None:
        js = self._nc.jetstream()
        try:
            await js.consumer_info(self._stream, self._durable)
        except NotFoundError:
            config = self._config
            config.filter_subject = self._subject
            config.name = config.durable_name = self._durable
            await js.add_consumer(self._stream, config=config)
        self._inbox = self._nc.new_inbox()
        self._sub = await self._nc.subscribe(self._inbox, cb=self._arrived)
        self._task = asyncio.create_task(self._ask(), name=f"pull {self._durable}")

    async def stop(self) -> None:
        """Ask for no more (the messages in hand are the caller's)."""
        self._stopped = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._sub is not None:
            with contextlib.suppress(Exception):  # the connection may already be closed
                await self._sub.unsubscribe()

    async def _ask(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopped:
            if self._owed and loop.time() - self._asked_at > self._poll_s + _PULL_MARGIN_S:
                self._owed = 0  # every request has expired by now, its 408 lost or never sent
            want = self._free - self._owed
            if want <= 0:
                self._wake.clear()
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancel that comes as the
                # event is set, and `stop` would wait for this loop forever.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._poll_s + _PULL_MARGIN_S):
                        await self._wake.wait()
                continue
            request = json.dumps({"batch": want, "expires": int(self._poll_s * 1e9)}).encode()
            try:
                await self._nc.publish(self._next, request, reply=self._inbox)
            except Exception:  # noqa: BLE001 — closed or reconnecting: ask again after a while
                log.warning("pull on %s failed", self._durable, exc_info=True)
                await asyncio.sleep(self._poll_s)
                continue
            self._owed += want
            self._asked_at = loop.time()

    async def _arrived(self, msg: Msg) -> None:
        status = msg.headers.get(Header.STATUS) if msg.headers else None
        if status is not None:
            if status != "100":  # a request ended: 408 expired, 409 cut short; a heartbeat is neither
                owed = msg.headers.get(_PENDING_MESSAGES)
                self._owed = max(0, self._owed - int(owed)) if owed is not None and owed.isdigit() else self._owed
                self._wake.set()
            return
        self._owed = max(0, self._owed - 1)
        self._free -= 1
        self._deliver(msg, self._finished)

    def _finished(self) -> None:
        self._free += 1
        self._wake.set()
