"""Keeping `rag_documents` in step with the tables it indexes. Knows nothing of NATS.

Three ways in, one way of doing it (`refresh`: re-read the entities, embed only those whose
body_hash or model changed, delete those that are gone):

- `index(scope, ids)` — an owner announced a change (ENTITIES_CHANGED);
- `sweep()` — catches what no announcement reached: writers that don't announce (the cli seed,
  the future studio app), lost announcements, a model switch, a new DOC_VERSION. It compares
  hashes inside Postgres and works in bounded batches; one replica at a time (advisory lock);
- `reindex(org_id)` — an operator asks for one organization, or everything with the global
  exercise library (REINDEX, `spotter reindex`).

Usage (the bench does this)::

    indexer = Indexer(pool, embedder)
    counts = await indexer.reindex(org_id)          # or reindex(None) for everything
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

import asyncpg

from spotter_shared.contracts.rag import ReindexResult, Scope
from spotter_shared.errors import ErrorCode, SpotterError

from .documents import SOURCES, Source, fetch_sources, selection, source_sql
from .embeddings import Embedder, vector_literal

log = logging.getLogger(__name__)

EMBED_BATCH = 32
SWEEP_BATCH = 256
# Cheap scopes first: a fresh studio's members, programs and exercises are searchable
# semantically long before its year of workouts is.
INDEX_ORDER: tuple[Scope, ...] = ("member", "program", "exercise", "workout")
# A document written before its embedding: lexical search finds it, semantic search (which asks
# for the current model) does not, and the sweep embeds it.
PENDING = "pending"
PENDING_VECTOR = "[0]"
_SWEEP_LOCK = 0x5EA_7C4  # advisory lock class of the sweep; one replica sweeps at a time
# After a rebuild or sweep that wrote this many documents, or this share of the table, the indexer
# runs ANALYZE rag_documents itself: a seed analyzes the table while it is empty, and until
# autoanalyze comes round the lexical query's plans put ambient's p95 at ~250 ms (bench). ANALYZE
# samples (30k rows at most), so it costs milliseconds for a studio and stays bounded after.
ANALYZE_MIN_ROWS = 200
ANALYZE_MIN_SHARE = 0.10


@dataclass
class Counts:
    indexed: int = 0
    unchanged: int = 0
    removed: int = 0

    def __iadd__(self, other: Counts) -> Counts:
        self.indexed += other.indexed
        self.unchanged += other.unchanged
        self.removed += other.removed
        self.placed += other.placed
        return self

    # Placeholders written (documents new to the table before their embedding); not reported.
    placed: int = 0

    @property
    def changed(self) -> int:
        return self.indexed + self.removed


def parse_uuid(value: str | uuid.UUID | None, field: str) -> uuid.UUID | None:
    if value is None or isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(value)
    except ValueError:
        raise SpotterError(ErrorCode.INVALID_REQUEST, f"{field}: not a UUID") from None


@dataclass(frozen=True)
class _Selection:
    """Which documents a rebuild or sweep covers (documents.selection)."""

    org: uuid.UUID | None
    library: bool
    every_org: bool

    def only(self, scope: Scope) -> _Selection:
        # The global library holds exercises only.
        return _Selection(self.org, self.library and scope == "exercise", self.every_org)

    @property
    def params(self) -> tuple[uuid.UUID | None, bool, bool]:
        return self.org, self.library, self.every_org


class Indexer:
    def __init__(self, pool: asyncpg.Pool, embedder: Embedder, *, embed_batch: int = EMBED_BATCH,
                 sweep_batch: int = SWEEP_BATCH) -> None:
        self._pool = pool
        self._embedder = embedder
        self._embed_batch = max(1, int(embed_batch))
        self._sweep_batch = max(1, int(sweep_batch))
        self.analyzed = 0  # ANALYZE runs so far (tests, logs)

    @property
    def model(self) -> str:
        return self._embedder.model

    # --- entry points -------------------------------------------------------------------------

    async def index(self, scope: Scope, ids: Iterable[str | uuid.UUID]) -> Counts:
        """Re-read these entities and bring their documents up to date (created, changed, gone)."""
        parsed = list(dict.fromkeys(parse_uuid(i, "ids") for i in ids))
        counts = Counts()
        for start in range(0, len(parsed), self._sweep_batch):
            counts += await self.refresh(scope, parsed[start:start + self._sweep_batch])
        return counts

    async def reindex(self, org_id: str | uuid.UUID | None = None) -> ReindexResult:
        """Bring up to date what one organization's searches read — its documents and the global
        exercise library (a no-op when current) — or (None) everything: every organization too."""
        org = parse_uuid(org_id, "organizationId")
        return await self._rebuild(_Selection(org, library=True, every_org=org is None))

    async def reindex_library(self) -> ReindexResult:
        """Only the global exercise library (every studio sees it)."""
        return await self._rebuild(_Selection(None, library=True, every_org=False))

    async def _rebuild(self, sel: _Selection) -> ReindexResult:
        started = time.perf_counter()
        counts = Counts()
        for scope in INDEX_ORDER:
            counts.placed += await self._placeholders(scope, sel.only(scope), limit=None)
        for scope in INDEX_ORDER:
            counts += await self._catch_up(scope, sel.only(scope), limit=None)
        await self.analyze_if_changed(counts)
        return ReindexResult(
            indexed=counts.indexed, unchanged=counts.unchanged, removed=counts.removed, model=self.model,
            duration_ms=round((time.perf_counter() - started) * 1000),
        )

    async def sweep(self, *, max_rounds: int | None = None) -> Counts | None:
        """Index whatever is missing, stale or of another model, and drop documents of entities
        that are gone, `sweep_batch` entities per scope and round, until nothing is left (or
        `max_rounds`). None when another replica holds the sweep."""
        async with self._pool.acquire() as lock_conn, lock_conn.transaction():
            # Held by this transaction for the sweep; the work itself runs on other connections.
            if not await lock_conn.fetchval("SELECT pg_try_advisory_xact_lock($1, 0)", _SWEEP_LOCK):
                return None
            everything = _Selection(None, library=True, every_org=True)
            total = Counts()
            for scope in INDEX_ORDER:
                total.placed += await self._placeholders(scope, everything.only(scope), limit=self._sweep_batch * 20)
            # Placeholders are what lexical search reads at once: statistics for them first.
            pending = Counts(placed=total.placed)
            await self.analyze_if_changed(pending)
            rounds = 0
            while max_rounds is None or rounds < max_rounds:
                rounds += 1
                found = Counts()
                for scope in INDEX_ORDER:
                    found += await self._catch_up(scope, everything.only(scope), limit=self._sweep_batch)
                total.indexed += found.indexed
                total.removed += found.removed
                pending.indexed += found.indexed
                pending.removed += found.removed
                # Rows rewritten since the last ANALYZE, over rounds: a long backlog is analyzed as it
                # grows, not only at its end.
                if await self.analyze_if_changed(pending):
                    pending = Counts()
                if found.changed == 0:
                    break
            return total

    async def analyze_if_changed(self, counts: Counts) -> bool:
        """ANALYZE rag_documents when `counts` wrote at least ANALYZE_MIN_ROWS documents or
        ANALYZE_MIN_SHARE of the table (by its planner estimate; a never-analyzed table always).
        True when it ran."""
        written = counts.indexed + counts.removed + counts.placed
        if written == 0:
            return False
        async with self._pool.acquire() as conn:
            if written < ANALYZE_MIN_ROWS:
                estimate = await conn.fetchval("SELECT reltuples FROM pg_class WHERE oid = 'rag_documents'::regclass")
                if estimate is not None and estimate > 0 and written < ANALYZE_MIN_SHARE * estimate:
                    return False
            started = time.perf_counter()
            try:
                await conn.execute("ANALYZE rag_documents")
            except asyncpg.PostgresError as exc:  # statistics are an optimisation; autoanalyze remains
                log.warning("ANALYZE rag_documents failed: %s", exc)
                return False
        self.analyzed += 1
        log.info("ANALYZE rag_documents after %d documents written (%.0f ms)", written,
                 (time.perf_counter() - started) * 1000)
        return True

    # --- the work -----------------------------------------------------------------------------

    async def _placeholders(self, scope: Scope, sel: _Selection, *, limit: int | None) -> int:
        """Documents for entities that have none yet, searchable lexically at once; their
        embeddings follow (a fresh demo studio is ~1,500 passages, a minute or two of CPU)."""
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(
                f"""SELECT s.entity_id FROM ({SOURCES[scope]}) s
                    WHERE {selection("s.organization_id")}
                      AND NOT EXISTS (SELECT 1 FROM rag_documents d WHERE d.scope = $4 AND d.entity_id = s.entity_id)
                    LIMIT $5""",
                *sel.params, scope, limit,
            )
            if not rows:
                return 0
            sources = await fetch_sources(conn, scope, [r["entity_id"] for r in rows])
        return await self._write(scope, sources, None)

    async def _catch_up(self, scope: Scope, sel: _Selection, *, limit: int | None) -> Counts:
        """Refresh the selection's stale and gone documents (at most `limit` of each per call, or all)."""
        sel_src, sel_doc = selection("s.organization_id"), selection("d.organization_id")
        async with self._pool.acquire() as conn:
            stale = await conn.fetch(
                f"""SELECT s.entity_id FROM {source_sql(scope)} s
                    LEFT JOIN rag_documents d ON d.scope = $4 AND d.entity_id = s.entity_id
                    WHERE {sel_src} AND (d.entity_id IS NULL OR d.body_hash <> s.body_hash OR d.model <> $5)
                    LIMIT $6""",
                *sel.params, scope, self.model, limit,
            )
            gone = await conn.fetch(
                f"""SELECT d.entity_id FROM rag_documents d
                    WHERE d.scope = $4 AND {sel_doc}
                      AND NOT EXISTS (SELECT 1 FROM ({SOURCES[scope]}) s WHERE s.entity_id = d.entity_id)
                    LIMIT $5""",
                *sel.params, scope, limit,
            )
            total = None
            if limit is None:
                total = await conn.fetchval(f"SELECT count(*) FROM ({SOURCES[scope]}) s WHERE {sel_src}", *sel.params)
        ids = [r["entity_id"] for r in stale] + [r["entity_id"] for r in gone]
        counts = Counts()
        for start in range(0, len(ids), self._sweep_batch):
            counts += await self.refresh(scope, ids[start:start + self._sweep_batch])
        if total is not None:
            counts.unchanged = max(0, total - counts.indexed)
        return counts

    async def refresh(self, scope: Scope, ids: Sequence[uuid.UUID]) -> Counts:
        """Bring the documents of these entities up to date."""
        if not ids:
            return Counts()
        async with self._pool.acquire() as conn:
            sources = await fetch_sources(conn, scope, ids)
            current = {
                r["entity_id"]: (r["body_hash"], r["model"])
                for r in await conn.fetch(
                    "SELECT entity_id, body_hash, model FROM rag_documents WHERE scope = $1 AND entity_id = ANY($2::uuid[])",
                    scope, list(ids),
                )
            }
            alive = {s.entity_id for s in sources}
            gone = [i for i in ids if i not in alive and i in current]
            removed = 0
            if gone:
                status = await conn.execute(
                    "DELETE FROM rag_documents WHERE scope = $1 AND entity_id = ANY($2::uuid[])", scope, gone
                )
                removed = int(status.split()[-1])
        fresh = [s for s in sources if s.entity_id not in current]
        if len(fresh) > self._embed_batch:
            await self._write(scope, fresh, None)
        changed = [s for s in sources if current.get(s.entity_id) != (s.body_hash, self.model)]
        written = 0
        for start in range(0, len(changed), self._embed_batch):
            batch = changed[start:start + self._embed_batch]
            written += await self._write(scope, batch, await self._embedder.embed([s.passage for s in batch], "passage"))
        return Counts(indexed=written, unchanged=len(sources) - len(changed), removed=removed)

    async def _write(self, scope: Scope, batch: list[Source], vectors: list | None) -> int:
        """Upsert documents with their embeddings, or (vectors None) insert placeholders of
        model PENDING that only the lexical search sees, leaving existing documents alone."""
        if vectors is None:
            model, embeddings = PENDING, [PENDING_VECTOR] * len(batch)
        else:
            model, embeddings = self.model, [vector_literal(v) for v in vectors]
        # A slower refresh must not overwrite a newer one's document: the newer source wins
        # (members have no timestamp; a sweep corrects any leftover by its hash).
        conflict = "DO NOTHING" if vectors is None else """DO UPDATE
                  SET organization_id = excluded.organization_id, label = excluded.label, detail = excluded.detail,
                      body = excluded.body, body_hash = excluded.body_hash, model = excluded.model,
                      embedding = excluded.embedding, source_updated_at = excluded.source_updated_at,
                      indexed_at = excluded.indexed_at
                WHERE d.source_updated_at IS NULL OR excluded.source_updated_at IS NULL
                   OR excluded.source_updated_at >= d.source_updated_at"""
        status = await self._pool.execute(
            f"""INSERT INTO rag_documents AS d (scope, entity_id, organization_id, label, detail, body, body_hash,
                                              model, embedding, source_updated_at, indexed_at)
               SELECT $1, x.entity_id, x.organization_id, x.label, x.detail, x.body, x.body_hash, $2,
                      x.embedding::vector, x.source_updated_at, now()
                 FROM unnest($3::uuid[], $4::uuid[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[],
                             $10::timestamptz[])
                      AS x(entity_id, organization_id, label, detail, body, body_hash, embedding, source_updated_at)
               ON CONFLICT (scope, entity_id) {conflict}""",
            scope, model,
            [s.entity_id for s in batch], [s.organization_id for s in batch], [s.label for s in batch],
            [s.detail for s in batch], [s.body for s in batch], [s.body_hash for s in batch],
            embeddings, [s.source_updated_at for s in batch],
        )
        return int(status.split()[-1])


class Sweeper:
    """The periodic sweep as a background task: once at start (never blocking readiness), then
    every `interval_s`. A failed round is logged and tried again at the next tick."""

    def __init__(self, indexer: Indexer, interval_s: float, *,
                 after_round: Callable[[], Awaitable[object]] | None = None) -> None:
        self._indexer = indexer
        self._interval_s = interval_s
        self._task: asyncio.Task | None = None
        self._after_round = after_round
        self.rounds = 0

    def start(self) -> None:
        if self._task is None and self._interval_s > 0:
            self._task = asyncio.create_task(self._run(), name="rag-sweep")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def _run(self) -> None:
        while True:
            started = time.perf_counter()
            try:
                counts = await self._indexer.sweep()
                if counts is not None and counts.changed:
                    log.info("sweep: %d indexed, %d removed in %.1f s", counts.indexed, counts.removed,
                             time.perf_counter() - started)
                if self._after_round is not None:
                    await self._after_round()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 — the next tick tries again
                log.exception("sweep failed")
            self.rounds += 1
            await asyncio.sleep(self._interval_s)
