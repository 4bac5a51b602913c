"""Billing's tiers (tiers.py): while billing listens for tier changes (migration 0016's trigger), a read
that must be fresh is answered from memory until the tier changes, and a change is seen by the next
read; while it does not listen (a lost connection, before start), fresh reads go to Postgres. Against
the session's real Postgres, whose connections are killed for real."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import asyncpg
import pytest

from spotter_billing.tiers import Tiers
from spotter_shared.errors import SpotterError
from tests.factories import make_studio


class CountingPool:
    """The pool, with the tier reads counted."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self.reads = 0

    async def fetchval(self, query: str, *args: Any) -> Any:
        self.reads += 1
        return await self._pool.fetchval(query, *args)

    def acquire(self) -> Any:
        return self._pool.acquire()

    async def release(self, conn: asyncpg.Connection) -> None:
        await self._pool.release(conn)


async def _until_tier(tiers: Tiers, org: str, expected: str, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while await tiers.read(org, fresh=True) != expected:
        assert time.monotonic() < deadline, f"tier never read as {expected}"
        await asyncio.sleep(0.01)


async def test_a_listening_process_answers_fresh_reads_from_memory_until_the_tier_changes(pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool, tier="lite")
    counted = CountingPool(pool)
    tiers = Tiers(counted)  # type: ignore[arg-type]
    await tiers.start()
    try:
        await asyncio.wait_for(tiers.listening_now.wait(), 5)
        assert [await tiers.read(studio.org.id, fresh=True) for _ in range(5)] == ["lite"] * 5
        assert counted.reads == 1
        await pool.execute("UPDATE organizations SET tier = 'pro' WHERE id = $1", uuid.UUID(studio.org.id))
        await _until_tier(tiers, studio.org.id, "pro")
        reads = counted.reads
        assert await tiers.read(studio.org.id, fresh=True) == "pro" and counted.reads == reads
        # And every later change is heard the same way.
        await pool.execute("UPDATE organizations SET tier = 'elite' WHERE id = $1", uuid.UUID(studio.org.id))
        await _until_tier(tiers, studio.org.id, "elite")
    finally:
        await tiers.stop()


async def test_a_process_not_listening_reads_fresh_tiers_from_postgres(pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool, tier="lite")
    counted = CountingPool(pool)
    tiers = Tiers(counted)  # type: ignore[arg-type] — never started
    assert await tiers.read(studio.org.id, fresh=True) == "lite"
    await pool.execute("UPDATE organizations SET tier = 'pro' WHERE id = $1", uuid.UUID(studio.org.id))
    assert tiers.cached(studio.org.id) == "lite"  # a reserve or a settle may use it for a few seconds
    assert await tiers.read(studio.org.id, fresh=True) == "pro" and counted.reads == 2
    with pytest.raises(SpotterError):
        await tiers.read(str(uuid.uuid4()), fresh=True)


async def test_a_lost_listening_connection_is_opened_again_and_nothing_it_missed_is_kept(pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool, tier="lite")
    tiers = Tiers(pool)
    await tiers.start()
    try:
        await asyncio.wait_for(tiers.listening_now.wait(), 5)
        assert await tiers.read(studio.org.id, fresh=True) == "lite"
        killed = await pool.fetchval(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN %spotter_org_tier%'")
        assert killed
        deadline = time.monotonic() + 5
        while tiers.listening_now.is_set():
            assert time.monotonic() < deadline, "the lost connection was not noticed"
            await asyncio.sleep(0.01)
        # Changed while nobody listens: a fresh read goes to Postgres and sees it.
        await pool.execute("UPDATE organizations SET tier = 'pro' WHERE id = $1", uuid.UUID(studio.org.id))
        assert await tiers.read(studio.org.id, fresh=True) == "pro"
        await asyncio.wait_for(tiers.listening_now.wait(), 5)  # listening again, on a new connection
        await pool.execute("UPDATE organizations SET tier = 'elite' WHERE id = $1", uuid.UUID(studio.org.id))
        await _until_tier(tiers, studio.org.id, "elite")
    finally:
        await tiers.stop()
