"""Serving a conversation's event log as SSE: stored events after a sequence number, then live
events from NATS, in order and each once. NATS is only a wake-up: every gap is re-read from the
log, so a lost publish or a second gateway replica changes nothing for the client."""

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

from spotter_shared.contracts.events import conversation_subject

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

    async def open(self) -> "EventFeed":
        async def on_msg(_msg: Any) -> None:
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
                batch = await self.read_after(cursor)
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
