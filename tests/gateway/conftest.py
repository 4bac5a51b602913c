"""Gateway fixtures: the gateway's own live-event subscriber (edges.py) on the session's real NATS."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from faststream.nats import NatsBroker

from spotter_cli.devstack import StackUrls
from spotter_gateway import edges
from spotter_gateway.streams import LiveEvents


@pytest.fixture
async def live_broker(stack: StackUrls) -> AsyncIterator[tuple[NatsBroker, LiveEvents]]:
    """A broker serving edges.router, whose subscriber hands each event to this test's LiveEvents.
    Publish through it: one connection, so its subscription is in place before any publish."""
    live = LiveEvents()
    broker = NatsBroker(stack.nats_url)
    broker.include_router(edges.router)
    broker.context.set_global(edges.LIVE, live)
    await broker.start()
    yield broker, live
    await broker.stop()
