"""Rag's subscribers: ambient search, hybrid search, embeddings and re-index (requests, queue
group "rag"), and the durable ENTITIES_CHANGED consumer that keeps the index in step. Each
handler validates (its parameter is the contract), calls the core and answers or acknowledges.

The requests answer on the bare NATS connection (`bus.Responders`: no FastStream middleware per
message, many at once; an ambient search is on the way to every turn's first token); the router
declares them for the AsyncAPI document and is never subscribed by FastStream. The durable
consumer stays on FastStream, whose JetStream pull and acknowledgement it needs."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Annotated

from faststream.middlewares import AckPolicy
from faststream.nats import JStream, NatsBroker, NatsMessage, NatsRouter, PullSub
from nats.js.api import ConsumerConfig

from spotter_shared import bus
from spotter_shared.bus import park
from spotter_shared.contracts.rag import (
    AMBIENT_SEARCH, EMBED, ENTITIES_CHANGED, HYBRID_SEARCH, RAG_INDEXER_DURABLE, RAG_STREAM, REINDEX, AmbientQuery,
    AmbientResult, EmbedRequest, EmbedResult, EntitiesChanged, ReindexRequest, ReindexResult, SearchQuery, SearchResult,
)
from spotter_shared.service import CORE, FromContext

from .rag import Rag
from .settings import RagSettings

Core = Annotated[Rag, FromContext(CORE)]
Broker = Annotated[NatsBroker, FromContext("broker")]

router = NatsRouter()
responders = bus.Responders(router)


# Core NATS with a queue group: replicas share the load and a late answer is useless anyway.
@responders(AMBIENT_SEARCH)
async def ambient_search(query: AmbientQuery, core: Core) -> AmbientResult:
    return await core.ambient(query)


@responders(HYBRID_SEARCH)
async def hybrid_search(query: SearchQuery, core: Core) -> SearchResult:
    return await core.hybrid(query)


@responders(EMBED)
async def embed(request: EmbedRequest, core: Core) -> EmbedResult:
    return await core.embed(request)


@responders(REINDEX)
async def reindex(request: ReindexRequest, core: Core) -> ReindexResult:
    return await core.reindex(request)


def build_router(settings: RagSettings) -> NatsRouter:
    """The ENTITIES_CHANGED consumer, whose consumer settings come from configuration."""
    durable = NatsRouter()

    async def entities_changed(change: EntitiesChanged, msg: NatsMessage, core: Core, broker: Broker) -> None:
        raw = msg.raw_message
        if raw.metadata.num_delivered > settings.rag_max_deliveries:
            # Failing again and again (not a bad payload: those are parked at once by the contract
            # middleware): park it with its reason; the sweep indexes the entities anyway.
            await park(broker, raw, f"gave up after {settings.rag_max_deliveries} deliveries")
            await msg.ack_sync()
            return
        async with _in_progress(msg, settings.rag_ack_wait_s / 3):
            await core.entities_changed(change)
        # Double ack: the announcement is gone only once the server confirms it.
        await msg.ack_sync()

    durable.subscriber(
        ENTITIES_CHANGED.subject, stream=JStream(name=RAG_STREAM, declare=False), durable=RAG_INDEXER_DURABLE,
        pull_sub=PullSub(timeout=1.0),
        config=ConsumerConfig(ack_wait=settings.rag_ack_wait_s, max_deliver=-1, max_ack_pending=1000),
        ack_policy=AckPolicy.MANUAL, description=ENTITIES_CHANGED.description,
    )(entities_changed)
    return durable


@contextlib.asynccontextmanager
async def _in_progress(msg: NatsMessage, every_s: float) -> AsyncIterator[None]:
    """Tell JetStream the announcement is still being worked on (embedding a large batch takes
    seconds), so only a dead replica's work is redelivered."""

    async def beat() -> None:
        while True:
            await asyncio.sleep(every_s)
            with contextlib.suppress(Exception):
                await msg.raw_message.in_progress()

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
