"""Session fixtures: real NATS (JetStream), Postgres (pgvector) and Redis.

Servers come from NATS_URL / DATABASE_URL / REDIS_URL when set; otherwise the project's own
devstack starts throw-away ones. Each test session migrates a fresh database of its own, so
tests never see another run's rows; tests use unique orgs/conversations, never shared state.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest
from redis.asyncio import Redis

from spotter_cli.devstack import DevStack, NatsServerProcess, StackUrls, create_database, drop_database
from spotter_shared.db import create_pool, migrate

from tests.platform import platform  # noqa: F401 — one platform per session, for tests/e2e and tests/browser


def docker_engine_available() -> bool:
    """True on a developer laptop with a Docker engine; False here (the client exists, no daemon)."""
    if os.environ.get("SPOTTER_TESTS_NO_DOCKER"):
        return False
    try:
        import docker

        docker.from_env(timeout=2).ping()
    except Exception:  # noqa: BLE001 — any failure means: no engine to use
        return False
    return True


@contextlib.contextmanager
def containers() -> Iterator[StackUrls]:
    """NATS (JetStream), Postgres with pgvector and Redis as throw-away containers."""
    from testcontainers.community.nats import NatsContainer
    from testcontainers.postgres import PostgresContainer
    from testcontainers.redis import RedisContainer

    with (
        NatsContainer("nats:2.12-alpine", jetstream=True) as nats,
        PostgresContainer("pgvector/pgvector:pg17", username="spotter", password="spotter", dbname="spotter") as pg,
        RedisContainer("redis:7-alpine") as redis,
    ):
        host, port = redis.get_container_host_ip(), redis.get_exposed_port(6379)
        yield StackUrls(
            nats_url=nats.nats_uri(),
            database_url=pg.get_connection_url(driver=None),
            redis_url=f"redis://{host}:{port}/0",
        )


@pytest.fixture(scope="session")
def stack() -> Iterator[StackUrls]:
    configured = {k: os.environ.get(k) for k in ("NATS_URL", "DATABASE_URL", "REDIS_URL")}
    if not all(configured.values()) and docker_engine_available():
        with containers() as urls:
            yield StackUrls(
                nats_url=configured["NATS_URL"] or urls.nats_url,
                database_url=configured["DATABASE_URL"] or urls.database_url,
                redis_url=configured["REDIS_URL"] or urls.redis_url,
            )
        return
    # No engine (this machine, CI): the project's own devstack starts what is missing.
    dev = DevStack(
        nats_url=configured["NATS_URL"],
        database_url=configured["DATABASE_URL"],
        redis_url=configured["REDIS_URL"],
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


@pytest.fixture(scope="module")
def private_nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A NATS server of the test module's own, for contract tests whose queue groups and durable
    consumers must not meet the services the end-to-end tests leave running on the session's."""
    server = NatsServerProcess(tmp_path_factory.mktemp("nats"), monitor=False)
    server.start()
    yield server.url
    server.stop()
