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
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
from nats.aio.client import Client as NatsClient
from nats.aio.subscription import Subscription
from pydantic import ValidationError

from spotter_shared.contracts.events import ConversationEvent, conversation_subject

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


class EventFeed:
    """Subscribe first, read after: nothing published in between can be missed."""

    def __init__(self, pool: asyncpg.Pool, nc: NatsClient, conversation_id: str) -> None:
        self._pool = pool
        self._nc = nc
        self._conversation_id = conversation_id
        self._wake = asyncio.Event()
        self._sub: Subscription | None = None
        self._live: dict[int, LoggedEvent] = {}

    async def open(self) -> "EventFeed":
        async def on_msg(msg: Any) -> None:
            try:
                envelope = ConversationEvent.model_validate_json(msg.data)
            except ValidationError:
                envelope = None  # not a valid event: it still wakes us, and the log decides
            if envelope is not None and envelope.conversation_id == self._conversation_id:
                # Same dump as the orchestrator stored, so live and replayed bytes are identical.
                data = envelope.event.model_dump(mode="json", exclude_none=True)
                self._live[envelope.seq] = LoggedEvent(seq=envelope.seq, turn_id=envelope.turn_id, type=data["type"], data=data)
            self._wake.set()

        self._sub = await self._nc.subscribe(conversation_subject(self._conversation_id), cb=on_msg)
        return self

    async def close(self) -> None:
        if self._sub is not None:
            try:
                await self._sub.unsubscribe()
            except Exception:  # noqa: BLE001 — connection may already be closing
                pass
            self._sub = None

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
            uuid.UUID(self._conversation_id), after,
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
