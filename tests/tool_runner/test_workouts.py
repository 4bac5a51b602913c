"""The `workouts` router over a real Postgres, through ToolRunner.execute as the orchestrator calls it."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from spotter_tool_runner.runner import ToolRunner

from tests.factories import Studio

from .helpers import Conversation, audit_rows, failed, new_conversation, succeeded

MONDAY_WOD = {
    "title": "Monday WOD",
    "scheduledFor": "2026-03-02",
    "sections": [
        {
            "name": "Metcon",
            "format": "3 rounds",
            "movements": [{"name": "Run", "distanceM": 200}, {"name": "Double-under", "reps": 30}],
        },
        {"name": "Cool-down", "notes": "Easy."},
    ],
}


@pytest.fixture
async def conv(pool: asyncpg.Pool, studio: Studio) -> Conversation:
    return await new_conversation(pool, studio, studio.coach)


async def workouts(runner: ToolRunner, conv: Conversation, action: str, input: dict):
    return await runner.execute(conv.command("workouts", action, input))


async def global_exercise(pool: asyncpg.Pool, name: str) -> str:
    """The id of the global library's exercise of that name (migration 0007 installs the library)."""
    return str(
        await pool.fetchval(
            "SELECT id FROM exercises WHERE organization_id IS NULL AND name = $1 AND deleted_at IS NULL", name
        )
    )


async def add_exercise(pool: asyncpg.Pool, org_id: str, name: str, aliases: list[str] | None = None) -> str:
    return str(
        await pool.fetchval(
            "INSERT INTO exercises (organization_id, name, aliases) VALUES ($1, $2, $3) RETURNING id",
            org_id,
            name,
            aliases or [],
        )
    )


async def linked(pool: asyncpg.Pool, workout_id: str) -> list[tuple[str, str | None]]:
    """(name, exercise_id) of the workout's stored movements, in order."""
    rows = await pool.fetch(
        """SELECT m.name, m.exercise_id::text FROM workout_movements m JOIN workout_sections s ON s.id = m.section_id
            WHERE s.workout_id = $1 ORDER BY s.position, m.position""",
        uuid.UUID(workout_id),
    )
    return [(r["name"], r["exercise_id"]) for r in rows]


async def test_create_a_structured_workout(pool, runner, conv, studio) -> None:
    input = {**MONDAY_WOD, "programId": studio.programs["CrossFit"]}
    cmd = conv.command("workouts", "create", input)

    outcome = await runner.execute(cmd)

    out = succeeded(outcome)
    assert outcome.inverse_available
    assert out == {
        "id": out["id"],
        "title": "Monday WOD",
        "description": None,
        "kind": "structured",
        "scheduledFor": "2026-03-02",
        "programId": studio.programs["CrossFit"],
        "programName": "CrossFit",
        "sections": [
            {
                "position": 1,
                "name": "Metcon",
                "format": "3 rounds",
                "notes": None,
                # Movements are sparse: only the fields that were given, and the exercise each name spells.
                "movements": [
                    {"position": 1, "name": "Run", "exerciseId": await global_exercise(pool, "Run"), "distanceM": 200},
                    {
                        "position": 2,
                        "name": "Double-under",
                        "exerciseId": await global_exercise(pool, "Double-under"),
                        "reps": 30,
                    },
                ],
            },
            {"position": 2, "name": "Cool-down", "format": None, "notes": "Easy.", "movements": []},
        ],
    }
    row = await pool.fetchrow("SELECT * FROM workouts WHERE id = $1", uuid.UUID(out["id"]))
    assert (str(row["organization_id"]), str(row["created_by"]), row["deleted_at"]) == (
        studio.org.id,
        studio.coach.user_id,
        None,
    )
    [audit] = await audit_rows(pool, cmd.tool_use_id)
    assert (audit["action"], audit["resource"], audit["resource_id"]) == ("workout.created", "workout", out["id"])
    assert audit["metadata"]["agent"] is True


async def test_create_a_freeform_workout_with_loads(pool, runner, conv) -> None:
    out = succeeded(
        await workouts(
            runner,
            conv,
            "create",
            {
                "title": "Grace",
                "description": "30 clean and jerks for time",
                "sections": [{"name": "Grace", "movements": [{"name": "Clean and jerk", "reps": 30, "loadKg": 61.5}]}],
            },
        )
    )
    # The library's "Clean and Jerk", whatever the case.
    clean_and_jerk = await global_exercise(pool, "Clean and Jerk")
    assert out["sections"][0]["movements"] == [
        {"position": 1, "name": "Clean and jerk", "exerciseId": clean_and_jerk, "reps": 30, "loadKg": 61.5}
    ]
    freeform = succeeded(await workouts(runner, conv, "create", {"title": "Rest day", "description": "Walk 30'"}))
    assert (freeform["kind"], freeform["sections"], freeform["scheduledFor"]) == ("freeform", [], None)


