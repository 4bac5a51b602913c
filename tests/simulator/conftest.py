"""Runs one simulator per test session (uvicorn in a thread) and resets it per test."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator

import anthropic
import pytest
import pytest_asyncio
import uvicorn

from spotter_sim import SimClock, SimConfig, create_app

from .helpers import Sim


@pytest.fixture(scope="session")
def sim_clock() -> SimClock:
    return SimClock()


@pytest.fixture(scope="session")
def sim_url(sim_clock: SimClock) -> Iterator[str]:
    config = SimConfig(ttft_ms=0, tokens_per_second=0, max_requests_logged=1000)
    server = uvicorn.Server(uvicorn.Config(create_app(config, clock=sim_clock), log_level="warning"))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))  # a free port, held until uvicorn takes over the socket
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("simulator did not start")
        time.sleep(0.01)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="session")
def sim_control(sim_url: str, sim_clock: SimClock) -> Iterator[Sim]:
    control = Sim(sim_url, sim_clock)
    yield control
    control.http.close()


@pytest.fixture
def sim(sim_control: Sim) -> Sim:
    """The control client, with the simulator reset to a blank state for this test."""
    sim_control.reset()
    return sim_control


@pytest_asyncio.fixture
async def client(sim: Sim) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic.AsyncAnthropic(base_url=sim.base_url, api_key="test", max_retries=0) as c:
        yield c
