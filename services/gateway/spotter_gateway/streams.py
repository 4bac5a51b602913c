"""Serving a conversation's event log as SSE: stored events after a sequence number, then live
events from NATS, in order and each once. A live event is used as it arrives only when it is the
very next sequence number (it was stored before it was published); any gap — a lost publish, a
subscriber that started late — is re-read from the log, so NATS can drop anything without the
client noticing."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg

from spotter_shared.contracts.coach import SessionEventOut
from spotter_shared.contracts.events import CONVERSATION_EVENTS, ConversationEvent
from spotter_shared.db import decoded

log = logging.getLogger(__name__)

POLL_S = 1.0
# A quiet stream looks at the log and the turn less and less often (1, 2, 4, 4 … × POLL_S): a live event
# still wakes it at once, and only a lost publish waits for the next look. Five thousand idle streams
# polling every second were 5,000 queries a second (bench/bench_fanout.py).
QUIET_POLL_MAX = 4


@dataclass(frozen=True)
class LoggedEvent:
    seq: int
    turn_id: str
    type: str
    data: dict[str, Any]

    def sse(self) -> dict[str, Any]:
        return {"event": self.type, "id": str(self.seq), "data": json.dumps(self.data, ensure_ascii=False)}


# Decides, after each event, whether the stream is complete.
StopRule = Callable[[LoggedEvent], bool]


class LiveEvents:
    """This replica's one subscription to every conversation's live events (`subscribe`, a bare NATS
    subscription) and to every session's (the subscriber in edges.py), handed to the streams open here
    for that log."""

    def __init__(self) -> None:
        self._feeds: dict[str, set[EventFeed]] = defaultdict(set)

    def attach(self, feed: EventFeed) -> None:
        self._feeds[feed.conversation_id].add(feed)

    def detach(self, feed: EventFeed) -> None:
        feeds = self._feeds.get(feed.conversation_id)
        if feeds is not None:
            feeds.discard(feed)
            if not feeds:
                del self._feeds[feed.conversation_id]

    async def subscribe(self, nc: NatsClient) -> None:
        """Every conversation's live events, straight off the connection (see edges.py)."""
        await nc.subscribe(CONVERSATION_EVENTS.subject, cb=self._on_message)

    async def _on_message(self, msg: Msg) -> None:
        conversation_id = msg.subject.rpartition(".")[2]
        if conversation_id not in self._feeds:
            return
        try:
            envelope = json.loads(msg.data)
            if envelope["conversationId"] != conversation_id:
                raise ValueError("another conversation's event")
            data = envelope["event"]
            event = LoggedEvent(seq=int(envelope["seq"]), turn_id=str(envelope["turnId"]), type=str(data["type"]), data=data)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("unreadable live event on %s (the log has it): %r", msg.subject, exc)
            return
        self._offer(conversation_id, event)

    def deliver(self, envelope: ConversationEvent) -> None:
        """Same dump as the orchestrator stored, so live and replayed bytes are identical."""
        data = envelope.event.model_dump(mode="json", exclude_none=True)
        self._offer(envelope.conversation_id, LoggedEvent(seq=envelope.seq, turn_id=envelope.turn_id, type=data["type"], data=data))

    def deliver_session(self, out: SessionEventOut) -> None:
        self._offer(out.session_id, LoggedEvent(seq=out.sequence, turn_id=str(out.metadata.get("runId", "")),
                                                type=out.event_type, data=session_data(out.content, out.metadata)))

    def _offer(self, key: str, event: LoggedEvent) -> None:
        for feed in tuple(self._feeds.get(key, ())):
            feed.offer(event)


def session_data(content: Any, metadata: Any) -> dict[str, Any]:
    return {"content": content, "metadata": metadata}


class EventFeed:
    """Attach first, read after: nothing published in between can be missed."""

    def __init__(self, pool: asyncpg.Pool, live: LiveEvents, conversation_id: str) -> None:
        self._pool = pool
        self._live_events = live
        self.conversation_id = conversation_id
        self._wake = asyncio.Event()
        self._attached = False
        self._live: dict[int, LoggedEvent] = {}

    async def open(self) -> EventFeed:
        self._live_events.attach(self)
        self._attached = True
        return self

    async def close(self) -> None:
        if self._attached:
            self._live_events.detach(self)
            self._attached = False

    def offer(self, event: LoggedEvent) -> None:
        """A live event of this log; whether it is used is decided by the sequence (`_take_live`)."""
        self._live[event.seq] = event
        self._wake.set()

    def _take_live(self, after: int) -> list[LoggedEvent]:
        """Live events that continue the sequence right after `after`; empty when there is a gap."""
        for seq in [seq for seq in self._live if seq <= after]:
            del self._live[seq]
        taken = []
        while after + 1 in self._live:
            after += 1
            taken.append(self._live.pop(after))
        return taken

    async def read_after(self, after: int) -> list[LoggedEvent]:
        rows = await self._pool.fetch(
            """SELECT seq, turn_id, type, data FROM ai_conversation_events
               WHERE conversation_id = $1 AND seq > $2 ORDER BY seq LIMIT 1000""",
            uuid.UUID(self.conversation_id), after,
        )
        return [LoggedEvent(seq=r["seq"], turn_id=str(r["turn_id"]), type=r["type"], data=r["data"]) for r in rows]

    async def events(self, after: int, stop: StopRule, idle_timeout_s: float, still_running: Callable[[], Any]) -> AsyncIterator[LoggedEvent]:
        """Yield events with seq > after until `stop` says so, or until nothing is running and the
        log is exhausted, or until idle for idle_timeout_s."""
        cursor = after
        idle = 0.0
        # Whether the run state must be looked up when the log has nothing new: at the start and
        # after a quiet poll interval, not after every wake-up (that would be a query per event).
        check_running = True
        wait_s = POLL_S
        try:
            while True:
                self._wake.clear()
                batch = self._take_live(cursor) or await self.read_after(cursor)
                for event in batch:
                    cursor = event.seq
                    yield event
                    if stop(event):
                        return
                if not batch and check_running and not await still_running():
                    # Re-read once: the last events may have landed between the read and the check.
                    for event in await self.read_after(cursor):
                        cursor = event.seq
                        yield event
                        if stop(event):
                            return
                    return
                try:
                    async with asyncio.timeout(wait_s):
                        await self._wake.wait()
                    idle, check_running, wait_s = 0.0, False, POLL_S
                except TimeoutError:
                    check_running = True
                    idle += wait_s
                    if idle >= idle_timeout_s:
                        raise StreamIdle() from None
                    wait_s = min(wait_s * 2, POLL_S * QUIET_POLL_MAX)
        finally:
            await self.close()


class SessionFeed(EventFeed):
    """The same feed over a seed 004 session's log (the coach's runs): sequence for seq, the run id
    for the turn id, the event type for the SSE type."""

    async def read_after(self, after: int) -> list[LoggedEvent]:
        rows = await self._pool.fetch(
            """SELECT sequence, event_type, content, metadata FROM session_events
               WHERE session_id = $1 AND sequence > $2 ORDER BY sequence LIMIT 1000""",
            uuid.UUID(self.conversation_id), after,
        )
        return [LoggedEvent(seq=r["sequence"], turn_id=str(decoded(r["metadata"]).get("runId", "")), type=r["event_type"],
                            data=session_data(decoded(r["content"]), decoded(r["metadata"]))) for r in rows]



class StreamIdle(Exception):
    pass
