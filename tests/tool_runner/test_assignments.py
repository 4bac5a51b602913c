"""The `assignments` router over a real Postgres, through ToolRunner.execute as the orchestrator calls it."""

from __future__ import annotations

import uuid
from datetime import datetime
from zoneinfo import ZoneInfo

import asyncpg
import pytest

from spotter_tool_runner.runner import ToolRunner

from tests.factories import Studio

from .helpers import Conversation, audit_rows, failed, new_conversation, succeeded

DAY = "2026-03-02"


@pytest.fixture
async def coach(pool: asyncpg.Pool, studio: Studio) -> Conversation:
    return await new_conversation(pool, studio, studio.coach)


@pytest.fixture
async def owner(pool: asyncpg.Pool, studio: Studio) -> Conversation:
    return await new_conversation(pool, studio, studio.owner)


@pytest.fixture
async def workout_id(pool: asyncpg.Pool, studio: Studio) -> str:
    return str(
        await pool.fetchval(
            "INSERT INTO workouts (organization_id, title, description) VALUES ($1, 'Squat day', '5x5') RETURNING id",
            studio.org.id,
        )
    )


async def call(runner: ToolRunner, conv: Conversation, action: str, input: dict | None = None):
    return await runner.execute(conv.command("assignments", action, input))


async def assign(runner: ToolRunner, conv: Conversation, member: str, day: str = DAY, **extra) -> dict:
    return succeeded(
        await call(
            runner, conv, "assign_personal", {"membershipId": member, "scheduledFor": day, "title": "PT", **extra}
        )
    )


async def comment(pool: asyncpg.Pool, studio: Studio, *, assignment_id=None, workout_id=None, body="Felt heavy") -> str:
    return str(
        await pool.fetchval(
            """INSERT INTO workout_comments (organization_id, assignment_id, workout_id, author_membership_id, body)
               VALUES ($1, $2, $3, $4, $5) RETURNING id""",
            studio.org.id,
            assignment_id and uuid.UUID(assignment_id),
            workout_id and uuid.UUID(workout_id),
            studio.member.membership_id,
            body,
        )
    )


# assign_personal -----------------------------------------------------------------------------------


async def test_a_coach_assigns_a_draft_to_themself(pool, runner, coach, studio) -> None:
    cmd = coach.command(
        "assignments",
        "assign_personal",
        {"membershipId": studio.member.membership_id, "scheduledFor": DAY, "title": "Lower body", "notes": "Go easy"},
    )
    outcome = await runner.execute(cmd)

    out = succeeded(outcome)
    assert not outcome.inverse_available
    assert out == {
        "id": out["id"],
        "membershipId": studio.member.membership_id,
        "memberName": studio.member.full_name,
        "coachMembershipId": studio.coach.membership_id,
        "coachName": studio.coach.full_name,
        "title": "Lower body",
        "notes": "Go easy",
        "scheduledFor": DAY,
        "workoutId": None,
        "workoutTitle": None,
        "programId": None,
        "programName": None,
        "published": False,
        "publishedAt": None,
    }
    row = await pool.fetchrow("SELECT * FROM assignments WHERE id = $1", uuid.UUID(out["id"]))
    assert (str(row["organization_id"]), str(row["created_by"]), row["published_at"]) == (
        studio.org.id,
        studio.coach.user_id,
        None,
    )
    [audit] = await audit_rows(pool, cmd.tool_use_id)
    assert (audit["action"], audit["resource"], audit["resource_id"]) == (
        "assignment.created",
        "assignment",
        out["id"],
    )


async def test_an_owner_assigns_a_published_workout_in_the_studio_time_zone(
    pool, runner, owner, studio, workout_id
) -> None:
    await pool.execute("UPDATE organizations SET timezone = 'Asia/Jerusalem' WHERE id = $1", studio.org.id)
    out = await assign(
        runner,
        owner,
        studio.member.membership_id,
        title="Squats",
        workoutId=workout_id,
        programId=studio.programs["CrossFit"],
        published=True,
    )
    assert (out["workoutTitle"], out["programName"], out["published"]) == ("Squat day", "CrossFit", True)
    # An owner is not defaulted to the coach: nobody is, unless named.
    assert (out["coachMembershipId"], out["coachName"]) == (None, None)
    published_at = datetime.fromisoformat(out["publishedAt"])
    stored = await pool.fetchval("SELECT published_at FROM assignments WHERE id = $1", uuid.UUID(out["id"]))
    assert published_at == stored.replace(microsecond=0)
    assert published_at.utcoffset() == stored.astimezone(ZoneInfo("Asia/Jerusalem")).utcoffset()

    named = await assign(runner, owner, studio.member.membership_id, coachMembershipId=studio.admin.membership_id)
    assert named["coachName"] == studio.admin.full_name


