"""Seed 000's daily `agent.storage.snapshot`: row counts and bytes of the agent's tables at 03:00 UTC,
once per cluster. Every billing replica runs the schedule; the one that wins the day's claim in
Redis (SET NX, kept for two days) takes the snapshot, so scaling billing out never multiplies it and
a replica restarted at 03:00 does not take a second one."""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import UTC, date, datetime, time, timedelta

import asyncpg
from redis.asyncio import Redis

from .background import BackgroundJob
from .observability import StorageSnapshot

log = logging.getLogger(__name__)

AT = time(3, 0, tzinfo=UTC)
TABLES = ("ai_conversations", "ai_messages", "ai_turns", "ai_conversation_events", "ai_tool_executions",
          "ai_usage_daily", "ai_conversation_usage", "ai_cache", "rag_documents", "audit_logs")
_CLAIM_TTL_S = 2 * 24 * 3600


async def measure(pool: asyncpg.Pool) -> dict[str, dict[str, int]]:
    """Exact rows and total bytes (table, indexes, TOAST) per agent table."""
    out: dict[str, dict[str, int]] = {}
    for table in TABLES:  # names from the tuple above, never from input
        row = await pool.fetchrow(f"SELECT count(*) AS rows, pg_total_relation_size('{table}') AS bytes FROM {table}")
        out[table] = {"rows": row["rows"], "bytes": row["bytes"]}
    return out


async def snapshot_once(pool: asyncpg.Pool, redis: Redis, day: date, logger: logging.Logger = log) -> StorageSnapshot | None:
    """Take the day's snapshot if no replica has; None when another one claimed the day."""
    if not await redis.set(f"spotter:storage-snapshot:{day.isoformat()}", "1", nx=True, ex=_CLAIM_TTL_S):
        return None
    event = StorageSnapshot(trace_id=str(uuid.uuid4()), org_id="*", day=day.isoformat(), tables=await measure(pool))
    event.log(logger)
    return event


def next_run(now: datetime) -> datetime:
    today = datetime.combine(now.date(), AT)
    return today if now < today else today + timedelta(days=1)


class SnapshotSchedule(BackgroundJob):
    """Sleeps until 03:00 UTC, takes the day's snapshot if it wins the claim, repeats."""

    name = "storage-snapshot"

    def __init__(self, pool: asyncpg.Pool, redis: Redis) -> None:
        super().__init__()
        self._pool, self._redis = pool, redis

    async def _run(self) -> None:
        while True:
            due = next_run(datetime.now(UTC))
            await asyncio.sleep((due - datetime.now(UTC)).total_seconds())
            try:
                await snapshot_once(self._pool, self._redis, due.date())
            except Exception:  # noqa: BLE001 — a failed snapshot is logged; tomorrow's still runs
                log.exception("storage snapshot for %s failed", due.date())
