"""spotter_shared.service.Service over a real NATS server: it runs a FastStream app as FastStream.run
does (the lifespan, startup and shutdown hooks, the broker connected and closed) without waking to
poll for its stop: a stop (`exit()`, SIGTERM) wakes it, and a failed startup ends it with the error."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
from faststream.nats import NatsBroker

from spotter_shared.service import Service

TIMEOUT = 10.0


@pytest.fixture
def no_polling(monkeypatch: pytest.MonkeyPatch) -> None:
    """FastStream.run polls its flag with anyio.sleep(0.1): fail if anything in the run does that."""

    async def polled(*_: object) -> None:
        raise AssertionError("the run slept in a loop instead of waiting for its stop")

    monkeypatch.setattr(anyio, "sleep", polled)


@pytest.fixture
async def restores_signals() -> AsyncIterator[None]:
    """The run puts SIGINT and SIGTERM handlers on the test's loop: taken off again after the test."""
    yield
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.remove_signal_handler(sig)


def app_with_hooks(nats_url: str, calls: list[str], *, fail_startup: bool = False) -> tuple[Service, NatsBroker, asyncio.Event]:
    broker = NatsBroker(nats_url)
    started = asyncio.Event()

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        calls.append("lifespan opened")
        try:
            yield
        finally:
            calls.append("lifespan closed")

    app = Service(broker, lifespan=lifespan)

    @app.on_startup
    async def starting() -> None:
        calls.append("startup")
        if fail_startup:
            raise RuntimeError("the database is not there")

    @app.after_startup
    async def up() -> None:
        calls.append("after startup")
        started.set()

    @app.on_shutdown
    async def stopping() -> None:
        calls.append("shutdown")

    return app, broker, started


async def test_an_exit_wakes_the_run_which_never_polled_and_shuts_down_in_order(
        private_nats: str, no_polling: None, restores_signals: None) -> None:
    calls: list[str] = []
    app, broker, started = app_with_hooks(private_nats, calls)
    run = asyncio.create_task(app.run())
    await asyncio.wait_for(started.wait(), TIMEOUT)
    assert broker.running and broker.connection.is_connected
    await asyncio.sleep(0.3)  # FastStream's own run would have polled three times by now
    assert not run.done()

    app.exit()
    await asyncio.wait_for(run, TIMEOUT)
    assert calls == ["lifespan opened", "startup", "after startup", "shutdown", "lifespan closed"]
    assert not broker.running


async def test_sigterm_stops_the_run(private_nats: str, no_polling: None, restores_signals: None) -> None:
    calls: list[str] = []
    app, _, started = app_with_hooks(private_nats, calls)
    run = asyncio.create_task(app.run())
    await asyncio.wait_for(started.wait(), TIMEOUT)

    os.kill(os.getpid(), signal.SIGTERM)  # the handler FastStream installs on the loop calls exit()
    await asyncio.wait_for(run, TIMEOUT)
    assert calls[-2:] == ["shutdown", "lifespan closed"]


async def test_a_failed_startup_ends_the_run_with_its_error(private_nats: str, restores_signals: None) -> None:
    calls: list[str] = []
    app, _, _ = app_with_hooks(private_nats, calls, fail_startup=True)
    with pytest.raises(RuntimeError, match="the database is not there"):
        await asyncio.wait_for(app.run(), TIMEOUT)
    assert "after startup" not in calls
    assert calls[-1] == "lifespan closed"