async def test_assign_personal_refuses_bad_input_and_foreign_ids(
    pool, runner, coach, studio, other_studio, workout_id
) -> None:
    member = studio.member.membership_id
    for bad in [
        {"membershipId": member, "scheduledFor": DAY},  # no title
        {"membershipId": member, "scheduledFor": "2026-02-30", "title": "PT"},
        {"membershipId": member, "scheduledFor": DAY, "title": "  "},
        {"membershipId": member, "scheduledFor": DAY, "title": "PT", "date": DAY},
    ]:
        failed(await call(runner, coach, "assign_personal", bad), "invalid_input")
    base = {"membershipId": member, "scheduledFor": DAY, "title": "PT"}
    saar = studio.people["Saar Cohen"].membership_id
    error = failed(await call(runner, coach, "assign_personal", {**base, "coachMembershipId": saar}), "not_a_coach")
    assert "Saar Cohen" in error.message
    for foreign in [
        {**base, "membershipId": other_studio.member.membership_id},
        {**base, "coachMembershipId": other_studio.coach.membership_id},
        {**base, "programId": other_studio.programs["CrossFit"]},
        {**base, "workoutId": str(uuid.uuid4())},
    ]:
        assert failed(await call(runner, coach, "assign_personal", foreign), "not_found").hint
    await pool.execute("UPDATE workouts SET deleted_at = now() WHERE id = $1", uuid.UUID(workout_id))
    failed(await call(runner, coach, "assign_personal", {**base, "workoutId": workout_id}), "not_found")
    assert not await pool.fetchval("SELECT count(*) FROM assignments WHERE organization_id = $1", studio.org.id)


async def test_members_may_use_no_assignment_tool(pool, runner, studio) -> None:
    member = await new_conversation(pool, studio, studio.member)
    some = str(uuid.uuid4())
    for action, input in [
        ("assign_personal", {"membershipId": studio.member.membership_id, "scheduledFor": DAY, "title": "PT"}),
        ("update", {"id": some, "title": "x"}),
        ("set_published", {"id": some, "published": True}),
        ("delete", {"id": some}),
        ("mark_comments_read", {"assignmentId": some}),
        ("bulk_preview", {"fromDate": DAY, "toDate": DAY}),
        ("bulk_delete", {"fromDate": DAY, "toDate": DAY, "selectionToken": "0" * 32}),
        ("bulk_publish", {"fromDate": DAY, "toDate": DAY, "selectionToken": "0" * 32}),
    ]:
        failed(await call(runner, member, action, input), "forbidden")


# update, set_published, delete ---------------------------------------------------------------------


async def test_update_patches_only_what_is_sent(pool, runner, coach, studio, other_studio, workout_id) -> None:
    created = await assign(runner, coach, studio.member.membership_id, notes="Warm up first")
    cmd = coach.command(
        "assignments",
        "update",
        {
            "id": created["id"],
            "title": "Upper body",
            "notes": None,
            "scheduledFor": "2026-03-04",
            "workoutId": workout_id,
            "coachMembershipId": studio.admin.membership_id,
        },
    )
    patched = succeeded(await runner.execute(cmd))
    assert patched == {
        **created,
        "title": "Upper body",
        "notes": None,
        "scheduledFor": "2026-03-04",
        "workoutId": workout_id,
        "workoutTitle": "Squat day",
        "coachMembershipId": studio.admin.membership_id,
        "coachName": studio.admin.full_name,
    }
    [audit] = await audit_rows(pool, cmd.tool_use_id)
    assert (audit["action"], audit["resource_id"]) == ("assignment.updated", created["id"])

    cleared = succeeded(await call(runner, coach, "update", {"id": created["id"], "coachMembershipId": None}))
    assert (cleared["coachName"], cleared["title"]) == (None, "Upper body")
    for bad in [{}, {"title": None}, {"scheduledFor": None}]:
        failed(await call(runner, coach, "update", {"id": created["id"], **bad}), "invalid_input")
    failed(
        await call(runner, coach, "update", {"id": created["id"], "coachMembershipId": studio.member.membership_id}),
        "not_a_coach",
    )
    theirs = await new_conversation(pool, other_studio, other_studio.coach)
    failed(await call(runner, theirs, "update", {"id": created["id"], "title": "Mine"}), "not_found")
    title = await pool.fetchval("SELECT title FROM assignments WHERE id = $1", uuid.UUID(created["id"]))
    assert title == "Upper body"


