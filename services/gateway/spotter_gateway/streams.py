"""Serving a conversation's event log as SSE: stored events after a sequence number, then live
events from NATS, in order and each once. A live event is used as it arrives only when it is the
very next sequence number (it was stored before it was published); any gap — a lost publish, a
subscriber that started late — is re-read from the log, so NATS can drop anything without the
client noticing.

A quiet stream has no timer of its own. The replica's one watchdog (`LiveEvents._watch`) looks at all
quiet streams together once per POLL_S — one query for which logs are past their streams, one Redis
script for which leases are gone — and wakes only the streams that are behind their log (a lost
publish), whose turn may have ended (no lease), that have been idle too long, or that are due a
keep-alive ping. Before, each of 5,000 quiet streams polled Postgres and Redis from its own timer."""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import suppress
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import asyncpg
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from opentelemetry.instrumentation.utils import suppress_instrumentation
from redis.asyncio import Redis
from sse_starlette.sse import AppStatus

from spotter_shared.contracts.coach import SessionEventOut
from spotter_shared.contracts.events import CONVERSATION_EVENTS, ConversationEvent
from spotter_shared.db import decoded
from spotter_shared.turnlock import lease_key

from . import sse

log = logging.getLogger(__name__)

# The watchdog's period. A lost publish is read from the log two to three periods after it was stored;
# a stream whose turn ended without its last event reaching it ends one to two periods after.
POLL_S = 1.0
# When a quiet stream's lease is gone but its own check says the turn still runs (a command waiting in
# JetStream after the gateway's claim lapsed), that check is repeated after 1, 2, 4, 4 … × POLL_S.
QUIET_POLL_MAX = 4
PAGE = 1000  # rows per log read
LOOK_BATCH = 1000  # streams per query and per Redis script: neither Postgres, Redis nor this loop is held long
# Keep-alive pings per look at most. Streams that went quiet together (the end of a burst) come due
# together; 5,000 pings sent in one go held the event loop for ~250 ms (bench/bench_fanout.py, token phase).
PINGS_PER_LOOK = 250


@dataclass(frozen=True)
class LoggedEvent:
    seq: int
    turn_id: str
    type: str
    data: dict[str, Any]

    @cached_property
    def frame(self) -> bytes:
        """The SSE frame, encoded once however many streams on this replica follow the conversation."""
        return sse.frame(json.dumps(self.data, ensure_ascii=False), event=self.type, id=str(self.seq))


# Decides, after each event, whether the stream is complete.
StopRule = Callable[[LoggedEvent], bool]


