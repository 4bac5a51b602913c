"""EventFeed's gap logic: live events over real NATS through the gateway's own subscription
(LiveEvents.subscribe → EventFeed.offer), the log from a list.

`ListFeed` overrides only `read_after` (no Postgres: it serves `Conversation.log` and counts its
calls), so each test states exactly when the log is read. `Conversation.emit` stores then publishes,
in the orchestrator's order; `store` alone is a lost publish, `publish` alone a late duplicate.
Tests that count log reads set POLL_S far beyond their timeouts, so only a live event can wake the
feed; tests that need a quiet poll interval shorten it instead. Nothing sleeps."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field

import pytest
from faststream.nats import NatsBroker

from spotter_gateway import streams
from spotter_gateway.streams import EventFeed, LiveEvents, LoggedEvent, StopRule, StreamIdle
from spotter_shared.contracts.events import ConversationEvent, Done, SseEvent, TextDelta, TurnUsage, conversation_subject

WAIT_S = 5.0


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

    def __init__(self, conversation: Conversation, live: LiveEvents) -> None:
        super().__init__(None, live, conversation.id)  # type: ignore[arg-type] — no pool: the log is a list
        self.conversation = conversation
        self.reads: list[int] = []
        self._read = asyncio.Condition()

    async def read_after(self, after: int) -> list[LoggedEvent]:
        batch = [e for e in self.conversation.log if e.seq > after]
        async with self._read:
            self.reads.append(after)
            self._read.notify_all()
        return batch

    async def until_reads(self, count: int) -> None:
        async with self._read:
            await asyncio.wait_for(self._read.wait_for(lambda: len(self.reads) >= count), WAIT_S)


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
        # The last event lands between the feed's empty read and this check: the re-read finds it.
        checks.append(len(feed.reads))
        conversation.store(2)
        return False

    async with events(feed, still_running=finished_just_now) as stream:
        assert [e.seq for e in await drain(stream)] == [1, 2]
    assert checks == [2]  # asked once, after a read found nothing past 1
    assert feed.reads == [0, 1, 1]


@pytest.mark.usefixtures("quiet_after_poll")
async def test_an_idle_stream_raises_stream_idle(conversation: Conversation, feed: ListFeed) -> None:
    async with events(feed, idle_s=0.05) as stream:
        with pytest.raises(StreamIdle):
            await drain(stream)
    assert feed.reads and set(feed.reads) == {0}  # it polled the log while it waited
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
