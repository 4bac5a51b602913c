"""The timetable routers — `class_sessions`, `class_types`, `bookings` — over a real Postgres, through
ToolRunner.execute, in a studio whose time zone (Asia/Jerusalem) is not UTC and changes with DST."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass, field
from zoneinfo import ZoneInfo

import asyncpg
import pytest

from spotter_shared.contracts.tools import UndoRequest
from spotter_shared.studio import Person, upsert_person
from spotter_tool_runner.runner import ToolRunner

from tests.factories import Studio, make_studio

from .helpers import Conversation, audit_rows, failed, new_conversation, succeeded

TZ = ZoneInfo("Asia/Jerusalem")


@dataclass
class Timetable:
    studio: Studio
    conv: Conversation  # the owner's
    types: dict[str, str]  # class type name → id
    members: list[Person] = field(default_factory=list)


async def make_timetable(pool: asyncpg.Pool, *, members: int = 0) -> Timetable:
    studio = await make_studio(pool)
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("UPDATE organizations SET timezone = 'Asia/Jerusalem' WHERE id = $1", studio.org.id)
        types = {}
        for name, program, capacity, minutes in [
            ("Open Gym", "CrossFit", 20, 60),
            ("WOD", "CrossFit", 12, 60),
            ("Olympic Lifting Basics", "Olympic Lifting", 8, 75),
            ("Olympic Lifting Advanced", "Olympic Lifting", 6, 90),
        ]:
            types[name] = str(await conn.fetchval(
                """INSERT INTO class_types (organization_id, program_id, name, default_capacity, duration_min)
                   VALUES ($1, $2, $3, $4, $5) RETURNING id""",
                studio.org.id, studio.programs[program], name, capacity, minutes,
            ))
        tag = studio.org.slug
        people = [
            await upsert_person(
                conn, studio.org.id, email=f"m{i}-{tag}@test.gym", full_name=f"Member {i}", role="member"
            )
            for i in range(members)
        ]
    return Timetable(studio, await new_conversation(pool, studio, studio.owner), types, people)


@pytest.fixture
async def tt(pool: asyncpg.Pool) -> Timetable:
    return await make_timetable(pool, members=4)


async def call(runner: ToolRunner, conv: Conversation, router: str, action: str, input: dict | None = None, **kw):
    return await runner.execute(conv.command(router, action, input, **kw))


async def sessions(runner, conv, action: str, input: dict | None = None, **kw):
    return await call(runner, conv, "class_sessions", action, input, **kw)


def undo_request(conv: Conversation, tool_use_id: str) -> UndoRequest:
    return UndoRequest(conversation_id=conv.id, tool_use_id=tool_use_id, actor=conv.actor, trace_id=uuid.uuid4().hex)


async def add_session(
    pool, tt: Timetable, class_name: str, local_start: dt.datetime, *, minutes: int = 60, **columns
) -> uuid.UUID:
    """A session inserted directly (as the studio app would), local_start a naive wall time at the studio."""
    starts = local_start.replace(tzinfo=TZ)
    values = {"capacity": 12, "published": True, **columns}
    names = ", ".join(values)
    params = ", ".join(f"${i}" for i in range(5, 5 + len(values)))
    return await pool.fetchval(
        f"""INSERT INTO class_sessions (organization_id, class_type_id, starts_at, ends_at, {names})
            VALUES ($1, $2, $3, $4, {params}) RETURNING id""",
        tt.studio.org.id, uuid.UUID(tt.types[class_name]), starts, starts + dt.timedelta(minutes=minutes),
        *values.values(),
    )


async def book(pool, session_id, member: Person, status: str = "booked", checked_in: bool = False) -> uuid.UUID:
    return await pool.fetchval(
        """INSERT INTO bookings (session_id, membership_id, status, checked_in_at)
           VALUES ($1, $2, $3, CASE WHEN $4 THEN now() END) RETURNING id""",
        session_id, uuid.UUID(member.membership_id), status, checked_in,
    )


# class_sessions.create ---------------------------------------------------------------------------


async def test_create_by_name_stores_the_utc_instant_of_the_local_time(pool, runner, tt) -> None:
    cmd = tt.conv.command(
        "class_sessions", "create",
        {"className": "open gym", "date": "2026-11-24", "startTime": "13:00", "endTime": "14:00", "published": True},
    )
    outcome = await runner.execute(cmd)
    created = succeeded(outcome)
    assert outcome.inverse_available
    assert created == {
        "id": created["id"],
        "classTypeId": tt.types["Open Gym"],
        "className": "Open Gym",
        "startsAt": "2026-11-24T13:00:00+02:00",
        "endsAt": "2026-11-24T14:00:00+02:00",
        "coachMembershipId": None,
        "coachName": None,
        "capacity": 20,
        "booked": 0,
        "published": True,
        "cancelled": False,
        "notes": None,
    }
    row = await pool.fetchrow("SELECT * FROM class_sessions WHERE id = $1", uuid.UUID(created["id"]))
    assert row["starts_at"] == dt.datetime(2026, 11, 24, 11, 0, tzinfo=dt.UTC)
    assert row["ends_at"] == dt.datetime(2026, 11, 24, 12, 0, tzinfo=dt.UTC)
    assert (str(row["organization_id"]), str(row["created_by"])) == (tt.studio.org.id, tt.studio.owner.user_id)
    [audit] = await audit_rows(pool, cmd.tool_use_id)
    assert (audit["action"], audit["resource"], audit["resource_id"]) == (
        "class_session.created", "class_session", created["id"]
    )

    # Summer time: the same wall time is another UTC instant, and the offset says so.
    summer = succeeded(await sessions(runner, tt.conv, "create", {
        "classTypeId": tt.types["WOD"], "date": "2026-07-01", "startTime": "13:00", "endTime": "14:30",
        "capacity": 10, "coachMembershipId": tt.studio.coach.membership_id, "notes": "bring a rope",
    }))
    assert (summer["startsAt"], summer["endsAt"]) == ("2026-07-01T13:00:00+03:00", "2026-07-01T14:30:00+03:00")
    assert (summer["capacity"], summer["coachName"], summer["published"], summer["notes"]) == (
        10, tt.studio.coach.full_name, False, "bring a rope"
    )
    starts = await pool.fetchval("SELECT starts_at FROM class_sessions WHERE id = $1", uuid.UUID(summer["id"]))
    assert starts == dt.datetime(2026, 7, 1, 10, 0, tzinfo=dt.UTC)


async def test_create_refuses_what_it_cannot_schedule(pool, runner, tt) -> None:
    base = {"date": "2026-11-24", "startTime": "13:00", "endTime": "14:00"}
    ambiguous = failed(
        await sessions(runner, tt.conv, "create", {**base, "className": "olympic"}), "ambiguous_class_type"
    )
    assert all(tt.types[f"Olympic Lifting {level}"] in ambiguous.hint for level in ("Basics", "Advanced"))
    unknown = failed(await sessions(runner, tt.conv, "create", {**base, "className": "Yoga"}), "not_found")
    assert all(name in unknown.hint for name in tt.types)
    # A unique part of a name is enough; the exact name wins over longer ones containing it.
    assert succeeded(await sessions(runner, tt.conv, "create", {**base, "className": "basics"}))["className"] == (
        "Olympic Lifting Basics"
    )
    assert succeeded(await sessions(runner, tt.conv, "create", {**base, "className": "wod"}))["className"] == "WOD"

    for bad in [
        {**base},  # no class type
        {**base, "className": "WOD", "classTypeId": tt.types["WOD"]},
        {**base, "className": "WOD", "endTime": "13:00"},
        {**base, "className": "WOD", "endTime": "12:00"},
        {**base, "className": "WOD", "capacity": 0},
        {**base, "className": "WOD", "date": "24/11/2026"},
        {**base, "className": "WOD", "startTime": "13:00+02:00"},
        {**base, "className": "WOD", "room": "B"},
    ]:
        failed(await sessions(runner, tt.conv, "create", bad), "invalid_input")
    # 02:30 does not exist on the night Israel moves its clocks forward.
    failed(await sessions(runner, tt.conv, "create", {
        "className": "WOD", "date": "2026-03-27", "startTime": "02:30", "endTime": "03:30"}), "invalid_input")
    failed(await sessions(runner, tt.conv, "create", {
        **base, "className": "WOD", "coachMembershipId": tt.studio.member.membership_id}), "not_staff")

    other = await make_timetable(pool)
    failed(await sessions(runner, tt.conv, "create", {**base, "classTypeId": other.types["WOD"]}), "not_found")
    failed(await sessions(runner, tt.conv, "create", {
        **base, "className": "WOD", "coachMembershipId": other.studio.coach.membership_id}), "not_found")
    member = await new_conversation(pool, tt.studio, tt.studio.member)
    failed(await sessions(runner, member, "create", {**base, "className": "WOD"}), "forbidden")
    assert await pool.fetchval(
        "SELECT count(*) FROM class_sessions WHERE organization_id = $1", tt.studio.org.id
    ) == 2


async def test_create_is_undone_by_cancelling(pool, runner, tt) -> None:
    coach = await new_conversation(pool, tt.studio, tt.studio.coach)
    create = coach.command(
        "class_sessions", "create",
        {"className": "Open Gym", "date": "2026-11-24", "startTime": "13:00", "endTime": "14:00"},
    )
    created = succeeded(await runner.execute(create))
    undone = await runner.undo(undo_request(coach, create.tool_use_id))
    assert (undone.router, undone.action, undone.input) == ("class_sessions", "cancel", {"id": created["id"]})
    assert succeeded(undone.outcome) == {
        "id": created["id"], "className": "Open Gym", "startsAt": "2026-11-24T13:00:00+02:00",
        "cancelled": True, "bookingsCancelled": 0,
    }
    cancelled_at = "SELECT cancelled_at FROM class_sessions WHERE id = $1"
    assert await pool.fetchval(cancelled_at, uuid.UUID(created["id"])) is not None
    [original] = await audit_rows(pool, create.tool_use_id)
    [inverse] = await audit_rows(pool, undone.tool_use_id)
    assert (original["action"], inverse["action"]) == ("class_session.created", "class_session.cancelled")
    assert original["resource_id"] == inverse["resource_id"] == created["id"]
    assert inverse["metadata"]["undoOf"] == str(original["id"])


# class_sessions.list_for_date ----------------------------------------------------------------------


async def test_list_for_date_takes_the_local_day(pool, runner, tt) -> None:
    day = dt.datetime(2026, 11, 24)
    coach = uuid.UUID(tt.studio.coach.membership_id)
    early = await add_session(pool, tt, "Open Gym", day.replace(hour=0, minute=30))  # 22:30 UTC the day before
    wod = await add_session(pool, tt, "WOD", day.replace(hour=18), coach_membership_id=coach)
    cancelled = await add_session(pool, tt, "WOD", day.replace(hour=19), cancelled_at=dt.datetime.now(dt.UTC))
    await add_session(pool, tt, "WOD", day.replace(hour=20), deleted_at=dt.datetime.now(dt.UTC))
    evening_before = await add_session(pool, tt, "WOD", day - dt.timedelta(minutes=30))  # 23:30 on the 23rd
    await add_session(pool, tt, "WOD", day + dt.timedelta(days=1))
    other = await make_timetable(pool)
    await add_session(pool, other, "WOD", day.replace(hour=18))
    m = tt.members
    for member, status in zip(m, ["booked", "booked", "waitlisted", "cancelled"]):
        await book(pool, wod, member, status)

    out = succeeded(await sessions(runner, tt.conv, "list_for_date", {"date": "2026-11-24"}))
    assert (out["date"], out["timezone"], out["total"]) == ("2026-11-24", "Asia/Jerusalem", 2)
    assert [(s["id"], s["className"], s["startsAt"], s["endsAt"], s["booked"]) for s in out["sessions"]] == [
        (str(early), "Open Gym", "2026-11-24T00:30:00+02:00", "2026-11-24T01:30:00+02:00", 0),
        (str(wod), "WOD", "2026-11-24T18:00:00+02:00", "2026-11-24T19:00:00+02:00", 2),
    ]
    assert out["sessions"][1] | {"id": None} == {
        "id": None, "classTypeId": tt.types["WOD"], "className": "WOD", "startsAt": "2026-11-24T18:00:00+02:00",
        "endsAt": "2026-11-24T19:00:00+02:00", "coachMembershipId": tt.studio.coach.membership_id,
        "coachName": tt.studio.coach.full_name, "capacity": 12, "booked": 2, "published": True, "cancelled": False,
        "notes": None,
    }

    async def ids(**input) -> list[str]:
        return [s["id"] for s in succeeded(await sessions(runner, tt.conv, "list_for_date", input))["sessions"]]

    assert await ids(date="2026-11-24", includeCancelled=True) == [str(early), str(wod), str(cancelled)]
    assert await ids(date="2026-11-24", classTypeId=tt.types["Open Gym"]) == [str(early)]
    assert await ids(date="2026-11-24", coachMembershipId=tt.studio.coach.membership_id) == [str(wod)]
    limited = succeeded(await sessions(runner, tt.conv, "list_for_date", {"date": "2026-11-24", "limit": 1}))
    assert (len(limited["sessions"]), limited["total"]) == (1, 2)

    assert await ids(date="2026-11-23") == [str(evening_before)]

    # Without a date: today at the studio.
    today = dt.datetime.now(TZ).replace(tzinfo=None, hour=12, minute=0, second=0, microsecond=0)
    now_session = await add_session(pool, tt, "Open Gym", today)
    default = succeeded(await sessions(runner, tt.conv, "list_for_date"))
    assert default["date"] == today.date().isoformat()
    assert str(now_session) in [s["id"] for s in default["sessions"]]

    failed(await sessions(runner, tt.conv, "list_for_date", {"date": "tomorrow"}), "invalid_input")
    member = await new_conversation(pool, tt.studio, tt.studio.member)
    failed(await sessions(runner, member, "list_for_date", {}), "forbidden")


# class_sessions.update -----------------------------------------------------------------------------


async def test_update_moves_in_local_time_and_guards_capacity(pool, runner, tt) -> None:
    session = await add_session(pool, tt, "WOD", dt.datetime(2026, 11, 24, 18, 0), capacity=12)
    for member in tt.members[:3]:
        await book(pool, session, member)
    await book(pool, session, tt.members[3], "waitlisted")

    cmd = tt.conv.command("class_sessions", "update", {
        "id": str(session), "date": "2026-11-25", "startTime": "07:00", "endTime": "08:15", "capacity": 3,
        "coachMembershipId": tt.studio.admin.membership_id, "notes": "moved to the morning",
    })
    out = succeeded(await runner.execute(cmd))
    assert (out["startsAt"], out["endsAt"], out["capacity"], out["coachName"], out["notes"], out["booked"]) == (
        "2026-11-25T07:00:00+02:00", "2026-11-25T08:15:00+02:00", 3, tt.studio.admin.full_name,
        "moved to the morning", 3,
    )
    assert await pool.fetchval("SELECT starts_at FROM class_sessions WHERE id = $1", session) == dt.datetime(
        2026, 11, 25, 5, 0, tzinfo=dt.UTC
    )
    [audit] = await audit_rows(pool, cmd.tool_use_id)
    assert (audit["action"], audit["resource_id"]) == ("class_session.updated", str(session))

    # Only the end: the start and the day stay; null clears coach and notes.
    out = succeeded(await sessions(runner, tt.conv, "update", {
        "id": str(session), "endTime": "09:00", "coachMembershipId": None, "notes": None}))
    assert (out["startsAt"], out["endsAt"], out["coachMembershipId"], out["notes"], out["capacity"]) == (
        "2026-11-25T07:00:00+02:00", "2026-11-25T09:00:00+02:00", None, None, 3
    )

    refused = failed(
        await sessions(runner, tt.conv, "update", {"id": str(session), "capacity": 2}), "capacity_below_bookings"
    )
    assert "3" in refused.message
    failed(await sessions(runner, tt.conv, "update", {"id": str(session), "startTime": "09:30"}), "invalid_input")
    for bad in [{"id": str(session)}, {"id": str(session), "capacity": None}, {"id": str(session), "capacity": -1}]:
        failed(await sessions(runner, tt.conv, "update", bad), "invalid_input")
    assert await pool.fetchval("SELECT capacity FROM class_sessions WHERE id = $1", session) == 3

    other = await make_timetable(pool)
    theirs = await new_conversation(pool, other.studio, other.studio.owner)
    failed(await sessions(runner, theirs, "update", {"id": str(session), "capacity": 30}), "not_found")
    member = await new_conversation(pool, tt.studio, tt.studio.member)
    failed(await sessions(runner, member, "update", {"id": str(session), "capacity": 30}), "forbidden")
    succeeded(await sessions(runner, tt.conv, "cancel", {"id": str(session)}))
    failed(await sessions(runner, tt.conv, "update", {"id": str(session), "capacity": 30}), "session_cancelled")


# class_sessions.publish / unpublish ----------------------------------------------------------------


async def test_publish_and_its_undo(pool, runner, tt) -> None:
    session = await add_session(pool, tt, "WOD", dt.datetime(2026, 11, 24, 18, 0), published=False)
    publish = tt.conv.command("class_sessions", "publish", {"id": str(session)})
    outcome = await runner.execute(publish)
    assert succeeded(outcome)["published"] is True and outcome.inverse_available
    failed(await sessions(runner, tt.conv, "publish", {"id": str(session)}), "already_published")

    undone = await runner.undo(undo_request(tt.conv, publish.tool_use_id))
    assert (undone.action, succeeded(undone.outcome)["published"]) == ("unpublish", False)
    assert not await pool.fetchval("SELECT published FROM class_sessions WHERE id = $1", session)
    [original] = await audit_rows(pool, publish.tool_use_id)
    [inverse] = await audit_rows(pool, undone.tool_use_id)
    assert (original["action"], inverse["action"]) == ("class_session.published", "class_session.unpublished")
    assert original["resource_id"] == inverse["resource_id"] == str(session)

    failed(await sessions(runner, tt.conv, "unpublish", {"id": str(session)}), "already_unpublished")
    unpublish = tt.conv.command("class_sessions", "unpublish", {"id": str(session)})
    succeeded(await sessions(runner, tt.conv, "publish", {"id": str(session)}))
    assert succeeded(await runner.execute(unpublish))["published"] is False
    [audit] = await audit_rows(pool, unpublish.tool_use_id)
    assert audit["action"] == "class_session.unpublished"

    failed(await sessions(runner, tt.conv, "publish", {"id": "not-a-uuid"}), "invalid_input")
    failed(await sessions(runner, tt.conv, "publish", {"id": str(uuid.uuid4())}), "not_found")
    member = await new_conversation(pool, tt.studio, tt.studio.member)
    for action in ("publish", "unpublish"):
        failed(await sessions(runner, member, action, {"id": str(session)}), "forbidden")


# class_sessions.cancel -----------------------------------------------------------------------------


async def test_cancel_voids_the_bookings(pool, runner, tt) -> None:
    session = await add_session(pool, tt, "WOD", dt.datetime(2026, 11, 24, 18, 0))
    mine = await book(pool, session, tt.members[0])
    await book(pool, session, tt.members[1])
    await book(pool, session, tt.members[2], "waitlisted")
    await book(pool, session, tt.members[3], "cancelled")

    cmd = tt.conv.command("class_sessions", "cancel", {"id": str(session), "reason": "coach sick"})
    out = succeeded(await runner.execute(cmd))
    assert out == {"id": str(session), "className": "WOD", "startsAt": "2026-11-24T18:00:00+02:00",
                   "cancelled": True, "bookingsCancelled": 3}
    row = await pool.fetchrow("SELECT cancelled_at, cancel_reason FROM class_sessions WHERE id = $1", session)
    assert row["cancelled_at"] is not None and row["cancel_reason"] == "coach sick"
    [audit] = await audit_rows(pool, cmd.tool_use_id)
    assert (audit["action"], audit["resource_id"]) == ("class_session.cancelled", str(session))
    # The member's booking now reads as cancelled.
    listed = succeeded(
        await call(runner, tt.conv, "bookings", "list_mine", {"membershipId": tt.members[0].membership_id})
    )
    assert [(b["id"], b["status"]) for b in listed["upcoming"] + listed["recent"]] == [(str(mine), "cancelled")]

    day = succeeded(await sessions(runner, tt.conv, "list_for_date", {"date": "2026-11-24", "includeCancelled": True}))
    assert [(s["id"], s["cancelled"], s["booked"]) for s in day["sessions"]] == [(str(session), True, 0)]

    failed(await sessions(runner, tt.conv, "cancel", {"id": str(session)}), "session_cancelled")
    failed(await sessions(runner, tt.conv, "cancel", {"reason": "no id"}), "invalid_input")


async def test_a_coach_cancels_only_their_own_classes(pool, runner, tt) -> None:
    coach = await new_conversation(pool, tt.studio, tt.studio.coach)
    theirs = await add_session(pool, tt, "WOD", dt.datetime(2026, 11, 24, 18, 0))
    led = await add_session(pool, tt, "WOD", dt.datetime(2026, 11, 24, 19, 0),
                            coach_membership_id=uuid.UUID(tt.studio.coach.membership_id))
    failed(await sessions(runner, coach, "cancel", {"id": str(theirs)}), "forbidden")
    assert await pool.fetchval("SELECT cancelled_at FROM class_sessions WHERE id = $1", theirs) is None
    assert succeeded(await sessions(runner, coach, "cancel", {"id": str(led)}))["cancelled"]
    member = await new_conversation(pool, tt.studio, tt.studio.member)
    failed(await sessions(runner, member, "cancel", {"id": str(theirs)}), "forbidden")
    assert succeeded(await sessions(runner, tt.conv, "cancel", {"id": str(theirs)}))["cancelled"]


# class_sessions.bulk_* -------------------------------------------------------------------------------


async def bulk_week(pool, tt: Timetable) -> list[uuid.UUID]:
    """Five WODs Sunday to Thursday at 18:00, one Open Gym, and sessions that no week selection takes."""
    week = [await add_session(pool, tt, "WOD", dt.datetime(2026, 11, d, 18, 0), published=False) for d in range(22, 27)]
    await add_session(pool, tt, "Open Gym", dt.datetime(2026, 11, 23, 7, 0), published=False)
    await add_session(pool, tt, "WOD", dt.datetime(2026, 11, 24, 20, 0), cancelled_at=dt.datetime.now(dt.UTC))
    await add_session(pool, tt, "WOD", dt.datetime(2026, 11, 27, 0, 30))  # the day after the range, local
    return week


SELECTION = {"dateFrom": "2026-11-22", "dateTo": "2026-11-26"}


async def test_bulk_preview_then_delete(pool, runner, tt) -> None:
    week = await bulk_week(pool, tt)
    await book(pool, week[0], tt.members[0])
    selection = {**SELECTION, "classTypeId": tt.types["WOD"]}
    preview = succeeded(await sessions(runner, tt.conv, "bulk_preview", selection))
    assert (preview["count"], preview["truncated"]) == (5, False)
    assert preview["items"][0] == {"id": str(week[0]), "className": "WOD", "startsAt": "2026-11-22T18:00:00+02:00",
                                   "published": False, "booked": 1}
    assert [i["id"] for i in preview["items"]] == [str(s) for s in week]

    coach = await new_conversation(pool, tt.studio, tt.studio.coach)
    action = {**selection, "selectionToken": preview["selectionToken"]}
    failed(await sessions(runner, coach, "bulk_delete", action), "forbidden")
    cmd = tt.conv.command("class_sessions", "bulk_delete", action)
    assert succeeded(await runner.execute(cmd)) == {"deleted": 5, "bookings": 1}
    deleted = await pool.fetch("SELECT id FROM class_sessions WHERE organization_id = $1 AND deleted_at IS NOT NULL",
                               tt.studio.org.id)
    assert sorted(r["id"] for r in deleted) == sorted(week)
    [audit] = await audit_rows(pool, cmd.tool_use_id)
    assert (audit["action"], audit["resource"]) == ("class_session.bulk_deleted", "class_session")
    failed(await sessions(runner, tt.conv, "bulk_delete", action), "empty_selection")
    failed(await sessions(runner, tt.conv, "bulk_preview", {"dateFrom": "2026-11-26", "dateTo": "2026-11-22"}),
           "invalid_input")
    failed(await sessions(runner, tt.conv, "bulk_preview", {"dateFrom": "2026-01-01", "dateTo": "2027-06-01"}),
           "invalid_input")


async def test_a_changed_selection_is_refused_and_nothing_changes(pool, runner, tt) -> None:
    week = await bulk_week(pool, tt)
    preview = succeeded(await sessions(runner, tt.conv, "bulk_preview", SELECTION))
    assert preview["count"] == 6
    action = {**SELECTION, "selectionToken": preview["selectionToken"]}

    # Someone moves one class after the preview: the approved selection is no longer what would run.
    succeeded(await sessions(runner, tt.conv, "update", {"id": str(week[2]), "startTime": "17:00", "endTime": "18:00"}))
    state = "SELECT id, published, deleted_at, updated_at FROM class_sessions WHERE organization_id = $1 ORDER BY id"
    before = await pool.fetch(state, tt.studio.org.id)
    for bulk in ("bulk_delete", "bulk_publish"):
        error = failed(await sessions(runner, tt.conv, bulk, action), "selection_changed")
        assert "bulk_preview" in error.hint
    assert await pool.fetch(state, tt.studio.org.id) == before
    assert not any(r["deleted_at"] or r["published"] for r in before if r["id"] in week)

    # A new class in the range changes it as well.
    again = succeeded(await sessions(runner, tt.conv, "bulk_preview", SELECTION))
    await add_session(pool, tt, "Open Gym", dt.datetime(2026, 11, 25, 7, 0), published=False)
    failed(await sessions(runner, tt.conv, "bulk_publish", {**SELECTION, "selectionToken": again["selectionToken"]}),
           "selection_changed")

    # So does an edit by another writer that leaves updated_at alone (the database moves it).
    again = succeeded(await sessions(runner, tt.conv, "bulk_preview", SELECTION))
    await pool.execute("UPDATE class_sessions SET notes = 'moved to the park' WHERE id = $1", week[0])
    failed(await sessions(runner, tt.conv, "bulk_delete", {**SELECTION, "selectionToken": again["selectionToken"]}),
           "selection_changed")


async def test_bulk_publish(pool, runner, tt) -> None:
    week = await bulk_week(pool, tt)
    succeeded(await sessions(runner, tt.conv, "publish", {"id": str(week[0])}))
    preview = succeeded(await sessions(runner, tt.conv, "bulk_preview", SELECTION))
    action = {**SELECTION, "selectionToken": preview["selectionToken"]}
    admin = await new_conversation(pool, tt.studio, tt.studio.admin)
    coach = await new_conversation(pool, tt.studio, tt.studio.coach)
    failed(await sessions(runner, coach, "bulk_publish", action), "forbidden")
    failed(await sessions(runner, admin, "bulk_publish", {**SELECTION}), "invalid_input")
    cmd = admin.command("class_sessions", "bulk_publish", action)
    assert succeeded(await runner.execute(cmd)) == {"published": 5, "alreadyPublished": 1}
    [audit] = await audit_rows(pool, cmd.tool_use_id)
    assert audit["action"] == "class_session.bulk_published"
    unpublished = succeeded(await sessions(runner, tt.conv, "bulk_preview", {**SELECTION, "published": False}))
    assert unpublished["count"] == 0


# class_types.list_for_program ------------------------------------------------------------------------


async def test_class_types_of_a_program(pool, runner, tt) -> None:
    soon = dt.datetime.now(TZ).replace(tzinfo=None) + dt.timedelta(days=2)
    await add_session(pool, tt, "WOD", soon)
    await add_session(pool, tt, "WOD", soon + dt.timedelta(days=1))
    await add_session(pool, tt, "WOD", soon, cancelled_at=dt.datetime.now(dt.UTC))
    await add_session(pool, tt, "WOD", soon - dt.timedelta(days=10))  # past
    out = succeeded(await call(runner, tt.conv, "class_types", "list_for_program",
                               {"programId": tt.studio.programs["CrossFit"]}))
    assert out == {"total": 2, "classTypes": [
        {"id": tt.types["Open Gym"], "name": "Open Gym", "programId": tt.studio.programs["CrossFit"],
         "programName": "CrossFit", "defaultCapacity": 20, "durationMin": 60, "upcomingSessions": 0},
        {"id": tt.types["WOD"], "name": "WOD", "programId": tt.studio.programs["CrossFit"],
         "programName": "CrossFit", "defaultCapacity": 12, "durationMin": 60, "upcomingSessions": 2},
    ]}
    every = succeeded(await call(runner, tt.conv, "class_types", "list_for_program"))
    assert [t["name"] for t in every["classTypes"]] == sorted(tt.types)
    other = await make_timetable(pool)
    failed(await call(runner, tt.conv, "class_types", "list_for_program",
                      {"programId": other.studio.programs["CrossFit"]}), "not_found")
    failed(await call(runner, tt.conv, "class_types", "list_for_program", {"programId": "x"}), "invalid_input")
    member = await new_conversation(pool, tt.studio, tt.studio.member)
    failed(await call(runner, member, "class_types", "list_for_program"), "forbidden")


# bookings.list_mine ----------------------------------------------------------------------------------


async def test_list_mine_is_the_callers_own_unless_a_manager_asks(pool, runner, tt) -> None:
    now = dt.datetime.now(TZ).replace(tzinfo=None, second=0, microsecond=0)
    member = tt.members[0]
    past = [await add_session(pool, tt, "WOD", now - dt.timedelta(days=d)) for d in (1, 3, 5)]
    future = [await add_session(pool, tt, "Open Gym", now + dt.timedelta(days=d)) for d in (2, 1)]
    came = await book(pool, past[0], member, checked_in=True)
    await book(pool, past[1], member)
    await book(pool, past[2], member, "cancelled")
    soonest = await book(pool, future[1], member)
    await book(pool, future[0], member, "waitlisted")
    coach_booking = await book(pool, future[0], tt.studio.coach)

    out = succeeded(await call(runner, tt.conv, "bookings", "list_mine",
                               {"membershipId": member.membership_id, "limit": 2}))
    assert (out["memberName"], out["upcomingTotal"], out["recentTotal"]) == ("Member 0", 2, 3)
    assert [(b["id"], b["className"], b["status"], b["attended"]) for b in out["upcoming"]] == [
        (str(soonest), "Open Gym", "booked", False), (out["upcoming"][1]["id"], "Open Gym", "waitlisted", False),
    ]
    assert [(b["id"], b["status"], b["attended"]) for b in out["recent"]] == [
        (str(came), "booked", True), (out["recent"][1]["id"], "booked", False),
    ]
    assert out["recent"][0]["startsAt"] == (now - dt.timedelta(days=1)).replace(tzinfo=TZ).isoformat()

    coach = await new_conversation(pool, tt.studio, tt.studio.coach)
    own = succeeded(await call(runner, coach, "bookings", "list_mine"))
    assert (own["membershipId"], [b["id"] for b in own["upcoming"]], own["recent"]) == (
        tt.studio.coach.membership_id, [str(coach_booking)], []
    )
    failed(await call(runner, coach, "bookings", "list_mine", {"membershipId": member.membership_id}), "forbidden")
    admin = await new_conversation(pool, tt.studio, tt.studio.admin)
    assert succeeded(await call(runner, admin, "bookings", "list_mine",
                                {"membershipId": member.membership_id}))["upcomingTotal"] == 2
    other = await make_timetable(pool)
    failed(await call(runner, tt.conv, "bookings", "list_mine",
                      {"membershipId": other.studio.member.membership_id}), "not_found")
    failed(await call(runner, tt.conv, "bookings", "list_mine", {"limit": 0}), "invalid_input")
    as_member = await new_conversation(pool, tt.studio, tt.studio.member)
    failed(await call(runner, as_member, "bookings", "list_mine"), "forbidden")


# bookings.attendance_* -------------------------------------------------------------------------------


@pytest.fixture
async def attendance(pool) -> Timetable:
    """Forty days of classes: a morning Open Gym and an evening WOD each day, some cancelled, one
    deleted, tomorrow's not yet held, bookings of every status, about two thirds checked in."""
    tt = await make_timetable(pool, members=6)
    today = dt.datetime.now(TZ).date()
    for back in range(-1, 41):
        day = dt.datetime.combine(today - dt.timedelta(days=back), dt.time())
        for name, hour in (("Open Gym", 7), ("WOD", 18)):
            columns = {}
            if back % 7 == 3 and name == "WOD":
                columns["cancelled_at"] = dt.datetime.now(dt.UTC)
            if back == 5 and name == "Open Gym":
                columns["deleted_at"] = dt.datetime.now(dt.UTC)
            session = await add_session(pool, tt, name, day.replace(hour=hour), **columns)
            for i, member in enumerate(tt.members[: 2 + back % 5]):
                status = ["booked", "booked", "booked", "waitlisted", "cancelled"][(i + back) % 5]
                came = status == "booked" and back > 0 and (i * back) % 3 != 0
                await book(pool, session, member, status, checked_in=came)
    # Look-alike data in another studio must not count.
    other = await make_timetable(pool, members=1)
    stray = await add_session(pool, other, "WOD", dt.datetime.combine(today - dt.timedelta(days=2), dt.time(18)))
    await book(pool, stray, other.members[0], checked_in=True)
    return tt


