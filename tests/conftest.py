"""Session fixtures: real NATS (JetStream), Postgres (pgvector) and Redis.

Servers come from NATS_URL / DATABASE_URL / REDIS_URL when set; otherwise the project's own
devstack starts throw-away ones. Each test session migrates a fresh database of its own, so
tests never see another run's rows; tests use unique orgs/conversations, never shared state.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest
from redis.asyncio import Redis

from spotter_cli.devstack import DevStack, StackUrls, create_database, drop_database
from spotter_shared.db import create_pool, migrate


@pytest.fixture(scope="session")
def stack() -> Iterator[StackUrls]:
    dev = DevStack(
        nats_url=os.environ.get("NATS_URL"),
        database_url=os.environ.get("DATABASE_URL"),
        redis_url=os.environ.get("REDIS_URL"),
        ephemeral=True,
    )
    urls = dev.start()
    try:
        yield urls
    finally:
        dev.stop()


@pytest.fixture(scope="session")
async def db_url(stack: StackUrls) -> AsyncIterator[str]:
    name = f"spotter_test_{uuid.uuid4().hex[:10]}"
    url = await create_database(stack.database_url, name)
    await migrate(url)
    yield url
    await drop_database(stack.database_url, name)


@pytest.fixture(scope="session")
async def pool(db_url: str) -> AsyncIterator[asyncpg.Pool]:
    p = await create_pool(db_url, max_size=5)
    yield p
    await p.close()


@pytest.fixture(scope="session")
async def redis(stack: StackUrls) -> AsyncIterator[Redis]:
    r = Redis.from_url(stack.redis_url, decode_responses=True)
    yield r
    await r.aclose()
