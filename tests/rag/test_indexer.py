"""The indexer against a real, migrated Postgres of its own (the sweep covers a whole database,
so other modules' studios stay out of it): announced changes, the sweep that catches what no one
announced, re-index counts, and documents that are searchable before their embedding exists."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from redis.asyncio import Redis

from spotter_cli.devstack import StackUrls, create_database, drop_database
from spotter_rag.core import HybridSearch
from spotter_rag.embeddings import E5Embedder, MemoEmbedder
from spotter_rag.indexer import Indexer

from tests.rag.conftest import library_size
from spotter_shared.db import create_pool, migrate
from tests.factories import Studio, make_studio
from tests.rag.conftest import Counting


@pytest.fixture(scope="module")
async def own_pool(stack: StackUrls) -> AsyncIterator[asyncpg.Pool]:
    name = f"spotter_rag_{uuid.uuid4().hex[:10]}"
    url = await create_database(stack.database_url, name)
    await migrate(url)
    pool = await create_pool(url, max_size=4)
    yield pool
    await pool.close()
    await drop_database(stack.database_url, name)


@pytest.fixture(scope="module")
async def counting(e5: E5Embedder) -> Counting:
    return Counting(e5)


@pytest.fixture(scope="module")
async def indexer(own_pool: asyncpg.Pool, counting: Counting, binary_redis: Redis) -> Indexer:
    # Through the memo, as in the service: `counting` sees only what the memo could not answer.
    return Indexer(own_pool, MemoEmbedder(counting, own_pool, binary_redis), embed_batch=8, sweep_batch=16)


@pytest.fixture(scope="module")
async def indexed(own_pool: asyncpg.Pool, indexer: Indexer) -> None:
    """Everything already in the database (the global library) indexed before the tests start."""
    await indexer.reindex(None)


async def studio_with_workout(pool: asyncpg.Pool) -> tuple[Studio, str]:
    studio = await make_studio(pool, extra_members=[{"full_name": "Saar Cohen", "plan": "Unlimited"}])
    workout = await pool.fetchval(
        """INSERT INTO workouts (organization_id, program_id, title, scheduled_for)
           VALUES ($1, $2, 'Monday WOD', current_date) RETURNING id::text""",
        studio.org.id, studio.programs["CrossFit"],
    )
    section = await pool.fetchval(
        "INSERT INTO workout_sections (workout_id, position, name) VALUES ($1, 1, 'Metcon') RETURNING id", workout
    )
    await pool.execute(
        "INSERT INTO workout_movements (section_id, position, name) VALUES ($1, 1, 'Thruster'), ($1, 2, 'Pull-up')", section
    )
    return studio, workout


async def document(pool: asyncpg.Pool, entity_id: str) -> asyncpg.Record | None:
    return await pool.fetchrow("SELECT * FROM rag_documents WHERE entity_id = $1", uuid.UUID(entity_id))


async def test_reindex_counts_then_leaves_unchanged_documents_alone(own_pool, indexer, indexed, counting) -> None:
    studio, workout = await studio_with_workout(own_pool)
    first = await indexer.reindex(studio.org.id)
    # 4 staff + Saar, 2 programs, 1 workout.
    # The global library (already indexed) is part of what an organization's reindex covers.
    library = await library_size(own_pool)
    assert (first.indexed, first.unchanged, first.removed) == (8, library, 0)
    assert first.model == "multilingual-e5-small-q4"
    doc = await document(own_pool, workout)
    assert doc["organization_id"] == uuid.UUID(studio.org.id) and doc["label"] == "Monday WOD"
    assert "pull-up" in doc["body"] and "thruster" in doc["body"] and doc["detail"].startswith("CrossFit · ")

    asked = len(counting.texts)
    again = await indexer.reindex(studio.org.id)
    assert (again.indexed, again.unchanged, again.removed) == (0, 8 + library, 0)
    assert len(counting.texts) == asked


async def test_changed_text_is_embedded_again_and_only_that(own_pool, indexer, indexed, counting) -> None:
    studio, _ = await studio_with_workout(own_pool)
    await indexer.reindex(studio.org.id)
    program = studio.programs["Olympic Lifting"]
    before = await document(own_pool, program)
    await own_pool.execute("UPDATE programs SET description = 'Snatch and clean & jerk, three times a week' WHERE id = $1", program)

    asked = len(counting.texts)
    counts = await indexer.index("program", [program, studio.programs["CrossFit"]])
    assert (counts.indexed, counts.unchanged, counts.removed) == (1, 1, 0)
    assert len(counting.texts) == asked + 1 and "three times a week" in counting.texts[-1]
    after = await document(own_pool, program)
    assert after["body_hash"] != before["body_hash"] and after["source_updated_at"] > before["source_updated_at"]
    assert "three times a week" in after["body"]


async def test_a_detail_only_change_costs_no_embedding(own_pool, indexer, indexed, counting) -> None:
    studio, _ = await studio_with_workout(own_pool)
    await indexer.reindex(studio.org.id)
    saar = studio.people["Saar Cohen"].membership_id
    await own_pool.execute("UPDATE memberships SET payment_status = 'overdue' WHERE id = $1", saar)
    asked = len(counting.texts)
    assert (await indexer.index("member", [saar])).indexed == 1
    # The passage (name, email, role) did not change: the memo answered.
    assert len(counting.texts) == asked
    assert "payment overdue" in (await document(own_pool, saar))["detail"]


async def test_deleted_entities_lose_their_documents(own_pool, indexer, indexed) -> None:
    studio, workout = await studio_with_workout(own_pool)
    await indexer.reindex(studio.org.id)
    await own_pool.execute("UPDATE workouts SET deleted_at = now() WHERE id = $1", workout)
    await own_pool.execute("DELETE FROM memberships WHERE id = $1", studio.people["Saar Cohen"].membership_id)
    assert (await indexer.index("workout", [workout])).removed == 1
    assert await document(own_pool, workout) is None
    # Not announced: the re-index finds the membership gone.
    counts = await indexer.reindex(studio.org.id)
    assert (counts.indexed, counts.removed) == (0, 1)
    assert await document(own_pool, studio.people["Saar Cohen"].membership_id) is None
    # Ids that never existed, or are already gone, are nothing to do.
    assert (await indexer.index("workout", [workout, str(uuid.uuid4())])).changed == 0


async def test_the_sweep_catches_writes_nobody_announced(own_pool, indexer, indexed) -> None:
    studio, workout = await studio_with_workout(own_pool)
    assert (await indexer.sweep()).indexed >= 8
    # A new program straight into the table (the cli seed, the studio app), a movement changed
    # under a workout (workouts.updated_at does not move), a document of another model, and a
    # deleted program: all caught by one sweep, none announced.
    new_program = await own_pool.fetchval(
        "INSERT INTO programs (organization_id, name, description) VALUES ($1, 'Kettlebell Basics', 'Swings') RETURNING id::text",
        studio.org.id,
    )
    await own_pool.execute(
        """UPDATE workout_movements SET name = 'Wall Ball' WHERE name = 'Thruster'
             AND section_id IN (SELECT id FROM workout_sections WHERE workout_id = $1)""", workout,
    )
    member = studio.member.membership_id
    await own_pool.execute("UPDATE rag_documents SET model = 'some-older-model' WHERE entity_id = $1", uuid.UUID(member))
    await own_pool.execute("UPDATE programs SET deleted_at = now() WHERE id = $1", studio.programs["Olympic Lifting"])

    counts = await indexer.sweep()
    assert (counts.indexed, counts.removed) == (3, 1)
    assert (await document(own_pool, new_program))["label"] == "Kettlebell Basics"
    assert "wall ball" in (await document(own_pool, workout))["body"]
    assert (await document(own_pool, member))["model"] == indexer.model
    assert await document(own_pool, studio.programs["Olympic Lifting"]) is None
    assert (await indexer.sweep()).changed == 0


async def test_the_sweep_works_through_a_backlog_in_bounded_rounds(own_pool, indexer, indexed) -> None:
    studio = await make_studio(own_pool, extra_members=[{"full_name": f"Member {i:02d}"} for i in range(40)])
    # sweep_batch is 16: one round indexes at most 16 entities per scope.
    first = await indexer.sweep(max_rounds=1)
    assert 0 < first.indexed <= 16 + 2
    rest = await indexer.sweep()
    assert first.indexed + rest.indexed == 4 + 40 + 2
    assert (await indexer.reindex(studio.org.id)).unchanged == 46 + await library_size(own_pool)


async def test_documents_are_searchable_before_their_embedding(own_pool, indexed) -> None:
    class Down:
        model, dimensions = "multilingual-e5-small-q4", 384
        semantic_floors: dict = {}

        async def embed(self, texts, kind):
            raise RuntimeError("embedding provider down")

    studio = await make_studio(own_pool, extra_members=[{"full_name": "Tal Mizrahi"}])
    with pytest.raises(RuntimeError):
        await Indexer(own_pool, Down()).sweep()
    tal = studio.people["Tal Mizrahi"].membership_id
    assert (await document(own_pool, tal))["model"] == "pending"
    hits = await HybridSearch(own_pool, None).search(studio.org.id, "Tal Mizrahi", ["member"])
    assert [h.id for h in hits] == [tal]


async def test_bad_ids_are_invalid_requests(indexer) -> None:
    from spotter_shared.errors import SpotterError

    with pytest.raises(SpotterError) as err:
        await indexer.index("program", ["not-a-uuid"])
    assert err.value.code == "invalid_request"
    with pytest.raises(SpotterError):
        await indexer.reindex("demo-gym")


async def reltuples(pool: asyncpg.Pool) -> float:
    return await pool.fetchval("SELECT reltuples FROM pg_class WHERE oid = 'rag_documents'::regclass")


async def test_a_rebuild_that_wrote_many_documents_analyzes_the_table(own_pool, indexer, indexed) -> None:
    # The first rebuild wrote the library into a table never analyzed: the planner knows its size.
    assert await reltuples(own_pool) >= await library_size(own_pool)
    # A few documents in a table of ~170: under 10 % and under 200, no ANALYZE.
    small = await make_studio(own_pool, extra_members=[{"full_name": "Lior Ben David"}])
    before = indexer.analyzed
    assert (await indexer.reindex(small.org.id)).indexed > 0
    assert indexer.analyzed == before
    # Forty new members are well over 10 % of the table: statistics follow at once.
    big = await make_studio(own_pool, extra_members=[{"full_name": f"Analyzed Member {i:02d}"} for i in range(40)])
    estimate = await reltuples(own_pool)
    assert (await indexer.reindex(big.org.id)).indexed >= 40
    assert indexer.analyzed == before + 1
    assert await reltuples(own_pool) >= estimate + 40


async def test_a_sweep_that_wrote_many_documents_analyzes_the_table(own_pool, indexer, indexed) -> None:
    await make_studio(own_pool, extra_members=[{"full_name": f"Swept Member {i:02d}"} for i in range(60)])
    before = indexer.analyzed
    estimate = await reltuples(own_pool)
    await indexer.sweep()
    assert indexer.analyzed > before and await reltuples(own_pool) >= estimate + 60
