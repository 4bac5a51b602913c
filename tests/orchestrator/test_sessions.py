"""Seed 004's sessions kernel against real Postgres: the status machine's guard, appends under
concurrency (consecutive, none lost or doubled), deduplication by external id, scoping by
organization and type, the append-only log, and one running human session per person."""

from __future__ import annotations

import asyncio
import itertools

import asyncpg
import pytest

from spotter_orchestrator.sessions import Sessions
from spotter_shared.sessions import (
    ACTIVE_STATUSES,
    FAILING_STATUSES,
    LIVE_STATUSES,
    SESSION_STATUSES,
    TRANSITIONS,
    IllegalTransition,
    NewEvent,
    check_transition,
)
from spotter_shared.errors import SpotterError
from tests.factories import make_studio


def test_the_guard_allows_exactly_the_machines_moves() -> None:
    allowed = {(a, b) for a, nxt in TRANSITIONS.items() for b in nxt}
    assert ("draft", "pending") in allowed and ("running", "waiting_human") in allowed and ("waiting_human", "running") in allowed
    for old, new in itertools.product(SESSION_STATUSES, SESSION_STATUSES):
        if (old, new) in allowed:
            check_transition(old, new)
        else:
            with pytest.raises(IllegalTransition):
                check_transition(old, new)
    with pytest.raises(IllegalTransition):
        check_transition("running", "finished")  # not a status at all
    assert set(SESSION_STATUSES) == set(TRANSITIONS) and len(SESSION_STATUSES) == 10
    assert LIVE_STATUSES <= ACTIVE_STATUSES and not FAILING_STATUSES & ACTIVE_STATUSES
    assert {s for s in SESSION_STATUSES if not TRANSITIONS[s]} == {"completed", "failed", "expired", "abandoned"}


async def test_a_session_moves_along_the_machine_and_a_forbidden_move_changes_nothing(pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool)
    sessions = Sessions(pool, studio.org.id, "agent")
    session = await sessions.create(source="coach", user_id=studio.owner.user_id, status="pending")
    assert session.status == "pending" and session.started_at is None
    for status in ("running", "waiting_human", "running", "completed"):
        session = await sessions.transition(session.id, status)
        assert session.status == status
    assert session.started_at is not None and session.completed_at is not None
    with pytest.raises(IllegalTransition):
        await sessions.transition(session.id, "running")
    assert (await sessions.get(session.id)).status == "completed"
    log = await sessions.events(session.id)
    assert [e.sequence for e in log] == [1, 2, 3, 4, 5]
    assert [(e.event_type, e.metadata.get("to")) for e in log] == [
        ("session.created", None), ("session.status_change", "running"), ("session.status_change", "waiting_human"),
        ("session.status_change", "running"), ("session.status_change", "completed")]


async def test_concurrent_appends_get_consecutive_numbers_none_lost_or_doubled(pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool)
    sessions = Sessions(pool, studio.org.id, "mixed")
    session = await sessions.create(source="human", user_id=studio.owner.user_id, status="running")

    async def writer(w: int) -> list[int]:
        stored = await sessions.append(session.id, [NewEvent("human.marker", "user", metadata={"w": w, "i": i}) for i in range(5)])
        return [e.sequence for e in stored]

    batches = await asyncio.gather(*(writer(w) for w in range(20)))
    for batch in batches:
        assert batch == list(range(batch[0], batch[0] + 5)), "a batch takes consecutive numbers"
    numbers = sorted(n for batch in batches for n in batch)
    assert numbers == list(range(2, 102))  # 1 is session.created
    log = await sessions.events(session.id, limit=1000)
    assert [e.sequence for e in log] == list(range(1, 102))
    assert (await sessions.get(session.id)).last_sequence == 101


