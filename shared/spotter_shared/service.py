"""The common shape of a service process: one lifespan that opens and closes the Postgres pool, the
Redis client and the broker, shared by the FastStream services and the gateway's FastAPI app."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import asyncpg
import uvloop
from faststream import FastStream
from faststream._internal._compat import ExceptionGroup
from faststream._internal.cli.supervisors.utils import set_exit
from faststream._internal.context.context_type import Context as ContextField  # the class behind Context()
from faststream.nats import NatsBroker, NatsRouter
from redis.asyncio import BlockingConnectionPool, Redis

from . import metrics, telemetry
from .bus import Pulling, Serving, create_broker, ensure_streams
from .db import create_pool
from .settings import CommonSettings

# The name under which a service's core object sits in the broker's context; module-level handlers
# take it as `core: Annotated[TheCore, FromContext(CORE)]`.
CORE = "core"


class FromContext(ContextField):
    """FastStream's `Context`, resolved on the event loop. fast_depends runs a custom field's sync
    `use` in a worker thread — a thread hop per message (measured here: ~0.1–0.4 ms of CPU each)."""

    async def use(self, /, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        return super().use(**kwargs)


@dataclass
class Infra:
    broker: NatsBroker
    pool: asyncpg.Pool
    redis: Redis
    # Gauges of shared state a service reports (consumer lag, budget holds): sampled only while
    # metrics are served.
    gauges: metrics.Sampler


def service_broker(name: str, settings: CommonSettings, *routers: NatsRouter) -> NatsBroker:
    """The service's broker with its module-level routers included; usable without connecting
    (AsyncAPI generation)."""
    broker = create_broker(settings.nats_url, name)
    for router in routers:
        broker.include_router(router)
    return broker


@asynccontextmanager
async def infra(name: str, settings: CommonSettings, broker: NatsBroker, *, start_broker: bool = False) -> AsyncIterator[Infra]:
    """Open everything a service needs, in order, and close it in reverse. FastStream starts the
    broker itself once the lifespan has run; a FastAPI app asks for `start_broker`."""
    telemetry.setup(name, settings)
    if not start_broker:  # a NATS service; the gateway (start_broker) has its own /metrics route
        metrics.serve(settings.spotter_metrics_port)
    pool = await create_pool(settings.database_url, max_size=settings.spotter_db_pool_max)
    # A pool that waits for a free connection (up to 5 s) instead of failing at once when every one is
    # in use: thousands of streams checking a lease together must not kill some of them.
    redis = Redis(connection_pool=BlockingConnectionPool.from_url(
        settings.redis_url, decode_responses=True, max_connections=settings.spotter_redis_max_connections, timeout=5,
        # No call waits forever for a reply (every command here is short; nothing blocks server-side).
        socket_timeout=10, socket_connect_timeout=5))
    gauges = metrics.Sampler(settings.spotter_metrics_sample_s if settings.spotter_metrics_port else 0)
    try:
        if start_broker:
            await broker.start()
        else:
            await broker.connect()
        await ensure_streams(broker, settings.spotter_jetstream_replicas)
        settle_heap()
        yield Infra(broker=broker, pool=pool, redis=redis, gauges=gauges)
    finally:
        await gauges.stop()
        if start_broker:
            await broker.stop()
        await redis.aclose()
        await pool.close()


def settle_heap() -> None:
    """Once started: what was allocated so far (modules, models, the app) is moved out of the cyclic
    collector's reach, and young collections run every 50,000 allocations rather than 700. With
    thousands of SSE streams the default thresholds made full collections over a ~400 MB heap stop
    the event loop for 1–2 s at a time (bench/bench_fanout.py: delivery lag p50 8–15 s → 35 ms)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 50, 100)


def service_app(
    name: str,
    settings: CommonSettings,
    broker: NatsBroker,
    make_core: Callable[[Infra], Awaitable[Any]],
    on_stop: Callable[[], Awaitable[None]] | None = None,
    *,
    serving: list[Serving | Pulling] | None = None,
) -> Service:
    """A FastStream app whose core (built by `make_core` once the infrastructure is open) is what
    every handler receives as `Context(CORE)`. `serving` collects the service's started
    `bus.Responders` and `bus.Pullers` groups (make_core starts them), stopped at shutdown before the broker closes."""

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        async with infra(name, settings, broker) as opened:
            broker.context.set_global(CORE, await make_core(opened))
            try:
                yield
            finally:
                if on_stop is not None:
                    await on_stop()

    app = Service(broker, lifespan=lifespan)
    if serving is not None:

        @app.on_shutdown
        async def stop_answering() -> None:
            # Before the broker closes the connection: take no more requests, answer the ones in flight
            # (every group at once: one grace period, not one after another).
            await asyncio.gather(*(group.stop() for group in serving))
            serving.clear()

    return app


class Service(FastStream):
    """FastStream's app, waiting for its stop instead of polling for it. `FastStream.run` wakes every
    100 ms to look at a flag that SIGTERM, SIGINT or `exit()` sets: on this VM a wake from idle costs a
    few hundred µs, ~2–4 ms of CPU a second in each service at rest (measured with the platform idle:
    ~7.7 ms/s across the four FastStream services). Here `exit()` sets an event the run waits on, so a
    service at rest sleeps and a stop is taken at once. The rest is `FastStream.run` as pinned (0.7.8):
    the same lifespan, startup and shutdown hooks, signal handlers and error unwrapping."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._stop = asyncio.Event()

    async def run(self, log_level: int = logging.INFO, run_extra_options: dict[str, Any] | None = None,
                  sleep_time: float = 0.1) -> None:
        set_exit(lambda *_: self.exit(), sync=False)
        async with self.lifespan_context(**(run_extra_options or {})):
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._startup, log_level, run_extra_options)
                    await self._stop.wait()
                    await self._shutdown(log_level)
                    tg.cancel_scope.cancel()
            except ExceptionGroup as e:
                for ex in e.exceptions:
                    raise ex from None

    def exit(self) -> None:
        super().exit()
        self._stop.set()


def run_app(app: FastStream) -> None:
    """Run a NATS service on uvloop: its socket reads and writes (NATS, Postgres, Redis) are a large
    share of each message's cost, and uvloop makes them 2-4x cheaper than asyncio's own loop. The
    gateway and the simulator get it from uvicorn, which picks uvloop and httptools when installed."""
    uvloop.run(app.run())