class LiveEvents:
    """This replica's one subscription to every conversation's live events (`subscribe`, a bare NATS
    subscription) and to every session's (the subscriber in edges.py), handed to the streams open here
    for that log; and the one watchdog over those streams while any is open."""

    def __init__(self) -> None:
        self._feeds: dict[str, set[EventFeed]] = defaultdict(set)
        self._watchdog: asyncio.Task[None] | None = None
        self._emptied = asyncio.Event()

    def attach(self, feed: EventFeed) -> None:
        self._feeds[feed.conversation_id].add(feed)
        if self._watchdog is None:
            # A context of its own, not that of the request that happened to open the first stream: the
            # watchdog belongs to no request, and would otherwise add its looks to that request's trace.
            self._watchdog = asyncio.get_running_loop().create_task(self._watch(), context=contextvars.Context())

    def detach(self, feed: EventFeed) -> None:
        feeds = self._feeds.get(feed.conversation_id)
        if feeds is not None:
            feeds.discard(feed)
            if not feeds:
                del self._feeds[feed.conversation_id]
        if not self._feeds:
            self._emptied.set()

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

    # The watchdog -------------------------------------------------------------------------------------

    async def _watch(self) -> None:
        """Runs while any feed is attached. Never cancelled: a Redis call cut off midway can leave its
        connection answering the next caller (see turnlock.LeaseKeeper); it ends at its next wake-up. Its
        queries are not traced: one a second, of no request (a stream's own reads and checks still are)."""
        try:
            with suppress_instrumentation():
                await self._watch_while_followed()
        finally:
            self._watchdog = None

    async def _watch_while_followed(self) -> None:
        while True:
            with suppress(TimeoutError):
                async with asyncio.timeout(POLL_S):
                    await self._emptied.wait()
            self._emptied.clear()
            if not self._feeds:
                return
            try:
                await self._look(time.monotonic())
            except Exception:  # noqa: BLE001 — the next period tries again; the streams keep their live events
                log.exception("stream watchdog: a look at the quiet streams failed")

    async def _look(self, now: float) -> None:
        if AppStatus.should_exit:
            # The server is stopping (sse-starlette's hook on uvicorn's signal handler sets this): end the
            # streams now, cleanly, so that their clients resume on another replica instead of waiting out
            # the graceful-shutdown timeout and being cut off.
            for feeds in self._feeds.values():
                for feed in feeds:
                    feed.hang_up()
            return
        quiet: list[EventFeed] = []
        pings = PINGS_PER_LOOK
        for feeds in self._feeds.values():
            for feed in feeds:
                if pings and feed.ping_due(now):
                    feed.wake(ping=True)
                    pings -= 1
                if feed.due(now):
                    quiet.append(feed)
        if quiet:
            await asyncio.gather(self._look_at_logs(quiet), self._look_at_leases(quiet, now))

    @staticmethod
    async def _look_at_logs(quiet: list[EventFeed]) -> None:
        """Wake a stream whose log has more than it served, at two looks in a row without progress: its
        live event was lost. Once is not enough: the live event may be on its way (it is stored before it
        is published), and reading the log for it would be a wasted query — thousands of them at once
        on a loaded replica."""
        groups: dict[tuple[type[EventFeed], Any], list[EventFeed]] = defaultdict(list)
        for feed in quiet:
            groups[(type(feed), feed.pool)].append(feed)
        for (kind, pool), feeds in groups.items():
            for i in range(0, len(feeds), LOOK_BATCH):
                for feed in await kind.behind(pool, feeds[i:i + LOOK_BATCH]):
                    feed.found_behind()

    @staticmethod
    async def _look_at_leases(quiet: list[EventFeed], now: float) -> None:
        """Let a stream ask whether its turn still runs only when no lease is held on its log: while one
        is, something runs there, and its events will come (live, or from the log)."""
        groups: dict[Redis | None, list[EventFeed]] = defaultdict(list)
        for feed in quiet:
            if feed.check_due(now):
                groups[feed.leases].append(feed)
        for redis, feeds in groups.items():
            for i in range(0, len(feeds), LOOK_BATCH):
                part = feeds[i:i + LOOK_BATCH]
                try:
                    unleased = part if redis is None else await without_lease(redis, part)
                except Exception as exc:  # noqa: BLE001 — Redis busy or away: each stream's own check decides
                    log.warning("stream watchdog: could not read %d leases: %r", len(part), exc)
                    unleased = part
                for feed in unleased:
                    feed.wake(check=True)


# The positions (1-based) of the keys that do not exist: a reply as short as the list of ended turns.
_ABSENT = """
local absent = {}
for i, key in ipairs(KEYS) do
  if redis.call('EXISTS', key) == 0 then absent[#absent + 1] = i end
end
return absent
"""


async def without_lease(redis: Redis, feeds: list[EventFeed]) -> list[EventFeed]:
    """Those of these feeds whose conversation (or session) has no lease held."""
    absent = await redis.register_script(_ABSENT)(keys=[feed.lease_key for feed in feeds])
    return [feeds[int(i) - 1] for i in absent]


def session_data(content: Any, metadata: Any) -> dict[str, Any]:
    return {"content": content, "metadata": metadata}