async def test_an_external_event_id_is_stored_once(pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool)
    sessions = Sessions(pool, studio.org.id, "agent")
    session = await sessions.create(source="coach", status="running")
    first = await sessions.append(session.id, [NewEvent("external.event", "system", external_event_id="evt-1"),
                                               NewEvent("external.event", "system", external_event_id="evt-1"),
                                               NewEvent("external.event", "system", external_event_id="evt-2")])
    assert [(e.sequence, e.external_event_id) for e in first] == [(2, "evt-1"), (3, "evt-2")]
    again = await asyncio.gather(*(sessions.append(session.id, [NewEvent("external.event", "system", external_event_id="evt-3")])
                                   for _ in range(5)))
    assert sorted(len(a) for a in again) == [0, 0, 0, 0, 1]
    assert [e.sequence for e in await sessions.events(session.id)] == [1, 2, 3, 4]


async def test_helpers_are_scoped_by_organization_and_type(pool: asyncpg.Pool) -> None:
    mine, theirs = await make_studio(pool), await make_studio(pool)
    session = await Sessions(pool, mine.org.id, "mixed").create(source="human", user_id=mine.owner.user_id)
    for other in (Sessions(pool, theirs.org.id, "mixed"), Sessions(pool, mine.org.id, "agent")):
        assert await other.get(session.id) is None
        assert await other.events(session.id) == []
        with pytest.raises(SpotterError) as refused:
            await other.append(session.id, [NewEvent("human.marker", "user")])
        assert refused.value.code == "not_found"
        with pytest.raises(SpotterError):
            await other.transition(session.id, "running")
    assert (await Sessions(pool, mine.org.id, "mixed").get(session.id)).status == "draft"


async def test_the_log_is_append_only_and_goes_with_its_session(pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool)
    sessions = Sessions(pool, studio.org.id, "agent")
    session = await sessions.create(source="coach", status="running")
    for sql in ("UPDATE session_events SET event_type = 'x' WHERE session_id = $1", "DELETE FROM session_events WHERE session_id = $1"):
        with pytest.raises(asyncpg.RestrictViolationError):
            await pool.execute(sql, __import__("uuid").UUID(session.id))
    await pool.execute("DELETE FROM sessions WHERE id = $1", __import__("uuid").UUID(session.id))
    assert await pool.fetchval("SELECT count(*) FROM session_events WHERE session_id = $1", __import__("uuid").UUID(session.id)) == 0


async def test_one_running_human_session_per_person_is_held_by_the_database(pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool)
    sessions = Sessions(pool, studio.org.id, "mixed")
    results = await asyncio.gather(*(sessions.create(source="human", user_id=studio.owner.user_id, status="running")
                                     for _ in range(5)), return_exceptions=True)
    assert sum(not isinstance(r, BaseException) for r in results) == 1
    assert all(isinstance(r, asyncpg.UniqueViolationError) for r in results if isinstance(r, BaseException))
    # Another person, or the same person once the first is over, may start one.
    await sessions.create(source="human", user_id=studio.admin.user_id, status="running")
    running = next(r for r in results if not isinstance(r, BaseException))
    await sessions.transition(running.id, "completed")
    await sessions.create(source="human", user_id=studio.owner.user_id, status="running")


async def test_metadata_and_usage_are_json_objects_in_the_database(pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool)
    sessions = Sessions(pool, studio.org.id, "agent")
    session = await sessions.create(source="coach", user_id=studio.member.user_id, metadata={"membershipId": "m1"})
    await sessions.add_usage(session.id, {"input_tokens": 10, "output_tokens": 5}, 42)
    await sessions.add_usage(session.id, {"input_tokens": 1, "output_tokens": 2}, 8)
    row = await pool.fetchrow(
        "SELECT jsonb_typeof(metadata) AS m, metadata->>'membershipId' AS member, usage, cost_usd_micros FROM sessions WHERE id = $1",
        __import__("uuid").UUID(session.id))
    assert (row["m"], row["member"], row["cost_usd_micros"]) == ("object", "m1", 50)
    assert row["usage"] == {"input_tokens": 11, "output_tokens": 7, "calls": 2}
