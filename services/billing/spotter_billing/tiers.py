"""Each organization's tier, as billing reads it: cached in this process, and exact while it listens.

A trigger notifies `spotter_org_tier` with the org's id when a change of its tier commits (migration
0016). While this process listens on a connection of its own, a cached tier is dropped the moment it
changes, so it answers even a read that must be fresh (the pre-check, a new message's reservation, the
usage snapshot) for up to WATCHED_S, a bound for a listening connection that died without a word. While
it does not listen (starting, or that connection lost and being opened again), a fresh read goes to
Postgres, and a cached one (a reserve or a settle) lasts CACHED_S, as before the trigger existed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from time import monotonic
from typing import Any

import asyncpg

from spotter_shared.errors import ErrorCode, SpotterError

log = logging.getLogger(__name__)

CHANNEL = "spotter_org_tier"
CACHED_S = 5.0
WATCHED_S = 60.0
CACHE_SIZE = 10_000
RELISTEN_S = 1.0


class Tiers:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self._tiers: dict[str, tuple[str, float]] = {}  # org → (tier, when it was read)
        # Bumped by every change heard and every start or loss of listening: a read begun before it is
        # not cached (it may have read the tier from before the change).
        self._generation = 0
        self._watch: asyncio.Task[None] | None = None
        self.listening_now = asyncio.Event()  # set while listening: a cached tier is then exact

    async def start(self) -> None:
        self._watch = asyncio.create_task(self._listen_while_running(), name="billing-tier-watch")

    async def stop(self) -> None:
        if self._watch is not None:
            watch, self._watch = self._watch, None
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch

    def cached(self, org: str, *, fresh: bool = False) -> str | None:
        """The org's tier from memory when it may be used (no coroutine on the hot path): for a reserve or
        a settle, read recently enough; for a read that must be `fresh`, only while listening."""
        listening = self.listening_now.is_set()
        if fresh and not listening:
            return None
        if (hit := self._tiers.get(org)) is not None and monotonic() - hit[1] < (WATCHED_S if listening else CACHED_S):
            return hit[0]
        return None

    async def read(self, org: str, *, fresh: bool) -> str:
        """The org's tier, from memory when `cached` allows, else from Postgres (and then remembered,
        unless a change was heard meanwhile). An unknown org is refused and never cached."""
        if (tier := self.cached(org, fresh=fresh)) is not None:
            return tier
        generation = self._generation
        tier = await self._pool.fetchval("SELECT tier::text FROM organizations WHERE id = $1", org)
        if tier is None:
            raise SpotterError(ErrorCode.NOT_FOUND, "organization not found")
        if generation == self._generation:
            if len(self._tiers) >= CACHE_SIZE:
                self._tiers.clear()  # bounded: an idle org's entry does not live for ever
            self._tiers[org] = (tier, monotonic())
        return tier

    def _changed(self, _conn: Any, _pid: int, _channel: str, org: str) -> None:
        self._generation += 1
        self._tiers.pop(org, None)

    def _forget_all(self) -> None:
        self._generation += 1
        self._tiers.clear()

    async def _listen_while_running(self) -> None:
        while True:
            try:
                await self._listen_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 — fresh reads go to Postgres meanwhile
                log.warning("not listening for tier changes (%r); reading tiers from Postgres until listening again", exc)
            await asyncio.sleep(RELISTEN_S)

    async def _listen_once(self) -> None:
        conn = await self._pool.acquire()
        lost = asyncio.Event()
        try:
            conn.add_termination_listener(lambda _conn: lost.set())
            await conn.add_listener(CHANNEL, self._changed)
            # Whatever was cached before now may have changed unheard: from here every change is heard.
            self._forget_all()
            self.listening_now.set()
            await lost.wait()
            log.warning("the connection listening for tier changes was lost")
        finally:
            self.listening_now.clear()
            self._forget_all()
            with contextlib.suppress(Exception):
                if not conn.is_closed():
                    await conn.remove_listener(CHANNEL, self._changed)
            with contextlib.suppress(Exception):
                await self._pool.release(conn)
