"""Retrieval benchmark (issue 8): quality of rag's hybrid search over Demo Gym in three languages,
ANN recall of its HNSW index against exact search, and the ambient round trip a turn pays.

1. Quality: the labelled queries of bench/retrieval_queries.json (what a coach types, in English,
   Hebrew and Russian; each with the scope and the entities that answer it). hit@5 per language and
   overall, for the hybrid search the read tools use (spotter.rag.search, the query's scope, top 5),
   for ambient context (spotter.rag.ambient: at most 5 hits in all), and, in process over the same
   index, for rag's lexical and semantic rankings alone.
2. ANN: recall@10 of pgvector HNSW against exact search over 100k synthetic 384-d embeddings, in a
   scratch database (bench_ann.py).
3. Ambient round trip: spotter.rag.ambient through NATS against the running rag, one request at a
   time as a turn makes it, each message new (query embedding included), then one memoised message.

    .venv/bin/python bench/retrieval.py           # own ephemeral stack: migrate, seed, rag, measure (~3 min)
    .venv/bin/python bench/retrieval.py --quick   # fewer round trips, 20k vectors

From bench/run.py, over its running platform: `await retrieval.run(database_url, nats_url)`; the
returned dict has every figure and `markdown(results)` renders the README section.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

import asyncpg  # noqa: E402
from faststream.nats import NatsBroker  # noqa: E402
from nats.errors import NoRespondersError  # noqa: E402

from spotter_shared import bus  # noqa: E402
from spotter_shared.contracts.rag import (  # noqa: E402
    AMBIENT_SEARCH, HYBRID_SEARCH, INDEXED_MODELS, REINDEX, AmbientQuery, ReindexRequest, SearchQuery,
)

from bench_ann import measure_ann  # noqa: E402
from bench_messages import fresh_messages  # noqa: E402
from bench_rag_modes import measure_modes  # noqa: E402
from bench_stats import ms, percentile  # noqa: E402

QUERIES_FILE = BENCH_DIR / "retrieval_queries.json"
DEMO_ORG_NAME = "Demo Gym"
LANGS = ("en", "he", "ru")
TOP_K = 5
TARGET_AMBIENT_P95_MS = 50.0
AMBIENT_TIMEOUT_S = 2.0


def say(msg: str) -> None:
    print(f"[retrieval] {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Query:
    id: str
    lang: str
    query: str
    scope: str
    expect: tuple[str, ...]


def load_queries(path: Path = QUERIES_FILE) -> list[Query]:
    data = json.loads(path.read_text())
    return [Query(q["id"], q["lang"], q["query"], q["scope"], tuple(q["expect"])) for q in data["queries"]]


def load_chatter(path: Path = QUERIES_FILE) -> list[dict[str, str]]:
    """Messages that name nothing in the studio: {"id", "lang", "query"}."""
    return json.loads(path.read_text()).get("chatter", [])


# --------------------------------------------------------------------------------------------- the labels

_ENTITY_IDS = {
    # Key → entity ids, as rag's hits name them (membershipId for a member). Exercises: the studio's own and the
    # global library; workouts: every workout of that title.
    "exercise": """SELECT name AS key, id::text FROM exercises
                    WHERE (organization_id = $1 OR organization_id IS NULL) AND deleted_at IS NULL""",
    "member": """SELECT u.full_name AS key, m.id::text FROM memberships m JOIN users u ON u.id = m.user_id
                  WHERE m.organization_id = $1""",
    "program": "SELECT name AS key, id::text FROM programs WHERE organization_id = $1 AND deleted_at IS NULL",
    "workout": "SELECT title AS key, id::text FROM workouts WHERE organization_id = $1 AND deleted_at IS NULL",
}


async def expected_ids(conn: asyncpg.Connection, org_id: str, queries: list[Query]) -> dict[str, set[str]]:
    """Query id → the ids of the entities that answer it. Raises if a label names nothing in the studio."""
    by_scope: dict[str, dict[str, set[str]]] = {}
    for scope, sql in _ENTITY_IDS.items():
        keys: dict[str, set[str]] = defaultdict(set)
        for r in await conn.fetch(sql, uuid.UUID(org_id)):
            keys[r["key"]].add(r["id"])
        by_scope[scope] = keys
    out, missing = {}, []
    for q in queries:
        ids: set[str] = set()
        for key in q.expect:
            found = by_scope[q.scope].get(key)
            if not found:
                missing.append(f"{q.id}: {q.scope} {key!r}")
            ids |= found or set()
        out[q.id] = ids
    if missing:
        raise RuntimeError("labelled entities missing from the demo studio: " + "; ".join(missing))
    return out


def _rank(ids: list[str], expected: set[str]) -> Optional[int]:
    return next((i for i, x in enumerate(ids, start=1) if x in expected), None)


def hit_table(ranks: dict[str, dict[str, Optional[int]]], queries: list[Query], k: int = TOP_K) -> dict[str, Any]:
    """{mode: {lang: hit@k, ..., "all": hit@k}} from {mode: {query id: rank or None}}."""
    out: dict[str, Any] = {}
    for mode, by_query in ranks.items():
        row: dict[str, Any] = {}
        for lang in (*LANGS, "all"):
            mine = [q for q in queries if (lang == "all" or q.lang == lang) and q.id in by_query]
            hits = sum(1 for q in mine if by_query[q.id] is not None and by_query[q.id] <= k)
            row[lang] = round(hits / len(mine), 3) if mine else None
        out[mode] = row
    return out


# --------------------------------------------------------------------------------------------- over NATS

async def ask(broker: NatsBroker, ep: Any, payload: Any, *, timeout: float, attempts: int = 1) -> Any:
    for attempt in range(1, attempts + 1):
        try:
            return await bus.request(broker, ep, payload, timeout=timeout)
        except (NoRespondersError, TimeoutError):
            if attempt == attempts:
                raise
            await asyncio.sleep(0.5)


async def wait_for_rag(broker: NatsBroker, org_id: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            await bus.request(broker, AMBIENT_SEARCH, AmbientQuery(organization_id=org_id, query="x"), timeout=2)
            return
        except (NoRespondersError, TimeoutError):
            if time.monotonic() > deadline:
                raise RuntimeError("rag did not answer spotter.rag.ambient") from None
            await asyncio.sleep(0.5)


async def quality_over_nats(broker: NatsBroker, org_id: str, queries: list[Query],
                            expected: dict[str, set[str]]) -> tuple[dict[str, dict[str, Optional[int]]], list[str]]:
    """Ranks of the first right answer: hybrid search in the query's scope (top 5) and ambient (≤ 5 in all)."""
    ranks: dict[str, dict[str, Optional[int]]] = {"hybrid": {}, "ambient": {}}
    errors: list[str] = []
    for q in queries:
        try:
            found = await ask(broker, HYBRID_SEARCH, SearchQuery(organization_id=org_id, query=q.query, scopes=[q.scope],
                                                                 limit=TOP_K), timeout=5)
            ranks["hybrid"][q.id] = _rank([h.id for h in found.hits if h.scope == q.scope], expected[q.id])
        except Exception as exc:  # noqa: BLE001 - a failed query is a figure, not the end of the run
            errors.append(f"search {q.id}: {type(exc).__name__}: {exc}")
        try:
            amb = await ask(broker, AMBIENT_SEARCH, AmbientQuery(organization_id=org_id, query=q.query), timeout=5)
            ranks["ambient"][q.id] = _rank([h.id for h in amb.hits if h.scope == q.scope], expected[q.id])
        except Exception as exc:  # noqa: BLE001
            errors.append(f"ambient {q.id}: {type(exc).__name__}: {exc}")
    return ranks, errors


