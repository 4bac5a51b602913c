"""EventFeed's gap logic and the replica's watchdog over quiet feeds: live events over real NATS through
the gateway's own subscription (LiveEvents.subscribe → EventFeed.offer), leases in real Redis, the log
from a list.

`ListFeed` overrides only `read_after` and `behind` (no Postgres: it serves `Conversation.log` and
counts its calls), so each test states exactly when the log is read or looked at. `Conversation.emit`
stores then publishes, in the orchestrator's order; `store` alone is a lost publish, `publish` alone
a late duplicate. Tests that count log reads set POLL_S (the watchdog's period) far beyond their
timeouts, so only a live event can wake the feed; tests that need the watchdog shorten it instead.
Nothing sleeps."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field

import pytest
from faststream.nats import NatsBroker
from opentelemetry.instrumentation.utils import is_instrumentation_enabled
from redis.asyncio import Redis
from sse_starlette.sse import AppStatus

from spotter_cli.devstack import StackUrls
from spotter_gateway import streams
from spotter_gateway.streams import EventFeed, LiveEvents, LoggedEvent, StopRule, StreamIdle
from spotter_shared.contracts.events import ConversationEvent, Done, SseEvent, TextDelta, TurnUsage, conversation_subject
from spotter_shared.turnlock import TurnLock

WAIT_S = 5.0
REQUEST: contextvars.ContextVar[str] = contextvars.ContextVar("request")  # stands for a request's trace context


@dataclass
class Conversation:
    broker: NatsBroker
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    turn_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    log: list[LoggedEvent] = field(default_factory=list)
    done_at: int | None = None  # the seq whose event is `done`; every other one is a text delta

    def envelope(self, seq: int) -> ConversationEvent:
        event: SseEvent = TextDelta(delta=f"part {seq}")
        if seq == self.done_at:
            event = Done(conversation_id=self.id, usage=TurnUsage())
        return ConversationEvent(conversation_id=self.id, seq=seq, turn_id=self.turn_id, event=event)

    def store(self, *seqs: int) -> list[LoggedEvent]:
        """Append to the log, as the orchestrator's insert does (the same JSON the feed dumps)."""
        stored = []
        for seq in seqs:
            data = self.envelope(seq).event.model_dump(mode="json", exclude_none=True)
            stored.append(LoggedEvent(seq=seq, turn_id=self.turn_id, type=data["type"], data=data))
        self.log += stored
        return stored

    async def publish(self, seq: int) -> None:
        await self.send(self.envelope(seq).to_bytes())

    async def send(self, payload: bytes) -> None:
        await self.broker.publish(payload, conversation_subject(self.id))

    async def emit(self, seq: int) -> LoggedEvent:
        (event,) = self.store(seq)
        await self.publish(seq)
        return event


class ListFeed(EventFeed):
    """An EventFeed whose log is `conversation.log`; `reads` lists the cursor of every read."""

    def __init__(self, conversation: Conversation, live: LiveEvents, leases: Redis | None = None) -> None:
        super().__init__(None, live, conversation.id, leases)  # type: ignore[arg-type] — no pool: the log is a list
        self.conversation = conversation
        self.reads: list[int] = []
        self.looks = 0  # the watchdog's looks at the log
        self.look_contexts: list[tuple[str | None, bool]] = []  # REQUEST and whether spans are made, at each look
        self._read = asyncio.Condition()

    @classmethod
    async def behind(cls, pool: None, feeds: list[EventFeed]) -> list[EventFeed]:  # type: ignore[override]
        found = []
        for feed in feeds:
            assert isinstance(feed, ListFeed)
            feed.look_contexts.append((REQUEST.get(None), is_instrumentation_enabled()))
            async with feed._read:
                feed.looks += 1
                feed._read.notify_all()
            if any(e.seq > feed.cursor for e in feed.conversation.log):
                found.append(feed)
        return found

    async def read_after(self, after: int) -> list[LoggedEvent]:
        batch = [e for e in self.conversation.log if e.seq > after]
        async with self._read:
            self.reads.append(after)
            self._read.notify_all()
        return batch

    async def until_reads(self, count: int) -> None:
        async with self._read:
            await asyncio.wait_for(self._read.wait_for(lambda: len(self.reads) >= count), WAIT_S)

    async def until_looks(self, count: int) -> None:
        async with self._read:
            await asyncio.wait_for(self._read.wait_for(lambda: self.looks >= count), WAIT_S)


