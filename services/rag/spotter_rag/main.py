"""The rag process: the broker with rag's subscribers over the hybrid search, the indexer and
the embedder (Voyage when VOYAGE_API_KEY is set, the bundled e5 otherwise), plus the background
sweep that keeps the index in step with writers that don't announce."""

from __future__ import annotations

import logging

from faststream import FastStream
from redis.asyncio import Redis

from spotter_shared import bus
from spotter_shared.bus import consumer_lag, prune_consumers
from spotter_shared.contracts.rag import RAG_INDEXER_DURABLE, RAG_STREAM
from spotter_shared.service import Infra, run_app, service_app, service_broker

from .core import HybridSearch, create_search_pool
from .embeddings import E5Embedder, Embedder, MemoEmbedder, VoyageEmbedder
from .handlers import build_router, responders, router
from .indexer import Indexer, Sweeper
from .rag import Rag
from .settings import RagSettings

__all__ = ["RagSettings", "create_app", "run"]

log = logging.getLogger(__name__)


def provider(settings: RagSettings) -> Embedder:
    if settings.voyage_api_key is not None and settings.voyage_api_key.get_secret_value():
        return VoyageEmbedder(settings.voyage_api_key.get_secret_value(), url=settings.voyage_url,
                              timeout_s=settings.voyage_timeout_s)
    return E5Embedder(query_lanes=settings.rag_query_lanes or None)


def create_app(settings: RagSettings) -> FastStream:
    broker = service_broker("spotter-rag", settings, router, build_router(settings))
    closing: list = []
    serving: list[bus.Serving] = []

    async def make_core(infra: Infra) -> Rag:
        await prune_consumers(broker, RAG_STREAM, {RAG_INDEXER_DURABLE})
        infra.gauges.add(consumer_lag(broker, RAG_STREAM, [RAG_INDEXER_DURABLE]))
        inner = provider(settings)
        if isinstance(inner, E5Embedder):
            await inner.start()
        # The memo stores raw float32: a client of its own that returns bytes (the shared one decodes).
        memo_redis = Redis.from_url(settings.redis_url, decode_responses=False)
        embedder = MemoEmbedder(inner, infra.pool, memo_redis, redis_ttl_s=settings.rag_embed_redis_ttl_s,
                                db_ttl_days=settings.rag_embed_db_ttl_days)
        # Ambient search's own connections, set up for it: a search is its two statements.
        search_pool = await create_search_pool(settings.database_url, max_size=settings.spotter_db_pool_max,
                                               statement_timeout_ms=settings.rag_statement_timeout_ms,
                                               ef_search=settings.rag_hnsw_ef_search)
        search = HybridSearch(
            infra.pool, embedder, search_pool=search_pool,
            budget_s=settings.rag_search_budget_ms / 1000,
            statement_timeout_ms=settings.rag_statement_timeout_ms,
            search_budget_s=settings.rag_tool_search_budget_ms / 1000,
            ef_search=settings.rag_hnsw_ef_search,
            semantic_wait_s=settings.rag_semantic_wait_ms / 1000,
        )
        indexer = Indexer(infra.pool, embedder, embed_batch=settings.rag_embed_batch, sweep_batch=settings.rag_sweep_batch)
        sweeper = Sweeper(indexer, settings.rag_sweep_interval_s, after_round=embedder.purge_expired)
        # In the background: readiness never waits for a first index of the whole database.
        sweeper.start()
        closing.append((sweeper, inner, memo_redis, search_pool))
        log.info("rag: embeddings %s (%d d), sweep every %ss", embedder.model, embedder.dimensions,
                 settings.rag_sweep_interval_s)
        rag = Rag(search=search, indexer=indexer, embedder=embedder)
        serving.append(await responders.start(infra.broker, rag))
        return rag

    async def on_stop() -> None:
        for sweeper, inner, memo_redis, search_pool in closing:
            await sweeper.stop()
            await search_pool.close()
            if isinstance(inner, VoyageEmbedder):
                await inner.aclose()
            elif isinstance(inner, E5Embedder):
                inner.close()
            await memo_redis.aclose()
        closing.clear()

    return service_app("rag", settings, broker, make_core, on_stop=on_stop, serving=serving)


def run() -> None:
    run_app(create_app(RagSettings()))


if __name__ == "__main__":
    run()