@pytest.mark.parametrize(
    "input",
    [
        {"title": "Nothing in it"},  # neither a description nor sections
        {"title": "", "description": "x"},
        {"title": "x", "sections": [{"name": "A", "movements": [{"name": "Run", "distanceM": 0}]}]},
        {"title": "x", "description": "x", "scheduledFor": "next monday"},
    ],
)
async def test_invalid_workouts_are_refused(pool, runner, conv, input) -> None:
    failed(await workouts(runner, conv, "create", input), "invalid_input")


async def test_another_orgs_program_is_not_found_and_nothing_is_written(pool, runner, conv, other_studio) -> None:
    title = f"Leaky {uuid.uuid4().hex[:6]}"
    error = failed(
        await workouts(
            runner, conv, "create", {"title": title, "description": "x", "programId": other_studio.programs["CrossFit"]}
        ),
        "not_found",
    )
    assert "read__programs_list" in error.hint
    assert await pool.fetchval("SELECT count(*) FROM workouts WHERE title = $1", title) == 0


async def test_update_patches_only_what_is_sent(runner, conv, studio) -> None:
    created = succeeded(await workouts(runner, conv, "create", {**MONDAY_WOD, "description": "Go hard"}))

    renamed = succeeded(await workouts(runner, conv, "update", {"id": created["id"], "title": "Tuesday WOD"}))
    assert renamed == {**created, "title": "Tuesday WOD"}

    moved = succeeded(
        await workouts(
            runner,
            conv,
            "update",
            {"id": created["id"], "scheduledFor": None, "programId": studio.programs["Olympic Lifting"]},
        )
    )
    assert (moved["scheduledFor"], moved["programName"], moved["description"]) == (None, "Olympic Lifting", "Go hard")
    assert moved["sections"] == created["sections"]


@pytest.mark.parametrize(
    ("patch", "problem"),
    [({}, "at least one field"), ({"title": None}, "title cannot be cleared"), ({"kind": "structured"}, "kind")],
)
async def test_an_update_must_change_something_valid(runner, conv, patch, problem) -> None:
    created = succeeded(await workouts(runner, conv, "create", MONDAY_WOD))
    error = failed(await workouts(runner, conv, "update", {"id": created["id"], **patch}), "invalid_input")
    assert problem in error.message


async def test_set_sections_replaces_everything(pool, runner, conv) -> None:
    created = succeeded(await workouts(runner, conv, "create", MONDAY_WOD))
    sections = [{"name": "AMRAP", "format": "AMRAP 12", "movements": [{"name": "Burpee", "reps": 10}]}]

    replaced = succeeded(await workouts(runner, conv, "set_sections", {"id": created["id"], "sections": sections}))

    assert replaced["sections"] == [
        {
            "position": 1,
            "name": "AMRAP",
            "format": "AMRAP 12",
            "notes": None,
            "movements": [
                {"position": 1, "name": "Burpee", "exerciseId": await global_exercise(pool, "Burpee"), "reps": 10}
            ],
        }
    ]
    assert await pool.fetchval(
        """SELECT count(*) FROM workout_movements m JOIN workout_sections s ON s.id = m.section_id
            WHERE s.workout_id = $1""",
        uuid.UUID(created["id"]),
    ) == 1
    emptied = succeeded(await workouts(runner, conv, "set_sections", {"id": created["id"], "sections": []}))
    assert (emptied["kind"], emptied["sections"]) == ("freeform", [])


async def test_a_movement_keeps_the_exercise_id_it_is_given(pool, runner, conv, studio) -> None:
    own = await add_exercise(pool, studio.org.id, f"Sled Sprint {uuid.uuid4().hex[:6]}")
    wall_ball = await global_exercise(pool, "Wall Ball")
    sections = [
        {
            "name": "Metcon",
            "movements": [
                # The id wins over the name: "Shuttle run" alone would link to the library's Shuttle Run.
                {"name": "Shuttle run", "exerciseId": own, "distanceM": 50},
                {"name": "Wall balls 9kg", "exerciseId": wall_ball, "reps": 30},
            ],
        }
    ]

    out = succeeded(await workouts(runner, conv, "create", {"title": "Linked", "sections": sections}))

    assert out["sections"][0]["movements"] == [
        {"position": 1, "name": "Shuttle run", "exerciseId": own, "distanceM": 50},
        {"position": 2, "name": "Wall balls 9kg", "exerciseId": wall_ball, "reps": 30},
    ]
    assert await linked(pool, out["id"]) == [("Shuttle run", own), ("Wall balls 9kg", wall_ball)]


