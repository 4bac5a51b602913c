"""The `program_templates` and `forms` routers over a real Postgres, through ToolRunner.execute."""

from __future__ import annotations

import uuid
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import asyncpg
import pytest

from spotter_tool_runner.runner import ToolRunner

from tests.factories import Studio

from .helpers import Conversation, audit_rows, failed, new_conversation, succeeded

METCON = {
    "name": "Metcon",
    "format": "3 rounds",
    "movements": [{"name": "Run", "distanceM": 200}, {"name": "Double-under", "reps": 30}],
}
ROW_TEST = {"name": "Test", "movements": [{"name": "Row", "durationS": 600}]}
STRENGTH = {
    "name": "Strength",
    "format": "5x5",
    "notes": "Build to a heavy 5.",
    "movements": [{"name": "Back squat", "reps": 5, "loadKg": 82.5}],
}
BASE_BUILDING = {
    "name": "Base Building",
    "description": "Four weeks of squats and engine.",
    "programKind": "coaching",
    "workouts": [
        {"dayOffset": 0, "title": "Squat day", "sections": [STRENGTH, METCON]},
        {"dayOffset": 2, "title": "Engine", "description": "Row 5k easy"},
        {"dayOffset": 7, "title": "Squat day", "sections": [STRENGTH]},
    ],
}


@pytest.fixture
async def conv(pool: asyncpg.Pool, studio: Studio) -> Conversation:
    return await new_conversation(pool, studio, studio.coach)


async def templates(runner: ToolRunner, conv: Conversation, action: str, input: dict | None = None):
    return await runner.execute(conv.command("program_templates", action, input))


async def forms(runner: ToolRunner, conv: Conversation, action: str, input: dict | None = None):
    return await runner.execute(conv.command("forms", action, input))


async def workouts_of(pool: asyncpg.Pool, program_id: str) -> list[tuple]:
    """(day, title, description, kind, sections) of a program's live workouts, sections as position-free tuples."""
    rows = await pool.fetch(
        """SELECT w.scheduled_for, w.title, w.description, w.kind::text AS kind,
                  coalesce((SELECT jsonb_agg(jsonb_build_object(
                              'name', s.name, 'format', s.format, 'notes', s.notes,
                              'movements', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                                              'name', m.name, 'reps', m.reps, 'distance_m', m.distance_m,
                                              'load_kg', m.load_kg, 'duration_s', m.duration_s, 'notes', m.notes)
                                            ORDER BY m.position), '[]') FROM workout_movements m
                                             WHERE m.section_id = s.id)) ORDER BY s.position)
                              FROM workout_sections s WHERE s.workout_id = w.id), '[]') AS sections
             FROM workouts w WHERE w.program_id = $1 AND w.deleted_at IS NULL
            ORDER BY w.scheduled_for, w.title""",
        uuid.UUID(program_id),
    )
    return [(r["scheduled_for"], r["title"], r["description"], r["kind"], r["sections"]) for r in rows]


# program_templates.create ----------------------------------------------------------------------------


