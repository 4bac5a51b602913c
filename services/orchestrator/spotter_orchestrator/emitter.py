"""Writes a turn's SSE events to the conversation's log, then fans them out on NATS.

The log (Postgres) is the source of truth: an event is published only after it is stored with
its sequence number, and a gateway that misses a publish re-reads the log. Token deltas are
coalesced (PITFALLS: one message per token saturates the bus): the first delta of a burst goes out at
once, then what came since at the end of each window (`flush_s`, the setting `SPOTTER_DELTA_FLUSH_MS`,
100 ms by default; the same windows for every turn of the process), and text never waits longer than
that for more to come: a stream that pauses mid-sentence still shows what it has. What is held when a
model call's stream ends is stored with the call's reply (`take_text`, Store.append_reply). Every batch is a
stored row, a publish and an SSE frame (about 1 ms of CPU across the processes), so the window sets
most of a long answer's cost; the web app reveals each batch smoothly.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable

from spotter_shared import bus
from spotter_shared.contracts.events import SseEvent, TextDelta, conversation_subject

from .store import Store

log = logging.getLogger(__name__)


def window_end(now: float, flush_s: float) -> float:
    """The end of the window `now` is in: the next multiple of `flush_s` (the same float for every caller)."""
    return (math.floor(now / flush_s) + 1) * flush_s


class WindowEnds:
    """One timer per window end for every emitter of the process: what they all hold is written in the
    same tick of the loop, so Store's batches make it one statement (timers of their own, due at the same
    millisecond, could fire an iteration apart and miss the batch)."""

    def __init__(self) -> None:
        self._waiting: dict[tuple[asyncio.AbstractEventLoop, float], set[Callable[[], None]]] = {}

    def wait(self, flush_s: float, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback` when the current window ends; the function returned cancels that."""
        loop = asyncio.get_running_loop()
        key = (loop, window_end(loop.time(), flush_s))
        waiting = self._waiting.get(key)
        if waiting is None:
            waiting = self._waiting[key] = set()
            loop.call_at(key[1], self._ended, key)
        waiting.add(callback)
        return lambda: waiting.discard(callback)

    def _ended(self, key: tuple[asyncio.AbstractEventLoop, float]) -> None:
        for callback in self._waiting.pop(key, ()):
            callback()


_WINDOWS = WindowEnds()


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
        # Text held for the window is written when it ends even if no more comes (a stalled stream):
        # the wait for its end (cancelled by calling it), then the task that writes it, which every
        # later write waits for.
        self._due: Callable[[], None] | None = None
        self._held: asyncio.Task[None] | None = None
        self._closed = False
        self._failed: Exception | None = None
        # Text already shown to listeners by a crashed attempt of this model call; the retry's
        # first characters are not sent twice (the SSE protocol has no retraction event).
        self._suppress = 0
        # Text streamed since the current model call began: kept as the partial message on cancel.
        self._since_mark = ""
        # A write the next stored event comes after (the turn's user message, `after`).
        self._after: asyncio.Future[object] | None = None
        # The turn's `done`, stored with its last reply (`ended`) and not published yet: (seq, data).
        self._done: tuple[int, dict] | None = None
        self.done_stored = False

    def suppress_prefix(self, chars: int) -> None:
        self._suppress = chars

    def mark(self) -> None:
        self._since_mark = ""

    def after(self, write: asyncio.Future[object]) -> None:
        """Store no event before `write` is done (and none at all if it fails: its error is raised)."""
        self._after = write

    @property
    def partial_text(self) -> str:
        return self._since_mark

    async def emit(self, event: SseEvent) -> int:
        await self.flush()
        return await self._write(event)

    async def emit_with(self, event: SseEvent, store: Callable[[dict], Awaitable[int]]) -> int:
        """`event`, stored by `store` (a statement that writes other rows with it and gives back the
        event's number), then published: as `emit`, in order after everything before it."""
        await self.flush()
        return await self._write(event, store=store)

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
        else:
            self._hold()

    def _hold(self) -> None:
        """Have the buffer written when the window ends, unless something writes it before. Windows are
        the same for every turn of this process (they end at multiples of `flush_s` on the loop's clock),
        so what every stream holds is written at the same moment: one statement for all of them
        (Store's batches) and one flush of the bus, instead of one each at moments of their own."""
        if self._due is None and self._held is None and not self._closed:
            self._due = _WINDOWS.wait(self._flush_s, self._window_ended)

    def _window_ended(self) -> None:
        self._due = None
        if self._buffer:
            self._held = asyncio.create_task(self._write_held())

    async def _write_held(self) -> None:
        try:
            await self.flush()
        except Exception as exc:  # noqa: BLE001 — the turn's next write raises it, as if it were its own
            self._failed = exc
            return
        finally:
            self._held = None
        if self._buffer:  # more came while it was written
            self._hold()

    async def close(self) -> None:
        """The turn's body is over: no held text is written after this (a redelivered attempt may
        already be reading the log), and a held write in flight has landed or failed."""
        self._closed = True
        if self._due is not None:
            self._due()
            self._due = None
        if self._held is not None:
            await asyncio.shield(self._held)

    async def flush(self) -> None:
        if delta := await self.take_text():
            await self._write(TextDelta(delta=delta))

    async def take_text(self) -> str:
        """The text held for the window ('' if none), taken off the emitter to be stored by the caller
        (a model call's last text goes with its reply: Store.append_reply), once every earlier write of
        text has landed; the caller publishes it (`announce`) once stored."""
        if self._due is not None:
            self._due()
            self._due = None
        held = self._held
        if held is not None and held is not asyncio.current_task():
            await asyncio.shield(held)  # the text before ours is stored first
        if self._failed is not None:
            failed, self._failed = self._failed, None
            raise failed
        delta, self._buffer = self._buffer, ""
        if delta:
            self._last_flush = time.monotonic()
        return delta

    def ended(self, seq: int, data: dict) -> None:
        """The turn's `done` was stored (with its last reply, Store.append_reply) under `seq`: nothing
        follows it, and it is published by `publish_done` once the lease is let go."""
        self._done = (seq, data)
        self.done_stored = True

    async def publish_done(self, before_publish: Callable[[], Awaitable[None]] | None = None) -> None:
        """Publish the `done` stored by `ended`, once (`before_publish` first, as `finish` does)."""
        if self._done is None:
            return
        if before_publish is not None:
            await before_publish()
        (seq, data), self._done = self._done, None
        await self._publish(seq, data)

    async def announce(self, event: SseEvent, seq: int) -> None:
        """Publish an event already stored under `seq` (begin_turn stores a new conversation's first)."""
        await self._publish(seq, event.model_dump(mode="json", exclude_none=True))

    async def _write(self, event: SseEvent, finish: tuple[str, str | None] | None = None,
                     before_publish: Callable[[], Awaitable[None]] | None = None,
                     store: Callable[[dict], Awaitable[int]] | None = None) -> int:
        if self._after is not None:
            await self._after  # every writer waits for it, and takes its failure if it failed
            self._after = None
        data = event.model_dump(mode="json", exclude_none=True)
        if store is not None:
            seq = await store(data)
        else:
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
