"""Rag's two halves alone, in process, over the index the running rag built: the lexical ranking is
rag's own HybridSearch without an embedder; the semantic one is the exact nearest neighbours of the
query's e5 embedding among the scope's indexed vectors (what HNSW approximates, see bench_ann.py).

The same vectors check rag's semantic floors, per scope, as ambient search uses them (it embeds the
message's terms, not its whole text): the cosine of each question's right answer, of the best wrong
one in its scope, and of the nearest document of each scope to messages that name nothing
(chit-chat), which a floor must stay above so that ambient context finds nothing in them.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from typing import Any, Optional, Sequence

import asyncpg
import numpy as np

FLOORS = tuple(round(0.80 + 0.005 * i, 3) for i in range(21))  # 0.800 … 0.900


async def _documents(conn: asyncpg.Connection, org: uuid.UUID, model: str) -> dict[str, tuple[list[str], np.ndarray]]:
    """Scope → (entity ids, their vectors): the studio's documents and the global library, as rag sees them."""
    rows = await conn.fetch(
        """SELECT scope, entity_id::text AS id, embedding::real[] AS v FROM rag_documents
            WHERE model = $2 AND (organization_id = $1 OR (scope = 'exercise' AND organization_id IS NULL))""",
        org, model,
    )
    by_scope: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for r in rows:
        by_scope[r["scope"]].append((r["id"], r["v"]))
    return {s: ([i for i, _ in xs], np.asarray([v for _, v in xs], dtype=np.float32)) for s, xs in by_scope.items()}


def _rank(ids: Sequence[str], expected: set[str]) -> Optional[int]:
    return next((i for i, x in enumerate(ids, start=1) if x in expected), None)


