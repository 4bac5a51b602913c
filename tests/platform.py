"""The whole platform as separate processes (five services + model simulator) on the session's
real NATS, Postgres and Redis, shared by the end-to-end tests (HTTP+SSE) and the browser tests
(Debian chromium driven by Playwright): one platform per test session."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass

import nats
import pytest

from spotter_shared.contracts.billing import USAGE
from spotter_shared.contracts.commands import ORGANIZE_CONVERSATION
from spotter_shared.contracts.rag import EMBED
from spotter_shared.contracts.tools import TOOL_CATALOG

from spotter_cli.devstack import StackUrls, find_free_port
from spotter_cli.supervisor import SERVICES, SIMULATOR, ServiceProcess, start_services, stop_services, wait_http_ok

from . import otlp


@dataclass
class Platform:
    base_url: str
    sim_url: str
    env: dict[str, str]
    procs: dict[str, ServiceProcess]
    traces: otlp.Collector

    def restart(self, name: str) -> None:
        self.procs[name].start()


def service_env(stack: StackUrls, db_url: str, *, nats_url: str, sim_port: int) -> dict[str, str]:
    """The services' settings in tests (this environment's, without trace export)."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
        "NATS_URL": nats_url,
        "DATABASE_URL": db_url,
        "REDIS_URL": stack.redis_url,
        "SPOTTER_ENV": "test",
        "SPOTTER_SIM_PORT": str(sim_port),
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{sim_port}",
        "ANTHROPIC_API_KEY": "sk-ant-simulator",
        "PYTHONUNBUFFERED": "1",
        # Faster crash recovery in tests: redelivery 3 s after a replica dies.
        "SPOTTER_ACK_WAIT_S": "3",
        "SPOTTER_TURN_LOCK_TTL_S": "6",
        # Each test is its own studio, but a long conversation sends many turns a minute; the limits
        # themselves are tested in tests/gateway/test_rate_limits.py.
        "SPOTTER_RATE_LIMIT_USER": "1000/minute",
        "SPOTTER_RATE_LIMIT_ORG": "10000/minute",
        "SPOTTER_PROVIDER_RETRIES": "0",
        "SPOTTER_TOOL_TIMEOUT_S": "3",
        # Rag indexes what a test asks for (REINDEX of its studio), not every studio of the session
        # in the background: the sweep's embeddings would compete for the 2 cores with every test.
        "RAG_SWEEP_INTERVAL_S": "0",
        "SPOTTER_SEARCH_EMBED_TIMEOUT_S": "3",
    }


@pytest.fixture(scope="session")
def platform(stack: StackUrls, db_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    http_port, sim_port = find_free_port(), find_free_port()
    traces, receiver = otlp.serve()
    env = {
        **service_env(stack, db_url, nats_url=stack.nats_url, sim_port=sim_port),
        "SPOTTER_HTTP_PORT": str(http_port),
        # Every service exports its spans to the test's OTLP receiver, as to a production collector.
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"http://127.0.0.1:{receiver.server_port}/v1/traces",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    }
    logs = tmp_path_factory.mktemp("platform-logs")
    procs = start_services(env, [SIMULATOR, *SERVICES], output=False, log_dir=logs)
    try:
        wait_http_ok(f"http://127.0.0.1:{sim_port}/_sim/health", timeout=60, watch=procs.values())
        wait_http_ok(f"http://127.0.0.1:{http_port}/readyz", timeout=60, watch=procs.values())
        asyncio.run(_wait_for_responders(stack.nats_url, timeout=60))
        yield Platform(base_url=f"http://127.0.0.1:{http_port}", sim_url=f"http://127.0.0.1:{sim_port}", env=env, procs=procs,
                       traces=traces)
    finally:
        stop_services(procs)
        receiver.shutdown()


async def _wait_for_responders(nats_url: str, *, timeout: float) -> None:
    """The gateway is ready before the services behind it have subscribed: wait until each answers a
    request (a malformed one is answered with a typed error, which is enough), so the first test of
    a session does not meet `no responders`."""
    nc = await nats.connect(nats_url)
    deadline = time.monotonic() + timeout
    try:
        for ep in (ORGANIZE_CONVERSATION, TOOL_CATALOG, USAGE, EMBED):
            while True:
                try:
                    await nc.request(ep.subject, b"{}", timeout=2)
                    break
                except (nats.errors.NoRespondersError, nats.errors.TimeoutError):
                    if time.monotonic() > deadline:
                        raise AssertionError(f"nobody answers {ep.subject}") from None
                    await asyncio.sleep(0.1)
    finally:
        await nc.close()