async def test_create_stores_the_workouts_in_the_workouts_shape(pool, runner, conv, studio) -> None:
    cmd = conv.command("program_templates", "create", BASE_BUILDING)
    outcome = await runner.execute(cmd)

    out = succeeded(outcome)
    assert not outcome.inverse_available  # seed 000: no inverse
    assert out == {
        "id": out["id"],
        "name": "Base Building",
        "description": "Four weeks of squats and engine.",
        "programKind": "coaching",
        "workoutCount": 3,
        "spanDays": 8,
        "workouts": [
            {"dayOffset": 0, "title": "Squat day", "sectionCount": 2},
            {"dayOffset": 2, "title": "Engine", "sectionCount": 0},
            {"dayOffset": 7, "title": "Squat day", "sectionCount": 1},
        ],
    }
    row = await pool.fetchrow("SELECT * FROM program_templates WHERE id = $1", uuid.UUID(out["id"]))
    assert (str(row["organization_id"]), str(row["created_by"])) == (studio.org.id, studio.coach.user_id)
    stored = await pool.fetchval(
        "SELECT sections FROM program_template_workouts WHERE template_id = $1 AND day_offset = 0", row["id"]
    )
    assert stored == [STRENGTH, METCON]  # camelCase, nulls left out: what workouts__create takes
    [audit] = await audit_rows(pool, cmd.tool_use_id)
    assert (audit["action"], audit["resource"], audit["resource_id"]) == (
        "program_template.created",
        "program_template",
        out["id"],
    )


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"workouts": []}, "at least 1"),
        ({"workouts": [{"dayOffset": -1, "title": "x", "description": "x"}]}, "greater than or equal to 0"),
        ({"workouts": [{"dayOffset": 0, "title": "Empty"}]}, "description or structured sections"),
        (
            {
                "workouts": [
                    {"dayOffset": 1, "title": "A", "description": "x"},
                    {"dayOffset": 1, "title": "a", "description": "y"},
                ]
            },
            "different titles",
        ),
        ({"programKind": "bootcamp"}, "programKind"),
        ({"name": "  "}, "name"),
        ({"color": "red"}, "color"),
    ],
)
async def test_invalid_templates_are_refused(pool, runner, conv, change, problem) -> None:
    name = f"Invalid {uuid.uuid4().hex[:6]}"
    error = failed(await templates(runner, conv, "create", {**BASE_BUILDING, "name": name, **change}), "invalid_input")
    assert problem in error.message
    assert await pool.fetchval("SELECT count(*) FROM program_templates WHERE name = $1", name) == 0


async def test_template_names_are_unique_case_insensitively(pool, runner, conv, studio, other_studio) -> None:
    first = succeeded(await templates(runner, conv, "create", BASE_BUILDING))
    error = failed(await templates(runner, conv, "create", {**BASE_BUILDING, "name": "base BUILDING"}), "conflict")
    assert first["id"] in error.message
    assert await pool.fetchval(
        "SELECT count(*) FROM program_templates WHERE organization_id = $1", uuid.UUID(studio.org.id)
    ) == 1
    # Another studio may use the same name.
    theirs = await new_conversation(pool, other_studio, other_studio.coach)
    succeeded(await templates(runner, theirs, "create", BASE_BUILDING))


# program_templates.list ------------------------------------------------------------------------------


async def test_list_counts_workouts_and_span_and_stays_in_the_org(pool, runner, conv, other_studio) -> None:
    base = succeeded(await templates(runner, conv, "create", BASE_BUILDING))
    hyrox = succeeded(
        await templates(
            runner,
            conv,
            "create",
            {"name": "Hyrox prep", "workouts": [{"dayOffset": 20, "title": "Sim", "description": "Half sim"}]},
        )
    )
    gone = succeeded(await templates(runner, conv, "create", {**BASE_BUILDING, "name": "Old"}))
    await pool.execute("UPDATE program_templates SET deleted_at = now() WHERE id = $1", uuid.UUID(gone["id"]))
    theirs = await new_conversation(pool, other_studio, other_studio.coach)
    succeeded(await templates(runner, theirs, "create", {**BASE_BUILDING, "name": "Theirs"}))

    listed = succeeded(await templates(runner, conv, "list"))

    assert listed == {
        "templates": [
            {
                "id": base["id"],
                "name": "Base Building",
                "description": "Four weeks of squats and engine.",
                "programKind": "coaching",
                "workoutCount": 3,
                "spanDays": 8,
            },
            {
                "id": hyrox["id"],
                "name": "Hyrox prep",
                "description": None,
                "programKind": "group",
                "workoutCount": 1,
                "spanDays": 21,
            },
        ],
        "total": 2,
    }
    groups = succeeded(await templates(runner, conv, "list", {"programKind": "group"}))
    assert ([t["name"] for t in groups["templates"]], groups["total"]) == (["Hyrox prep"], 1)
    limited = succeeded(await templates(runner, conv, "list", {"limit": 1}))
    assert (len(limited["templates"]), limited["total"]) == (1, 2)
    failed(await templates(runner, conv, "list", {"limit": 0}), "invalid_input")


