"""The daily agent.storage.snapshot: what it measures, and that it is taken once per cluster however
many billing replicas run the schedule."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from datetime import UTC, date, datetime

import asyncpg
import pytest
from redis.asyncio import Redis

from spotter_shared.storage_snapshot import TABLES, next_run, snapshot_once


async def test_two_replicas_take_one_snapshot_per_day(pool: asyncpg.Pool, redis: Redis, caplog: pytest.LogCaptureFixture) -> None:
    # A day of its own (far future), so no other test or earlier run has claimed it.
    day = date(2100 + uuid.uuid4().int % 800, 1, 1)
    with caplog.at_level(logging.INFO, logger="spotter_shared.storage_snapshot"):
        results = await asyncio.gather(*(snapshot_once(pool, redis, day) for _ in range(4)))
        again = await snapshot_once(pool, redis, day)
    taken = [r for r in results if r is not None]
    assert len(taken) == 1 and again is None
    [line] = [json.loads(r.getMessage()) for r in caplog.records if "agent.storage.snapshot" in r.getMessage()]
    assert line["day"] == day.isoformat() and line["orgId"] == "*" and line["traceId"]
    assert set(line["tables"]) == set(TABLES)
    messages = await pool.fetchval("SELECT count(*) FROM ai_messages")
    assert line["tables"]["ai_messages"]["rows"] == messages
    assert all(t["bytes"] > 0 for t in line["tables"].values())  # every table has at least its pages and indexes


def test_it_runs_at_three_utc() -> None:
    assert next_run(datetime(2026, 11, 24, 2, 59, tzinfo=UTC)) == datetime(2026, 11, 24, 3, 0, tzinfo=UTC)
    assert next_run(datetime(2026, 11, 24, 3, 0, tzinfo=UTC)) == datetime(2026, 11, 25, 3, 0, tzinfo=UTC)
    assert next_run(datetime(2026, 11, 24, 23, 0, tzinfo=UTC)) == datetime(2026, 11, 25, 3, 0, tzinfo=UTC)