async def test_set_published_sets_and_clears_published_at(pool, runner, coach, studio) -> None:
    created = await assign(runner, coach, studio.member.membership_id)
    cmd = coach.command("assignments", "set_published", {"id": created["id"], "published": True})
    published = succeeded(await runner.execute(cmd))
    assert (published["published"], bool(published["publishedAt"])) == (True, True)
    [audit] = await audit_rows(pool, cmd.tool_use_id)
    assert (audit["action"], audit["resource"], audit["resource_id"]) == (
        "assignment.published_set",
        "assignment",
        created["id"],
    )
    failed(await call(runner, coach, "set_published", {"id": created["id"], "published": True}), "unchanged")

    draft = succeeded(await call(runner, coach, "set_published", {"id": created["id"], "published": False}))
    assert (draft["published"], draft["publishedAt"]) == (False, None)
    row = await pool.fetchrow("SELECT published, published_at FROM assignments WHERE id = $1", uuid.UUID(created["id"]))
    assert tuple(row) == (False, None)
    failed(await call(runner, coach, "set_published", {"id": created["id"]}), "invalid_input")
    failed(await call(runner, coach, "set_published", {"id": created["id"], "published": "maybe"}), "invalid_input")


async def test_delete_is_soft_and_org_scoped(pool, runner, coach, studio, other_studio) -> None:
    created = await assign(runner, coach, studio.member.membership_id, title="Mobility")
    theirs = await new_conversation(pool, other_studio, other_studio.owner)
    failed(await call(runner, theirs, "delete", {"id": created["id"]}), "not_found")
    failed(await call(runner, coach, "delete", {"id": "not-a-uuid"}), "invalid_input")

    cmd = coach.command("assignments", "delete", {"id": created["id"]})
    assert succeeded(await runner.execute(cmd)) == {"id": created["id"], "title": "Mobility", "deleted": True}
    assert await pool.fetchval("SELECT deleted_at IS NOT NULL FROM assignments WHERE id = $1", uuid.UUID(created["id"]))
    [audit] = await audit_rows(pool, cmd.tool_use_id)
    assert (audit["action"], audit["resource_id"]) == ("assignment.deleted", created["id"])
    for action, input in [
        ("delete", {"id": created["id"]}),
        ("update", {"id": created["id"], "title": "Back"}),
        ("set_published", {"id": created["id"], "published": True}),
    ]:
        failed(await call(runner, coach, action, input), "not_found")


# mark_comments_read --------------------------------------------------------------------------------


async def test_mark_comments_read_for_the_calling_coach(pool, runner, coach, owner, studio, workout_id) -> None:
    created = await assign(runner, coach, studio.member.membership_id)
    on_assignment = [await comment(pool, studio, assignment_id=created["id"]) for _ in range(2)]
    gone = await comment(pool, studio, assignment_id=created["id"])
    await pool.execute("UPDATE workout_comments SET deleted_at = now() WHERE id = $1", uuid.UUID(gone))
    on_workout = await comment(pool, studio, workout_id=workout_id)

    cmd = coach.command("assignments", "mark_comments_read", {"assignmentId": created["id"]})
    assert succeeded(await runner.execute(cmd)) == {"assignmentId": created["id"], "marked": 2, "alreadyRead": 0}
    [audit] = await audit_rows(pool, cmd.tool_use_id)
    assert (audit["action"], audit["resource"]) == ("workout_comment.marked_read", "workout_comment")

    # Idempotent: marking again changes nothing; by ids, only the new one is marked.
    again = succeeded(await call(runner, coach, "mark_comments_read", {"assignmentId": created["id"]}))
    assert (again["marked"], again["alreadyRead"]) == (0, 2)
    by_ids = succeeded(
        await call(runner, coach, "mark_comments_read", {"commentIds": [on_workout, *on_assignment]})
    )
    assert by_ids == {"assignmentId": None, "marked": 1, "alreadyRead": 2}
    reads = await pool.fetch(
        """SELECT comment_id::text, coach_membership_id::text FROM workout_comment_reads
            WHERE comment_id = ANY($1::uuid[])""",
        [*on_assignment, on_workout, gone],
    )
    assert sorted(map(tuple, reads)) == sorted((c, studio.coach.membership_id) for c in [*on_assignment, on_workout])

    # Read state is per coach: the owner has read nothing yet.
    mine = succeeded(await call(runner, owner, "mark_comments_read", {"commentIds": [on_workout]}))
    assert mine["marked"] == 1


