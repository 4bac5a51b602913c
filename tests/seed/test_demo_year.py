"""The demo year (`seed_demo_year`) in fresh organizations: enough of everything, the same data for
the same day, nothing changed by a second run, and the examples the seed's prompts talk about."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import asyncpg
import pytest

from spotter_cli.demo_year import YearSummary, seed_demo_year
from spotter_cli.devstack import StackUrls, create_database, drop_database
from spotter_shared.db import migrate
from spotter_shared.studio import upsert_org

TODAY = date(2026, 6, 3)  # a Wednesday, nine days after Memorial Day (Murph)
YEAR_START = TODAY - timedelta(days=365)

# Rows of one organization, for the idempotency snapshot.
ORG_ROWS = {
    "memberships": "SELECT * FROM memberships WHERE organization_id = $1",
    "plans": "SELECT * FROM plans WHERE organization_id = $1",
    "member_plans": "SELECT mp.* FROM member_plans mp JOIN memberships m ON m.id = mp.membership_id WHERE m.organization_id = $1",
    "payments": "SELECT * FROM payments WHERE organization_id = $1",
    "class_types": "SELECT * FROM class_types WHERE organization_id = $1",
    "class_sessions": "SELECT * FROM class_sessions WHERE organization_id = $1",
    "bookings": "SELECT b.* FROM bookings b JOIN class_sessions s ON s.id = b.session_id WHERE s.organization_id = $1",
    "programs": "SELECT * FROM programs WHERE organization_id = $1",
    "program_enrollments": "SELECT e.* FROM program_enrollments e JOIN programs p ON p.id = e.program_id WHERE p.organization_id = $1",
    "workouts": "SELECT * FROM workouts WHERE organization_id = $1",
    "workout_movements": """SELECT wm.* FROM workout_movements wm JOIN workout_sections s ON s.id = wm.section_id
                            JOIN workouts w ON w.id = s.workout_id WHERE w.organization_id = $1""",
    "workout_comments": "SELECT * FROM workout_comments WHERE organization_id = $1",
    "workout_comment_reads": """SELECT r.* FROM workout_comment_reads r JOIN workout_comments c ON c.id = r.comment_id
                                WHERE c.organization_id = $1""",
    "assignments": "SELECT * FROM assignments WHERE organization_id = $1",
    "tasks": "SELECT * FROM tasks WHERE organization_id = $1",
    "program_templates": "SELECT * FROM program_templates WHERE organization_id = $1",
    "forms": "SELECT * FROM forms WHERE organization_id = $1",
    "form_assignments": "SELECT * FROM form_assignments WHERE organization_id = $1",
    "exercises": "SELECT * FROM exercises WHERE organization_id = $1 OR organization_id IS NULL",
}

# What the same day must reproduce, without ids: who the members are, when classes ran and who came,
# what was paid, which workouts were programmed.
AGGREGATES = {
    "members": """SELECT u.full_name, m.status::text, m.plan, m.payment_status::text, m.joined_at, m.ended_on, m.last_visit_at
                  FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.organization_id = $1 ORDER BY 1""",
    "attendance": """SELECT t.name, s.starts_at, b.status::text, count(*), count(b.checked_in_at)
                     FROM bookings b JOIN class_sessions s ON s.id = b.session_id JOIN class_types t ON t.id = s.class_type_id
                     WHERE s.organization_id = $1 GROUP BY 1, 2, 3 ORDER BY 1, 2, 3""",
    "payments": """SELECT date_trunc('month', due_on), status::text, count(*), sum(amount_cents) FROM payments
                   WHERE organization_id = $1 GROUP BY 1, 2 ORDER BY 1, 2""",
    "workouts": """SELECT w.title, w.scheduled_for, p.name, count(wm.id) FROM workouts w JOIN programs p ON p.id = w.program_id
                   LEFT JOIN workout_sections s ON s.workout_id = w.id LEFT JOIN workout_movements wm ON wm.section_id = s.id
                   WHERE w.organization_id = $1 GROUP BY w.id, p.name ORDER BY 2, 1, 3""",
    "comments": """SELECT c.body, c.created_at, count(r.comment_id) FROM workout_comments c
                   LEFT JOIN workout_comment_reads r ON r.comment_id = c.id WHERE c.organization_id = $1
                   GROUP BY c.id ORDER BY 2, 1""",
    "forms": """SELECT f.type_key, a.status::text, count(*) FROM form_assignments a JOIN forms f ON f.id = a.form_id
                WHERE a.organization_id = $1 GROUP BY 1, 2 ORDER BY 1, 2""",
}


@dataclass(frozen=True)
class Years:
    org: uuid.UUID
    twin: uuid.UUID
    first: YearSummary
    twin_summary: YearSummary
    again: YearSummary
    before: dict
    after: dict
    aggregates: dict
    twin_aggregates: dict


@pytest.fixture(scope="module")
async def year_db(stack: StackUrls) -> AsyncIterator[str]:
    name = f"spotter_year_{uuid.uuid4().hex[:10]}"
    url = await create_database(stack.database_url, name)
    await migrate(url)
    yield url
    await drop_database(stack.database_url, name)


@pytest.fixture(scope="module")
async def db(year_db: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(year_db)
    yield conn
    await conn.close()


@pytest.fixture(scope="module")
async def years(db: asyncpg.Connection) -> Years:
    org = await upsert_org(db, name="Year Gym", slug="year-gym", tier="pro", timezone="Asia/Jerusalem")
    twin = await upsert_org(db, name="Twin Gym", slug="twin-gym", tier="pro", timezone="Asia/Jerusalem")
    first = await seed_demo_year(db, org.id, TODAY)
    twin_summary = await seed_demo_year(db, twin.id, TODAY)
    before = await _rows(db, org.id, ORG_ROWS)
    again = await seed_demo_year(db, org.id, TODAY)
    after = await _rows(db, org.id, ORG_ROWS)
    return Years(
        org=uuid.UUID(org.id), twin=uuid.UUID(twin.id), first=first, twin_summary=twin_summary, again=again,
        before=before, after=after,
        aggregates=await _rows(db, org.id, AGGREGATES), twin_aggregates=await _rows(db, twin.id, AGGREGATES),
    )


async def _rows(db: asyncpg.Connection, org_id: str, queries: dict[str, str]) -> dict[str, list[tuple]]:
    return {name: [tuple(r) for r in await db.fetch(sql, uuid.UUID(org_id))] for name, sql in queries.items()}


def _sorted(rows: list[tuple]) -> list[tuple]:
    return sorted(rows, key=repr)


async def test_counts_meet_the_minimums(years: Years) -> None:
    s = years.first
    assert s.members >= 300 and s.active_members > s.members / 2
    assert s.cancelled_members >= 20 and s.paused_members >= 5
    assert s.global_exercises >= 150 and s.studio_exercises >= 3
    assert s.plans >= 5 and s.member_plans >= s.members * 0.9
    assert s.payments >= 2000 and s.payments_paid_cents > 0
    assert s.class_types >= 4 and s.class_sessions >= 2500 and s.cancelled_sessions > 0
    assert s.bookings >= 15_000 and s.attended >= 12_000
    assert s.workouts >= 300 and s.linked_movements >= 0.95 * s.workout_movements
    assert s.comments >= 100 and s.comment_reads > 0
    assert s.assignments > s.published_assignments > 0
    assert s.tasks >= 10 and s.templates == 2 and s.template_workouts >= 10
    assert s.form_assignments >= s.members


async def test_the_same_day_gives_the_same_year(years: Years) -> None:
    assert years.first == years.twin_summary
    for name in AGGREGATES:
        assert years.aggregates[name] == years.twin_aggregates[name], name


async def test_seeding_again_changes_nothing(years: Years) -> None:
    assert years.again == years.first
    for table in ORG_ROWS:
        assert _sorted(years.before[table]) == _sorted(years.after[table]), table


async def test_the_exercise_library_has_the_standard_movements(years: Years, db: asyncpg.Connection) -> None:
    rows = await db.fetch("SELECT name, aliases, modality::text, equipment, muscles FROM exercises WHERE organization_id IS NULL")
    library = {r["name"]: r for r in rows}
    standard = ["Back Squat", "Front Squat", "Overhead Squat", "Deadlift", "Sumo Deadlift High Pull", "Bench Press",
                "Strict Press", "Push Press", "Push Jerk", "Clean", "Power Clean", "Snatch", "Power Snatch", "Clean and Jerk",
                "Thruster", "Pull-up", "Chest-to-bar Pull-up", "Muscle-up", "Toes-to-bar", "Handstand Push-up", "Push-up",
                "Burpee", "Box Jump", "Double-under", "Single-under", "Run", "Row", "Bike", "Ski Erg", "Kettlebell Swing",
                "Wall Ball", "Lunge", "Plank", "Sit-up", "GHD Sit-up", "Air Squat", "Rope Climb"]
    assert set(standard) <= set(library)
    assert "T2B" in library["Toes-to-bar"]["aliases"] and "HSPU" in library["Handstand Push-up"]["aliases"]
    assert {r["modality"] for r in rows} == {"weightlifting", "gymnastics", "monostructural", "strongman", "mobility", "other"}
    assert all(r["muscles"] for r in rows)
    assert "barbell" in library["Back Squat"]["equipment"]
    own = await db.fetch("SELECT name FROM exercises WHERE organization_id = $1", years.org)
    assert own and not {r["name"] for r in own} & set(library)


async def test_members_join_churn_pause_and_the_studio_grows(years: Years, db: asyncpg.Connection) -> None:
    rows = await db.fetch(
        "SELECT status::text, joined_at, ended_on FROM memberships WHERE organization_id = $1 AND role = 'member'", years.org
    )
    assert sum(r["joined_at"] < YEAR_START for r in rows) >= 80
    assert sum(r["joined_at"] >= YEAR_START for r in rows) >= 100
    assert all((r["status"] == "cancelled") == (r["ended_on"] is not None) for r in rows)
    assert sum(r["status"] == "cancelled" and r["ended_on"] >= YEAR_START for r in rows) >= 20

    def active_on(day: date) -> int:
        return sum(r["joined_at"] <= day and (r["ended_on"] is None or r["ended_on"] > day) for r in rows)

    assert active_on(TODAY) > 1.2 * active_on(YEAR_START)
    # At risk: still active, came regularly, then nothing in the last two weeks.
    at_risk = await db.fetchval(
        """SELECT count(*) FROM memberships m WHERE m.organization_id = $1 AND m.status = 'active' AND m.role = 'member'
             AND m.last_visit_at < $2::date - 14
             AND (SELECT count(*) FROM bookings b WHERE b.membership_id = m.id AND b.checked_in_at IS NOT NULL) >= 4""",
        years.org, TODAY,
    )
    assert at_risk >= 10


async def test_plans_history_and_payments_match_the_payment_status(years: Years, db: asyncpg.Connection) -> None:
    plans = {r["name"]: r for r in await db.fetch("SELECT * FROM plans WHERE organization_id = $1", years.org)}
    assert {"Unlimited", "3x/week", "8 per month", "10-class pass", "Drop-in", "Annual"} <= set(plans)
    assert {p["billing_interval"] for p in plans.values()} == {"month", "year", "once"}
    current = await db.fetch(
        """SELECT m.plan, p.name FROM memberships m JOIN member_plans mp ON mp.membership_id = m.id AND mp.ended_on IS NULL
           JOIN plans p ON p.id = mp.plan_id WHERE m.organization_id = $1 AND m.status = 'active'""",
        years.org,
    )
    assert current and all(r["plan"] == r["name"] for r in current)
    switched = await db.fetchval(
        """SELECT count(*) FROM (SELECT mp.membership_id FROM member_plans mp JOIN memberships m ON m.id = mp.membership_id
           WHERE m.organization_id = $1 GROUP BY 1 HAVING count(*) > 1) x""",
        years.org,
    )
    assert switched >= 10

    latest = await db.fetch(
        """SELECT m.payment_status::text AS member, p.status::text AS payment, p.due_on
           FROM memberships m JOIN LATERAL (SELECT * FROM payments p WHERE p.membership_id = m.id
                                            ORDER BY due_on DESC LIMIT 1) p ON true
           WHERE m.organization_id = $1 AND m.role = 'member'""",
        years.org,
    )
    by_status = {s: [r for r in latest if r["member"] == s] for s in ("paid", "due", "overdue", "failed")}
    assert all(by_status.values()), {s: len(r) for s, r in by_status.items()}
    assert all(r["payment"] == "failed" for r in by_status["failed"])
    assert all(r["payment"] == "pending" and TODAY - r["due_on"] <= timedelta(days=6) for r in by_status["due"])
    assert all(r["payment"] == "pending" for r in by_status["overdue"])
    overdue = await db.fetchval(
        """SELECT count(*) FROM memberships m WHERE m.organization_id = $1 AND m.payment_status = 'overdue'
             AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.membership_id = m.id AND p.status = 'pending'
                             AND p.due_on < $2::date - 7)""",
        years.org, TODAY,
    )
    assert overdue == 0
    assert all(r["payment"] in ("paid", "refunded") for r in by_status["paid"])


async def test_the_timetable_runs_all_year_and_two_weeks_ahead(years: Years, db: asyncpg.Connection) -> None:
    types = {r["name"] for r in await db.fetch("SELECT name FROM class_types WHERE organization_id = $1", years.org)}
    assert {"Open Gym", "WOD", "Olympic Lifting", "Mobility"} <= types
    days = await db.fetch(
        """SELECT DISTINCT (starts_at AT TIME ZONE 'Asia/Jerusalem')::date AS day FROM class_sessions
           WHERE organization_id = $1 AND published AND cancelled_at IS NULL""",
        years.org,
    )
    assert {r["day"] for r in days} >= {YEAR_START + timedelta(days=i) for i in range(1, 365 + 13)}
    coaches = await db.fetchval(
        "SELECT count(DISTINCT coach_membership_id) FROM class_sessions WHERE organization_id = $1", years.org
    )
    assert coaches >= 3
    future = await db.fetchrow(
        """SELECT count(*) AS booked, count(b.checked_in_at) AS checked_in FROM bookings b
           JOIN class_sessions s ON s.id = b.session_id WHERE s.organization_id = $1
             AND s.starts_at >= ($2::date)::timestamp AT TIME ZONE 'Asia/Jerusalem'""",
        years.org, TODAY,
    )
    assert future["booked"] > 100 and future["checked_in"] == 0
    # Evenings fill, late mornings do not: popular-class and utilization analytics have something to say.
    by_hour = dict(await db.fetch(
        """SELECT to_char(s.starts_at AT TIME ZONE 'Asia/Jerusalem', 'HH24:MI'), avg(x.came)::float
           FROM class_sessions s JOIN class_types t ON t.id = s.class_type_id
           JOIN LATERAL (SELECT count(b.checked_in_at) AS came FROM bookings b WHERE b.session_id = s.id) x ON true
           WHERE s.organization_id = $1 AND t.name = 'WOD' AND s.starts_at < $2::date GROUP BY 1""",
        years.org, TODAY,
    ))
    assert by_hour["18:00"] > 1.5 * by_hour["09:00"]


async def test_workouts_murph_and_coaching_comments(years: Years, db: asyncpg.Connection) -> None:
    murph = await db.fetch("SELECT scheduled_for FROM workouts WHERE organization_id = $1 AND title = 'Murph'", years.org)
    assert [r["scheduled_for"] for r in murph] == [date(2026, 5, 25)]
    comments = await db.fetch(
        """SELECT c.created_at >= ($2::date - 7)::timestamp AT TIME ZONE 'Asia/Jerusalem' AS recent,
                  m.role::text AS author, EXISTS (SELECT 1 FROM workout_comment_reads r WHERE r.comment_id = c.id) AS read
           FROM workout_comments c JOIN workouts w ON w.id = c.workout_id JOIN programs p ON p.id = w.program_id
           JOIN memberships m ON m.id = c.author_membership_id
           WHERE c.organization_id = $1 AND p.name = 'Coaching' AND p.kind = 'coaching'""",
        years.org, TODAY,
    )
    recent = [c for c in comments if c["recent"]]
    assert len(recent) >= 5 and any(not c["read"] for c in recent)
    assert all(c["read"] for c in comments if not c["recent"])
    assert {c["author"] for c in comments} == {"member", "coach"}


async def test_dani_has_a_plan_a_payment_status_and_a_comment_on_mondays_wod(years: Years, db: asyncpg.Connection) -> None:
    dani = await db.fetch(
        """SELECT m.id, m.plan, m.payment_status::text FROM memberships m JOIN users u ON u.id = m.user_id
           WHERE m.organization_id = $1 AND u.full_name ILIKE 'Dani %'""",
        years.org,
    )
    assert len(dani) == 1 and dani[0]["plan"] == "Personal training" and dani[0]["payment_status"] == "due"
    thread = await db.fetch(
        """SELECT a.title, a.scheduled_for, a.published, c.body, c.author_membership_id FROM assignments a
           JOIN workout_comments c ON c.assignment_id = a.id
           WHERE a.membership_id = $1 AND a.title = 'Monday''s WOD' ORDER BY a.scheduled_for DESC""",
        dani[0]["id"],
    )
    assert thread[0]["scheduled_for"] == date(2026, 6, 1) and thread[0]["published"]
    assert "knee" in thread[0]["body"] and thread[0]["author_membership_id"] == dani[0]["id"]


async def test_assignments_tasks_templates_and_forms(years: Years, db: asyncpg.Connection) -> None:
    published = await db.fetch(
        "SELECT published, scheduled_for >= $2::date AS ahead FROM assignments WHERE organization_id = $1", years.org, TODAY
    )
    assert {(r["published"], r["ahead"]) for r in published} == {(True, False), (True, True), (False, True)}
    templates = await db.fetch(
        """SELECT t.name, count(w.id) AS workouts, min(jsonb_array_length(w.sections)) AS sections FROM program_templates t
           JOIN program_template_workouts w ON w.template_id = t.id WHERE t.organization_id = $1 GROUP BY t.name""",
        years.org,
    )
    assert len(templates) == 2 and all(t["workouts"] >= 8 and t["sections"] >= 1 for t in templates)
    forms = {r["type_key"]: r for r in await db.fetch("SELECT * FROM forms WHERE organization_id = $1", years.org)}
    assert set(forms) == {"waiver", "par_q", "health_update"} and forms["health_update"]["valid_days"] == 90
    statuses = await db.fetch(
        "SELECT DISTINCT status::text FROM form_assignments WHERE organization_id = $1", years.org
    )
    assert {r["status"] for r in statuses} == {"pending", "completed", "expired"}
    tasks = await db.fetch("SELECT status::text, assignee_membership_id FROM tasks WHERE organization_id = $1", years.org)
    assert {t["status"] for t in tasks} == {"open", "done"} and any(t["assignee_membership_id"] for t in tasks)


async def test_nothing_already_done_lies_after_the_start_of_today(years: Years, db: asyncpg.Connection) -> None:
    start = datetime.combine(TODAY, time(), ZoneInfo("Asia/Jerusalem"))
    latest = await db.fetchrow(
        """SELECT (SELECT max(paid_at) FROM payments WHERE organization_id = $1) AS paid,
                  (SELECT max(b.checked_in_at) FROM bookings b JOIN class_sessions s ON s.id = b.session_id
                    WHERE s.organization_id = $1) AS checked_in,
                  (SELECT max(b.booked_at) FROM bookings b JOIN class_sessions s ON s.id = b.session_id
                    WHERE s.organization_id = $1) AS booked,
                  (SELECT max(created_at) FROM workout_comments WHERE organization_id = $1) AS commented,
                  (SELECT max(r.read_at) FROM workout_comment_reads r JOIN workout_comments c ON c.id = r.comment_id
                    WHERE c.organization_id = $1) AS read,
                  (SELECT max(published_at) FROM assignments WHERE organization_id = $1) AS published,
                  (SELECT max(created_at) FROM workouts WHERE organization_id = $1) AS written,
                  (SELECT max(cancelled_at) FROM class_sessions WHERE organization_id = $1) AS cancelled,
                  (SELECT max(completed_at) FROM form_assignments WHERE organization_id = $1) AS completed,
                  (SELECT max(last_visit_at) FROM memberships WHERE organization_id = $1) AS visited""",
        years.org,
    )
    assert all(value is not None and value < start for value in latest.values()), dict(latest)
