"""bus.Pullers over a real NATS server with JetStream: a durable command reaches its handler typed,
with its JetStream message and the context; no more messages are taken than there are workers (the
rest wait in JetStream for another replica); bad input and refusals are parked on the dead-letter
subject and acknowledged, a bug leaves the message to come back; the producer's trace is continued;
and stopping gives back what was still being handled, so another replica takes it at once instead of
after the ack wait. The declared FastStream subscriber is never subscribed."""

from __future__ import annotations

import asyncio
import json
import secrets
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest
from faststream.nats import JStream, NatsBroker, NatsRouter
from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig, DeliverPolicy, StreamConfig
from pydantic import Field

from spotter_shared import bus, telemetry
from spotter_shared.bus import DLQ_STREAM, ensure_streams, publish_headers
from spotter_shared.contracts.base import Contract, DeadLetter, Endpoint, dead_letter_subject
from spotter_shared.errors import ErrorCode, SpotterError

TIMEOUT = 5.0


class Job(Contract):
    name: str = Field(description="What to do.")


@dataclass
class Seen:
    name: str
    attempt: int
    context: object
    trace_id: str | None


@dataclass
class Worker:
    """A handler that records what reached it and acknowledges as the orchestrator does (double
    ack), unless told to hold it (`hold`) or to fail (`boom`, `refuse`)."""

    seen: asyncio.Queue[Seen] = field(default_factory=asyncio.Queue)
    hold: asyncio.Event = field(default_factory=asyncio.Event)
    running: int = 0
    most: int = 0

    async def __call__(self, body: Job, msg: Msg, context: object) -> None:
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            self.seen.put_nowait(Seen(body.name, msg.metadata.num_delivered, context, telemetry.current_trace_id()))
            if body.name == "boom":
                raise RuntimeError("a bug")
            if body.name == "refuse":
                raise SpotterError(ErrorCode.FORBIDDEN, "not yours")
            if body.name.startswith("hold"):
                await self.hold.wait()
            await msg.ack_sync()
        finally:
            self.running -= 1

    async def next(self) -> Seen:
        return await asyncio.wait_for(self.seen.get(), TIMEOUT)


@dataclass(frozen=True)
class Stream:
    endpoint: Endpoint[Job, None]
    durable: str


@pytest.fixture
async def stream(stack) -> AsyncIterator[Stream]:
    name = f"TESTPULL_{uuid.uuid4().hex[:12]}"
    subject = f"test.pull.{uuid.uuid4().hex}"
    broker = NatsBroker(stack.nats_url)
    await broker.connect()
    js = broker.connection.jetstream()
    await js.add_stream(StreamConfig(name=name, subjects=[subject]))
    await ensure_streams(broker)  # the dead-letter stream
    yield Stream(Endpoint(subject, Job, "command", "Do a job.", stream=name), f"worker-{uuid.uuid4().hex[:8]}")
    await js.delete_stream(name)
    await broker.stop()


Start = Callable[..., Awaitable[tuple[bus.Pulling, NatsBroker]]]


@pytest.fixture
async def start(stack, stream: Stream) -> AsyncIterator[Start]:
    """Start a replica: its own broker and pullers on the stream's durable consumer."""
    replicas: list[tuple[bus.Pulling, NatsBroker]] = []

    async def replica(handler: Worker, *, max_workers: int = 4, ack_wait: float = 30.0, context: object = "ctx"):
        broker = NatsBroker(stack.nats_url)
        router = NatsRouter()
        pullers = bus.Pullers(router)
        pullers(stream.endpoint, stream=JStream(name=stream.endpoint.stream, declare=False), durable=stream.durable,
                config=ConsumerConfig(ack_wait=ack_wait, max_deliver=-1, max_ack_pending=1000),
                max_workers=max_workers, poll_s=1.0)(handler)
        broker.include_router(router)
        await broker.connect()
        pulling = await pullers.start(broker, context)
        await broker.start()
        # FastStream was given the router (the AsyncAPI document sees it) but never subscribes it.
        assert router not in broker.routers and all(sub.subscription is None for sub in router.subscribers)
        replicas.append((pulling, broker))
        return pulling, broker

    yield replica
    for pulling, broker in replicas:
        await pulling.stop(grace_s=1.0)
        await broker.stop()


async def publish(broker: NatsBroker, stream: Stream, payload: bytes, headers: dict[str, str] | None = None) -> str:
    msg_id = str(uuid.uuid4())
    await broker.connection.jetstream().publish(stream.endpoint.subject, payload, stream=stream.endpoint.stream,
                                                headers={**publish_headers(msg_id=msg_id), **(headers or {})})
    return msg_id


