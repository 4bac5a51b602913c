"""Rag's one subscriber: ambient search for the page-context block."""

from __future__ import annotations

from faststream.nats import NatsRouter

from spotter_shared import bus
from spotter_shared.contracts.rag import AMBIENT_SEARCH, AmbientQuery, AmbientResult
from spotter_shared.service import CORE, FromContext

from .core import AmbientSearch

router = NatsRouter()


# Core NATS with a queue group: replicas share the load and a late answer is useless anyway.
@bus.subscriber(router, AMBIENT_SEARCH)
async def ambient_search(query: AmbientQuery, core: AmbientSearch = FromContext(CORE)) -> AmbientResult:
    return await core.find(query)