# program_templates.apply -----------------------------------------------------------------------------


async def test_apply_into_an_existing_program_creates_the_workouts_on_their_days(pool, runner, conv, studio) -> None:
    template = succeeded(await templates(runner, conv, "create", BASE_BUILDING))
    program_id = studio.programs["Olympic Lifting"]
    cmd = conv.command(
        "program_templates", "apply", {"id": template["id"], "startDate": "2026-03-02", "programId": program_id}
    )

    out = succeeded(await runner.execute(cmd))

    assert out == {
        "id": template["id"],
        "templateName": "Base Building",
        "programId": program_id,
        "programName": "Olympic Lifting",
        "programCreated": False,
        "startDate": "2026-03-02",
        "endDate": "2026-03-09",
        "workoutsCreated": 3,
        "workoutIds": out["workoutIds"],
    }
    strength = {"name": "Strength", "format": "5x5", "notes": "Build to a heavy 5.", "movements": [
        {"name": "Back squat", "reps": 5, "distance_m": None, "load_kg": 82.5, "duration_s": None, "notes": None}
    ]}
    metcon = {"name": "Metcon", "format": "3 rounds", "notes": None, "movements": [
        {"name": "Run", "reps": None, "distance_m": 200, "load_kg": None, "duration_s": None, "notes": None},
        {"name": "Double-under", "reps": 30, "distance_m": None, "load_kg": None, "duration_s": None, "notes": None},
    ]}
    assert await workouts_of(pool, program_id) == [
        (date(2026, 3, 2), "Squat day", None, "structured", [strength, metcon]),
        (date(2026, 3, 4), "Engine", "Row 5k easy", "freeform", []),
        (date(2026, 3, 9), "Squat day", None, "structured", [strength]),
    ]
    rows = await pool.fetch(
        "SELECT id, organization_id, created_by FROM workouts WHERE id = ANY($1::uuid[])", out["workoutIds"]
    )
    assert {(str(r["organization_id"]), str(r["created_by"])) for r in rows} == {(studio.org.id, studio.coach.user_id)}
    assert len(rows) == 3
    [audit] = await audit_rows(pool, cmd.tool_use_id)
    assert (audit["action"], audit["resource"], audit["resource_id"]) == (
        "program_template.applied",
        "program_template",
        template["id"],
    )


async def test_apply_into_a_new_program_takes_the_templates_kind(pool, runner, conv, studio) -> None:
    template = succeeded(await templates(runner, conv, "create", BASE_BUILDING))

    out = succeeded(
        await templates(
            runner, conv, "apply", {"id": template["id"], "startDate": "2026-04-06", "programName": "Base Block"}
        )
    )

    assert (out["programName"], out["programCreated"], out["workoutsCreated"]) == ("Base Block", True, 3)
    program = await pool.fetchrow("SELECT * FROM programs WHERE id = $1", uuid.UUID(out["programId"]))
    assert (str(program["organization_id"]), program["kind"], program["description"]) == (
        studio.org.id,
        "coaching",
        "Four weeks of squats and engine.",
    )
    assert [(w[0], w[1]) for w in await workouts_of(pool, out["programId"])] == [
        (date(2026, 4, 6), "Squat day"),
        (date(2026, 4, 8), "Engine"),
        (date(2026, 4, 13), "Squat day"),
    ]


