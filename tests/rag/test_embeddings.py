"""Embeddings: the bundled e5 model, the memo in front of it (Redis, then ai_cache, then the
model for the misses only), and the Voyage adapter at its HTTP boundary."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import uuid
from collections.abc import Iterator

import asyncpg
import httpx
import numpy as np
import pytest
from redis.asyncio import Redis

from spotter_rag import embeddings
from spotter_rag.embeddings import (
    E5_DIMENSIONS, E5_MODEL, VOYAGE_DIMENSIONS, VOYAGE_MODEL, E5Embedder, MemoEmbedder, PARALLEL_MIN_TOKENS, VoyageEmbedder,
    available_cpus, input_hash,
)
from spotter_shared.errors import SpotterError
from tests.rag.conftest import Counting


def unique(text: str) -> str:
    return f"{text} {uuid.uuid4().hex[:8]}"


async def test_e5_vectors_are_normalised_and_query_differs_from_passage(e5: E5Embedder) -> None:
    query, passage = *(await e5.embed(["back squat"], "query")), *(await e5.embed(["back squat"], "passage"))
    assert query.shape == (E5_DIMENSIONS,) and query.dtype == np.float32
    assert abs(float(np.linalg.norm(query)) - 1) < 1e-4
    assert not np.allclose(query, passage)
    assert await e5.embed([], "query") == []


async def test_memo_answers_a_passage_from_redis_then_from_ai_cache(e5: E5Embedder, pool: asyncpg.Pool, binary_redis: Redis) -> None:
    counting = Counting(e5)
    memo = MemoEmbedder(counting, pool, binary_redis)
    text = unique("Goblet Squat: a squat holding one dumbbell at the chest")

    first = await memo.embed([text], "passage")
    assert counting.texts == [text]
    digest = input_hash("passage", text)
    row = await pool.fetchrow("SELECT operation, result FROM ai_cache WHERE model = $1 AND input_hash = $2", E5_MODEL, digest)
    assert row["operation"] == "embed.passage"
    assert np.array_equal(np.frombuffer(base64.b64decode(row["result"]), dtype="<f4"), first[0])
    assert await binary_redis.get(memo.redis_key(digest)) == first[0].astype("<f4").tobytes()

    # Redis hit: the model is not asked.
    assert np.array_equal((await memo.embed([text], "passage"))[0], first[0])
    assert counting.texts == [text]

    # Redis lost it (eviction, a new Redis): ai_cache answers and Redis is filled again.
    await binary_redis.delete(memo.redis_key(digest))
    assert np.array_equal((await memo.embed([text], "passage"))[0], first[0])
    assert counting.texts == [text]
    assert await binary_redis.exists(memo.redis_key(digest))


async def test_memo_keeps_a_query_in_the_process_only(e5: E5Embedder, pool: asyncpg.Pool, binary_redis: Redis,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embeddings, "QUERY_MEMO_SIZE", 2)
    counting = Counting(e5)
    memo = MemoEmbedder(counting, pool, binary_redis)
    text, other, third = unique("find a squat variation"), unique("rowing intervals"), unique("kettlebell swings")
    first = await memo.embed([text], "query")
    digest = input_hash("query", text)
    # Neither Redis nor ai_cache: a query costs no round trip on its way to the model call.
    assert not await binary_redis.exists(memo.redis_key(digest))
    assert await pool.fetchval("SELECT count(*) FROM ai_cache WHERE input_hash = $1", digest) == 0
    # Asked again (a retry): the process answers, the same vector.
    assert np.array_equal((await memo.embed([text], "query"))[0], first[0]) and counting.texts == [text]
    # Only the last QUERY_MEMO_SIZE are kept, the least recently used out first.
    await memo.embed([other], "query")
    await memo.embed([text], "query")  # used again: the most recent
    await memo.embed([third], "query")  # `other` goes
    await memo.embed([text], "query")
    await memo.embed([other], "query")
    assert counting.calls == [("query", [text]), ("query", [other]), ("query", [third]), ("query", [other])]


async def test_memo_embeds_only_the_misses_in_one_batch(e5: E5Embedder, pool: asyncpg.Pool, binary_redis: Redis) -> None:
    counting = Counting(e5)
    memo = MemoEmbedder(counting, pool, binary_redis)
    known, new_a, new_b = unique("Back Squat"), unique("Goblet Squat"), unique("Pull-up")
    await memo.embed([known], "passage")
    vectors = await memo.embed([new_a, known, new_b, new_a], "passage")
    assert counting.calls == [("passage", [known]), ("passage", [new_a, new_b])]
    assert len(vectors) == 4 and np.array_equal(vectors[0], vectors[3])
    # A query and a passage of the same text are different entries (e5 prefixes them differently).
    await memo.embed([known], "query")
    assert counting.calls[-1] == ("query", [known])


async def test_memo_ignores_a_corrupt_entry(e5: E5Embedder, pool: asyncpg.Pool, binary_redis: Redis) -> None:
    counting = Counting(e5)
    memo = MemoEmbedder(counting, pool, binary_redis)
    text = unique("Deadlift")
    await binary_redis.set(memo.redis_key(input_hash("passage", text)), b"not a vector")
    vector = (await memo.embed([text], "passage"))[0]
    assert counting.texts == [text] and vector.shape == (E5_DIMENSIONS,)


async def test_memo_works_without_redis(e5: E5Embedder, pool: asyncpg.Pool) -> None:
    counting = Counting(e5)
    # A Redis nobody listens on: every call fails, and the memo carries on with ai_cache.
    dead = Redis.from_url("redis://127.0.0.1:1/0", decode_responses=False, socket_connect_timeout=0.2)
    memo = MemoEmbedder(counting, pool, dead)
    text = unique("Kettlebell Swing")
    first = await memo.embed([text], "passage")
    assert np.array_equal((await memo.embed([text], "passage"))[0], first[0])
    assert counting.texts == [text]
    await dead.aclose()


async def test_expired_memo_rows_are_purged(e5: E5Embedder, pool: asyncpg.Pool) -> None:
    memo = MemoEmbedder(e5, pool, None)
    text = unique("Wall Ball")
    await memo.embed([text], "passage")
    digest = input_hash("passage", text)
    await pool.execute("UPDATE ai_cache SET expires_at = now() - interval '1 day' WHERE input_hash = $1", digest)
    assert await memo.purge_expired() >= 1
    assert await pool.fetchval("SELECT count(*) FROM ai_cache WHERE input_hash = $1", digest) == 0


# --- Voyage at its HTTP boundary --------------------------------------------------------------------


def voyage(handler) -> VoyageEmbedder:
    return VoyageEmbedder("test-key", client=httpx.AsyncClient(transport=httpx.MockTransport(handler)))


async def test_voyage_request_and_answer() -> None:
    seen: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append({"url": str(request.url), "auth": request.headers["authorization"], "body": json.loads(request.content)})
        body = json.loads(request.content)
        # Out of order on purpose: the adapter sorts by index.
        data = [{"index": i, "embedding": [float(i + 1)] * VOYAGE_DIMENSIONS} for i in range(len(body["input"]))][::-1]
        return httpx.Response(200, json={"data": data, "model": VOYAGE_MODEL})

    embedder = voyage(handler)
    vectors = await embedder.embed(["סקוואט", "приседания"], "passage")
    assert seen == [{"url": "https://api.voyageai.com/v1/embeddings", "auth": "Bearer test-key",
                     "body": {"input": ["סקוואט", "приседания"], "model": VOYAGE_MODEL, "input_type": "document"}}]
    assert [v.shape for v in vectors] == [(VOYAGE_DIMENSIONS,)] * 2
    assert abs(float(np.linalg.norm(vectors[1])) - 1) < 1e-4
    await embedder.embed(["squat"], "query")
    assert seen[-1]["body"]["input_type"] == "query"
    await embedder.aclose()


@pytest.mark.parametrize(
    ("status", "body", "code"),
    [
        (401, {"detail": "bad key"}, "provider_unauthorized"),
        (429, {"detail": "slow down"}, "provider_rate_limited"),
        (503, {"detail": "down"}, "provider_unavailable"),
        (200, {"data": [{"index": 0, "embedding": [0.1, 0.2]}]}, "provider_unavailable"),
        (200, {"nothing": True}, "provider_unavailable"),
    ],
    ids=["unauthorized", "rate-limited", "unavailable", "wrong-dimensions", "unreadable"],
)
async def test_voyage_failures_are_typed(status: int, body: dict, code: str) -> None:
    embedder = voyage(lambda request: httpx.Response(status, json=body))
    with pytest.raises(SpotterError) as err:
        await embedder.embed(["squat"], "query")
    assert err.value.code == code
    await embedder.aclose()


async def test_voyage_unreachable_is_typed() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    embedder = voyage(handler)
    with pytest.raises(SpotterError) as err:
        await embedder.embed(["squat"], "query")
    assert err.value.code == "provider_unavailable"
    await embedder.aclose()


@contextlib.contextmanager
def engine_calls(e5: E5Embedder) -> Iterator[list[tuple[list[str], int]]]:
    """What the query lanes are given to embed, in the order they were given it (on the event loop, not
    in the lanes' threads, whose start order the OS decides): the texts and the engine threads for them."""
    calls: list[tuple[list[str], int]] = []
    lanes = e5._query_lanes
    for lane in lanes:
        real = lane.run

        async def counting(kind: str, texts: list[str], threads: int, real=real) -> np.ndarray:
            calls.append((list(texts), threads))
            return await real(kind, texts, threads)

        lane.run = counting
    try:
        yield calls
    finally:
        for lane in lanes:
            del lane.run


async def test_queries_asked_together_run_a_lane_each_newest_first_with_the_same_vectors(e5: E5Embedder) -> None:
    texts = [unique(t) for t in ("back squat", "kettlebell swing", "rowing intervals", "תרגילי בטן", "приседания со штангой")]
    alone = [(await e5.embed([t], "query"))[0] for t in texts]
    cores, lanes = available_cpus(), len(e5._query_lanes)
    with engine_calls(e5) as calls:
        together = await asyncio.gather(*(e5.embed([t], "query") for t in texts))
    assert all(np.array_equal(a, b[0]) for a, b in zip(alone, together, strict=True))
    # One text per call, each embedded once, on one engine thread each (each is short, and only the first
    # was alone); the ones that waited for a lane went newest first, so the oldest of them came last.
    assert sorted(t for batch, _ in calls for t in batch) == sorted(texts) and all(len(b) == 1 for b, _ in calls)
    assert calls[0] == ([texts[0]], 1) and all(threads == 1 for _, threads in calls[1:])
    assert lanes == cores and calls[-1][0] == [texts[lanes]]


async def test_a_query_alone_gets_every_engine_thread_only_when_it_is_long(e5: E5Embedder) -> None:
    short = unique("kettlebell swings")
    long = unique(" ".join(["kettlebell swings rowing intervals deadlift mobility"] * 8))
    assert e5._query_lanes[0].tokens(short) < PARALLEL_MIN_TOKENS <= e5._query_lanes[0].tokens(long)
    with engine_calls(e5) as calls:
        await e5.embed([short], "query")
        await e5.embed([long], "query")
    assert calls == [([short], 1), ([long], available_cpus())]


async def test_a_query_whose_caller_gave_up_is_not_embedded_and_does_not_stop_the_others(e5: E5Embedder) -> None:
    lanes = len(e5._query_lanes)
    texts = [unique(f"deadlift {i}") for i in range(lanes + 2)]
    with engine_calls(e5) as calls:
        tasks = [asyncio.create_task(e5.embed([t], "query")) for t in texts]
        await asyncio.sleep(0)  # all are asked for: one per lane is being embedded, two wait
        tasks[lanes].cancel()
        results = [await t for i, t in enumerate(tasks) if i != lanes]
    assert all(r[0].shape == (E5_DIMENSIONS,) for r in results)
    with pytest.raises(asyncio.CancelledError):
        await tasks[lanes]
    assert sorted(t for batch, _ in calls for t in batch) == sorted(texts[:lanes] + texts[lanes + 1:])


@pytest.mark.parametrize(("cpu_max", "expected"), [
    ("max 100000", None),          # no quota: the CPUs it may run on
    ("50000 100000", 1),           # half a CPU (a pod's 500m limit): one, not the node's
    ("150000 100000", 2),          # one and a half: rounded up
    ("not a quota", None),         # unreadable: the affinity decides
])
def test_available_cpus_follow_the_cgroup_quota(tmp_path, cpu_max: str, expected: int | None) -> None:
    (tmp_path / "cpu.max").write_text(cpu_max + "\n")
    affinity = len(os.sched_getaffinity(0))
    assert available_cpus(str(tmp_path)) == (min(affinity, expected) if expected is not None else affinity)
    assert available_cpus(str(tmp_path / "absent")) == affinity
