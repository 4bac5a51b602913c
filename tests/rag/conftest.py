"""Rag's fixtures: the real bundled e5 model (one per session), a Redis client that returns bytes
for the embedding memo, and the global exercise library indexed once per test database."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import asyncpg
import numpy as np
import pytest
from redis.asyncio import Redis

from spotter_cli.devstack import StackUrls
from spotter_rag.embeddings import E5Embedder, Kind, MemoEmbedder
from spotter_rag.indexer import Indexer


class Counting:
    """A real embedder that counts what it is asked to embed (to tell memo hits from misses)."""

    def __init__(self, inner: E5Embedder) -> None:
        self.inner = inner
        self.model = inner.model
        self.dimensions = inner.dimensions
        self.semantic_floors = inner.semantic_floors
        self.calls: list[tuple[Kind, list[str]]] = []

    async def embed(self, texts: Sequence[str], kind: Kind) -> list[np.ndarray]:
        self.calls.append((kind, list(texts)))
        return await self.inner.embed(texts, kind)

    @property
    def texts(self) -> list[str]:
        return [t for _, batch in self.calls for t in batch]


@pytest.fixture(scope="session")
async def e5() -> AsyncIterator[E5Embedder]:
    model = E5Embedder()
    await model.start()
    yield model
    model.close()


@pytest.fixture(scope="session")
async def binary_redis(stack: StackUrls) -> AsyncIterator[Redis]:
    client = Redis.from_url(stack.redis_url, decode_responses=False)
    yield client
    await client.aclose()


@pytest.fixture(scope="session")
async def memo(e5: E5Embedder, pool: asyncpg.Pool, binary_redis: Redis) -> MemoEmbedder:
    return MemoEmbedder(e5, pool, binary_redis)


@pytest.fixture(scope="session")
async def library(pool: asyncpg.Pool, memo: MemoEmbedder) -> None:
    """The global exercise library in the index (~170 passages; the memo makes repeats cheap)."""
    await Indexer(pool, memo).reindex_library()


async def library_size(pool: asyncpg.Pool) -> int:
    """Entries of the global exercise library: every organization's reindex also covers them."""
    return await pool.fetchval("SELECT count(*) FROM exercises WHERE organization_id IS NULL AND deleted_at IS NULL")