class EventFeed:
    """Attach first, read after: nothing published in between can be missed. `leases`: where the
    turn leases are (the watchdog reads them in bulk); without it every quiet look asks `still_running`."""

    def __init__(self, pool: asyncpg.Pool, live: LiveEvents, conversation_id: str, leases: Redis | None = None) -> None:
        self.pool = pool
        self.leases = leases
        self._live_events = live
        self.conversation_id = conversation_id
        self.key = uuid.UUID(conversation_id)
        self.lease_key = lease_key(conversation_id)
        self._wake = asyncio.Event()
        self._attached = False
        self._live: dict[int, LoggedEvent] = {}
        self.cursor = 0
        self._behind_at = -1  # the cursor at which the watchdog last found the log ahead
        # Set by the stream's loop, read by the watchdog.
        self._waiting = False
        self._idle_timeout_s = float("inf")
        self._ping_s: float | None = None
        self._active_at = self._sent_at = time.monotonic()
        self._check_after = 0.0
        self._check_every = POLL_S
        # Set by the watchdog (or the client's disconnect), acted on by the stream's loop.
        self._must_read = self._must_check = self._idle = self._ping = self._hung_up = False

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
        self._active_at = time.monotonic()
        self._wake.set()

    def hang_up(self) -> None:
        """The client has gone: the stream ends at its next step."""
        self._hung_up = True
        self._wake.set()

    def found_behind(self) -> None:
        """The watchdog found the log past this stream's cursor; a second time at the same cursor, it reads."""
        if self._behind_at == self.cursor:
            self.wake(read=True)
        self._behind_at = self.cursor

    def wake(self, *, read: bool = False, check: bool = False, ping: bool = False) -> None:
        self._must_read |= read
        self._must_check |= check
        self._ping |= ping
        self._wake.set()

    def due(self, now: float) -> bool:
        """The watchdog's look at one stream: flags an idle stream, and says whether the stream has been
        quiet for a period (then its log and lease are looked at)."""
        if not self._waiting:
            return False
        if now - self._active_at >= self._idle_timeout_s:
            self._idle = True
            self._wake.set()
            return False
        return now - self._active_at >= POLL_S

    def ping_due(self, now: float) -> bool:
        return self._waiting and self._ping_s is not None and now - self._sent_at >= self._ping_s

    def check_due(self, now: float) -> bool:
        return now >= self._check_after

    # The log this feed reads: its table, the column naming the log, the sequence column.
    LOG = ("ai_conversation_events", "conversation_id", "seq")

    @classmethod
    async def behind(cls, pool: asyncpg.Pool, feeds: list[EventFeed]) -> list[EventFeed]:
        """Those of these feeds whose log has events past their cursor (one index probe each)."""
        table, log_id, seq = cls.LOG
        rows = await pool.fetch(
            f"""SELECT k.n FROM unnest($1::uuid[], $2::bigint[]) WITH ORDINALITY AS k(id, cursor, n)
                WHERE EXISTS (SELECT 1 FROM {table} e WHERE e.{log_id} = k.id AND e.{seq} > k.cursor)""",
            [feed.key for feed in feeds], [feed.cursor for feed in feeds])
        return [feeds[r["n"] - 1] for r in rows]

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
        rows = await self.pool.fetch(
            """SELECT seq, turn_id, type, data FROM ai_conversation_events
               WHERE conversation_id = $1 AND seq > $2 ORDER BY seq LIMIT 1000""",
            self.key, after,
        )
        return [LoggedEvent(seq=r["seq"], turn_id=str(r["turn_id"]), type=r["type"], data=r["data"]) for r in rows]

    async def events(self, after: int, stop: StopRule, idle_timeout_s: float, still_running: Callable[[], Any]) -> AsyncIterator[LoggedEvent]:
        """Yield events with seq > after until `stop` says so, or until nothing is running and the
        log is exhausted, or until idle for idle_timeout_s."""
        async for batch in self.batches(after, stop, idle_timeout_s, still_running):
            for event in batch:
                yield event

    async def batches(self, after: int, stop: StopRule, idle_timeout_s: float, still_running: Callable[[], Any],
                      ping_s: float | None = None, *, known: list[LoggedEvent] | None = None,
                      running: bool = False) -> AsyncIterator[list[LoggedEvent]]:
        """`events`, a batch at a time: everything ready at once (each batch is one `send`). With
        `ping_s`, an empty batch when nothing was yielded for that long — the stream's keep-alive.
        `known`: the log after `after`, read since this feed was attached (`read_after`), so the stream
        does not read it again at the start. `running`: the caller knows the turn runs (it has just
        published its command), so the stream does not ask at the start — as if it had, and heard yes."""
        self.cursor = after
        self._idle_timeout_s, self._ping_s = idle_timeout_s, ping_s
        self._active_at = self._sent_at = time.monotonic()
        # The log is read at the start, on a gap, after a full page and when the watchdog finds it
        # ahead; whether the turn still runs is asked at the start and when the watchdog finds its
        # lease gone — never after each event (that would be a query per event).
        self._must_read, self._must_check = known is None or len(known) >= PAGE, not running
        for event in known or ():
            # Served like live events, in sequence; a live copy that came first is the same event.
            self._live.setdefault(event.seq, event)
        if running:
            self._check_after = self._active_at + self._check_every
            self._check_every = min(self._check_every * 2, POLL_S * QUIET_POLL_MAX)
        try:
            while not self._hung_up:
                self._wake.clear()
                batch = self._take_live(self.cursor)
                if not batch and (self._must_read or self._live):
                    self._must_read = False
                    batch = await self.read_after(self.cursor)
                    self._must_read = len(batch) >= PAGE
                if batch:
                    served, stopped = _until(batch, stop)
                    self.cursor = served[-1].seq
                    self._active_at = self._sent_at = time.monotonic()
                    self._check_every = POLL_S
                    yield served
                    if stopped:
                        return
                    continue
                if self._must_check:
                    self._must_check = False
                    if not await still_running():
                        # Nothing runs, so everything is stored: read to the end (events may have landed
                        # between the last read and the check), then the stream is complete.
                        while True:
                            batch = await self.read_after(self.cursor)
                            if batch:
                                served, stopped = _until(batch, stop)
                                self.cursor = served[-1].seq
                                yield served
                                if stopped:
                                    return
                            if len(batch) < PAGE:
                                return
                    now = time.monotonic()
                    self._check_after = now + self._check_every
                    self._check_every = min(self._check_every * 2, POLL_S * QUIET_POLL_MAX)
                    continue
                if self._idle:
                    raise StreamIdle()
                if self._ping:
                    self._ping = False
                    self._sent_at = time.monotonic()
                    yield []
                    continue
                self._waiting = True
                try:
                    await self._wake.wait()
                finally:
                    self._waiting = False
        finally:
            await self.close()


def _until(batch: list[LoggedEvent], stop: StopRule) -> tuple[list[LoggedEvent], bool]:
    """The batch up to and including the first event `stop` accepts, and whether there was one."""
    for i, event in enumerate(batch):
        if stop(event):
            return batch[:i + 1], True
    return batch, False


class SessionFeed(EventFeed):
    """The same feed over a seed 004 session's log (the coach's runs): sequence for seq, the run id
    for the turn id, the event type for the SSE type."""

    LOG = ("session_events", "session_id", "sequence")

    async def read_after(self, after: int) -> list[LoggedEvent]:
        rows = await self.pool.fetch(
            """SELECT sequence, event_type, content, metadata FROM session_events
               WHERE session_id = $1 AND sequence > $2 ORDER BY sequence LIMIT 1000""",
            self.key, after,
        )
        return [LoggedEvent(seq=r["sequence"], turn_id=str(decoded(r["metadata"]).get("runId", "")), type=r["event_type"],
                            data=session_data(decoded(r["content"]), decoded(r["metadata"]))) for r in rows]


class StreamIdle(Exception):
    pass
