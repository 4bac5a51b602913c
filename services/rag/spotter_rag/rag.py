"""Rag's core as the handlers see it: the hybrid search, the indexer and the embedder, with the
contracts in and out. Knows nothing about NATS."""

from __future__ import annotations

from dataclasses import dataclass

from spotter_shared.contracts.rag import (
    AmbientQuery, AmbientResult, EmbedRequest, EmbedResult, EntitiesChanged, ReindexRequest, ReindexResult, SearchQuery,
    SearchResult,
)
from spotter_shared.errors import ErrorCode, SpotterError

from .core import HybridSearch
from .embeddings import Embedder
from .indexer import Counts, Indexer, parse_uuid


@dataclass
class Rag:
    search: HybridSearch
    indexer: Indexer
    embedder: Embedder

    async def ambient(self, query: AmbientQuery) -> AmbientResult:
        return await self.search.find(query)

    async def hybrid(self, query: SearchQuery) -> SearchResult:
        return await self.search.find_search(query)

    async def embed(self, request: EmbedRequest) -> EmbedResult:
        vectors = await self.embedder.embed(request.texts, request.kind)
        return EmbedResult(
            model=self.embedder.model, dimensions=self.embedder.dimensions,
            vectors=[[float(x) for x in v] for v in vectors],
        )

    async def reindex(self, request: ReindexRequest) -> ReindexResult:
        return await self.indexer.reindex(request.organization_id)

    async def entities_changed(self, change: EntitiesChanged) -> Counts:
        org = parse_uuid(change.organization_id, "organizationId")
        if org is None and change.scope != "exercise":
            raise SpotterError(ErrorCode.INVALID_REQUEST, "organizationId: only exercises may be global")
        return await self.indexer.index(change.scope, change.ids)