async def test_apply_refuses_a_taken_program_name_and_writes_nothing(pool, runner, conv, studio) -> None:
    template = succeeded(await templates(runner, conv, "create", BASE_BUILDING))
    count = "SELECT count(*) FROM workouts WHERE organization_id = $1"
    before = await pool.fetchval(count, uuid.UUID(studio.org.id))

    error = failed(
        await templates(
            runner, conv, "apply", {"id": template["id"], "startDate": "2026-04-06", "programName": "crossfit"}
        ),
        "conflict",
    )

    assert "already exists" in error.message
    assert await pool.fetchval(count, uuid.UUID(studio.org.id)) == before


@pytest.mark.parametrize(
    "change",
    [
        {},  # neither programId nor programName
        {"programId": str(uuid.uuid4()), "programName": "Both"},
        {"programName": "X", "startDate": "next monday"},
    ],
)
async def test_apply_needs_exactly_one_target_and_a_date(runner, conv, change) -> None:
    template = succeeded(await templates(runner, conv, "create", BASE_BUILDING))
    input = {"id": template["id"], "startDate": "2026-04-06", **change}
    failed(await templates(runner, conv, "apply", input), "invalid_input")


async def test_apply_does_not_reach_another_orgs_template_or_program(pool, runner, conv, studio, other_studio) -> None:
    theirs = await new_conversation(pool, other_studio, other_studio.coach)
    their_template = succeeded(await templates(runner, theirs, "create", BASE_BUILDING))
    mine = succeeded(await templates(runner, conv, "create", BASE_BUILDING))

    error = failed(
        await templates(
            runner, conv, "apply", {"id": their_template["id"], "startDate": "2026-04-06", "programName": "Stolen"}
        ),
        "not_found",
    )
    assert "program_templates__list" in error.hint
    failed(
        await templates(
            runner,
            conv,
            "apply",
            {"id": mine["id"], "startDate": "2026-04-06", "programId": other_studio.programs["CrossFit"]},
        ),
        "not_found",
    )
    assert await pool.fetchval("SELECT count(*) FROM programs WHERE name = 'Stolen'") == 0
    assert await workouts_of(pool, other_studio.programs["CrossFit"]) == []


# program_templates.from_history ----------------------------------------------------------------------


async def _history(runner: ToolRunner, conv: Conversation, program_id: str) -> None:
    """Three weeks of a program's workouts, one outside the range, one deleted, one in another program."""

    async def workout(title: str, day: str, program: str = program_id, **content) -> dict:
        body = content or {"description": f"{title} text"}
        return succeeded(
            await runner.execute(
                conv.command("workouts", "create", {"title": title, "scheduledFor": day, "programId": program, **body})
            )
        )

    await workout("Week 1 squat", "2026-01-05", sections=[STRENGTH, METCON])
    await workout("Week 1 engine", "2026-01-07", description="Row 5k", sections=[METCON])
    await workout("Week 1 engine PM", "2026-01-07")
    await workout("Week 3 test", "2026-01-19", sections=[ROW_TEST])
    await workout("Too late", "2026-01-26")
    await workout("Too early", "2026-01-04")
    deleted = await workout("Deleted", "2026-01-06")
    await runner.execute(conv.command("workouts", "delete", {"id": deleted["id"]}))


