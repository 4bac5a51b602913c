"""Hybrid search over rag_documents: lexical (substring, trigram, cross-script name keys) plus
semantic (pgvector HNSW), blended by reciprocal-rank fusion. Knows nothing about NATS.

Two entry points (the bench imports them)::

    search = HybridSearch(pool, embedder)
    await search.ambient(org_id, "can you find saar and tell me about their payment plan")  # AmbientResult
    await search.search(org_id, "squat", scopes=["exercise"], limit=10)                      # list[AmbientHit]

Ambient (seed 000): messages under 30 characters are skipped; the message is cut into terms
(stopwords and intent words of English, Hebrew and Russian stripped, terms.py); at most 3 hits
per scope and 5 in all; it answers within its budget (below the caller's 800 ms) or says
`skipped="timeout"`, and an embedding failure only drops the semantic half. The query's embedding
is waited for only so long (`semantic_wait_s`, 150 ms from the start): on a loaded rag a late
vector is dropped (and never computed, if it had not started) and ambient answers with the lexical
half, which it also does when the budget ends after the lexical half finished. The search is the
same over the whole query (a tool's query is what to find, not a message): the phrase as one term
at full weight, its words at half.

Fusion: each ranking adds weight / (RRF_K + rank) to an entity's score. The rankings: per term,
name matches (label or other names contain the term or its variant), text matches (anywhere in
the body), cross-script name-key matches; the best trigram similarity to the names; and the
semantic neighbours. A neighbour that nothing lexical found must reach the embedder's semantic
floor (e5: 0.835–0.88 by scope, see embeddings.py) to count in ambient, so chit-chat finds nothing
while a paraphrase ("a squat variation", "exercise for the back") does. The tools' search has no
floor (NO_FLOOR): whoever asks wants the nearest by meaning.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field

import asyncpg
import numpy as np

from spotter_shared import metrics
from spotter_shared.contracts.rag import SCOPES, AmbientHit, AmbientQuery, AmbientResult, Scope, SearchQuery, SearchResult
from spotter_shared.db import create_pool
from spotter_shared.errors import ErrorCode, SpotterError
from spotter_shared.phonetic import MIN_KEY
from spotter_shared.terms import Term, extract_terms, like_pattern, name_pattern, unsearched

from .embeddings import Embedder, vector_literal

log = logging.getLogger(__name__)

MAX_PER_SCOPE = 3
MAX_TOTAL = 5
# Candidate rows per scope from each side before fusion; bounds the work a chatty message can cause.
MAX_ROWS_PER_SCOPE = 50
# Semantic neighbours per scope: a lexical candidate further down gets no semantic vote, and a
# semantic-only one must clear the floor, which only the first few ever do.
SEMANTIC_ROWS_PER_SCOPE = 20
ROWS_PER_PATTERN = 200
# pg_trgm word_similarity at or above this counts as a fuzzy name match ("crosfit" ~ "CrossFit"
# 0.7, "saarr" ~ "Saar" 0.67; not "dana" ~ "Dani" 0.6 nor "friend" ~ "Friedman" 0.57).
# Only Latin words of four letters or more are matched fuzzily: Hebrew and Russian spellings are
# covered by their variants and name keys, and a trigram search for every word costs too much.
FUZZY_MIN = 0.65
FUZZY_MIN_LETTERS = 4
# The usual RRF damping constant: rank 1 scores 1/61, rank 2 1/62, …
RRF_K = 60
# A name key is a name match in another script, so it weighs as much; coverage ranks entities by
# how many of the query's terms they match ("dan cohen": דן כהן matches both, Saar Cohen one).
WEIGHT_NAME, WEIGHT_TEXT, WEIGHT_FUZZY, WEIGHT_KEY, WEIGHT_COVERAGE, WEIGHT_SEMANTIC = 1.0, 0.5, 0.5, 1.0, 1.0, 1.0
# In HYBRID_SEARCH the whole query is one term; its words count half.
WORD_WEIGHT_IN_SEARCH = 0.5
# Ambient: a term that names more entities of a scope than this says nothing about which one the
# message means ("time" in a year of "… for time" workouts, "squat" among them).
MAX_NAMED_PER_TERM = 40
HNSW_EF_SEARCH = 40
# HYBRID_SEARCH has no semantic floor: a tool asked for the nearest by meaning, and the fusion
# still ranks lexical matches first (bench: hit@5 81% → 88% without the floor). Ambient, where
# nobody asked, keeps the embedder's per-scope floors against chit-chat.
NO_FLOOR = -1.0

# Kinds of lexical pattern.
WORD, KEY, SHORT_KEY = 0, 1, 2


@dataclass(frozen=True)
class Match:
    """One entity matched lexically by one term. `named` counts the entities of its scope whose
    name the term matched (the term's specificity)."""

    id: str
    label: str
    detail: str | None
    term: int
    name_hit: bool
    text_hit: bool
    key_hit: bool
    short_key_hit: bool
    similarity: float
    named: int = 1


@dataclass(frozen=True)
class Neighbour:
    """One entity near the query's embedding."""

    id: str
    label: str
    detail: str | None
    cosine: float


def _rrf(scores: dict[str, float], ranking: list[tuple[str, float]], weight: float) -> None:
    """Add weight/(K + rank) for each (id, value) of a ranking sorted best first. Equal values
    share a rank, so two equally good matches (two "Saar"s) score the same."""
    rank, previous = 0, None
    for position, (entity_id, value) in enumerate(ranking, start=1):
        if value != previous:
            rank, previous = position, value
        scores[entity_id] += weight / (RRF_K + rank)


def fuse(scope: Scope, matches: Sequence[Match], neighbours: Sequence[Neighbour] = (), *,
         weights: Sequence[float] | None = None, floor: float = 1.0, limit: int = MAX_PER_SCOPE,
         strict: bool = False) -> list[AmbientHit]:
    """Reciprocal-rank fusion of the lexical rankings (per term: name, text, name key; trigram
    similarity; terms covered) and the semantic one; the scope's best `limit` hits, best first.

    An entity needs evidence: a name, text or fuzzy match, a name key of three consonants or more
    (or two-consonant keys from two terms: "סער כהן" → sr + kn), or a cosine at the floor. A lone
    two-consonant key is too common to mean anything by itself. `strict` (ambient, where nobody
    asked for a search) also drops terms that name too many entities and asks more of a
    description: one common word in it ("time" in "training time") is not enough, two terms are."""
    if strict:
        matches = [m if m.named <= MAX_NAMED_PER_TERM else _unnamed(m) for m in matches]
    scores: dict[str, float] = defaultdict(float)
    for term in dict.fromkeys(m.term for m in matches):
        weight = weights[term] if weights is not None else 1.0
        mine = sorted((m for m in matches if m.term == term), key=lambda m: -m.similarity)
        _rrf(scores, [(m.id, m.similarity) for m in mine if m.name_hit], WEIGHT_NAME * weight)
        _rrf(scores, [(m.id, m.similarity) for m in mine if m.text_hit and not m.name_hit], WEIGHT_TEXT * weight)
        _rrf(scores, [(m.id, 0.0) for m in mine if (m.key_hit or m.short_key_hit) and not m.name_hit], WEIGHT_KEY * weight)
    best: dict[str, float] = defaultdict(float)
    covered: dict[str, set[int]] = defaultdict(set)
    for m in matches:
        best[m.id] = max(best[m.id], m.similarity)
        if m.name_hit or m.text_hit or m.key_hit or m.short_key_hit:
            covered[m.id].add(m.term)
    _rrf(scores, sorted(((i, s) for i, s in best.items() if s >= FUZZY_MIN), key=lambda p: -p[1]), WEIGHT_FUZZY)
    if len(covered) > 1:
        _rrf(scores, sorted(((i, float(len(t))) for i, t in covered.items()), key=lambda p: -p[1]), WEIGHT_COVERAGE)

    lexical = {m.id for m in matches}
    near = sorted((n for n in neighbours if n.cosine >= floor or n.id in lexical), key=lambda n: -n.cosine)
    _rrf(scores, [(n.id, round(n.cosine, 4)) for n in near], WEIGHT_SEMANTIC)

    evidence = _evidence(matches, strict) | {n.id for n in neighbours if n.cosine >= floor}
    first: dict[str, tuple[str, str | None]] = {n.id: (n.label, n.detail) for n in neighbours}
    first.update({m.id: (m.label, m.detail) for m in reversed(matches)})
    ranked = sorted((i for i in scores if i in evidence), key=lambda i: (-scores[i], first[i][0], i))[:limit]
    return [
        AmbientHit(scope=scope, id=i, label=first[i][0], detail=first[i][1] or None, score=round(scores[i], 6))
        for i in ranked
    ]


def _unnamed(m: Match) -> Match:
    return Match(m.id, m.label, m.detail, m.term, False, False, m.key_hit, m.short_key_hit, 0.0, m.named)


def _evidence(matches: Iterable[Match], strict: bool) -> set[str]:
    found: set[str] = set()
    weak: dict[str, set[int]] = defaultdict(set)
    for m in matches:
        if m.name_hit or m.key_hit or m.similarity >= FUZZY_MIN or (m.text_hit and not strict):
            found.add(m.id)
        elif m.short_key_hit or m.text_hit:
            weak[m.id].add(m.term)
    return found | {i for i, terms in weak.items() if len(terms) >= 2}


@dataclass
class _Patterns:
    """The lexical query's rows: term index, needle for trigram similarity ("" for none), LIKE
    pattern over the body, LIKE pattern over the names, kind."""

    index: list[int]
    needles: list[str]
    patterns: list[str]
    names: list[str]
    kinds: list[int]

    def add(self, index: int, needle: str, pattern: str, name: str, kind: int) -> None:
        self.index.append(index), self.needles.append(needle), self.patterns.append(pattern)
        self.names.append(name), self.kinds.append(kind)


def _patterns(terms: Sequence[Term]) -> _Patterns:
    rows = _Patterns([], [], [], [], [])
    for i, term in enumerate(terms):
        for variant in term.variants:
            fuzzy = variant.isascii() and sum(c.isalpha() for c in variant) >= FUZZY_MIN_LETTERS
            rows.add(i, variant if fuzzy else "", like_pattern(variant),
                     name_pattern(variant, stem=variant in term.stems), WORD)
        for pattern in term.phonetic:
            # "%9lsr9%": the skeleton sits between the script letter and the closing 9.
            short = len(pattern) - len("%9l9%") <= MIN_KEY
            rows.add(i, "", pattern, "", SHORT_KEY if short else KEY)
    return rows


# A studio's own rows, and the global exercise library minus the entries the studio shadows with
# its own of the same name (as the tool-runner's exercise search does).
_VISIBLE = """(d.organization_id = $1 OR (d.scope = 'exercise' AND d.organization_id IS NULL
      AND NOT EXISTS (SELECT 1 FROM rag_documents o WHERE o.scope = 'exercise' AND o.organization_id = $1
                       AND lower(o.label) = lower(d.label))))"""

# Bodies are lower case with padded lines (documents.py): line 1 the label, line 2 other names.
# `names` and `head` are those two lines as the query reads them, stored with each document (migration 0017).
# Each pattern is one trigram-index search (a needle "" matches nothing by similarity); a pattern
# that names more than ROWS_PER_PATTERN rows is cut there.
_LEXICAL = f"""
WITH t AS (SELECT * FROM unnest($3::int[], $4::text[], $5::text[], $8::text[], $6::int[])
                         AS t(term, needle, pat, name_pat, kind)),
liked AS MATERIALIZED (
    SELECT t.*, d.* FROM t CROSS JOIN LATERAL (
        SELECT d.scope, d.entity_id, d.label, d.detail, d.body, d.names, d.head FROM rag_documents d
         WHERE d.scope = ANY($2::text[]) AND {_VISIBLE} AND d.body LIKE t.pat
         LIMIT {ROWS_PER_PATTERN}) d
),
-- Fuzzy (a misspelling) only for the needles that have one, an empty needle would scan the whole
-- index, and only for a term no spelling of which is in any document as written: a word that is
-- there is not misspelt ("rounds", "swings"), and its fuzzy search, a word_similarity over every
-- body with its trigrams, was the costliest part. MATERIALIZED, so the terms are chosen before any
-- fuzzy search runs (inlined, the planner searched for every needle and dropped the rows after).
fuzzy AS MATERIALIZED (
    SELECT * FROM t WHERE t.needle <> '' AND NOT EXISTS (SELECT 1 FROM liked l WHERE l.term = t.term AND l.kind = {WORD})
),
hits AS (
    SELECT found.scope, found.entity_id::text AS id, found.label, found.detail, found.term,
           bool_or(kind = {WORD} AND names LIKE name_pat) AS name_hit,
           bool_or(kind = {WORD} AND body LIKE pat) AS text_hit,
           bool_or(kind = {KEY} AND body LIKE pat) AS key_hit,
           bool_or(kind = {SHORT_KEY} AND body LIKE pat) AS short_key_hit,
           max(CASE WHEN needle <> ''
                    THEN word_similarity(needle, head)
                    ELSE 0 END) AS similarity
      FROM (SELECT * FROM liked
            UNION ALL
            SELECT t.*, d.* FROM fuzzy t
            CROSS JOIN LATERAL (
                SELECT d.scope, d.entity_id, d.label, d.detail, d.body, d.names, d.head FROM rag_documents d
                 WHERE d.scope = ANY($2::text[]) AND {_VISIBLE} AND t.needle <% d.body AND NOT d.body LIKE t.pat
                 LIMIT {ROWS_PER_PATTERN}) d
           ) AS found (term, needle, pat, name_pat, kind, scope, entity_id, label, detail, body, names, head)
     GROUP BY found.scope, found.entity_id, found.label, found.detail, found.term
),
counted AS (
    SELECT hits.*, count(*) FILTER (WHERE name_hit) OVER (PARTITION BY scope, term) AS named,
           max((name_hit OR key_hit)::int * 2 + text_hit::int + similarity) OVER (PARTITION BY scope, id) AS best
      FROM hits
)
SELECT * FROM (SELECT counted.*, dense_rank() OVER (PARTITION BY scope ORDER BY best DESC, id) AS place FROM counted) r
 WHERE place <= $7
"""


def _semantic_sql(dimensions: int, *, exact: bool = False) -> str:
    # The cast and the model predicate repeat the partial HNSW index's own (migration 0008).
    # `exact` orders by an expression the HNSW index does not serve ("+ 0"): Postgres reads the
    # scope's documents through the (organization, scope) index and compares them all.
    distance = f"d.embedding::vector({int(dimensions)}) <=> $3::vector({int(dimensions)})"
    order = f"({distance}) + 0" if exact else distance
    return f"""
SELECT s.scope, x.id, x.label, x.detail, x.cosine FROM unnest($2::text[]) AS s(scope)
CROSS JOIN LATERAL (
    SELECT d.entity_id::text AS id, d.label, d.detail, 1 - ({distance}) AS cosine
      FROM rag_documents d
     WHERE d.model = $4 AND d.scope = s.scope AND {_VISIBLE}
     ORDER BY {order}
     LIMIT $5) x
"""


def search_settings(*, statement_timeout_ms: int, ef_search: int = HNSW_EF_SEARCH) -> dict[str, str]:
    """What an ambient search needs of its connection, as the settings a search pool's connections start with
    (`create_search_pool`): read only, the statement timeout, the fuzzy threshold and HNSW's. Set per search
    instead, they cost a transaction and a SET LOCAL, three round trips to Postgres beside its two statements.
    The extensions' settings are placeholders until pg_trgm and pgvector load, which then take their values."""
    return {
        "default_transaction_read_only": "on",
        "statement_timeout": str(int(statement_timeout_ms)),
        "pg_trgm.word_similarity_threshold": str(FUZZY_MIN),
        "hnsw.ef_search": str(max(int(ef_search), SEMANTIC_ROWS_PER_SCOPE)),
        # pgvector ≥ 0.8: keep scanning the graph until enough rows pass the filters (one studio's
        # documents among all studios').
        "hnsw.iterative_scan": "relaxed_order",
    }


async def create_search_pool(dsn: str, *, max_size: int, statement_timeout_ms: int,
                             ef_search: int = HNSW_EF_SEARCH) -> asyncpg.Pool:
    """A pool for `HybridSearch(search_pool=…)`, its connections set up for ambient search."""
    return await create_pool(dsn, max_size=max_size,
                             server_settings=search_settings(statement_timeout_ms=statement_timeout_ms, ef_search=ef_search))


# A scope of a studio with at most this many documents (its own and the library's) is searched
# exactly: a few hundred 384-d comparisons cost less than an HNSW walk that must skip every other
# studio's and scope's nodes to find them (Demo Gym's 7 programs: ~1.5 ms by HNSW), and find the
# true neighbours. Larger scopes use the index. Sizes are remembered per studio for SIZES_TTL_S.
EXACT_MAX_DOCUMENTS = 2000
SIZES_TTL_S = 60.0


@dataclass
class _Found:
    """What a search found, filled as its halves finish (a search cut short keeps the lexical half)."""

    matches: dict[str, list[Match]] | None = None
    neighbours: dict[str, list[Neighbour]] = field(default_factory=dict)
    # The semantic half: "used", "late" (the vector missed its wait), "failed", "off" (no embedder).
    semantic: str = "off"


class HybridSearch:
    def __init__(self, pool: asyncpg.Pool, embedder: Embedder | None, *, budget_s: float = 0.6,
                 statement_timeout_ms: int = 450, search_budget_s: float = 2.0, ef_search: int = HNSW_EF_SEARCH,
                 search_floor: float = NO_FLOOR, semantic_wait_s: float = 0.15,
                 search_pool: asyncpg.Pool | None = None) -> None:
        """`search_pool`: made by `create_search_pool` with the same statement timeout and ef_search; ambient
        searches then run on its connections as they are. Without it (and for the tools' search, whose
        settings differ) a search sets what it needs in a read-only transaction of its own."""
        self._pool = pool
        self._search_pool = search_pool
        self._embedder = embedder
        self._budget_s = budget_s
        self._semantic_wait_s = semantic_wait_s
        self._statement_timeout_ms = int(statement_timeout_ms)
        self._search_budget_s = search_budget_s
        self._ef_search = int(ef_search)
        self._search_floor = float(search_floor)
        self._sizes: dict[uuid.UUID, tuple[float, dict[str, int]]] = {}

    def floor(self, scope: Scope) -> float:
        """The cosine a semantic-only neighbour of this scope must reach (embeddings.py)."""
        return self._embedder.semantic_floors.get(scope, 1.0) if self._embedder is not None else 1.0

    # --- ambient ------------------------------------------------------------------------------

    async def find(self, query: AmbientQuery) -> AmbientResult:
        """AMBIENT_SEARCH's contract in and out."""
        return await self.ambient(query.organization_id, query.query)

    async def ambient(self, org_id: str | uuid.UUID, text: str) -> AmbientResult:
        org = _org(org_id)
        if (skipped := unsearched(text)) is not None:
            return AmbientResult(hits=[], skipped=skipped)
        terms = extract_terms(text)
        found = _Found()
        try:
            # The caller's budget is 800 ms end to end; answering late is worth nothing, so the
            # search gives up first and says so instead of leaving the caller to time out.
            # The terms are what the message is about; its whole text embeds the chit-chat too.
            async with asyncio.timeout(self._budget_s):
                await self._find(found, org, terms, SCOPES, " ".join(t.word for t in terms), MAX_ROWS_PER_SCOPE,
                                 SEMANTIC_ROWS_PER_SCOPE, self._statement_timeout_ms, self._semantic_wait_s)
        except (TimeoutError, asyncpg.QueryCanceledError):
            if found.matches is None:
                log.warning("ambient search over budget (%d terms)", len(terms))
                metrics.AMBIENT_SEARCHES.labels("timeout").inc()
                return AmbientResult(hits=[], skipped="timeout")
            log.warning("ambient search over budget after its lexical half (%d terms): lexical hits only", len(terms))
            found.neighbours, found.semantic = {}, "late"
        metrics.AMBIENT_SEARCHES.labels(found.semantic).inc()
        hits = [
            hit
            for scope in SCOPES
            for hit in fuse(scope, found.matches.get(scope, []), found.neighbours.get(scope, []),
                            floor=self.floor(scope), limit=MAX_PER_SCOPE, strict=True)
        ]
        hits.sort(key=lambda h: -h.score)  # stable: ties keep scope order
        return AmbientResult(hits=hits[:MAX_TOTAL])

    # --- search for tools ---------------------------------------------------------------------

    async def find_search(self, query: SearchQuery) -> SearchResult:
        """HYBRID_SEARCH's contract in and out."""
        return SearchResult(hits=await self.search(query.organization_id, query.query, query.scopes, query.limit))

    async def search(self, org_id: str | uuid.UUID, query: str, scopes: Sequence[Scope] = SCOPES,
                     limit: int = 10) -> list[AmbientHit]:
        """Hybrid search for the whole query; best first within each scope, scopes in the order asked."""
        org = _org(org_id)
        text = " ".join(query.split())
        if not text:
            raise SpotterError(ErrorCode.INVALID_REQUEST, "query: empty")
        scopes = list(dict.fromkeys(scopes))
        terms = _search_terms(text)
        rows = max(limit * 3, MAX_ROWS_PER_SCOPE)
        found = _Found()
        try:
            async with asyncio.timeout(self._search_budget_s):
                await self._find(found, org, terms, scopes, text, rows, max(limit * 2, SEMANTIC_ROWS_PER_SCOPE),
                                 round(self._search_budget_s * 900))
        except (TimeoutError, asyncpg.QueryCanceledError):
            raise SpotterError(ErrorCode.INTERNAL, "search over budget") from None
        assert found.matches is not None
        weights = [t.weight for t in terms]
        return [
            hit
            for scope in scopes
            for hit in fuse(scope, found.matches.get(scope, []), found.neighbours.get(scope, []),
                            weights=weights, floor=self._search_floor, limit=limit)
        ]

    # --- both ---------------------------------------------------------------------------------

    async def _find(self, found: _Found, org: uuid.UUID, terms: Sequence[Term], scopes: Sequence[Scope],
                    semantic_text: str, rows: int, semantic_rows: int, statement_timeout_ms: int,
                    semantic_wait_s: float | None = None) -> None:
        """Fills `found`: the lexical half, then the semantic one if the query's vector came in time
        (within `semantic_wait_s` of the start, or whenever it comes if None)."""
        loop = asyncio.get_running_loop()
        deadline = None if semantic_wait_s is None else loop.time() + semantic_wait_s
        embedding = asyncio.create_task(self._embed(semantic_text))
        try:
            async with self._connection(statement_timeout_ms, semantic_rows) as conn:
                found.matches = await self._lexical(conn, org, terms, scopes, rows)
                if self._embedder is None:
                    return
                # Not cancelled by the wait: a vector that misses it is dropped in `finally`, which
                # also takes a query not yet embedded out of the engine's queue.
                done, _ = await asyncio.wait({embedding}, timeout=None if deadline is None else max(0.0, deadline - loop.time()))
                vector = embedding.result() if done else None
                found.semantic = "used" if vector is not None else "late" if not done else "failed"
                if vector is not None:
                    found.neighbours = await self._semantic(conn, org, vector, scopes, semantic_rows)
        finally:
            embedding.cancel()

    @contextlib.asynccontextmanager
    async def _connection(self, statement_timeout_ms: int, semantic_rows: int) -> AsyncIterator[asyncpg.Connection]:
        """A connection with the search's settings: the search pool's as it is when they are its own
        (ambient), else one whose read-only transaction sets them."""
        if (self._search_pool is not None and statement_timeout_ms == self._statement_timeout_ms
                and semantic_rows <= max(self._ef_search, SEMANTIC_ROWS_PER_SCOPE)):
            async with self._search_pool.acquire() as conn:
                yield conn
            return
        async with (self._search_pool or self._pool).acquire() as conn, conn.transaction(readonly=True):
            # SET LOCAL: the settings die with this transaction, never leaking to the pooled connection.
            await conn.execute("; ".join(
                f"SET LOCAL {name} = {value}" for name, value in search_settings(
                    statement_timeout_ms=statement_timeout_ms, ef_search=max(self._ef_search, semantic_rows)).items()
                if name != "default_transaction_read_only"))
            yield conn

    async def _embed(self, text: str) -> np.ndarray | None:
        if self._embedder is None:
            return None
        try:
            return (await self._embedder.embed([text], "query"))[0]
        except Exception as exc:  # noqa: BLE001 — lexical results are still worth returning
            log.warning("query embedding failed, lexical only (%s)", exc)
            return None

    async def _lexical(self, conn: asyncpg.Connection, org: uuid.UUID, terms: Sequence[Term],
                       scopes: Sequence[Scope], rows: int) -> dict[str, list[Match]]:
        if not terms:
            return {}
        p = _patterns(terms)
        records = await conn.fetch(_LEXICAL, org, list(scopes), p.index, p.needles, p.patterns, p.kinds, rows, p.names)
        out: dict[str, list[Match]] = defaultdict(list)
        for r in records:
            out[r["scope"]].append(Match(r["id"], r["label"], r["detail"], r["term"], r["name_hit"], r["text_hit"],
                                         r["key_hit"], r["short_key_hit"], float(r["similarity"]), r["named"]))
        return out

    async def _semantic(self, conn: asyncpg.Connection, org: uuid.UUID, vector: np.ndarray,
                        scopes: Sequence[Scope], rows: int) -> dict[str, list[Neighbour]]:
        assert self._embedder is not None
        sizes = await self._scope_sizes(conn, org)
        exact = [s for s in scopes if sizes.get(s, 0) <= EXACT_MAX_DOCUMENTS]
        indexed = [s for s in scopes if s not in exact]
        out: dict[str, list[Neighbour]] = defaultdict(list)
        literal = vector_literal(vector)
        for group, is_exact in ((exact, True), (indexed, False)):
            if not group:
                continue
            records = await conn.fetch(_semantic_sql(self._embedder.dimensions, exact=is_exact), org, group, literal,
                                       self._embedder.model, rows)
            for r in records:
                out[r["scope"]].append(Neighbour(r["id"], r["label"], r["detail"], float(r["cosine"])))
        return out

    async def _scope_sizes(self, conn: asyncpg.Connection, org: uuid.UUID) -> dict[str, int]:
        """Documents per scope a studio's semantic search reads (its own, and the library's
        exercises), remembered for SIZES_TTL_S."""
        now = time.monotonic()
        cached = self._sizes.get(org)
        if cached is not None and cached[0] > now:
            return cached[1]
        rows = await conn.fetch(
            """SELECT scope, count(*) AS n FROM rag_documents
                WHERE organization_id = $1 OR (organization_id IS NULL AND scope = 'exercise') GROUP BY scope""",
            org,
        )
        sizes = {r["scope"]: int(r["n"]) for r in rows}
        if len(self._sizes) > 1000:
            self._sizes.clear()
        self._sizes[org] = (now + SIZES_TTL_S, sizes)
        return sizes


# Before issue 8 the ambient core was called this; the orchestrator's tests and the bench knew it.
AmbientSearch = HybridSearch


def _org(org_id: str | uuid.UUID) -> uuid.UUID:
    if isinstance(org_id, uuid.UUID):
        return org_id
    try:
        return uuid.UUID(org_id)
    except ValueError:
        raise SpotterError(ErrorCode.INVALID_REQUEST, "organizationId: not a UUID") from None


def _search_terms(text: str) -> list[Term]:
    """The whole query as one term at full weight, then its words at half (the same word alone is
    the phrase itself)."""
    phrase = text.lower()
    words = extract_terms(phrase, weight=WORD_WEIGHT_IN_SEARCH)
    if len(words) == 1 and words[0].word == phrase:
        return [Term(words[0].word, words[0].variants, words[0].phonetic, 1.0, words[0].stems)]
    return [Term(phrase, (phrase,), (), 1.0), *words]