async def test_mark_comments_read_refuses_bad_input_and_unknown_comments(
    pool, runner, coach, studio, other_studio
) -> None:
    created = await assign(runner, coach, studio.member.membership_id)
    mine = await comment(pool, studio, assignment_id=created["id"])
    their_workout = await pool.fetchval(
        "INSERT INTO workouts (organization_id, title) VALUES ($1, 'Theirs') RETURNING id", other_studio.org.id
    )
    theirs = await comment(pool, other_studio, workout_id=str(their_workout))
    for bad in [
        {},
        {"assignmentId": created["id"], "commentIds": [mine]},
        {"commentIds": []},
        {"commentIds": [str(uuid.uuid4()) for _ in range(201)]},
    ]:
        failed(await call(runner, coach, "mark_comments_read", bad), "invalid_input")
    error = failed(await call(runner, coach, "mark_comments_read", {"commentIds": [mine, theirs]}), "not_found")
    assert "nothing was marked" in error.message
    failed(await call(runner, coach, "mark_comments_read", {"assignmentId": str(uuid.uuid4())}), "not_found")
    assert not await pool.fetchval("SELECT count(*) FROM workout_comment_reads WHERE comment_id = $1", uuid.UUID(mine))


# bulk ----------------------------------------------------------------------------------------------

MARCH = {"fromDate": "2026-03-01", "toDate": "2026-03-31"}


@pytest.fixture
async def march(runner, coach, studio) -> list[dict]:
    """Three March assignments (one published, one of them Saar's) and one in April."""
    saar = studio.people["Saar Cohen"].membership_id
    rows = [
        await assign(runner, coach, studio.member.membership_id, "2026-03-02", title="A"),
        await assign(runner, coach, saar, "2026-03-09", title="B", published=True),
        await assign(runner, coach, studio.member.membership_id, "2026-03-31", title="C"),
    ]
    await assign(runner, coach, saar, "2026-04-01", title="April")
    return rows


async def live_titles(pool, studio) -> list[str]:
    rows = await pool.fetch(
        "SELECT title FROM assignments WHERE organization_id = $1 AND deleted_at IS NULL ORDER BY title", studio.org.id
    )
    return [r["title"] for r in rows]


async def test_bulk_preview_lists_the_selection(pool, runner, coach, studio, other_studio, march) -> None:
    out = succeeded(await call(runner, coach, "bulk_preview", MARCH))
    assert (out["count"], out["truncated"], len(out["selectionToken"])) == (3, False, 32)
    member = studio.member.full_name
    assert out["items"] == [
        {"id": march[0]["id"], "date": "2026-03-02", "member": member, "title": "A", "published": False},
        {"id": march[1]["id"], "date": "2026-03-09", "member": "Saar Cohen", "title": "B", "published": True},
        {"id": march[2]["id"], "date": "2026-03-31", "member": member, "title": "C", "published": False},
    ]

    async def titles(**filters) -> list[str]:
        return [i["title"] for i in succeeded(await call(runner, coach, "bulk_preview", {**MARCH, **filters}))["items"]]

    assert await titles(published=False) == ["A", "C"]
    assert await titles(membershipId=studio.people["Saar Cohen"].membership_id) == ["B"]
    assert await titles(coachMembershipId=studio.coach.membership_id) == ["A", "B", "C"]
    assert await titles(coachMembershipId=studio.admin.membership_id) == []
    assert await titles(programId=studio.programs["CrossFit"]) == []
    assert await titles(toDate="2026-03-02") == ["A"]
    theirs = await new_conversation(pool, other_studio, other_studio.owner)
    assert succeeded(await call(runner, theirs, "bulk_preview", MARCH))["count"] == 0

    for bad in [
        {"fromDate": "2026-03-31", "toDate": "2026-03-01"},
        {"fromDate": "2026-01-01", "toDate": "2027-01-02"},
        {"fromDate": "2026-03-01"},
        {**MARCH, "published": "maybe"},
    ]:
        failed(await call(runner, coach, "bulk_preview", bad), "invalid_input")


