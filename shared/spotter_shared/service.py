"""The common shape of a NATS service process: one FastStream app whose lifespan opens and closes
the Postgres pool and Redis client, handing them to the service's core once ready."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Generic, TypeVar

import asyncpg
from faststream import FastStream
from faststream.nats import NatsBroker
from redis.asyncio import Redis

from . import telemetry
from .bus import ensure_streams
from .db import create_pool
from .settings import CommonSettings

T = TypeVar("T")


class Holder(Generic[T]):
    """The core object a handler calls; set once the lifespan has opened its resources."""

    def __init__(self) -> None:
        self._value: T | None = None

    def set(self, value: T) -> None:
        self._value = value

    def get(self) -> T:
        if self._value is None:
            raise RuntimeError("service core used before start-up finished")
        return self._value


@dataclass
class Infra:
    broker: NatsBroker
    pool: asyncpg.Pool
    redis: Redis


def service_app(
    name: str,
    settings: CommonSettings,
    broker: NatsBroker,
    on_ready: Callable[[Infra], Awaitable[None]],
    on_stop: Callable[[], Awaitable[None]] | None = None,
) -> FastStream:
    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        telemetry.setup(name, settings)
        pool = await create_pool(settings.database_url, max_size=settings.spotter_db_pool_max)
        redis = Redis.from_url(settings.redis_url, decode_responses=True)
        await broker.connect()
        await ensure_streams(broker, settings.spotter_jetstream_replicas)
        await on_ready(Infra(broker=broker, pool=pool, redis=redis))
        try:
            yield
        finally:
            if on_stop is not None:
                await on_stop()
            await redis.aclose()
            await pool.close()

    return FastStream(broker, lifespan=lifespan)


def run_app(app: FastStream) -> None:
    asyncio.run(app.run())
