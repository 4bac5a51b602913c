"""Writes a turn's SSE events to the conversation's log, then fans them out on NATS.

The log (Postgres) is the source of truth: an event is published only after it is stored with
its sequence number, and a gateway that misses a publish re-reads the log. Token deltas are
coalesced (PITFALLS: one message per token saturates the bus): the first delta of a burst goes out at
once, then at most one per `flush_s` (the setting `SPOTTER_DELTA_FLUSH_MS`, 100 ms by default). Every
batch is a stored row, a publish and an SSE frame (about 1 ms of CPU across the processes), so the
window sets most of a long answer's cost; the web app reveals each batch smoothly.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable

from spotter_shared import bus
from spotter_shared.contracts.events import SseEvent, TextDelta, conversation_subject

from .store import Store

log = logging.getLogger(__name__)



class Emitter:
    def __init__(self, store: Store, events: bus.LivePublisher, conversation_id: str, turn_id: str,
                 flush_s: float = 0.1) -> None:
        self._store = store
        self._flush_s = flush_s
        self._events = events
        self.conversation_id = conversation_id
        self.turn_id = turn_id
        self._buffer = ""
        self._last_flush = 0.0
        # Text already shown to listeners by a crashed attempt of this model call; the retry's
        # first characters are not sent twice (the SSE protocol has no retraction event).
        self._suppress = 0
        # Text streamed since the current model call began: kept as the partial message on cancel.
        self._since_mark = ""

    def suppress_prefix(self, chars: int) -> None:
        self._suppress = chars

    def mark(self) -> None:
        self._since_mark = ""

    @property
    def partial_text(self) -> str:
        return self._since_mark

    async def emit(self, event: SseEvent) -> int:
        await self.flush()
        return await self._write(event)

    async def finish(self, event: SseEvent, status: str, error_code: str | None = None, *,
                     before_publish: Callable[[], Awaitable[None]] | None = None) -> int:
        """The turn's last event, stored in one transaction with the turn's terminal status.
        `before_publish` runs once it is stored and before listeners hear of it: the lease is let
        go there, so a client that answers `done` at once never finds the conversation busy."""
        await self.flush()
        return await self._write(event, finish=(status, error_code), before_publish=before_publish)

    async def text(self, delta: str) -> None:
        if self._suppress:
            skipped = min(self._suppress, len(delta))
            self._suppress -= skipped
            delta = delta[skipped:]
        if not delta:
            return
        self._since_mark += delta
        self._buffer += delta
        if time.monotonic() - self._last_flush >= self._flush_s:
            await self.flush()

    async def flush(self) -> None:
        if self._buffer:
            delta, self._buffer = self._buffer, ""
            self._last_flush = time.monotonic()
            await self._write(TextDelta(delta=delta))

    async def announce(self, event: SseEvent, seq: int) -> None:
        """Publish an event already stored under `seq` (begin_turn stores a new conversation's first)."""
        await self._publish(seq, event.model_dump(mode="json", exclude_none=True))

    async def _write(self, event: SseEvent, finish: tuple[str, str | None] | None = None,
                     before_publish: Callable[[], Awaitable[None]] | None = None) -> int:
        data = event.model_dump(mode="json", exclude_none=True)
        seq = await self._store.append_event(self.conversation_id, self.turn_id, event.type, data, finish=finish)
        if before_publish is not None:
            await before_publish()
        await self._publish(seq, data)
        return seq

    async def _publish(self, seq: int, data: dict) -> None:
        # A ConversationEvent whose event is the very dict stored: live and replayed bytes are the same.
        envelope = {"conversationId": self.conversation_id, "seq": seq, "turnId": self.turn_id, "event": data}
        try:
            await self._events.publish(conversation_subject(self.conversation_id), json.dumps(envelope, ensure_ascii=False).encode())
        except Exception:  # noqa: BLE001 — listeners catch up from the log
            log.warning("live publish failed for %s seq %s", self.conversation_id, seq, exc_info=True)