def never(event: LoggedEvent) -> bool:
    return False


def is_done(event: LoggedEvent) -> bool:
    return event.type == "done"


async def running() -> bool:
    return True


def events(
    feed: ListFeed,
    after: int = 0,
    stop: StopRule = never,
    still_running: Callable[[], Awaitable[bool]] = running,
    idle_s: float = 60.0,
) -> aclosing[AsyncIterator[LoggedEvent]]:
    return aclosing(feed.events(after, stop, idle_s, still_running))


async def ends_stream(feed: ListFeed, ready: Callable[[], Awaitable[object]], stop: Callable[[], object]) -> None:
    """Read the feed's events, wait until `ready`, then `stop`: the stream must end."""
    async with events(feed) as stream:
        first = asyncio.create_task(anext(stream))
        await ready()
        stop()
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(first, WAIT_S)


async def take(stream: AsyncIterator[LoggedEvent], count: int) -> list[LoggedEvent]:
    return [await asyncio.wait_for(anext(stream), WAIT_S) for _ in range(count)]


async def drain(stream: AsyncIterator[LoggedEvent]) -> list[LoggedEvent]:
    async def collect() -> list[LoggedEvent]:
        return [event async for event in stream]

    return await asyncio.wait_for(collect(), WAIT_S)


@pytest.fixture
def conversation(live_broker: tuple[NatsBroker, LiveEvents]) -> Conversation:
    return Conversation(live_broker[0])


@pytest.fixture
async def feed(conversation: Conversation, live_broker: tuple[NatsBroker, LiveEvents]) -> AsyncIterator[ListFeed]:
    opened = await ListFeed(conversation, live_broker[1]).open()
    yield opened
    await opened.close()


@pytest.fixture
def quiet_after_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(streams, "POLL_S", 0.01)


@pytest.fixture
def no_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(streams, "POLL_S", 3600.0)


@pytest.mark.usefixtures("no_poll")
async def test_in_order_live_events_are_served_without_reading_the_log(conversation: Conversation, feed: ListFeed) -> None:
    async with events(feed) as stream:
        first = asyncio.create_task(anext(stream))
        await feed.until_reads(1)  # the log was read once, empty, and the feed now waits
        one = await conversation.emit(1)
        assert await asyncio.wait_for(first, WAIT_S) == one
        rest = [await conversation.emit(2), await conversation.emit(3)]
        assert await take(stream, 2) == rest
    assert feed.reads == [0]


@pytest.mark.usefixtures("no_poll")
async def test_a_gap_is_read_from_the_log_and_what_it_covered_is_dropped(conversation: Conversation, feed: ListFeed) -> None:
    conversation.store(1, 2, 3)
    async with events(feed, after=3) as stream:
        first = asyncio.create_task(anext(stream))
        await feed.until_reads(1)
        four = conversation.store(4)  # its publish is lost
        five = await conversation.emit(5)  # seq 5 while the cursor is at 3: a gap
        assert [await asyncio.wait_for(first, WAIT_S), *await take(stream, 1)] == [*four, five]
        assert feed.reads == [3, 3]
        # Live 5 is still held, but the log read covered it: 6 follows, from NATS, with no read.
        six = await conversation.emit(6)
        assert await take(stream, 1) == [six]
        assert feed._live == {}
    assert feed.reads == [3, 3]


@pytest.mark.usefixtures("no_poll")
async def test_late_live_copies_of_logged_events_are_not_served_again(conversation: Conversation, feed: ListFeed) -> None:
    conversation.done_at = 5
    async with events(feed, stop=is_done) as stream:
        first = asyncio.create_task(anext(stream))
        await feed.until_reads(1)
        conversation.store(1, 2)
        await conversation.emit(3)
        assert [e.seq for e in [await asyncio.wait_for(first, WAIT_S), *await take(stream, 2)]] == [1, 2, 3]
        await conversation.publish(2)  # arrives after the read that served it
        await conversation.publish(3)
        await conversation.emit(4)
        await conversation.emit(5)
        assert [e.seq for e in await drain(stream)] == [4, 5]