async def test_from_history_round_trips_through_apply(pool, runner, conv, studio) -> None:
    crossfit = studio.programs["CrossFit"]
    await _history(runner, conv, crossfit)
    await runner.execute(
        conv.command(
            "workouts",
            "create",
            {
                "title": "Other program",
                "description": "x",
                "scheduledFor": "2026-01-08",
                "programId": studio.programs["Olympic Lifting"],
            },
        )
    )
    cmd = conv.command(
        "program_templates",
        "from_history",
        {"programId": crossfit, "from": "2026-01-05", "to": "2026-01-25", "name": "January block"},
    )

    derived = succeeded(await runner.execute(cmd))

    assert derived == {
        "id": derived["id"],
        "name": "January block",
        "description": "CrossFit classes",  # the program's, when none is given
        "programKind": "group",
        "workoutCount": 4,
        "spanDays": 15,
        "workouts": [
            {"dayOffset": 0, "title": "Week 1 squat", "sectionCount": 2},
            {"dayOffset": 2, "title": "Week 1 engine", "sectionCount": 1},
            {"dayOffset": 2, "title": "Week 1 engine PM", "sectionCount": 0},
            {"dayOffset": 14, "title": "Week 3 test", "sectionCount": 1},
        ],
    }
    [audit] = await audit_rows(pool, cmd.tool_use_id)
    assert (audit["action"], audit["resource"], audit["resource_id"]) == (
        "program_template.derived",
        "program_template",
        derived["id"],
    )

    applied = succeeded(
        await templates(
            runner, conv, "apply", {"id": derived["id"], "startDate": "2026-06-01", "programName": "June block"}
        )
    )

    originals = [w for w in await workouts_of(pool, crossfit) if date(2026, 1, 5) <= w[0] <= date(2026, 1, 25)]
    copies = await workouts_of(pool, applied["programId"])
    shift = date(2026, 6, 1) - date(2026, 1, 5)
    assert copies == [(day + shift, *rest) for day, *rest in originals]
    assert len(copies) == applied["workoutsCreated"] == 4


async def test_from_history_refuses_empty_ranges_taken_names_and_bad_dates(pool, runner, conv, studio) -> None:
    crossfit = studio.programs["CrossFit"]
    await _history(runner, conv, crossfit)
    succeeded(await templates(runner, conv, "create", BASE_BUILDING))

    def derive(**input):
        return templates(
            runner, conv, "from_history", {"programId": crossfit, "from": "2026-01-05", "to": "2026-01-25", **input}
        )

    failed(await derive(name="Base building"), "conflict")
    failed(await derive(name="Nothing", **{"from": "2025-06-01", "to": "2025-06-30"}), "no_workouts")
    failed(await derive(name="Backwards", **{"from": "2026-01-25", "to": "2026-01-05"}), "invalid_input")
    failed(await derive(name="Too long", **{"from": "2025-01-01", "to": "2026-01-25"}), "invalid_input")
    failed(await derive(name="Theirs", programId=str(uuid.uuid4())), "not_found")
    assert await pool.fetchval(
        "SELECT count(*) FROM program_templates WHERE organization_id = $1", uuid.UUID(studio.org.id)
    ) == 1


async def test_from_history_refuses_two_same_titled_workouts_on_a_day(pool, runner, conv, studio) -> None:
    crossfit = studio.programs["CrossFit"]
    for _ in range(2):
        succeeded(
            await runner.execute(
                conv.command(
                    "workouts",
                    "create",
                    {"title": "WOD", "description": "x", "scheduledFor": "2026-02-02", "programId": crossfit},
                )
            )
        )
    error = failed(
        await templates(
            runner,
            conv,
            "from_history",
            {"programId": crossfit, "from": "2026-02-01", "to": "2026-02-07", "name": "Dup"},
        ),
        "conflict",
    )
    assert "2026-02-02" in error.message
    assert await pool.fetchval("SELECT count(*) FROM program_templates WHERE name = 'Dup'") == 0


# forms ------------------------------------------------------------------------------------------------

STUDIO_TZ = ZoneInfo("Asia/Jerusalem")
NOW = datetime.now(ZoneInfo("UTC"))
TODAY = NOW.astimezone(STUDIO_TZ).date()


def local(days_ago: int) -> str:
    """That many days before NOW, as the tools return it: ISO 8601 in the studio's time zone."""
    return (NOW - timedelta(days=days_ago)).astimezone(STUDIO_TZ).isoformat()


async def _form(pool: asyncpg.Pool, studio: Studio, type_key: str, title: str, **columns) -> uuid.UUID:
    values = {"required": True, "valid_days": None, "deleted_at": None, **columns}
    return await pool.fetchval(
        """INSERT INTO forms (organization_id, type_key, title, required, valid_days, deleted_at)
           VALUES ($1, $2, $3, $4, $5, $6) RETURNING id""",
        uuid.UUID(studio.org.id),
        type_key,
        title,
        *values.values(),
    )


