"""Runs one simulator per test session (uvicorn in a thread) and resets it per test."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anthropic
import httpx
import pytest
import pytest_asyncio
import uvicorn

from spotter_sim import SimClock, SimConfig, create_app

MODEL = "claude-sonnet-5-5"
LEGACY_MODEL = "claude-sonnet-4-6"

DEMO_TOOLS: list[dict[str, Any]] = [
    {
        "name": "read__get_current_context",
        "description": "Who the caller is and which studio they act for.",
        "input_schema": {"type": "object", "properties": {}},
    },
    {
        "name": "read__programs_list",
        "description": "List the studio's programs.",
        "input_schema": {"type": "object", "properties": {}},
    },
    {
        "name": "read__members_search",
        "description": "Search members by name or email.",
        "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
]


class Sim:
    """Thin client for the `/_sim` control API."""

    def __init__(self, base_url: str, clock: SimClock) -> None:
        self.base_url = base_url
        self.clock = clock
        self.http = httpx.Client(base_url=base_url, timeout=10)

    def script(self, responses: list[dict[str, Any]], match: str | None = None, times: int | None = None) -> str:
        r = self.http.post("/_sim/script", json={"match": match, "responses": responses, "times": times})
        r.raise_for_status()
        return r.json()["id"]

    def fault(self, status: int, count: int = 1, **extra: Any) -> str:
        r = self.http.post("/_sim/faults", json={"status": status, "count": count, **extra})
        r.raise_for_status()
        return r.json()["id"]

    def latency(self, ttft_ms: int | None = None, tokens_per_second: float | None = None) -> dict[str, Any]:
        r = self.http.post("/_sim/latency", json={"ttft_ms": ttft_ms, "tokens_per_second": tokens_per_second})
        r.raise_for_status()
        return r.json()

    def requests(self, limit: int | None = None) -> list[dict[str, Any]]:
        r = self.http.get("/_sim/requests", params={"limit": limit} if limit else None)
        r.raise_for_status()
        return r.json()["requests"]

    def reset(self) -> None:
        self.http.post("/_sim/reset").raise_for_status()


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