@pytest.mark.usefixtures("no_poll")
async def test_a_live_event_published_twice_is_served_once(conversation: Conversation, feed: ListFeed) -> None:
    conversation.done_at = 3
    async with events(feed, stop=is_done) as stream:
        first = asyncio.create_task(anext(stream))
        await feed.until_reads(1)
        one = await conversation.emit(1)
        assert await asyncio.wait_for(first, WAIT_S) == one
        await conversation.publish(1)  # a duplicate of what was served
        two = await conversation.emit(2)
        await conversation.publish(2)  # a duplicate of what is not served yet
        three = await conversation.emit(3)
        assert await drain(stream) == [two, three]


@pytest.mark.usefixtures("no_poll")
async def test_the_stop_rule_ends_the_stream_and_closes_the_subscription(conversation: Conversation, feed: ListFeed) -> None:
    conversation.done_at = 2
    conversation.store(1, 2, 3)
    async with events(feed, stop=is_done) as stream:
        assert [e.seq for e in await drain(stream)] == [1, 2]
    assert feed.reads == [0]
    assert not feed._attached  # the feed left LiveEvents when its stream ended


@pytest.mark.usefixtures("quiet_after_poll")
async def test_when_nothing_runs_the_log_is_read_once_more_then_the_stream_ends(
    conversation: Conversation, feed: ListFeed
) -> None:
    conversation.store(1)
    checks: list[int] = []

    async def finished_just_now() -> bool:
        # The last event lands between the feed's read and this check: the re-read finds it.
        checks.append(len(feed.reads))
        conversation.store(2)
        return False

    async with events(feed, still_running=finished_just_now) as stream:
        assert [e.seq for e in await drain(stream)] == [1, 2]
    assert checks == [1]  # asked once, when the feed had nothing more to serve
    assert feed.reads == [0, 1]


@pytest.mark.usefixtures("quiet_after_poll")
async def test_an_idle_stream_raises_stream_idle(conversation: Conversation, feed: ListFeed) -> None:
    async with events(feed, idle_s=0.05) as stream:
        with pytest.raises(StreamIdle):
            await drain(stream)
    assert feed.reads == [0]
    assert feed.looks > 0  # the watchdog looked at its log while it waited
    assert not feed._attached  # the feed left LiveEvents when its stream ended


def other_conversations_event(conversation: Conversation) -> bytes:
    # Seq 2: were it handed to this feed, it would be served right after our 1 (or cause a gap read).
    return Conversation(conversation.broker).envelope(2).to_bytes()


@pytest.mark.usefixtures("no_poll")
@pytest.mark.parametrize(
    "payload",
    [lambda c: b"not json", lambda c: b'{"seq": 1, "turnId": "t"}', other_conversations_event],
    ids=["not-json", "not-an-event", "another-conversation"],
)
async def test_a_message_that_is_not_this_conversations_event_never_reaches_the_feed(
    conversation: Conversation, feed: ListFeed, payload: Callable[[Conversation], bytes]
) -> None:
    async with events(feed) as stream:
        first = asyncio.create_task(anext(stream))
        await feed.until_reads(1)
        await conversation.send(payload(conversation))
        # Had it woken the feed, the log (which has 1 by then) would have been read again.
        one = await conversation.emit(1)
        assert await asyncio.wait_for(first, WAIT_S) == one
        two = await conversation.emit(2)
        assert await take(stream, 1) == [two]
    assert feed.reads == [0]
    assert feed._live == {}


# The watchdog ---------------------------------------------------------------------------------------------


@pytest.fixture
async def redis(stack: StackUrls) -> AsyncIterator[Redis]:
    client = Redis.from_url(stack.redis_url, decode_responses=True)
    yield client
    await client.aclose()