async def _assign(
    pool: asyncpg.Pool,
    studio: Studio,
    form_id: uuid.UUID,
    membership_id: str,
    *,
    status: str = "pending",
    sent: int = 10,
    due_in_days: int | None = None,
    done: tuple[int, int] | None = None,
) -> uuid.UUID:
    """A form sent `sent` days ago; `done`: (days ago it was sent, days ago it was completed)."""
    sent, completed = done if done is not None else (sent, None)
    return await pool.fetchval(
        """INSERT INTO form_assignments
                  (organization_id, form_id, membership_id, status, assigned_at, due_on, completed_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id""",
        uuid.UUID(studio.org.id),
        form_id,
        uuid.UUID(membership_id),
        "completed" if done is not None else status,
        NOW - timedelta(days=sent),
        None if due_in_days is None else TODAY + timedelta(days=due_in_days),
        None if completed is None else NOW - timedelta(days=completed),
    )


@pytest.fixture
async def paperwork(pool: asyncpg.Pool, studio: Studio, other_studio: Studio) -> dict[str, uuid.UUID]:
    """Required waiver (valid forever, an old deleted version too), PAR-Q (365 days), health update
    (30 days), emergency contact (never sent to anyone); an optional photo release."""
    await pool.execute("UPDATE organizations SET timezone = $2 WHERE id = $1", uuid.UUID(studio.org.id), str(STUDIO_TZ))
    forms = {
        "waiver": await _form(pool, studio, "waiver", "Liability waiver 2026"),
        "old_waiver": await _form(pool, studio, "waiver", "Liability waiver 2025", deleted_at=NOW - timedelta(days=60)),
        "par_q": await _form(pool, studio, "par_q", "PAR-Q", valid_days=365),
        "health": await _form(pool, studio, "health_update", "Health update", valid_days=30),
        "contact": await _form(pool, studio, "emergency_contact", "Emergency contact"),
        "photo": await _form(pool, studio, "photo_release", "Photo release", required=False),
    }
    theirs = await _form(pool, other_studio, "waiver", "Their waiver")
    await _assign(pool, other_studio, theirs, other_studio.people["Saar Cohen"].membership_id)
    return forms


async def test_compliance_covers_every_status(pool, runner, conv, studio, paperwork) -> None:
    saar = studio.people["Saar Cohen"].membership_id
    waiver = await _assign(pool, studio, paperwork["waiver"], saar, done=(200, 199))
    # The latest PAR-Q assignment counts, and it is past its 365 days.
    await _assign(pool, studio, paperwork["par_q"], saar, done=(900, 899))
    par_q = await _assign(pool, studio, paperwork["par_q"], saar, done=(400, 366))
    health = await _assign(pool, studio, paperwork["health"], saar, sent=3, due_in_days=4)
    await _assign(pool, studio, paperwork["photo"], saar)

    out = succeeded(await forms(runner, conv, "compliance_status_for_member", {"membershipId": saar}))

    assert out == {
        "membershipId": saar,
        "memberName": "Saar Cohen",
        "compliant": False,
        "forms": [
            {
                "typeKey": "emergency_contact",
                "formTitle": "Emergency contact",
                "status": "missing",
                "assignmentId": None,
                "assignedAt": None,
                "dueOn": None,
                "completedAt": None,
                "validUntil": None,
            },
            {
                "typeKey": "health_update",
                "formTitle": "Health update",
                "status": "pending",
                "assignmentId": str(health),
                "assignedAt": local(3),
                "dueOn": out["forms"][1]["dueOn"],
                "completedAt": None,
                "validUntil": None,
            },
            {
                "typeKey": "par_q",
                "formTitle": "PAR-Q",
                "status": "expired",
                "assignmentId": str(par_q),
                "assignedAt": local(400),
                "dueOn": None,
                "completedAt": local(366),
                "validUntil": local(1),
            },
            {
                "typeKey": "waiver",
                "formTitle": "Liability waiver 2026",
                "status": "compliant",
                "assignmentId": str(waiver),
                "assignedAt": local(200),
                "dueOn": None,
                "completedAt": local(199),
                "validUntil": None,
            },
        ],
    }
    assert out["forms"][1]["dueOn"] == (TODAY + timedelta(days=4)).isoformat()
    assert out["forms"][2]["validUntil"].endswith(("+02:00", "+03:00"))  # the studio's offset, not UTC