EXPECTED = """
SELECT ct.id AS class_type_id, ct.name AS class_name, {period} AS period,
       count(DISTINCT s.id) AS sessions,
       count(b.id) FILTER (WHERE b.status = 'booked') AS bookings,
       count(b.id) FILTER (WHERE b.status = 'booked' AND b.checked_in_at IS NOT NULL) AS attended
  FROM class_sessions s
  JOIN class_types ct ON ct.id = s.class_type_id
  LEFT JOIN bookings b ON b.session_id = s.id
 WHERE s.organization_id = $1 AND s.deleted_at IS NULL AND s.cancelled_at IS NULL AND s.starts_at < now()
   AND (s.starts_at AT TIME ZONE 'Asia/Jerusalem')::date BETWEEN $2 AND $3
 GROUP BY GROUPING SETS ((ct.id, ct.name), ({period}))
"""


async def test_attendance_summary_matches_sql(pool, runner, attendance) -> None:
    tt = attendance
    today = dt.datetime.now(TZ).date()
    for dates in ({}, {"dateFrom": (today - dt.timedelta(days=39)).isoformat(), "dateTo": today.isoformat()}):
        out = succeeded(await call(runner, tt.conv, "bookings", "attendance_summary", dates))
        first = dt.date.fromisoformat(dates.get("dateFrom", (today - dt.timedelta(days=29)).isoformat()))
        assert (out["dateFrom"], out["dateTo"]) == (first.isoformat(), today.isoformat())
        rows = await pool.fetch(EXPECTED.format(period="NULL::date"), uuid.UUID(tt.studio.org.id), first, today)
        by_type = {r["class_name"]: r for r in rows if r["class_name"]}
        assert {t["className"]: (t["classTypeId"], t["sessions"], t["bookings"], t["attended"], t["noShows"])
                for t in out["byClassType"]} == {
            name: (str(r["class_type_id"]), r["sessions"], r["bookings"], r["attended"], r["bookings"] - r["attended"])
            for name, r in by_type.items()
        }
        total = {f: sum(r[f] for r in by_type.values()) for f in ("sessions", "bookings", "attended")}
        assert (out["sessions"], out["bookings"], out["attended"], out["noShows"]) == (
            total["sessions"], total["bookings"], total["attended"], total["bookings"] - total["attended"]
        )
        assert out["attendanceRate"] == round(total["attended"] / total["bookings"], 3)
        assert 0 < out["attended"] < out["bookings"]
    # The WOD of day 3 was cancelled and the Open Gym of day 5 deleted: fewer WODs held than Open Gyms.
    assert [t["className"] for t in out["byClassType"]] == ["Open Gym", "WOD"]

    failed(await call(runner, tt.conv, "bookings", "attendance_summary",
                      {"dateFrom": today.isoformat(), "dateTo": (today - dt.timedelta(days=1)).isoformat()}),
           "invalid_input")
    member = await new_conversation(pool, tt.studio, tt.studio.member)
    failed(await call(runner, member, "bookings", "attendance_summary"), "forbidden")