@pytest.mark.usefixtures("quiet_after_poll")
async def test_a_lost_last_publish_is_found_by_the_watchdog(conversation: Conversation, feed: ListFeed) -> None:
    async with events(feed) as stream:
        first = asyncio.create_task(anext(stream))
        await feed.until_reads(1)
        (one,) = conversation.store(1)  # stored, its publish lost, and nothing follows it
        assert await asyncio.wait_for(first, WAIT_S) == one
    assert feed.reads == [0, 0]
    assert feed.looks >= 2  # found ahead twice at the same cursor before it was read


@pytest.mark.usefixtures("no_poll")
async def test_a_log_found_ahead_is_read_only_when_found_so_twice_without_progress(conversation: Conversation, feed: ListFeed) -> None:
    async with events(feed) as stream:
        first = asyncio.create_task(anext(stream))
        await feed.until_reads(1)
        (one,) = conversation.store(1)  # stored, its publish on the way
        feed.found_behind()  # the watchdog's look in between: no read
        await conversation.publish(1)
        assert await asyncio.wait_for(first, WAIT_S) == one
        second = asyncio.create_task(anext(stream))
        (two,) = conversation.store(2)  # its publish lost
        feed.found_behind()  # at cursor 1 for the first time: no read
        await asyncio.sleep(0)
        assert not second.done() and feed.reads == [0]
        feed.found_behind()  # again at cursor 1: read
        assert await asyncio.wait_for(second, WAIT_S) == two
    assert feed.reads == [0, 1]


@pytest.mark.usefixtures("quiet_after_poll")
async def test_while_a_lease_is_held_the_turn_is_not_asked_about_and_when_it_is_released_the_stream_ends(
    conversation: Conversation, live_broker: tuple[NatsBroker, LiveEvents], redis: Redis
) -> None:
    lock = TurnLock(redis, 60)
    assert await lock.claim(conversation.id, conversation.turn_id)
    conversation.store(1)
    asked: list[str | None] = []

    async def running() -> bool:
        asked.append(await lock.holder(conversation.id))
        return asked[-1] is not None

    feed = await ListFeed(conversation, live_broker[1], leases=redis).open()
    async with events(feed, still_running=running) as stream:
        assert [e.seq for e in await take(stream, 1)] == [1]
        rest = asyncio.create_task(drain(stream))
        await feed.until_looks(3)
        assert asked == [conversation.turn_id]  # at the start only: the held lease answered every look since
        # The turn's last event is stored, its lease let go, and the event's publish is lost.
        conversation.store(2)
        await lock.release(conversation.id, conversation.turn_id)
        assert [e.seq for e in await rest] == [2]
    assert asked == [conversation.turn_id, None]
    assert not feed._attached


@pytest.mark.usefixtures("quiet_after_poll")
async def test_a_quiet_feed_yields_an_empty_batch_as_its_keep_alive(conversation: Conversation, feed: ListFeed) -> None:
    async with aclosing(feed.batches(0, never, 60.0, running, ping_s=0.05)) as batches:
        assert await asyncio.wait_for(anext(batches), WAIT_S) == []
        one = await conversation.emit(1)
        assert await asyncio.wait_for(anext(batches), WAIT_S) == [one]


@pytest.mark.usefixtures("no_poll")
async def test_a_hung_up_feed_ends_its_stream_and_leaves_live_events(conversation: Conversation, feed: ListFeed) -> None:
    await ends_stream(feed, lambda: feed.until_reads(1), feed.hang_up)
    assert not feed._attached


@pytest.mark.usefixtures("no_poll")
async def test_events_ready_together_come_in_one_batch(conversation: Conversation, feed: ListFeed) -> None:
    conversation.done_at = 4
    stored = conversation.store(1, 2, 3, 4, 5)
    async with aclosing(feed.batches(0, is_done, 60.0, running)) as batches:
        assert await drain(batches) == [stored[:4]]  # one read, one batch, cut at the stop event
    assert feed.reads == [0]