async def test_compliance_expired_status_old_versions_and_latest_pending(pool, runner, conv, studio, paperwork) -> None:
    levi, dani = studio.people["Saar Levi"].membership_id, studio.people["Dani Mizrahi"].membership_id
    await _assign(pool, studio, paperwork["waiver"], levi, status="expired", sent=50)
    await _assign(pool, studio, paperwork["health"], levi, done=(40, 10))
    # A completed PAR-Q, then a newer one sent and not yet filled: the newer one is what counts.
    await _assign(pool, studio, paperwork["par_q"], levi, done=(40, 39))
    await _assign(pool, studio, paperwork["par_q"], levi, sent=1)
    # A waiver signed on the replaced (deleted) version still counts.
    await _assign(pool, studio, paperwork["old_waiver"], dani, done=(100, 90))
    for form in ("par_q", "health", "contact"):
        await _assign(pool, studio, paperwork[form], dani, done=(5, 2))

    levi_out = succeeded(await forms(runner, conv, "compliance_status_for_member", {"membershipId": levi}))
    dani_out = succeeded(await forms(runner, conv, "compliance_status_for_member", {"membershipId": dani}))

    assert {f["typeKey"]: f["status"] for f in levi_out["forms"]} == {
        "emergency_contact": "missing",
        "health_update": "compliant",
        "par_q": "pending",
        "waiver": "expired",
    }
    assert {f["typeKey"]: (f["status"], f["formTitle"]) for f in dani_out["forms"]} == {
        "emergency_contact": ("compliant", "Emergency contact"),
        "health_update": ("compliant", "Health update"),
        "par_q": ("compliant", "PAR-Q"),
        "waiver": ("compliant", "Liability waiver 2025"),
    }
    assert dani_out["compliant"] is True


async def test_compliance_refuses_bad_ids_and_other_orgs_members(runner, conv, other_studio, paperwork) -> None:
    failed(await forms(runner, conv, "compliance_status_for_member", {"membershipId": "saar"}), "invalid_input")
    failed(await forms(runner, conv, "compliance_status_for_member", {}), "invalid_input")
    error = failed(
        await forms(
            runner,
            conv,
            "compliance_status_for_member",
            {"membershipId": other_studio.people["Saar Cohen"].membership_id},
        ),
        "not_found",
    )
    assert "read__members_search" in error.hint