async def measure_modes(database_url: str, org_id: str, queries: Sequence[Any], expected: dict[str, set[str]],
                        chatter: Sequence[Any], *, top_k: int) -> dict[str, Any]:
    """{"ranks": {"lexical": {id: rank}, "semantic": {...}}, "components_ms": ..., "floor": ..., "note": str | None}."""
    try:
        from spotter_rag.core import HybridSearch  # noqa: PLC0415
        from spotter_rag.embeddings import E5_MODEL, E5Embedder  # noqa: PLC0415
        from spotter_shared.terms import extract_terms  # noqa: PLC0415
    except ImportError as exc:
        return {"ranks": {}, "floor": None, "note": f"lexical/semantic split not measured: {exc}"}

    def ambient_text(text: str) -> str:
        return " ".join(t.word for t in extract_terms(text))  # what rag's ambient search embeds

    floors = dict(getattr(E5Embedder, "semantic_floors", {}) or {})
    org = uuid.UUID(org_id)
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=2)
    e5 = E5Embedder()
    try:
        async with pool.acquire() as conn:
            models = [r["model"] for r in await conn.fetch("SELECT DISTINCT model FROM rag_documents")]
            docs = await _documents(conn, org, E5_MODEL)
        ranks: dict[str, dict[str, Optional[int]]] = {"lexical": {}, "semantic": {}}
        lexical = HybridSearch(pool, None)
        lexical_s, embed_s = [], []
        for q in queries:
            hits = await lexical.search(org_id, q.query, [q.scope], top_k)
            ranks["lexical"][q.id] = _rank([h.id for h in hits], expected[q.id])
            t = time.perf_counter()
            await lexical.ambient(org_id, q.query)  # the lexical half of an ambient search, all four scopes
            lexical_s.append(time.perf_counter() - t)
        if not docs:
            return {"ranks": {"lexical": ranks["lexical"]}, "floor": None,
                    "note": f"semantic half not measured: the index has no {E5_MODEL} vectors (models: {models})"}
        await e5.start()
        # Search embeds the whole query; ranked by exact cosine within the query's scope.
        for q, v in zip(queries, await e5.embed([q.query for q in queries], "query")):
            ids, matrix = docs.get(q.scope, ([], np.zeros((0, 384), np.float32)))
            ranks["semantic"][q.id] = _rank([ids[i] for i in np.argsort(-(matrix @ v))[:top_k]], expected[q.id])
        # What if the tools' search let every nearest neighbour in (no floor): rag's own fusion, floors off.
        no_floor = HybridSearch(pool, _Floorless(e5))
        ranks["hybrid_no_floor"] = {}
        for q in queries:
            hits = await no_floor.search(org_id, q.query, [q.scope], top_k)
            ranks["hybrid_no_floor"][q.id] = _rank([h.id for h in hits], expected[q.id])
        # Ambient embeds the message's terms, one message at a time (timed: a turn waits for it).
        ambient_vectors = []
        for q in queries:
            t = time.perf_counter()
            ambient_vectors += await e5.embed([ambient_text(q.query) or q.query], "query")
            embed_s.append(time.perf_counter() - t)
        chat_vectors = await e5.embed([ambient_text(c["query"]) or c["query"] for c in chatter], "query") if chatter else []
    finally:
        e5.close()
        await pool.close()

    by_scope: dict[str, Any] = {}
    for scope, (ids, matrix) in sorted(docs.items()):
        right, wrong = [], []
        for q, v in zip(queries, ambient_vectors):
            if q.scope != scope:
                continue
            cos = matrix @ v
            mine = [float(c) for i, c in zip(ids, cos) if i in expected[q.id]]
            others = [float(c) for i, c in zip(ids, cos) if i not in expected[q.id]]
            right.append(max(mine, default=0.0))
            wrong.append(max(others, default=0.0))
        chat = [float((matrix @ v).max()) for v in chat_vectors] if len(ids) else []
        clear = next((f for f in FLOORS if all(c < f for c in chat)), None)
        rag_floor = floors.get(scope)
        by_scope[scope] = {
            "questions": len(right),
            "rag_floor": rag_floor,
            "right_answer_cosine": _spread(right),
            "best_wrong_cosine": _spread(wrong),
            "chatter_max_cosine": round(max(chat), 3) if chat else None,
            "lowest_floor_clear_of_chatter": clear,
            # Share of right answers a semantic neighbour alone would surface (nothing lexical found them).
            "right_at_rag_floor": _share(right, rag_floor),
            "wrong_at_rag_floor": _share(wrong, rag_floor),
            "chatter_at_rag_floor": None if rag_floor is None else sum(c >= rag_floor for c in chat),
            "right_at_lowest_clear_floor": _share(right, clear),
        }
    return {
        "ranks": ranks,
        # The two halves of an ambient search timed apart (rag runs them side by side).
        "components_ms": {"lexical_ambient": _ms(lexical_s), "query_embedding": _ms(embed_s)},
        "floor": {"model": E5_MODEL, "query_text": "the message's terms, as ambient search embeds them",
                  "chatter_messages": len(chat_vectors), "by_scope": by_scope},
        "note": None,
    }


class _Floorless:
    """An embedder like `inner` whose semantic floors let every neighbour count."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.model, self.dimensions = inner.model, inner.dimensions
        self.semantic_floors = {scope: -1.0 for scope in ("program", "workout", "exercise", "member")}

    async def embed(self, texts: Sequence[str], kind: str) -> list[np.ndarray]:
        return await self._inner.embed(texts, kind)


def _share(xs: Sequence[float], floor: Optional[float]) -> Optional[float]:
    if floor is None or not xs:
        return None
    return round(sum(x >= floor for x in xs) / len(xs), 3)


def _spread(xs: Sequence[float]) -> dict[str, Optional[float]]:
    if not xs:
        return {"n": 0, "min": None, "median": None, "max": None}
    a = np.asarray(xs)
    return {"n": len(xs), "min": round(float(a.min()), 3), "median": round(float(np.median(a)), 3),
            "max": round(float(a.max()), 3)}


def _ms(seconds: Sequence[float]) -> dict[str, Optional[float]]:
    if not seconds:
        return {"p50": None, "p95": None}
    a = np.asarray(seconds) * 1000
    return {"p50": round(float(np.percentile(a, 50)), 1), "p95": round(float(np.percentile(a, 95)), 1)}