async def test_attendance_trend_matches_sql(pool, runner, attendance) -> None:
    tt = attendance
    today = dt.datetime.now(TZ).date()
    daily = succeeded(await call(runner, tt.conv, "bookings", "attendance_trend"))
    first = today - dt.timedelta(days=29)
    assert (daily["interval"], daily["dateFrom"], len(daily["points"])) == ("day", first.isoformat(), 30)
    rows = await pool.fetch(EXPECTED.format(period="(s.starts_at AT TIME ZONE 'Asia/Jerusalem')::date"),
                            uuid.UUID(tt.studio.org.id), first, today)
    expected = {r["period"]: (r["sessions"], r["bookings"], r["attended"]) for r in rows if r["period"]}
    days = [first + dt.timedelta(days=d) for d in range(30)]
    assert [(p["period"], p["sessions"], p["bookings"], p["attended"]) for p in daily["points"]] == [
        (day.isoformat(), *expected.get(day, (0, 0, 0))) for day in days
    ]

    weekly = succeeded(await call(runner, tt.conv, "bookings", "attendance_trend",
                                  {"interval": "week", "dateFrom": (today - dt.timedelta(days=34)).isoformat()}))
    first = today - dt.timedelta(days=34)
    rows = await pool.fetch(
        EXPECTED.format(period="date_trunc('week', s.starts_at AT TIME ZONE 'Asia/Jerusalem')::date"),
        uuid.UUID(tt.studio.org.id), first, today,
    )
    expected = {r["period"]: (r["sessions"], r["bookings"], r["attended"]) for r in rows if r["period"]}
    points = {
        dt.date.fromisoformat(p["period"]): (p["sessions"], p["bookings"], p["attended"]) for p in weekly["points"]
    }
    assert all(day.weekday() == 0 for day in points) and points == {
        day: expected.get(day, (0, 0, 0)) for day in points
    }
    assert set(expected) <= set(points) and sum(p[0] for p in points.values()) == sum(e[0] for e in expected.values())
    assert [p["attendanceRate"] for p in weekly["points"]] == [
        round(p["attended"] / p["bookings"], 3) if p["bookings"] else None for p in weekly["points"]
    ]

    failed(await call(runner, tt.conv, "bookings", "attendance_trend",
                      {"interval": "day", "dateFrom": "2026-01-01", "dateTo": "2026-06-30"}), "invalid_input")
    failed(await call(runner, tt.conv, "bookings", "attendance_trend", {"interval": "month"}), "invalid_input")
    coach = await new_conversation(pool, tt.studio, tt.studio.coach)
    assert succeeded(await call(runner, coach, "bookings", "attendance_trend", {"interval": "week"}))["points"]
    member = await new_conversation(pool, tt.studio, tt.studio.member)
    failed(await call(runner, member, "bookings", "attendance_trend"), "forbidden")
