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

from spotter_shared.contracts.events import ConversationEvent

log = logging.getLogger(__name__)

POLL_S = 1.0


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
    """This replica's one subscription to every conversation's live events (the module-level
    subscriber in edges.py), handed to the streams open here for that conversation."""

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

    def deliver(self, envelope: ConversationEvent) -> None:
        for feed in tuple(self._feeds.get(envelope.conversation_id, ())):
            feed.offer(envelope)


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

    def offer(self, envelope: ConversationEvent) -> None:
        """A live event of this conversation. Same dump as the orchestrator stored, so live and
        replayed bytes are identical; whether it is used is decided by the sequence (`_take_live`)."""
        data = envelope.event.model_dump(mode="json", exclude_none=True)
        self._live[envelope.seq] = LoggedEvent(seq=envelope.seq, turn_id=envelope.turn_id, type=data["type"], data=data)
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
                    await asyncio.wait_for(self._wake.wait(), timeout=POLL_S)
                    idle, check_running = 0.0, False
                except TimeoutError:
                    check_running = True
                    idle += POLL_S
                    if idle >= idle_timeout_s:
                        raise StreamIdle() from None
        finally:
            await self.close()


class StreamIdle(Exception):
    pass