async def test_bulk_delete_deletes_exactly_what_was_previewed(pool, runner, owner, coach, studio, march) -> None:
    token = succeeded(await call(runner, coach, "bulk_preview", {**MARCH, "published": False}))["selectionToken"]
    input = {**MARCH, "published": False, "selectionToken": token}
    failed(await call(runner, coach, "bulk_delete", input), "forbidden")
    failed(await call(runner, owner, "bulk_delete", {**MARCH, "published": False}), "invalid_input")

    cmd = owner.command("assignments", "bulk_delete", input)
    out = succeeded(await runner.execute(cmd))
    assert out == {"count": 2, "changed": 2, "ids": [march[0]["id"], march[2]["id"]], "truncated": False}
    assert await live_titles(pool, studio) == ["April", "B"]
    [audit] = await audit_rows(pool, cmd.tool_use_id)
    assert (audit["action"], audit["resource"]) == ("assignment.bulk_deleted", "assignment")
    # The same token again: the selection is empty now.
    failed(await call(runner, owner, "bulk_delete", input), "empty_selection")


async def test_bulk_delete_refuses_a_selection_that_changed(pool, runner, owner, coach, studio, march) -> None:
    token = succeeded(await call(runner, owner, "bulk_preview", MARCH))["selectionToken"]
    input = {**MARCH, "selectionToken": token}

    added = await assign(runner, coach, studio.member.membership_id, "2026-03-15", title="Added")
    error = failed(await call(runner, owner, "bulk_delete", input), "selection_changed")
    assert "bulk_preview" in error.hint
    assert await live_titles(pool, studio) == ["A", "Added", "April", "B", "C"]

    # Back to the previewed rows, but one of them edited: still refused.
    succeeded(await call(runner, coach, "delete", {"id": added["id"]}))
    succeeded(await call(runner, coach, "update", {"id": march[0]["id"], "notes": "Changed"}))
    failed(await call(runner, owner, "bulk_delete", input), "selection_changed")
    assert await live_titles(pool, studio) == ["A", "April", "B", "C"]

    # A token for some other selection is no licence either.
    other = succeeded(await call(runner, owner, "bulk_preview", {**MARCH, "published": True}))["selectionToken"]
    failed(await call(runner, owner, "bulk_delete", {**MARCH, "selectionToken": other}), "selection_changed")
    assert await live_titles(pool, studio) == ["A", "April", "B", "C"]


async def test_bulk_publish_publishes_the_previewed_selection(pool, runner, owner, coach, studio, march) -> None:
    already = await pool.fetchval("SELECT published_at FROM assignments WHERE id = $1", uuid.UUID(march[1]["id"]))
    token = succeeded(await call(runner, owner, "bulk_preview", MARCH))["selectionToken"]
    input = {**MARCH, "selectionToken": token}
    failed(await call(runner, coach, "bulk_publish", input), "forbidden")

    cmd = owner.command("assignments", "bulk_publish", input)
    out = succeeded(await runner.execute(cmd))
    # All three are the selection; the published one stays as it was.
    assert out == {"count": 3, "changed": 2, "ids": [m["id"] for m in march], "truncated": False}
    rows = await pool.fetch(
        "SELECT title, published, published_at FROM assignments WHERE organization_id = $1 ORDER BY title",
        studio.org.id,
    )
    assert [(r["title"], r["published"], r["published_at"] is not None) for r in rows] == [
        ("A", True, True),
        ("April", False, False),
        ("B", True, True),
        ("C", True, True),
    ]
    assert rows[2]["published_at"] == already
    [audit] = await audit_rows(pool, cmd.tool_use_id)
    assert (audit["action"], audit["resource"]) == ("assignment.bulk_published", "assignment")


async def test_bulk_publish_refuses_a_selection_that_changed(pool, runner, owner, coach, studio, march) -> None:
    token = succeeded(await call(runner, owner, "bulk_preview", {**MARCH, "published": False}))["selectionToken"]
    # Published in the meantime: it leaves the "drafts" selection.
    succeeded(await call(runner, coach, "set_published", {"id": march[0]["id"], "published": True}))

    error = failed(
        await call(runner, owner, "bulk_publish", {**MARCH, "published": False, "selectionToken": token}),
        "selection_changed",
    )
    assert "now 1 rows" in error.message
    published = await pool.fetch(
        "SELECT title FROM assignments WHERE organization_id = $1 AND published ORDER BY title", studio.org.id
    )
    assert [r["title"] for r in published] == ["A", "B"]