@pytest.mark.usefixtures("quiet_after_poll")
async def test_when_the_server_stops_the_watchdog_ends_every_stream(
    conversation: Conversation, feed: ListFeed, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What uvicorn's SIGTERM handler sets (via sse-starlette).
    await ends_stream(feed, lambda: feed.until_reads(1), lambda: monkeypatch.setattr(AppStatus, "should_exit", True))
    assert not feed._attached


@pytest.mark.usefixtures("quiet_after_poll")
async def test_the_watchdog_runs_outside_the_request_that_started_it_and_makes_no_spans(
    conversation: Conversation, live_broker: tuple[NatsBroker, LiveEvents]
) -> None:
    live = LiveEvents()  # no watchdog yet: this test's feed starts it
    token = REQUEST.set("the request that opened the first stream")
    try:
        feed = await ListFeed(conversation, live).open()
    finally:
        REQUEST.reset(token)
    await ends_stream(feed, lambda: feed.until_looks(1), feed.hang_up)
    assert feed.look_contexts and set(feed.look_contexts) == {(None, False)}


@pytest.mark.usefixtures("no_poll")
async def test_the_watchdog_sends_at_most_pings_per_look_keep_alives_at_once(
    live_broker: tuple[NatsBroker, LiveEvents], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(streams, "PINGS_PER_LOOK", 2)
    live = live_broker[1]
    feeds = [await ListFeed(Conversation(live_broker[0]), live).open() for _ in range(5)]
    asked, all_waiting = [0], asyncio.Event()

    async def still_running() -> bool:
        # Its answer is the feed's last step before it waits: once all five answered, all five wait.
        asked[0] += 1
        if asked[0] == len(feeds):
            all_waiting.set()
        return True

    async with contextlib.AsyncExitStack() as stack:
        batches = [await stack.enter_async_context(aclosing(f.batches(0, never, 60.0, still_running, ping_s=0.01))) for f in feeds]
        pending = {feed: asyncio.create_task(anext(b)) for feed, b in zip(feeds, batches)}
        await asyncio.wait_for(all_waiting.wait(), WAIT_S)
        for expected in (2, 2, 1):
            await live._look(time.monotonic() + 1.0)  # a look well after every ping came due
            pinged = [feed for feed in pending if feed._ping]
            assert len(pinged) == expected
            assert await asyncio.wait_for(asyncio.gather(*(pending.pop(feed) for feed in pinged)), WAIT_S) == [[]] * expected
        for feed in feeds:
            feed.hang_up()


@pytest.mark.usefixtures("no_poll")
async def test_a_log_read_ahead_and_a_turn_known_to_run_cost_the_stream_no_query(conversation: Conversation, feed: ListFeed) -> None:
    """A send's stream: the log after its cursor was read while the command was published (`known`), and
    the turn was just published (`running`): the stream starts with neither a read nor a check."""
    conversation.done_at = 4
    known = conversation.store(1, 2)
    asked = 0

    async def still_running() -> bool:
        nonlocal asked
        asked += 1
        return True

    batches = feed.batches(0, is_done, 60.0, still_running, known=known, running=True)
    async with aclosing(batches) as stream:
        assert await asyncio.wait_for(anext(stream), WAIT_S) == known
        three = await conversation.emit(3)
        done = await conversation.emit(4)
        served = []
        async for batch in stream:
            served += batch
        assert served == [three, done]
    assert feed.reads == [] and asked == 0


@pytest.mark.usefixtures("no_poll")
async def test_a_gap_after_the_events_read_ahead_is_still_read(conversation: Conversation, feed: ListFeed) -> None:
    conversation.done_at = 3
    known = conversation.store(1)
    two = conversation.store(2)  # stored after the read ahead; its publish is lost
    batches = feed.batches(0, is_done, 60.0, running, known=known, running=True)
    async with aclosing(batches) as stream:
        assert await asyncio.wait_for(anext(stream), WAIT_S) == known
        done = await conversation.emit(3)  # 3 while the cursor is at 1: the gap is read
        assert await asyncio.wait_for(anext(stream), WAIT_S) == [*two, done]
    assert feed.reads == [1]
