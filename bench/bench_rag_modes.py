"""Rag's two halves alone, in process, over the index the running rag built: the lexical ranking is
rag's own HybridSearch without an embedder; the semantic one is the exact nearest neighbours of the
query's e5 embedding among the scope's indexed vectors (what HNSW approximates, see bench_ann.py).

The same vectors calibrate the semantic floor: the cosine of each query's right answer, of the best
wrong one in its scope, and of the nearest document to messages that name nothing (chit-chat), which
a floor must stay above so that ambient context finds nothing in them.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from typing import Any, Optional, Sequence

import asyncpg
import numpy as np

FLOORS = tuple(round(0.80 + 0.005 * i, 3) for i in range(17))  # 0.800 … 0.880


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
    """{"ranks": {"lexical": {id: rank}, "semantic": {...}}, "floor": {...}, "note": str | None}."""
    try:
        from spotter_rag.core import HybridSearch  # noqa: PLC0415
        from spotter_rag.embeddings import E5_MODEL, E5Embedder  # noqa: PLC0415

        rag_floor = getattr(E5Embedder, "semantic_floor", None)
    except ImportError as exc:
        return {"ranks": {}, "floor": None, "note": f"lexical/semantic split not measured: {exc}"}

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
        vectors = []
        for q in queries:  # one at a time, as a turn's message is embedded
            t = time.perf_counter()
            vectors += await e5.embed([q.query], "query")
            embed_s.append(time.perf_counter() - t)
        right, wrong = [], []
        for q, v in zip(queries, vectors):
            ids, matrix = docs.get(q.scope, ([], np.zeros((0, 384), np.float32)))
            cos = matrix @ v
            order = np.argsort(-cos)
            ranks["semantic"][q.id] = _rank([ids[i] for i in order[:top_k]], expected[q.id])
            mine = [float(cos[i]) for i in order if ids[i] in expected[q.id]]
            others = [float(cos[i]) for i in order if ids[i] not in expected[q.id]]
            right.append(mine[0] if mine else None)
            wrong.append(others[0] if others else None)
        chat_vectors = await e5.embed([c["query"] for c in chatter], "query") if chatter else []
        every = np.concatenate([m for _, m in docs.values()]) if docs else np.zeros((0, 384), np.float32)
        chat_best = [float((every @ v).max()) for v in chat_vectors]
    finally:
        e5.close()
        await pool.close()

    rights = [x for x in right if x is not None]
    table = [{
        "floor": f,
        "right_answers_at_or_above": round(sum(x >= f for x in rights) / max(1, len(rights)), 3),
        "best_wrong_at_or_above": round(sum(x is not None and x >= f for x in wrong) / max(1, len(wrong)), 3),
        "chatter_with_a_document_at_or_above": sum(x >= f for x in chat_best),
    } for f in FLOORS]
    return {
        "ranks": ranks,
        # The two halves of an ambient search timed apart (rag runs them side by side).
        "components_ms": {"lexical_ambient": _ms(lexical_s), "query_embedding": _ms(embed_s)},
        "floor": {
            "model": E5_MODEL,
            "rag_floor": rag_floor,
            "right_answer_cosine": _spread(rights),
            "best_wrong_cosine": _spread([x for x in wrong if x is not None]),
            "chatter_best_cosine": _spread(chat_best),
            "chatter_messages": len(chat_best),
            "by_floor": table,
            # The lowest floor no chit-chat message reaches: below it ambient context would fill idle talk.
            "lowest_floor_clear_of_chatter": next((row["floor"] for row in table
                                                   if row["chatter_with_a_document_at_or_above"] == 0), None),
        },
        "note": None,
    }


def _spread(xs: Sequence[float]) -> dict[str, Optional[float]]:
    if not xs:
        return {"n": 0, "min": None, "p10": None, "median": None, "p90": None, "max": None}
    a = np.asarray(xs)
    return {"n": len(xs), "min": round(float(a.min()), 3), "p10": round(float(np.percentile(a, 10)), 3),
            "median": round(float(np.median(a)), 3), "p90": round(float(np.percentile(a, 90)), 3),
            "max": round(float(a.max()), 3)}


def _ms(seconds: Sequence[float]) -> dict[str, Optional[float]]:
    if not seconds:
        return {"p50": None, "p95": None}
    a = np.asarray(seconds) * 1000
    return {"p50": round(float(np.percentile(a, 50)), 1), "p95": round(float(np.percentile(a, 95)), 1)}