async def test_list_pending_orders_overdue_first_and_filters(pool, runner, conv, studio, paperwork) -> None:
    saar, levi, dani = (studio.people[n].membership_id for n in ("Saar Cohen", "Saar Levi", "Dani Mizrahi"))
    late = await _assign(pool, studio, paperwork["waiver"], levi, sent=20, due_in_days=-3)
    soon = await _assign(pool, studio, paperwork["par_q"], saar, sent=2, due_in_days=5)
    open_ended = await _assign(pool, studio, paperwork["health"], dani, sent=1)
    await _assign(pool, studio, paperwork["contact"], saar, done=(2, 1))
    await _assign(pool, studio, paperwork["old_waiver"], saar)  # a deleted form is not owed any more
    # A member who has left owes nothing.
    await pool.execute(
        """UPDATE memberships SET status = 'cancelled', joined_at = current_date - 30, ended_on = current_date - 1
            WHERE id = $1""",
        uuid.UUID(studio.member.membership_id),
    )
    await _assign(pool, studio, paperwork["waiver"], studio.member.membership_id, due_in_days=-10)

    out = succeeded(await forms(runner, conv, "list_pending_for_org"))

    assert out == {
        "assignments": [
            {
                "assignmentId": str(late),
                "membershipId": levi,
                "memberName": "Saar Levi",
                "formTitle": "Liability waiver 2026",
                "typeKey": "waiver",
                "assignedAt": local(20),
                "dueOn": (TODAY - timedelta(days=3)).isoformat(),
                "overdue": True,
            },
            {
                "assignmentId": str(soon),
                "membershipId": saar,
                "memberName": "Saar Cohen",
                "formTitle": "PAR-Q",
                "typeKey": "par_q",
                "assignedAt": local(2),
                "dueOn": (TODAY + timedelta(days=5)).isoformat(),
                "overdue": False,
            },
            {
                "assignmentId": str(open_ended),
                "membershipId": dani,
                "memberName": "Dani Mizrahi",
                "formTitle": "Health update",
                "typeKey": "health_update",
                "assignedAt": local(1),
                "dueOn": None,
                "overdue": False,
            },
        ],
        "total": 3,
        "overdueTotal": 1,
    }
    overdue = succeeded(await forms(runner, conv, "list_pending_for_org", {"overdueOnly": True}))
    assert ([a["assignmentId"] for a in overdue["assignments"]], overdue["total"]) == ([str(late)], 1)
    par_q = succeeded(await forms(runner, conv, "list_pending_for_org", {"typeKey": "par_q"}))
    assert [a["assignmentId"] for a in par_q["assignments"]] == [str(soon)]
    limited = succeeded(await forms(runner, conv, "list_pending_for_org", {"limit": 1}))
    assert (len(limited["assignments"]), limited["total"]) == (1, 3)
    for bad in ({"limit": 0}, {"typeKey": ""}, {"overdue": True}):
        failed(await forms(runner, conv, "list_pending_for_org", bad), "invalid_input")


async def test_list_pending_stays_in_the_org(pool, runner, other_studio, paperwork) -> None:
    # other_studio has one pending waiver (the fixture); its own staff see it, and only it.
    theirs = await new_conversation(pool, other_studio, other_studio.coach)
    out = succeeded(await forms(runner, theirs, "list_pending_for_org"))
    assert [(a["formTitle"], a["memberName"]) for a in out["assignments"]] == [("Their waiver", "Saar Cohen")]


# roles ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("router", "action", "input"),
    [
        ("program_templates", "list", {}),
        ("program_templates", "create", BASE_BUILDING),
        ("program_templates", "apply", {"id": str(uuid.uuid4()), "startDate": "2026-03-02", "programName": "X"}),
        (
            "program_templates",
            "from_history",
            {"programId": str(uuid.uuid4()), "from": "2026-01-01", "to": "2026-01-31", "name": "X"},
        ),
        ("forms", "list_pending_for_org", {}),
        ("forms", "compliance_status_for_member", {"membershipId": str(uuid.uuid4())}),
    ],
)
async def test_members_may_not_use_these_tools(pool, runner, studio, router, action, input) -> None:
    conv = await new_conversation(pool, studio, studio.member)
    cmd = conv.command(router, action, input)
    failed(await runner.execute(cmd), "forbidden")
    assert await audit_rows(pool, cmd.tool_use_id) == []


async def test_admins_and_owners_may_apply(pool, runner, studio) -> None:
    coach = await new_conversation(pool, studio, studio.coach)
    template = succeeded(await templates(runner, coach, "create", BASE_BUILDING))
    for person, name in ((studio.owner, "Owner block"), (studio.admin, "Admin block")):
        conv = await new_conversation(pool, studio, person)
        out = succeeded(
            await templates(
                runner, conv, "apply", {"id": template["id"], "startDate": "2026-05-04", "programName": name}
            )
        )
        assert out["workoutsCreated"] == 3