async def test_another_studios_exercise_id_is_not_found_and_nothing_is_written(
    pool, runner, conv, studio, other_studio
) -> None:
    created = succeeded(await workouts(runner, conv, "create", MONDAY_WOD))
    theirs = await add_exercise(pool, other_studio.org.id, f"Their Move {uuid.uuid4().hex[:6]}")
    deleted = await add_exercise(pool, studio.org.id, f"Old Move {uuid.uuid4().hex[:6]}")
    await pool.execute("UPDATE exercises SET deleted_at = now() WHERE id = $1", uuid.UUID(deleted))
    title = f"Leaky {uuid.uuid4().hex[:6]}"
    for exercise_id in (theirs, deleted, str(uuid.uuid4())):
        sections = [{"name": "A", "movements": [{"name": "Run"}, {"name": "Their move", "exerciseId": exercise_id}]}]
        error = failed(await workouts(runner, conv, "create", {"title": title, "sections": sections}), "not_found")
        assert exercise_id in error.message and "read__exercises_resolve_batch" in error.hint
        failed(await workouts(runner, conv, "set_sections", {"id": created["id"], "sections": sections}), "not_found")
    assert await pool.fetchval("SELECT count(*) FROM workouts WHERE title = $1", title) == 0
    assert [name for name, _ in await linked(pool, created["id"])] == ["Run", "Double-under"]  # unchanged


async def test_a_movement_is_linked_by_the_one_exercise_its_name_spells(pool, runner, conv, studio) -> None:
    tag = uuid.uuid4().hex[:6]
    own_thruster = await add_exercise(pool, studio.org.id, "Thruster")  # shadows the library's
    own_flip = await add_exercise(pool, studio.org.id, f"Tyre Flip {tag}", aliases=[f"Flip {tag}"])
    # Two of the studio's own exercises spell "Hop {tag}": which one is meant is not guessed.
    for name, alias in [(f"Hop {tag}", None), (f"Bunny Hop {tag}", f"Hop {tag}")]:
        await add_exercise(pool, studio.org.id, name, [alias] if alias else None)
    movements = [
        {"name": "thruster", "reps": 21},  # the studio's own, not the library's of the same name
        {"name": "KB Swing", "reps": 15},  # an alias of the library's Kettlebell Swing
        {"name": f"FLIP {tag}"},  # an alias of the studio's own, whatever the case
        {"name": f"Hop {tag}"},  # ambiguous
        {"name": "Zorbing"},  # unknown
        {"name": "200m run"},  # not exactly a name: left for read__exercises_resolve_batch
    ]

    out = succeeded(
        await workouts(runner, conv, "create", {"title": "Names", "sections": [{"name": "A", "movements": movements}]})
    )

    assert [m.get("exerciseId") for m in out["sections"][0]["movements"]] == [
        own_thruster,
        await global_exercise(pool, "Kettlebell Swing"),
        own_flip,
        None,
        None,
        None,
    ]
    assert [exercise_id for _, exercise_id in await linked(pool, out["id"])] == [
        m.get("exerciseId") for m in out["sections"][0]["movements"]
    ]


async def test_delete_is_soft_and_happens_once(pool, runner, conv) -> None:
    created = succeeded(await workouts(runner, conv, "create", MONDAY_WOD))
    cmd = conv.command("workouts", "delete", {"id": created["id"]})

    deleted = succeeded(await runner.execute(cmd))

    assert deleted == {"id": created["id"], "title": "Monday WOD", "deleted": True}
    row = await pool.fetchrow("SELECT deleted_at FROM workouts WHERE id = $1", uuid.UUID(created["id"]))
    assert row["deleted_at"] is not None  # the row (and its sections) stay, for audit and history
    [audit] = await audit_rows(pool, cmd.tool_use_id)
    assert (audit["action"], audit["resource_id"]) == ("workout.deleted", created["id"])

    for action, input in [
        ("delete", {"id": created["id"]}),
        ("update", {"id": created["id"], "title": "Back"}),
        ("set_sections", {"id": created["id"], "sections": []}),
    ]:
        failed(await workouts(runner, conv, action, input), "not_found")


async def test_another_orgs_workout_is_not_found(pool, runner, conv, other_studio) -> None:
    theirs = await new_conversation(pool, other_studio, other_studio.coach)
    created = succeeded(await workouts(runner, theirs, "create", MONDAY_WOD))
    for action, input in [
        ("update", {"id": created["id"], "title": "Mine now"}),
        ("set_sections", {"id": created["id"], "sections": []}),
        ("delete", {"id": created["id"]}),
    ]:
        error = failed(await workouts(runner, conv, action, input), "not_found")
        assert error.hint
    row = await pool.fetchrow("SELECT title, deleted_at FROM workouts WHERE id = $1", uuid.UUID(created["id"]))
    assert (row["title"], row["deleted_at"]) == ("Monday WOD", None)


async def test_members_may_not_write_workouts(pool, runner, studio) -> None:
    conv = await new_conversation(pool, studio, studio.member)
    failed(await workouts(runner, conv, "create", MONDAY_WOD), "forbidden")
