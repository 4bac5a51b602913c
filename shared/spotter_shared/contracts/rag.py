"""Retrieval: ambient context for a turn, the hybrid search the read tools use, embeddings for
other services, and keeping rag's index in step with the data it indexes.

Rag owns its index (`rag_documents`) and the embedding memo (`ai_cache`). The owners of the
indexed data announce what changed (`ENTITIES_CHANGED`, durable); rag re-reads those rows and
re-indexes them asynchronously, and a sweep catches up whatever no announcement reached it.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from .base import Contract, command_endpoint, request_endpoint

RAG_QUEUE = "rag"
RAG_STREAM = "SPOTTER_RAG"
RAG_INDEXER_DURABLE = "rag-indexer"

# The embedding models with a partial HNSW index of their own (migration 0008: a cast to the
# dimension, partial on the model), as name → dimensions. Vectors of different models never mix.
E5_MODEL, E5_DIMENSIONS = "multilingual-e5-small-q4", 384
VOYAGE_MODEL, VOYAGE_DIMENSIONS = "voyage-multilingual-2", 1024
INDEXED_MODELS: dict[str, int] = {E5_MODEL: E5_DIMENSIONS, VOYAGE_MODEL: VOYAGE_DIMENSIONS}

Scope = Literal["program", "workout", "exercise", "member"]
SCOPES: tuple[Scope, ...] = ("program", "workout", "exercise", "member")


class AmbientQuery(Contract):
    organization_id: str = Field(description="Organization whose data is searched.")
    query: str = Field(max_length=16000, description="The user's message.")


class AmbientHit(Contract):
    scope: Scope = Field(description="Entity kind.")
    id: str = Field(description="Entity id (membershipId for a member).")
    label: str = Field(description="Display name.")
    detail: str | None = Field(default=None, description="Short extra detail.")
    score: float = Field(description="Blended relevance score (reciprocal-rank fusion).")


class AmbientResult(Contract):
    hits: list[AmbientHit] = Field(description="At most 3 per scope, 5 in all.")
    skipped: str | None = Field(default=None, description="Why the search was skipped, e.g. too_short.")


AMBIENT_SEARCH = request_endpoint(
    "spotter.rag.ambient", AmbientQuery, AmbientResult, queue=RAG_QUEUE,
    description="Ambient search for a user's message: hybrid (lexical + semantic) over programs, workouts, "
    "exercises and members.",
)


SearchText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=500)]


class SearchQuery(Contract):
    organization_id: str = Field(description="Organization whose data is searched (plus the global exercise library).")
    query: SearchText = Field(description="What to find, in any language.")
    scopes: list[Scope] = Field(default_factory=lambda: list(SCOPES), min_length=1, description="Kinds to search.")
    limit: int = Field(default=10, ge=1, le=100, description="Maximum hits per scope.")


class SearchResult(Contract):
    hits: list[AmbientHit] = Field(description="Best first within each scope, scopes in the order asked.")


HYBRID_SEARCH = request_endpoint(
    "spotter.rag.search", SearchQuery, SearchResult, queue=RAG_QUEUE,
    description="Hybrid search (trigram + pgvector, reciprocal-rank fusion) for the read tools.",
)


class EmbedRequest(Contract):
    texts: list[Annotated[str, StringConstraints(max_length=8000)]] = Field(min_length=1, max_length=64,
                                                                          description="Texts to embed.")
    kind: Literal["query", "passage"] = Field(description="A search query, or a document to be found.")


class EmbedResult(Contract):
    model: str = Field(description="The embedding model; vectors of different models never mix.")
    dimensions: int = Field(description="Length of each vector.")
    vectors: list[list[float]] = Field(description="One L2-normalised vector per text, in order.")


EMBED = request_endpoint(
    "spotter.rag.embed", EmbedRequest, EmbedResult, queue=RAG_QUEUE,
    description="Embed texts with the configured provider (memoised by model and input hash).",
)


class EntitiesChanged(Contract):
    organization_id: str | None = Field(description="Their organization; null for the global exercise library.")
    scope: Scope = Field(description="Kind of the entities.")
    ids: list[str] = Field(min_length=1, max_length=1000, description="Ids that were created, changed or deleted.")


ENTITIES_CHANGED = command_endpoint(
    "spotter.rag.entities.changed", EntitiesChanged, stream=RAG_STREAM, queue=RAG_INDEXER_DURABLE,
    description="The owner of indexed data says these entities changed; rag re-reads and re-indexes them.",
)


class ReindexRequest(Contract):
    organization_id: str | None = Field(default=None, description="One organization, or everything when null.")


class ReindexResult(Contract):
    indexed: int = Field(description="Documents written (new or changed text).")
    unchanged: int = Field(description="Documents whose text had not changed.")
    removed: int = Field(description="Documents of entities that no longer exist.")
    model: str = Field(description="Embedding model of the index.")
    duration_ms: int = Field(description="Wall time of the rebuild.")


REINDEX = request_endpoint(
    "spotter.rag.reindex", ReindexRequest, ReindexResult, queue=RAG_QUEUE,
    description="Rebuild the index from the source tables (one organization or all).",
)
