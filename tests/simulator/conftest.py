"""Runs one simulator per test session (uvicorn in a thread) and resets it per test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import anthropic
import pytest
import pytest_asyncio

from spotter_sim import SimClock, SimConfig, create_app

from tests.servers import serve_in_thread

from .helpers import Sim


@pytest.fixture(scope="session")
def sim_clock() -> SimClock:
    return SimClock()


@pytest.fixture(scope="session")
def sim_url(sim_clock: SimClock) -> Iterator[str]:
    config = SimConfig(ttft_ms=0, tokens_per_second=0, max_requests_logged=1000)
    with serve_in_thread(create_app(config, clock=sim_clock), "simulator", timeout=10) as url:
        yield url


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
