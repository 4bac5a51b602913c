"""bus.Responders over a real NATS server: typed replies from the bare connection, many requests in
flight but no more than allowed, bad input answered as FastStream's contract_errors answers it, the
caller's trace continued, and the declared FastStream subscriber never subscribed."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from faststream.nats import NatsBroker, NatsRouter
from nats.errors import NoRespondersError
from opentelemetry import context, trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from pydantic import Field

from spotter_shared import bus, telemetry
from spotter_shared.contracts.base import ERROR_HEADER, Contract, Endpoint, ErrorReply
from spotter_shared.errors import ErrorCode, RemoteError, SpotterError

TIMEOUT = 5.0


class Ask(Contract):
    word: str = Field(description="A word.")
    times: int = Field(default=1, ge=1, description="How often to repeat it.")


class Answer(Contract):
    words: str = Field(description="The word, repeated.")
    trace_id: str | None = Field(default=None, description="The trace the handler ran in.")


def endpoint() -> Endpoint[Ask, Answer]:
    # Not request_endpoint: that would add a test subject to the bus's catalog.
    return Endpoint(f"test.responder.{uuid.uuid4().hex}", Ask, "request", "Repeat a word.", reply=Answer, queue="test")


Handler = Callable[[Ask, object], Awaitable[Answer]]


@pytest.fixture
async def broker(stack) -> AsyncIterator[NatsBroker]:
    broker = NatsBroker(stack.nats_url)
    await broker.connect()
    yield broker
    await broker.stop()


async def serve(broker: NatsBroker, ep: Endpoint[Ask, Answer], handler: Handler, *, max_in_flight: int = 64,
                context: object = "ctx") -> bus.Serving:
    router = NatsRouter()
    responders = bus.Responders(router, max_in_flight=max_in_flight)
    responders(ep)(handler)
    broker.include_router(router)
    serving = await responders.start(broker, context)
    await broker.start()
    # FastStream was given the router (the AsyncAPI document sees it) but never subscribes it.
    assert router not in broker.routers and all(sub.subscription is None for sub in router.subscribers)
    return serving


async def repeat(body: Ask, context: object) -> Answer:
    if body.word == "boom":
        raise RuntimeError("a bug")
    if body.word == "gone":
        raise SpotterError(ErrorCode.NOT_FOUND, "no such word")
    return Answer(words=" ".join([f"{body.word}@{context}"] * body.times), trace_id=telemetry.current_trace_id())


async def test_a_valid_request_gets_its_reply_contract_with_the_context_passed_to_the_handler(broker: NatsBroker) -> None:
    ep = endpoint()
    await serve(broker, ep, repeat)
    assert (await bus.request(broker, ep, Ask(word="hi", times=2), timeout=TIMEOUT)).words == "hi@ctx hi@ctx"


# What FastStream's contract_errors answered for each body (captured from billing before it moved
# to Responders), with and without a JSON content type.
MALFORMED: list[tuple[bytes, dict[str, str] | None, str]] = [
    (b"", None, "body: Input should be a valid dictionary or instance of Ask"),
    (b"", {"content-type": "application/json"}, "body: not valid JSON"),
    (b"null", None, "body: Input should be a valid dictionary or instance of Ask"),
    (b"[1, 2]", {"content-type": "application/json"}, "body: Input should be a valid dictionary or instance of Ask"),
    (b"ask!", None, "body: Input should be a valid dictionary or instance of Ask"),
    (b"{", {"content-type": "application/json"}, "body: not valid JSON"),
    (b'{"word": "\xff"}', None, "body: Input should be a valid dictionary or instance of Ask"),
    (b'{"word": "\xff"}', {"content-type": "application/json"}, "body: not valid UTF-8"),
    (b"{}", None, "word: Field required"),
    (json.dumps({"word": 42, "times": 0}).encode(), None,
     "word: Input should be a valid string; times: Input should be greater than or equal to 1"),
]


async def test_bad_input_gets_the_typed_error_contract_errors_gives_and_the_responder_keeps_serving(broker: NatsBroker) -> None:
    ep = endpoint()
    await serve(broker, ep, repeat)
    for raw, headers, reason in MALFORMED:
        msg = await broker.connection.request(ep.subject, raw, timeout=TIMEOUT, headers=headers)
        assert (msg.headers or {}).get(ERROR_HEADER) == "invalid_request", raw
        assert ErrorReply.model_validate_json(msg.data) == ErrorReply(code="invalid_request", message=reason), raw
    assert (await bus.request(broker, ep, Ask(word="still"), timeout=TIMEOUT)).words == "still@ctx"


async def test_a_refusal_keeps_its_code_and_a_bug_is_an_internal_error_that_is_logged(
    broker: NatsBroker, caplog: pytest.LogCaptureFixture
) -> None:
    ep = endpoint()
    await serve(broker, ep, repeat)
    with pytest.raises(RemoteError) as refused:
        await bus.request(broker, ep, Ask(word="gone"), timeout=TIMEOUT)
    assert (refused.value.code, refused.value.message) == ("not_found", "no such word")
    with caplog.at_level(logging.ERROR, logger="spotter_shared.bus"), pytest.raises(RemoteError) as failed:
        await bus.request(broker, ep, Ask(word="boom"), timeout=TIMEOUT)
    assert (failed.value.code, failed.value.message) == ("internal", "internal error")
    assert any(r.exc_info and "a bug" in str(r.exc_info[1]) for r in caplog.records)
    assert (await bus.request(broker, ep, Ask(word="after"), timeout=TIMEOUT)).words == "after@ctx"


async def test_requests_run_concurrently_up_to_max_in_flight(broker: NatsBroker) -> None:
    ep = endpoint()
    running, peak, release = 0, 0, asyncio.Event()
    three_running = asyncio.Event()

    async def slow(body: Ask, context: object) -> Answer:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        if running == 3:
            three_running.set()
        await release.wait()
        running -= 1
        return Answer(words=body.word)

    await serve(broker, ep, slow, max_in_flight=3)
    asks = [asyncio.create_task(bus.request(broker, ep, Ask(word=str(i)), timeout=TIMEOUT)) for i in range(8)]
    await asyncio.wait_for(three_running.wait(), TIMEOUT)  # three at once: not one at a time
    release.set()
    answers = await asyncio.gather(*asks)
    assert sorted(a.words for a in answers) == [str(i) for i in range(8)]
    assert peak == 3  # and never more than allowed


@pytest.fixture(params=["recorded", "not recorded"])
def spans(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways a process runs: spans recorded (an exporter is set), or not (none is: the consumer then
    continues the caller's context without a span of its own)."""
    monkeypatch.setattr(telemetry, "_recording", request.param == "recorded")
    return request.param


