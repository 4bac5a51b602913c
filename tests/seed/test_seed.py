"""The demo seed: idempotent, complete, and its two studios kept apart.

The seed writes fixed slugs and emails, so it runs in a database of its own rather than the
session's shared one (where it would collide with any other test seeding it)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from spotter_cli.devstack import StackUrls, create_database, drop_database
from spotter_cli.seed import DemoSummary, seed_demo
from spotter_shared.db import migrate

TABLES = (
    "organizations",
    "users",
    "memberships",
    "programs",
    "workouts",
    "workout_sections",
    "workout_movements",
    "tasks",
    "program_enrollments",
    "exercises",
    "plans",
    "member_plans",
    "payments",
    "class_types",
    "class_sessions",
    "bookings",
    "workout_comments",
    "workout_comment_reads",
    "assignments",
    "program_templates",
    "program_template_workouts",
    "forms",
    "form_assignments",
)


@pytest.fixture(scope="module")
async def seed_db(stack: StackUrls) -> AsyncIterator[str]:
    name = f"spotter_seed_{uuid.uuid4().hex[:10]}"
    url = await create_database(stack.database_url, name)
    await migrate(url)
    yield url
    await drop_database(stack.database_url, name)


@pytest.fixture(scope="module")
async def seeded(seed_db: str) -> tuple[DemoSummary, DemoSummary, dict, dict]:
    first = await seed_demo(seed_db)
    before = await _snapshot(seed_db)
    second = await seed_demo(seed_db)
    after = await _snapshot(seed_db)
    return first, second, before, after


async def _snapshot(url: str) -> dict[str, list[tuple]]:
    conn = await asyncpg.connect(url)
    try:
        return {t: [tuple(r) for r in await conn.fetch(f"SELECT * FROM {t} ORDER BY 1, 2")] for t in TABLES}
    finally:
        await conn.close()


async def _fetch(url: str, sql: str, *args) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetch(sql, *args)
    finally:
        await conn.close()


async def test_seeding_twice_changes_nothing(seeded) -> None:
    first, second, before, after = seeded
    assert first == second
    assert before == after
    assert all(before[t] for t in TABLES)


async def test_demo_gym_and_its_staff(seeded, seed_db: str) -> None:
    summary = seeded[0]
    org = (await _fetch(seed_db, "SELECT * FROM organizations WHERE slug = 'demo-gym'"))[0]
    assert (str(org["id"]), org["name"], org["tier"], org["timezone"], org["locale"]) == (
        summary.demo_org_id, "Demo Gym", "pro", "Asia/Jerusalem", "en",
    )
    logins = {"owner@demo.gym": "owner", "admin@demo.gym": "admin", "coach@demo.gym": "coach", "member@demo.gym": "member"}
    rows = await _fetch(
        seed_db,
        """SELECT u.email, m.role::text FROM memberships m JOIN users u ON u.id = m.user_id
           WHERE m.organization_id = $1 AND u.email = ANY($2::text[])""",
        org["id"], list(logins),
    )
    assert {r["email"]: r["role"] for r in rows} == logins
    assert summary.demo_staff == 6  # the three logins and the demo year's three more coaches
    assert {"owner@demo.gym", "admin@demo.gym", "coach@demo.gym", "member@demo.gym"} <= set(summary.logins)


async def test_demo_members_are_many_varied_and_include_two_saars(seeded, seed_db: str) -> None:
    summary = seeded[0]
    members = await _fetch(
        seed_db,
        """SELECT u.full_name, m.status::text, m.plan, m.payment_status::text, m.phone, m.joined_at,
                  m.last_visit_at < now() - interval '30 days' AS at_risk
           FROM memberships m JOIN users u ON u.id = m.user_id
           WHERE m.organization_id = $1 AND m.role = 'member'""",
        uuid.UUID(summary.demo_org_id),
    )
    assert len(members) == summary.demo_members >= 41  # the member login plus at least 40 more
    assert sorted(r["full_name"] for r in members if r["full_name"].lower().startswith("saar")) == ["Saar Cohen", "Saar Levi"]
    assert {r["status"] for r in members} == {"active", "paused", "cancelled", "pending"}
    assert {r["payment_status"] for r in members} == {"paid", "due", "overdue", "failed", "none"}
    assert {"Unlimited", "3x/week", "2x/week", "10-class pass", "Drop-in", "Personal training"} <= {r["plan"] for r in members}
    assert sum(r["status"] == "active" for r in members) > len(members) / 2
    assert any(r["at_risk"] for r in members)
    assert all(r["phone"] for r in members)
    assert len({r["phone"] for r in members}) == len(members)
    joined = sorted(r["joined_at"] for r in members)
    assert (joined[-1] - joined[0]).days > 600


async def test_demo_programs(seeded, seed_db: str) -> None:
    summary = seeded[0]
    programs = await _fetch(
        seed_db, "SELECT name, kind::text, description FROM programs WHERE organization_id = $1", uuid.UUID(summary.demo_org_id)
    )
    assert len(programs) == summary.demo_programs >= 4
    assert {"CrossFit", "Olympic Weightlifting", "Open Gym", "Personal Coaching"} <= {p["name"] for p in programs}
    assert {p["kind"] for p in programs} == {"group", "coaching", "feed"}
    assert all(p["description"] for p in programs)


async def test_other_gym_is_lite_and_separate(seeded, seed_db: str) -> None:
    summary = seeded[0]
    org = (await _fetch(seed_db, "SELECT * FROM organizations WHERE slug = 'other-gym'"))[0]
    assert (str(org["id"]), org["name"], org["tier"]) == (summary.other_org_id, "Other Gym", "lite")
    people = await _fetch(
        seed_db,
        """SELECT u.email, u.full_name, m.role::text FROM memberships m JOIN users u ON u.id = m.user_id
           WHERE m.organization_id = $1""",
        org["id"],
    )
    assert ("owner@other.gym", "owner") in {(p["email"], p["role"]) for p in people}
    assert summary.other_members == sum(p["role"] == "member" for p in people) >= 3
    assert any(p["full_name"].startswith("Saar ") and p["full_name"] not in ("Saar Cohen", "Saar Levi") for p in people)
    assert 1 <= summary.other_programs <= 2
    # Nobody belongs to both studios.
    shared = await _fetch(
        seed_db,
        "SELECT user_id FROM memberships WHERE organization_id IN ($1, $2) GROUP BY user_id HAVING count(*) > 1",
        uuid.UUID(summary.demo_org_id), org["id"],
    )
    assert shared == []


async def test_demo_workouts_are_structured_and_freeform(seeded, seed_db: str) -> None:
    summary = seeded[0]
    workouts = await _fetch(
        seed_db,
        """SELECT w.title, w.kind::text, w.scheduled_for, w.description, p.name AS program
           FROM workouts w LEFT JOIN programs p ON p.id = w.program_id
           WHERE w.organization_id = $1 AND w.deleted_at IS NULL""",
        uuid.UUID(summary.demo_org_id),
    )
    assert len(workouts) == summary.demo_workouts >= 4
    assert {w["kind"] for w in workouts} == {"structured", "freeform"}
    assert all(w["program"] for w in workouts)  # each is attached to one of the demo programs
    monday = next(w for w in workouts if w["title"] == "Monday WOD")
    assert (monday["program"], monday["scheduled_for"].weekday()) == ("CrossFit", 0)
    assert all(w["description"] for w in workouts if w["kind"] == "freeform")

    movements = await _fetch(
        seed_db,
        """SELECT s.position AS section, s.name AS section_name, s.format, m.position, m.name, m.reps, m.distance_m
           FROM workouts w JOIN workout_sections s ON s.workout_id = w.id
           JOIN workout_movements m ON m.section_id = s.id
           WHERE w.organization_id = $1 AND w.title = 'Monday WOD'
           ORDER BY s.position, m.position""",
        uuid.UUID(summary.demo_org_id),
    )
    metcon = [(m["name"], m["reps"], m["distance_m"]) for m in movements if m["format"] == "3 rounds"]
    assert metcon == [("Run", None, 200), ("Double-under", 30, None)]
    empty = await _fetch(
        seed_db,
        """SELECT s.id FROM workout_sections s JOIN workouts w ON w.id = s.workout_id
           WHERE w.kind = 'structured' AND NOT EXISTS (SELECT 1 FROM workout_movements m WHERE m.section_id = s.id)""",
    )
    assert empty == []


async def test_demo_tasks_and_enrollments(seeded, seed_db: str) -> None:
    summary = seeded[0]
    tasks = await _fetch(
        seed_db,
        """SELECT t.title, t.status::text, t.completed_at, t.due_date, t.assignee_membership_id, m.organization_id
           FROM tasks t LEFT JOIN memberships m ON m.id = t.assignee_membership_id
           WHERE t.organization_id = $1""",
        uuid.UUID(summary.demo_org_id),
    )
    assert len(tasks) == summary.demo_tasks >= 4
    assert {t["status"] for t in tasks} == {"open", "done"}
    assert all((t["status"] == "done") == (t["completed_at"] is not None) for t in tasks)
    assert any(t["assignee_membership_id"] is None for t in tasks)
    assert {str(t["organization_id"]) for t in tasks if t["assignee_membership_id"]} == {summary.demo_org_id}

    enrollments = await _fetch(
        seed_db,
        """SELECT p.kind::text, p.organization_id AS program_org, m.organization_id AS member_org
           FROM program_enrollments e JOIN programs p ON p.id = e.program_id
           JOIN memberships m ON m.id = e.membership_id
           WHERE p.organization_id = $1 OR m.organization_id = $1""",
        uuid.UUID(summary.demo_org_id),
    )
    assert len(enrollments) == summary.demo_enrollments >= 4
    assert {e["kind"] for e in enrollments} == {"coaching", "feed"}
    assert all(e["program_org"] == e["member_org"] for e in enrollments)


async def test_other_gym_has_look_alike_workouts_and_tasks(seeded, seed_db: str) -> None:
    summary = seeded[0]
    rows = await _fetch(
        seed_db,
        """SELECT (SELECT array_agg(title) FROM workouts WHERE organization_id = $1) AS workouts,
                  (SELECT array_agg(title) FROM tasks WHERE organization_id = $1) AS tasks""",
        uuid.UUID(summary.other_org_id),
    )
    assert "Monday WOD" in rows[0]["workouts"] and "Order new jump ropes" in rows[0]["tasks"]


async def test_demo_gym_has_its_year_and_the_examples(seeded, seed_db: str) -> None:
    summary = seeded[0]
    org = uuid.UUID(summary.demo_org_id)
    year = summary.demo_year
    assert year.members == summary.demo_members >= 300 and year.global_exercises >= 150
    assert year.class_sessions >= 2500 and year.bookings >= 15_000 and year.payments >= 2000
    dani = await _fetch(
        seed_db,
        """SELECT m.plan, m.payment_status::text FROM memberships m JOIN users u ON u.id = m.user_id
           WHERE m.organization_id = $1 AND u.full_name LIKE 'Dani %'""",
        org,
    )
    assert [(d["plan"], d["payment_status"]) for d in dani] == [("Personal training", "due")]
    said = await _fetch(
        seed_db,
        """SELECT c.body FROM workout_comments c JOIN assignments a ON a.id = c.assignment_id
           JOIN memberships m ON m.id = a.membership_id JOIN users u ON u.id = m.user_id
           WHERE a.organization_id = $1 AND u.full_name LIKE 'Dani %' AND a.title = 'Monday''s WOD'
             AND c.author_membership_id = m.id""",
        org,
    )
    assert said
    assert await _fetch(seed_db, "SELECT 1 FROM workouts WHERE organization_id = $1 AND title = 'Murph'", org)
    assert await _fetch(seed_db, "SELECT 1 FROM class_types WHERE organization_id = $1 AND name = 'Open Gym'", org)
    coaching = await _fetch(
        seed_db,
        """SELECT EXISTS (SELECT 1 FROM workout_comment_reads r JOIN memberships co ON co.id = r.coach_membership_id
                          JOIN users cu ON cu.id = co.user_id
                          WHERE r.comment_id = c.id AND cu.email = 'coach@demo.gym') AS read
           FROM workout_comments c JOIN workouts w ON w.id = c.workout_id JOIN programs p ON p.id = w.program_id
           WHERE c.organization_id = $1 AND p.name = 'Coaching' AND c.created_at > now() - interval '7 days'""",
        org,
    )
    assert coaching and any(not c["read"] for c in coaching)