async def chatter_over_nats(broker: NatsBroker, org_id: str, chatter: list[dict[str, str]]) -> dict[str, Any]:
    """Ambient context for messages that name nothing: every hit is a false one."""
    false_hits: list[dict[str, Any]] = []
    for c in chatter:
        amb = await ask(broker, AMBIENT_SEARCH, AmbientQuery(organization_id=org_id, query=c["query"]), timeout=5)
        false_hits += [{"id": c["id"], "query": c["query"], "scope": h.scope, "label": h.label} for h in amb.hits]
    return {"messages": len(chatter), "with_hits": len({h["id"] for h in false_hits}), "hits": false_hits}


async def ambient_round_trip(broker: NatsBroker, org_id: str, *, requests: int, warm_requests: int) -> dict[str, Any]:
    """p50/p95 of spotter.rag.ambient, one request at a time: `requests` new messages (nothing memoised: the
    query is embedded each time), then `warm_requests` repeats of a few messages already asked."""
    messages = fresh_messages(requests + 10)
    for _, text in messages[:5]:  # connections, statements, the model's first call
        await ask(broker, AMBIENT_SEARCH, AmbientQuery(organization_id=org_id, query=text), timeout=AMBIENT_TIMEOUT_S)

    async def measure(texts: list[str]) -> dict[str, Any]:
        seconds, errors, skipped, with_hits, slow = [], [], Counter(), 0, []
        begun = time.perf_counter()
        for text in texts:
            t = time.perf_counter()
            try:
                r = await bus.request(broker, AMBIENT_SEARCH, AmbientQuery(organization_id=org_id, query=text),
                                      timeout=AMBIENT_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001
                errors.append(f"{type(exc).__name__}: {exc}")
                continue
            seconds.append(time.perf_counter() - t)
            if seconds[-1] > 0.1:  # when the slow ones happen: periodic (a sweep) or scattered (a busy box)
                slow.append((round(t - begun, 1), ms(seconds[-1])))
            if r.skipped:
                skipped[r.skipped] += 1
            with_hits += bool(r.hits)
        return {
            "requests": len(texts), "p50_ms": ms(percentile(seconds, 50)), "p90_ms": ms(percentile(seconds, 90)),
            "p95_ms": ms(percentile(seconds, 95)), "max_ms": ms(max(seconds, default=None)),
            "over_100_ms": [{"at_s": a, "ms": b} for a, b in slow], "with_hits": with_hits, "skipped": dict(skipped),
            "errors": len(errors), "first_errors": errors[:3],
        }

    fresh = [text for _, text in messages[5:5 + requests]]
    cold = await measure(fresh)
    repeated = [text for _, text in messages[:5]]  # each asked at least once already: memoised
    warm = await measure([repeated[i % len(repeated)] for i in range(warm_requests)])
    langs = Counter(lang for lang, _ in messages[5:5 + requests])
    return {"fresh": cold, "memoised": warm, "languages": dict(langs), "target_p95_ms": TARGET_AMBIENT_P95_MS,
            "meets_target": cold["p95_ms"] is not None and cold["p95_ms"] <= TARGET_AMBIENT_P95_MS and not cold["errors"]}


# --------------------------------------------------------------------------------------------- the run

EMBEDDING_MODELS = tuple(INDEXED_MODELS)


async def wait_index_quiet(pool: asyncpg.Pool, *, timeout: float = 300.0, quiet_s: float = 3.0) -> float:
    """Seconds waited until rag's index has documents, all embedded, and none written for `quiet_s`
    (or `timeout`). A fresh database is indexed by rag's own sweep, ~1,500 passages of CPU."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        row = await pool.fetchrow(
            """SELECT count(*) AS n, count(*) FILTER (WHERE model NOT IN ($1, $2)) AS pending,
                      coalesce(extract(epoch FROM now() - max(indexed_at)), 0) AS idle_s FROM rag_documents""",
            *EMBEDDING_MODELS,
        )
        if row["n"] and not row["pending"] and row["idle_s"] >= quiet_s:
            break
        await asyncio.sleep(1.0)
    return round(time.monotonic() - started, 1)


async def demo_org_id(conn: asyncpg.Connection) -> str:
    org = await conn.fetchval("SELECT id::text FROM organizations WHERE name = $1", DEMO_ORG_NAME)
    if org is None:
        raise RuntimeError(f"no organization {DEMO_ORG_NAME!r}: run `spotter seed-demo` first")
    return org


async def run(database_url: str, nats_url: str, *, org_id: Optional[str] = None, admin_url: Optional[str] = None,
              quick: bool = False, reindex: bool = True) -> dict[str, Any]:
    """The whole retrieval benchmark against a migrated, seeded database and a running rag.

    database_url: the platform's database (read; rag writes its index there). nats_url: where rag listens.
    admin_url: a superuser URL of the same server for the scratch ANN database (default: database_url).
    reindex: ask rag to rebuild the index first (spotter.rag.reindex), so every entity is in it."""
    started = time.perf_counter()
    queries, chatter = load_queries(), load_chatter()
    conn = await asyncpg.connect(database_url)
    try:
        org_id = org_id or await demo_org_id(conn)
        expected = await expected_ids(conn, org_id, queries)
        counts = dict(await conn.fetchrow(
            """SELECT (SELECT count(*) FROM memberships WHERE organization_id = $1) AS members,
                      (SELECT count(*) FROM programs WHERE organization_id = $1 AND deleted_at IS NULL) AS programs,
                      (SELECT count(*) FROM workouts WHERE organization_id = $1 AND deleted_at IS NULL) AS workouts,
                      (SELECT count(*) FROM exercises WHERE (organization_id = $1 OR organization_id IS NULL)
                          AND deleted_at IS NULL) AS exercises""",
            uuid.UUID(org_id),
        ))
    finally:
        await conn.close()

    broker = bus.create_broker(nats_url, "spotter-bench-retrieval")
    await broker.connect()
    errors: list[str] = []
    try:
        await wait_for_rag(broker, org_id)
        index: dict[str, Any] = {}
        async with asyncpg.create_pool(database_url, min_size=1, max_size=2) as pool:
            # rag indexes a new database by itself (its sweep): let that finish rather than double the work.
            index["sweep_wait_s"] = await wait_index_quiet(pool)
            if reindex:
                t = time.perf_counter()
                r = await ask(broker, REINDEX, ReindexRequest(organization_id=None), timeout=600)
                index.update(r.model_dump(), reindex_wall_s=round(time.perf_counter() - t, 1))
                say(f"index: waited {index['sweep_wait_s']}s for rag's sweep; reindex then wrote {r.indexed}, "
                    f"{r.unchanged} unchanged, {r.removed} removed ({r.model}) in {index['reindex_wall_s']}s")
            # Statistics for the index just written, as autovacuum gives a live database within a minute or
            # so: without them (the seed's ANALYZE saw an empty rag_documents) the lexical query picks plans
            # that put ambient's p95 at ~250 ms until autoanalyze comes round (measured here).
            await pool.execute("ANALYZE rag_documents")
            index["documents"] = dict(await pool.fetchrow(
                """SELECT count(*) FILTER (WHERE organization_id = $1) AS studio,
                          count(*) FILTER (WHERE organization_id IS NULL) AS global,
                          count(*) FILTER (WHERE model NOT IN ($2, $3)) AS not_embedded
                     FROM rag_documents""", uuid.UUID(org_id), *EMBEDDING_MODELS))

        t = time.perf_counter()
        ranks, errs = await quality_over_nats(broker, org_id, queries, expected)
        errors += errs
        say(f"quality over NATS: {len(queries)} queries x 2 in {time.perf_counter() - t:.1f}s")
        chat = await chatter_over_nats(broker, org_id, chatter)
        t = time.perf_counter()
        modes = await measure_modes(database_url, org_id, queries, expected, chatter, top_k=TOP_K)
        ranks = {**modes["ranks"], **ranks}
        say(f"lexical and semantic halves in process in {time.perf_counter() - t:.1f}s")

        async with asyncpg.create_pool(database_url, min_size=1, max_size=1) as pool:
            await wait_index_quiet(pool, timeout=60)  # the round trip of a rag that is not indexing
        load_before = os.getloadavg()[0]
        t = time.perf_counter()
        n = 60 if quick else 240
        rtt = await ambient_round_trip(broker, org_id, requests=n, warm_requests=n)
        rtt["load_average_1m"] = {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2),
                                  "cpus": os.cpu_count()}
        say(f"ambient round trip: {n} fresh + {n} memoised in {time.perf_counter() - t:.1f}s: "
            f"p95 {rtt['fresh']['p95_ms']} ms fresh, {rtt['memoised']['p95_ms']} ms memoised")
        errors += [f"ambient round trip: {e}" for e in rtt["fresh"]["first_errors"] + rtt["memoised"]["first_errors"]]
    finally:
        await broker.stop()

    setting, effective = _rag_ef_search()
    ann = await measure_ann(admin_url or database_url, rows=20_000 if quick else 100_000, say=say,
                            rag_ef_search=setting, also_ef=[effective] if effective else [])
    ann["rag_effective_ef_search"] = effective

    misses = {
        mode: [{"id": q.id, "query": q.query, "scope": q.scope, "expect": list(q.expect), "rank": by_query.get(q.id)}
               for q in queries if by_query.get(q.id) is None or by_query[q.id] > TOP_K]
        for mode, by_query in ranks.items()
    }
    return {
        "quick": quick,
        "queries": {"total": len(queries), **Counter(q.lang for q in queries)},
        "demo_studio": counts,
        "index": index,
        "hit_at_5": hit_table(ranks, queries),
        "modes_note": modes["note"],
        "chatter": chat,
        "semantic_floor": modes["floor"],
        "ambient_components_ms": modes.get("components_ms"),
        "misses": misses,
        "ranks": ranks,
        "ann": ann,
        "ambient_round_trip": rtt,
        "errors": errors,
        "runtime_s": round(time.perf_counter() - started, 1),
    }


def _rag_ef_search() -> tuple[Optional[int], Optional[int]]:
    """rag's hnsw.ef_search setting, and what its ambient searches run with: it raises ef_search to the
    semantic rows it wants per scope, since HNSW returns at most ef_search rows."""
    try:
        from spotter_rag import core  # noqa: PLC0415
        from spotter_rag.settings import RagSettings  # noqa: PLC0415
    except ImportError:
        return None, None
    field = RagSettings.model_fields.get("rag_hnsw_ef_search")
    setting = field.default if field is not None else getattr(core, "HNSW_EF_SEARCH", None)
    rows = getattr(core, "SEMANTIC_ROWS_PER_SCOPE", None) or getattr(core, "MAX_ROWS_PER_SCOPE", None)
    return setting, (max(setting, rows) if setting and rows else setting)


# --------------------------------------------------------------------------------------------- the report

_MODE_TITLES = {
    "hybrid": "hybrid search (spotter.rag.search, the query's scope, top 5)",
    "ambient": "ambient context (spotter.rag.ambient, ≤ 5 hits in all)",
    "lexical": "lexical only (in process)",
    "semantic": "semantic only (in process)",
    "hybrid_no_floor": "what if: hybrid search with no semantic floor (in process)",
}


def _pct(x: Optional[float]) -> str:
    return "–" if x is None else f"{x * 100:.0f}%"


def markdown(results: dict[str, Any]) -> str:
    """The README's retrieval section."""
    q, hits, ann, rtt = results["queries"], results["hit_at_5"], results["ann"], results["ambient_round_trip"]
    lines = [
        "### Retrieval",
        "",
        f"hit@5 over {q['total']} labelled coach questions on Demo Gym ({q.get('en', 0)} English, {q.get('he', 0)} Hebrew, "
        f"{q.get('ru', 0)} Russian: members by name in any script, exercises by name, alias or what they train, "
        "programs, workouts; `bench/retrieval_queries.json`):",
        "",
        "| ranking | English | Hebrew | Russian | all |",
        "|---|---:|---:|---:|---:|",
    ]
    for mode in ("lexical", "semantic", "hybrid", "ambient", "hybrid_no_floor"):
        if mode in hits:
            h = hits[mode]
            lines.append(f"| {_MODE_TITLES[mode]} | {_pct(h['en'])} | {_pct(h['he'])} | {_pct(h['ru'])} | **{_pct(h['all'])}** |")
    if results.get("modes_note"):
        lines += ["", results["modes_note"]]
    chat = results.get("chatter")
    if chat:
        lines += ["", f"Ambient context on {chat['messages']} messages that name nothing (thanks, the weather, a rephrase "
                      f"request; three languages): {chat['with_hits']} got hits."]
    floor = results.get("semantic_floor")
    if floor and floor.get("by_scope"):
        lines += ["", f"rag's semantic floors against e5 cosines (query: {floor['query_text']}; "
                      f"{floor['chatter_messages']} idle messages):", "",
                  "| scope | rag's floor | right answers at or above it | idle messages at or above it | "
                  "highest idle cosine | right answers above that |",
                  "|---|---:|---:|---:|---:|---:|"]
        for scope, f in floor["by_scope"].items():
            lines.append(f"| {scope} | {f['rag_floor']} | {_pct(f['right_at_rag_floor'])} | {f['chatter_at_rag_floor']} | "
                         f"{f['chatter_max_cosine']} | {_pct(f['right_at_lowest_clear_floor'])} |")
    by_ef = {s_["ef_search"]: s_ for s_ in ann["sweep"]}
    eff = by_ef.get(ann.get("rag_effective_ef_search") or ann["ef_search"], by_ef[ann["ef_search"]])
    ef_note = f"ef_search {ann['ef_search']}" + (
        f" (rag's setting; its queries run at {eff['ef_search']}: {eff['recall']:.3f})" if eff["ef_search"] != ann["ef_search"] else "")
    sweep = ", ".join(f"{s_['ef_search']}: {s_['recall']:.3f} ({s_['p95_ms']} ms p95)" for s_ in ann["sweep"])
    fresh, warm = rtt["fresh"], rtt["memoised"]
    lines += [
        "",
        "| measure | result | target |",
        "|---|---:|---:|",
        f"| HNSW recall@10 vs exact, {ann['rows']:,} × {ann['dimensions']}-d, {ef_note} | "
        f"**{ann['recall']:.3f}** | ≥ {ann['target_recall']} |",
        f"| HNSW query p50 / p95 | {ann['hnsw']['p50_ms']} / {ann['hnsw']['p95_ms']} ms | |",
        f"| exact query p50 / p95 | {ann['exact']['p50_ms']} / {ann['exact']['p95_ms']} ms | |",
        f"| HNSW build ({ann['rows']:,} rows, maintenance_work_mem {ann['build_maintenance_work_mem']}) | {ann['build_s']} s | |",
        f"| ambient round trip p95, new message each time (query embedded) | **{fresh['p95_ms']} ms** "
        f"(p50 {fresh['p50_ms']}) | ≤ {rtt['target_p95_ms']:.0f} ms |",
        f"| ambient round trip p95, memoised message | {warm['p95_ms']} ms (p50 {warm['p50_ms']}) | |",
        "",
        f"ANN: {ann['queries']} queries, vectors clustered around {ann['centres']:,} centres and anisotropic like e5's "
        f"(`bench/bench_ann.py`), in a scratch database; recall by ef_search: {sweep}. "
        f"Round trip: {fresh['requests']} requests through NATS to the running rag, one at a time, each a new coach "
        f"message in English, Hebrew or Russian (30+ characters), then {warm['requests']} repeats of memoised ones, "
        "after `ANALYZE rag_documents` (as autovacuum would have done by then).",
    ]
    parts, load = results.get("ambient_components_ms"), rtt.get("load_average_1m")
    if parts:
        lines[-1] += (f" Its parts, timed apart in process (rag runs them side by side): the lexical half over the four "
                      f"scopes p50 {parts['lexical_ambient']['p50']} / p95 {parts['lexical_ambient']['p95']} ms, the query "
                      f"embedding p50 {parts['query_embedding']['p50']} / p95 {parts['query_embedding']['p95']} ms.")
    if load:
        lines[-1] += f" Load average while measuring: {load['before']}–{load['after']} on {load['cpus']} CPUs."
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------- standalone

def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer round trips and 20k vectors")
    ap.add_argument("--results-dir", default=str(BENCH_DIR / "results"))
    args = ap.parse_args(argv)

    from spotter_cli.devstack import DevStack, repo_root  # noqa: PLC0415
    from spotter_cli.seed import seed_demo  # noqa: PLC0415
    from spotter_cli.supervisor import start_services, stop_services  # noqa: PLC0415
    from spotter_shared.db import migrate  # noqa: PLC0415

    def on_term(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt()

    signal.signal(signal.SIGTERM, on_term)
    results_dir = Path(args.results_dir)
    (results_dir / "logs").mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    stack = DevStack(ephemeral=True)
    procs: dict = {}
    try:
        urls = stack.start()

        async def prepare() -> str:
            await migrate(urls.database_url)
            return (await seed_demo(urls.database_url)).demo_org_id

        t = time.perf_counter()
        org_id = asyncio.run(prepare())
        say(f"migrated and seeded Demo Gym in {time.perf_counter() - t:.1f}s")
        env = {**os.environ, **urls.as_env(), "PYTHONUNBUFFERED": "1", "SPOTTER_REPO_ROOT": str(repo_root())}
        procs = start_services(env, ["spotter-rag"], cwd=repo_root(), output=False, log_dir=results_dir / "logs")
        results = asyncio.run(run(urls.database_url, urls.nats_url, org_id=org_id, quick=args.quick))
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    finally:
        if procs:
            stop_services(procs)
        stack.stop()
    results["total_runtime_s"] = round(time.perf_counter() - started, 1)
    out = results_dir / ("retrieval-quick.json" if args.quick else "retrieval.json")
    out.write_text(json.dumps(results, ensure_ascii=False, indent=1) + "\n")
    print(markdown(results))
    say(f"wrote {out.relative_to(REPO) if out.is_relative_to(REPO) else out}; total {results['total_runtime_s']}s")
    for e in results["errors"]:
        say(f"ERROR {e}")
    return 1 if results["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