@pytest.mark.usefixtures("spans")
async def test_the_callers_w3c_trace_is_continued(broker: NatsBroker) -> None:
    ep = endpoint()
    await serve(broker, ep, repeat)
    trace_id = secrets.token_hex(16)
    msg = await broker.connection.request(ep.subject, Ask(word="t").to_bytes(), timeout=TIMEOUT,
                                          headers={"traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"})
    assert Answer.model_validate_json(msg.data).trace_id == trace_id


async def test_stop_answers_the_requests_in_flight_and_takes_no_more(broker: NatsBroker) -> None:
    ep = endpoint()
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(body: Ask, context: object) -> Answer:
        started.set()
        await release.wait()
        return Answer(words=body.word)

    serving = await serve(broker, ep, slow)
    in_flight = asyncio.create_task(bus.request(broker, ep, Ask(word="last"), timeout=TIMEOUT))
    await asyncio.wait_for(started.wait(), TIMEOUT)
    stopping = asyncio.create_task(serving.stop())
    await asyncio.sleep(0)  # a turn of the loop: stop() has begun
    assert not stopping.done()  # it waits for the request in flight
    release.set()
    await stopping
    assert (await in_flight).words == "last"
    with pytest.raises(NoRespondersError):
        await broker.connection.request(ep.subject, Ask(word="late").to_bytes(), timeout=TIMEOUT)


async def test_a_requester_asks_on_the_bare_connection_and_carries_the_trace(broker: NatsBroker) -> None:
    """The asking side (bus.Requester): reply contracts, typed refusals, the current trace carried in
    `traceparent`, and NATS's own no-responders and timeout errors, as the services expect them."""
    ep = endpoint()
    asking = NatsRouter()
    ask = bus.requester(asking, ep)
    broker.include_router(asking)
    await serve(broker, ep, repeat)

    assert (await ask(Ask(word="hi"), timeout=TIMEOUT)).words == "hi@ctx"
    with pytest.raises(RemoteError) as refused:
        await ask(Ask(word="gone"), timeout=TIMEOUT)
    assert (refused.value.code, refused.value.message) == (ErrorCode.NOT_FOUND, "no such word")

    trace_id = secrets.token_hex(16)
    parent = SpanContext(int(trace_id, 16), int(secrets.token_hex(8), 16), is_remote=True,
                         trace_flags=TraceFlags(TraceFlags.SAMPLED))
    token = context.attach(trace.set_span_in_context(NonRecordingSpan(parent)))
    try:
        assert (await ask(Ask(word="t"), timeout=TIMEOUT)).trace_id == trace_id
    finally:
        context.detach(token)

    silent = endpoint()
    nobody = bus.requester(asking, silent)
    broker.include_router(asking)
    with pytest.raises(NoRespondersError):
        await nobody(Ask(word="x"), timeout=TIMEOUT)

    stuck, release = endpoint(), asyncio.Event()

    async def never(body: Ask, context: object) -> Answer:
        await release.wait()
        return Answer(words="late")

    ask_stuck = bus.requester(asking, stuck)
    broker.include_router(asking)
    await serve(broker, stuck, never)
    with pytest.raises(TimeoutError):
        await ask_stuck(Ask(word="x"), timeout=0.3)
    release.set()
