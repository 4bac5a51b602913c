"""Micro-batching per key, with no timer: the calls for a key that arrive while that key's batch is
being written form its next batch. A quiet key's call is written at once, alone; a hot key's calls
share one round trip (one Redis script, one statement) however many arrive together. Billing batches
one organization's settlements and reserves; the orchestrator batches its conversations' event-log appends.

A writer may also `take` what is waiting for its key while it writes (the ledger claims the next
batch in its current batch's last Redis step), and `put_back` what it could not handle."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Batches(Generic[T]):
    def __init__(self, write: Callable[[list[T]], Awaitable[None]], *, max_batch: int = 256) -> None:
        """`write` handles one batch and answers every item of it; it must not raise."""
        self._write = write
        self._max_batch = max_batch
        self._waiting: dict[str, list[T]] = {}
        self._writers: dict[str, asyncio.Task[None]] = {}

    def add(self, key: str, item: T) -> None:
        self._waiting.setdefault(key, []).append(item)
        if key not in self._writers:
            self._writers[key] = asyncio.create_task(self._drain(key))

    def take(self, key: str, limit: int) -> list[T]:
        """For the key's writer, from inside `write`: up to `limit` of the items waiting, oldest first.
        It then answers them as it answers its batch."""
        waiting = self._waiting.get(key)
        if not waiting:
            return []
        taken, rest = waiting[:limit], waiting[limit:]
        if rest:
            self._waiting[key] = rest
        else:
            del self._waiting[key]
        return taken

    def put_back(self, key: str, items: list[T]) -> None:
        """For the key's writer, from inside `write`: items taken and not handled, first in line again
        (the writer goes on to them once `write` returns)."""
        if items:
            self._waiting[key] = items + self._waiting.get(key, [])

    async def _drain(self, key: str) -> None:
        # No await between finding nothing waiting and leaving: an item added meanwhile has a writer.
        try:
            while waiting := self._waiting.pop(key, None):
                for start in range(0, len(waiting), self._max_batch):
                    await self._write(waiting[start:start + self._max_batch])
        finally:
            del self._writers[key]