async def pending(broker: NatsBroker, stream: Stream) -> tuple[int, int]:
    info = await broker.connection.jetstream().consumer_info(stream.endpoint.stream, stream.durable)
    return info.num_pending, info.num_ack_pending


async def eventually(check: Callable[[], Awaitable[bool]]) -> None:
    async with asyncio.timeout(TIMEOUT):
        while not await check():
            await asyncio.sleep(0.02)


async def test_a_command_reaches_its_handler_typed_with_its_message_and_context_and_is_acknowledged(
    stream: Stream, start: Start,
) -> None:
    worker = Worker()
    _, broker = await start(worker)
    await publish(broker, stream, Job(name="sweep").to_bytes())
    seen = await worker.next()
    assert (seen.name, seen.attempt, seen.context) == ("sweep", 1, "ctx")
    await eventually(lambda: _is(pending(broker, stream), (0, 0)))


async def test_no_more_messages_are_taken_than_there_are_workers(stream: Stream, start: Start) -> None:
    worker = Worker()
    _, broker = await start(worker, max_workers=2)
    for i in range(5):
        await publish(broker, stream, Job(name=f"hold-{i}").to_bytes())
    await worker.next()
    await worker.next()
    await asyncio.sleep(0.3)  # time enough for a third to be taken, if one were
    # Two in the handlers (delivered, not acknowledged); three still in JetStream for another replica.
    assert await pending(broker, stream) == (3, 2)
    assert worker.seen.empty()
    worker.hold.set()
    for _ in range(3):
        await worker.next()
    await eventually(lambda: _is(pending(broker, stream), (0, 0)))
    assert worker.most == 2


async def test_bad_input_and_a_refusal_are_parked_and_acknowledged_and_a_bug_comes_back(stream: Stream, start: Start) -> None:
    worker = Worker()
    _, broker = await start(worker, ack_wait=1.0)
    js = broker.connection.jetstream()
    parked = await js.subscribe(dead_letter_subject(stream.endpoint.subject), stream=DLQ_STREAM, ordered_consumer=True,
                                deliver_policy=DeliverPolicy.NEW)
    bad = [b"{not json", b'{"nom": "x"}', Job(name="refuse").to_bytes()]
    ids = [await publish(broker, stream, payload) for payload in bad]
    letters: dict[str | None, DeadLetter] = {}
    while len(letters) < len(ids):
        letter = DeadLetter.model_validate_json((await parked.next_msg(timeout=TIMEOUT)).data)
        letters[letter.msg_id] = letter
    await parked.unsubscribe()
    reasons = [letters[i].reason for i in ids]
    assert reasons[0].startswith(f"{ErrorCode.INVALID_REQUEST}: body: ")
    assert reasons[1] == f"{ErrorCode.INVALID_REQUEST}: name: Field required"
    assert reasons[2] == f"{ErrorCode.FORBIDDEN}: not yours"
    assert [letters[i].payload for i in ids] == [p.decode() for p in bad]
    assert (await worker.next()).name == "refuse"  # only the valid one reached the handler

    # A bug: not parked, not acknowledged; JetStream delivers it again after the ack wait.
    await publish(broker, stream, Job(name="boom").to_bytes())
    assert ((await worker.next()).name, (await worker.next()).attempt) == ("boom", 2)
    # And the puller keeps serving.
    await publish(broker, stream, Job(name="after").to_bytes())
    while (seen := await worker.next()).name != "after":
        pass
    assert seen.attempt == 1


