"""Gateway fixtures: the gateway's own live-event subscription (LiveEvents.subscribe) on the session's real NATS,
and the whole gateway app (create_app) served over HTTP on a test module's private NATS."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from faststream.nats import NatsBroker

from spotter_cli.devstack import StackUrls
from spotter_gateway.main import create_app
from spotter_gateway.settings import GatewaySettings
from spotter_gateway.streams import LiveEvents

from tests.servers import serve_in_thread


@pytest.fixture
async def live_broker(stack: StackUrls) -> AsyncIterator[tuple[NatsBroker, LiveEvents]]:
    """A broker whose connection carries this test's LiveEvents subscription, as the gateway's does.
    Publish through it: one connection, so its subscription is in place before any publish."""
    live = LiveEvents()
    broker = NatsBroker(stack.nats_url)
    await broker.start()
    await live.subscribe(broker.connection)
    yield broker, live
    await broker.stop()


@pytest.fixture(scope="module")
def gateway_settings(private_nats: str, stack: StackUrls, db_url: str) -> GatewaySettings:
    """On the module's private NATS: only what the test answers there answers the gateway's requests.
    A module overrides this fixture to change a setting."""
    return GatewaySettings(nats_url=private_nats, database_url=db_url, redis_url=stack.redis_url,
                           spotter_env="test", spotter_db_pool_max=2)


@pytest.fixture(scope="module")
def gateway_url(gateway_settings: GatewaySettings) -> Iterator[str]:
    """The gateway as `spotter-gateway` runs it: uvicorn, with its own event loop in a thread."""
    with serve_in_thread(create_app(gateway_settings), "gateway", timeout=30) as url:
        yield url


@pytest.fixture
async def http(gateway_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gateway_url, timeout=10) as client:
        yield client