@pytest.mark.parametrize("recorded", [True, False], ids=["spans recorded", "spans not recorded"])
async def test_the_producers_trace_is_continued(stream: Stream, start: Start, recorded: bool,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(telemetry, "_recording", recorded)
    worker = Worker()
    _, broker = await start(worker)
    trace_id = secrets.token_hex(16)
    await publish(broker, stream, Job(name="traced").to_bytes(),
                  headers={"traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"})
    assert (await worker.next()).trace_id == trace_id


async def test_stopping_gives_back_what_was_being_handled_and_another_replica_takes_it_at_once(
    stream: Stream, start: Start,
) -> None:
    first = Worker()
    pulling, broker = await start(first, ack_wait=30.0, context="first")
    await publish(broker, stream, Job(name="hold-me").to_bytes())
    assert (await first.next()).context == "first"
    await pulling.stop(grace_s=1.0)
    assert first.running == 0  # cancelled, not left running

    second = Worker()
    second.hold.set()
    await start(second, ack_wait=30.0, context="second")
    # Well within the 30 s ack wait: given back (nak), not waited out.
    seen = await second.next()
    assert (seen.name, seen.attempt, seen.context) == ("hold-me", 2, "second")
    await eventually(lambda: _is(pending(broker, stream), (0, 0)))


async def _is(value: Awaitable[object], expected: object) -> bool:
    return await value == expected


async def test_a_burst_is_asked_for_in_one_pull_request_not_one_a_message(stack, stream: Stream, start: Start) -> None:
    """Commands that arrive together reach their handlers together: the replica asks JetStream for as many
    as it has free workers in one request, answered as they come, instead of a request's round trip per
    command (fetch(1) in a loop). Seen from outside: the pull requests on the consumer's MSG.NEXT subject."""
    spy = NatsBroker(stack.nats_url)
    await spy.connect()
    asked: list[dict] = []

    async def seen(msg: Msg) -> None:
        asked.append(json.loads(msg.data))

    requests = await spy.connection.subscribe(f"$JS.API.CONSUMER.MSG.NEXT.{stream.endpoint.stream}.{stream.durable}", cb=seen)
    try:
        worker = Worker()
        _, broker = await start(worker, max_workers=8)
        await eventually(lambda: _true(bool(asked)))
        for i in range(6):
            await publish(broker, stream, Job(name=f"hold-{i}").to_bytes())
        assert sorted([(await worker.next()).name for _ in range(6)]) == [f"hold-{i}" for i in range(6)]
        # The first request asked for all eight; the six came on it (a second, at most, if it expired
        # meanwhile: requests live a second). fetch(1) in a loop would have sent seven.
        assert asked[0]["batch"] == 8
        assert len(asked) <= 2
        before = len(asked)
        worker.hold.set()
        await eventually(lambda: _is(pending(broker, stream), (0, 0)))
        # Workers freed: asked for again, never for more than there are workers.
        await eventually(lambda: _true(len(asked) > before))
        assert all(1 <= a["batch"] <= 8 for a in asked)
    finally:
        await requests.unsubscribe()
        await spy.stop()


async def _true(value: bool) -> bool:
    return value


async def test_an_expired_pull_request_is_asked_for_again_at_once(stack, stream: Stream, start: Start) -> None:
    """A pull request lives a second; the server's 408 says how many it still owed, so the replica asks
    again at once (not only once its fallback, a second later still, says every request must be gone)."""
    spy = NatsBroker(stack.nats_url)
    await spy.connect()
    loop = asyncio.get_running_loop()
    asked: list[tuple[float, int, str]] = []  # when, batch, the inbox it is answered on
    expired: list[tuple[float, str | None]] = []  # when, what it still owed

    async def request(msg: Msg) -> None:
        asked.append((loop.time(), json.loads(msg.data)["batch"], msg.reply))

    async def answer(msg: Msg) -> None:
        if msg.headers and msg.headers.get("Status") == "408":
            expired.append((loop.time(), msg.headers.get("Nats-Pending-Messages")))

    subs = [await spy.connection.subscribe(f"$JS.API.CONSUMER.MSG.NEXT.{stream.endpoint.stream}.{stream.durable}",
                                           cb=request)]
    try:
        await start(Worker(), max_workers=3)
        await eventually(lambda: _true(bool(asked)))
        subs.append(await spy.connection.subscribe(asked[0][2], cb=answer))
        await eventually(lambda: _true(bool(expired) and asked[-1][0] > expired[0][0]))
        when, owed = expired[0]
        assert owed == "3"
        again = min(t for t, _, _ in asked if t > when)
        assert again - when < 0.5  # the fallback would be ≥ 1 s later
        assert {batch for _, batch, _ in asked} == {3}
    finally:
        for sub in subs:
            await sub.unsubscribe()
        await spy.stop()


async def test_stopping_as_a_worker_frees_up_does_not_hang(stack, stream: Stream) -> None:
    """`stop` as a handler finishes (its worker freed, the pull loop woken, in the same step): the loop stops.
    With asyncio.wait_for in the loop, Python 3.11 swallows that cancel and `stop` waits forever."""
    broker = NatsBroker(stack.nats_url)
    await broker.connect()
    handed: list[tuple[Msg, Callable[[], None]]] = []
    puller = bus.Puller(broker.connection, stream=stream.endpoint.stream, durable=stream.durable,
                        subject=stream.endpoint.subject, config=ConsumerConfig(ack_wait=30.0), max_workers=1, poll_s=1.0,
                        deliver=lambda msg, done: handed.append((msg, done)))
    try:
        await puller.start()
        await publish(broker, stream, Job(name="one").to_bytes())
        await eventually(lambda: _true(bool(handed)))
        await asyncio.sleep(0.05)  # the loop, its one worker busy, waits to be woken
        msg, done = handed[0]
        await msg.ack_sync()
        done()
        await asyncio.wait_for(puller.stop(), TIMEOUT)
    finally:
        await broker.stop()
