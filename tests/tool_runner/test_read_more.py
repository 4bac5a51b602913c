"""The `read` router's library, search and comment tools over a real Postgres, through ToolRunner.execute.

Every studio row a test needs is inserted here. The global exercise library (166 exercises with aliases) is
reference data that migration 0007 installs in every database: tests use it by name, and a studio's own
exercises of the same names shadow its entries. Tests that add global entries give them unique names.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import asyncpg
import pytest

from spotter_tool_runner.runner import ToolRunner
from spotter_tool_runner.tools.read import normalise_movement

from tests.factories import Studio

from .helpers import Conversation, actor_of, failed, new_conversation, succeeded


async def run(runner: ToolRunner, conv: Conversation, action: str, input: dict | None = None, **kwargs):
    return await runner.execute(conv.command("read", action, input, **kwargs))


@pytest.fixture
async def conv(pool: asyncpg.Pool, studio: Studio) -> Conversation:
    return await new_conversation(pool, studio, studio.coach)


# the exercise library ------------------------------------------------------------------------------

LIBRARY = [
    # name, aliases, modality, equipment
    ("Back Squat", ["BS"], "weightlifting", ["barbell"]),
    ("Front Squat", [], "weightlifting", ["barbell"]),
    ("Goblet Squat", [], "weightlifting", ["kettlebell", "dumbbell"]),
    ("Thruster", [], "weightlifting", ["barbell"]),
    ("Kettlebell Swing", ["KB swing", "Russian swing"], "weightlifting", ["kettlebell"]),
    ("Double-Under", ["DU"], "monostructural", ["jump rope"]),
    ("Run", [], "monostructural", []),
    ("Sandbag Carry", [], "strongman", ["sandbag"]),
    ("Sandbag Clean", [], "strongman", ["sandbag"]),
]


async def add_exercise(
    pool: asyncpg.Pool, org_id: str | None, name: str, aliases=(), modality="other", equipment=()
) -> str:
    return str(
        await pool.fetchval(
            """INSERT INTO exercises (organization_id, name, aliases, modality, equipment, muscles, description)
               VALUES ($1, $2, $3, $4, $5, '{quads}', 'A movement.') RETURNING id""",
            org_id,
            name,
            list(aliases),
            modality,
            list(equipment),
        )
    )


DELETED = "Overhead Squat (deleted)"


@pytest.fixture
async def library(pool: asyncpg.Pool, studio: Studio) -> dict[str, str]:
    """The studio's own exercises by name, each but Run shadowing a global one; DELETED is its deleted Overhead
    Squat, which shadows nothing."""
    ids = {name: await add_exercise(pool, studio.org.id, name, *rest) for name, *rest in LIBRARY}
    ids[DELETED] = str(
        await pool.fetchval(
            "INSERT INTO exercises (organization_id, name, deleted_at) VALUES ($1, 'Overhead Squat', now()) RETURNING id",
            studio.org.id,
        )
    )
    return ids


@pytest.fixture
async def global_library(pool: asyncpg.Pool) -> dict[str, str]:
    """The global library's exercises by name."""
    rows = await pool.fetch("SELECT name, id::text FROM exercises WHERE organization_id IS NULL AND deleted_at IS NULL")
    return {r["name"]: r["id"] for r in rows}


def ours(items: list[dict], ids: dict[str, str]) -> list[str]:
    """The names of this test's exercises among `items`, in their order."""
    names = {v: k for k, v in ids.items()}
    return [names[i["id"]] for i in items if i["id"] in names]


def by_score_then_studio_first(items: list[dict]) -> bool:
    keys = [(-e["score"], e["scope"] == "global") for e in items]
    return keys == sorted(keys)


async def test_exercises_search_ranks_matches_and_applies_filters(
    pool, runner, conv, library, global_library
) -> None:
    found = succeeded(await run(runner, conv, "exercises_search", {"query": "squat", "limit": 25}))
    items = found["exercises"]
    # Equally good matches: the studio's own first, then the global library's, each by name.
    assert [(e["name"], e["scope"]) for e in items[:3]] == [
        ("Back Squat", "studio"),
        ("Front Squat", "studio"),
        ("Goblet Squat", "studio"),
    ]
    assert by_score_then_studio_first(items)
    # The studio's entries shadow the global ones of the same names; its deleted Overhead Squat shadows nothing.
    ids = [e["id"] for e in items]
    assert not {global_library[n] for n in ("Back Squat", "Front Squat", "Goblet Squat")} & set(ids)
    assert library[DELETED] not in ids and global_library["Overhead Squat"] in ids
    assert {"Box Squat", "Zercher Squat", "Air Squat"} <= {e["name"] for e in items if e["scope"] == "global"}
    back = items[0]
    assert back == {
        "id": library["Back Squat"],
        "name": "Back Squat",
        "aliases": ["BS"],
        "modality": "weightlifting",
        "equipment": ["barbell"],
        "scope": "studio",
        "score": 1.0,
    }
    assert found["total"] == len(items) < 25

    kettlebell = succeeded(await run(runner, conv, "exercises_search", {"query": "squat", "equipment": "KETTLEBELL"}))
    assert [e["id"] for e in kettlebell["exercises"]] == [library["Goblet Squat"]]
    strongman = succeeded(
        await run(runner, conv, "exercises_search", {"query": "*", "modality": "strongman", "limit": 25})
    )
    assert ours(strongman["exercises"], library) == ["Sandbag Carry", "Sandbag Clean"]
    assert [e["scope"] for e in strongman["exercises"][:2]] == ["studio", "studio"]
    assert {e["modality"] for e in strongman["exercises"]} == {"strongman"}
    global_strongman = await pool.fetchval(
        "SELECT count(*) FROM exercises WHERE organization_id IS NULL AND deleted_at IS NULL AND modality = 'strongman'"
    )
    # Two studio entries in, the two global ones they shadow out.
    assert strongman["total"] == len(strongman["exercises"]) == global_strongman
    assert global_library["Sandbag Carry"] not in {e["id"] for e in strongman["exercises"]}

    by_alias = succeeded(await run(runner, conv, "exercises_search", {"query": "kb swing"}))
    assert by_alias["exercises"][0]["id"] == library["Kettlebell Swing"]
    assert global_library["Kettlebell Swing"] not in {e["id"] for e in by_alias["exercises"]}
    assert succeeded(await run(runner, conv, "exercises_search", {"query": "xylophone flip"}))["total"] == 0

    one = succeeded(await run(runner, conv, "exercises_search", {"query": "squat", "limit": 1}))
    assert [e["id"] for e in one["exercises"]] == [library["Back Squat"]] and one["total"] == found["total"]


async def test_exercises_search_in_the_global_library_tolerates_typos(runner, conv, global_library) -> None:
    # A studio without exercises of its own sees the global library alone.
    typo = succeeded(await run(runner, conv, "exercises_search", {"query": "thrustr"}))
    names = {e["name"]: e for e in typo["exercises"]}
    assert {"Thruster", "Dumbbell Thruster"} <= set(names)
    assert (names["Thruster"]["id"], names["Thruster"]["scope"]) == (global_library["Thruster"], "global")
    by_alias = succeeded(await run(runner, conv, "exercises_search", {"query": "c2b"}))
    assert by_alias["exercises"][0]["name"] == "Chest-to-bar Pull-up"


async def test_a_studio_exercise_shadows_the_global_one_of_the_same_name(
    pool, runner, conv, studio, other_studio, global_library
) -> None:
    own = await add_exercise(pool, studio.org.id, "THRUSTER", modality="weightlifting")
    # Another studio's own Run hides nothing from this one.
    await add_exercise(pool, other_studio.org.id, "Run")

    thruster = succeeded(await run(runner, conv, "exercises_search", {"query": "thruster"}))
    ids = [e["id"] for e in thruster["exercises"]]
    assert ids[0] == own and global_library["Thruster"] not in ids  # the same name in another case
    assert global_library["Dumbbell Thruster"] in ids
    run_ = succeeded(await run(runner, conv, "exercises_search", {"query": "run"}))
    assert run_["exercises"][0]["id"] == global_library["Run"]


async def test_exercises_search_sees_the_global_library_but_not_another_studios(
    pool, runner, conv, other_studio
) -> None:
    tag = uuid.uuid4().hex[:8]
    global_id = await add_exercise(pool, None, f"Zottman Curl {tag}", modality="weightlifting")
    theirs = await add_exercise(pool, other_studio.org.id, f"Zottman Press {tag}")

    found = succeeded(await run(runner, conv, "exercises_search", {"query": f"zottman {tag}"}))
    ids = [e["id"] for e in found["exercises"]]
    assert global_id in ids and theirs not in ids
    listed = succeeded(await run(runner, conv, "exercises_search", {"query": "*", "limit": 25}))
    assert {e["scope"] for e in listed["exercises"]} == {"global"}
    assert next(e for e in found["exercises"] if e["id"] == global_id)["scope"] == "global"


@pytest.mark.parametrize(
    ("action", "input"),
    [
        ("exercises_search", {"query": ""}),
        ("exercises_search", {"query": "squat", "limit": 26}),
        ("exercises_search", {"query": "squat", "modality": "cardio"}),
        ("exercises_resolve_batch", {"names": []}),
        ("exercises_resolve_batch", {"names": ["run"] * 51}),
        ("exercises_resolve_batch", {"names": ["  "]}),
        ("search_anything", {"query": "murph", "limit": 6}),
        ("search_anything", {"query": "murph", "kinds": ["class"]}),
        ("lookup_by_id", {"type": "coach", "id": str(uuid.uuid4())}),
        ("lookup_by_id", {"type": "program", "id": "murph"}),
        ("workout_comments_in_program", {"programId": str(uuid.uuid4()), "limit": 0}),
        ("workout_comments_in_program", {"programId": str(uuid.uuid4()), "since": "monday"}),
        ("workout_comments_for_assignment", {"assignmentId": "abc"}),
        ("workout_comments_for_assignment", {"assignmentId": str(uuid.uuid4()), "unreadOnly": True}),
    ],
)
async def test_invalid_input_is_refused(runner, conv, action, input) -> None:
    failed(await run(runner, conv, action, input), "invalid_input")


@pytest.mark.parametrize(
    ("action", "input"),
    [
        ("exercises_search", {"query": "squat"}),
        ("exercises_resolve_batch", {"names": ["run"]}),
        ("search_anything", {"query": "murph"}),
        ("lookup_by_id", {"type": "program", "id": str(uuid.uuid4())}),
        ("workout_comments_in_program", {"programId": str(uuid.uuid4())}),
        ("workout_comments_for_assignment", {"assignmentId": str(uuid.uuid4())}),
    ],
)
async def test_members_may_not_use_them(pool, runner, studio, action, input) -> None:
    conv = await new_conversation(pool, studio, studio.member)
    failed(await run(runner, conv, action, input, actor=actor_of(studio, studio.member)), "forbidden")


@pytest.mark.parametrize(
    ("written", "normalised"),
    [
        ("200m run", "run"),
        ("30 Double-Unders", "double under"),
        ("KB swings", "kb swing"),
        ("21-15-9 thrusters", "thruster"),
        ("3x10 Back Squats", "back squat"),
        ("5 muscle-ups", "muscle up"),
        ("15 cal row", "row"),
        ("Presses", "press"),
        ("Snatches", "snatch"),
        ("200m", ""),
        # Quantities wherever they are; a digit inside a word is part of a name.
        ("row 500m", "row"),
        ("21 thrusters 43kg", "thruster"),
        ("30 wall balls (20/14 lb)", "wall ball"),
        ("back squat x5 @ 70%", "back squat"),
        ("24 in box jumps", "box jump"),
        ("C2B pull-ups", "c2b pull up"),
        ("C2 Row", "c2 row"),
    ],
)
def test_normalise_movement(written, normalised) -> None:
    assert normalise_movement(written) == normalised


async def test_exercises_resolve_batch_in_one_call(pool, runner, conv, studio, library) -> None:
    # The studio's entries shadow the global library's of the same names (Run, Double-under, Thruster, …).
    names = ["200m run", "30 double unders", "KB swing", "thruster", "Thrustr", "sandbag", "xylophone flips"]
    out = succeeded(await run(runner, conv, "exercises_resolve_batch", {"names": names}))

    results = out["results"]
    assert [r["input"] for r in results] == names
    expected = {
        "200m run": "Run",
        "30 double unders": "Double-Under",
        "KB swing": "Kettlebell Swing",
        "thruster": "Thruster",
    }
    for result in results[:4]:
        name = expected[result["input"]]
        assert result == {
            "input": result["input"],
            "status": "resolved",
            "match": "exact",
            "exercise": {"id": library[name], "name": name},
            "candidates": [],
        }
    assert (results[4]["status"], results[4]["match"], results[4]["exercise"]["id"]) == (
        "resolved",
        "fuzzy",
        library["Thruster"],
    )
    sandbag = results[5]
    assert (sandbag["status"], sandbag["exercise"]) == ("ambiguous", None)
    assert 2 <= len(sandbag["candidates"]) <= 5
    assert {library["Sandbag Carry"], library["Sandbag Clean"]} <= {c["id"] for c in sandbag["candidates"]}
    assert results[6] == {
        "input": "xylophone flips",
        "status": "unknown",
        "match": None,
        "exercise": None,
        "candidates": [],
    }
    assert (out["resolved"], out["ambiguous"], out["unknown"]) == (5, 1, 1)


async def test_exercises_resolve_batch_against_the_global_library(runner, conv, global_library) -> None:
    names = [
        "row 500m",  # quantities anywhere
        "21 thrusters 43kg",
        "30 wall balls (20/14 lb)",
        "C2B pull-ups",  # the alias C2B stands for "Chest-to-bar", the rest are words of the name
        "CTB",
        "thrustr",  # as many words as the input: Thruster, not Dumbbell Thruster or Hip Thrust
        "sandbag",  # Sandbag Carry or Sandbag Clean: both longer than the input
    ]
    out = succeeded(await run(runner, conv, "exercises_resolve_batch", {"names": names}))

    def outcome(r: dict) -> tuple:
        return r["status"], r["match"], r["exercise"] and r["exercise"]["name"]

    assert [outcome(r) for r in out["results"]] == [
        ("resolved", "exact", "Row"),
        ("resolved", "exact", "Thruster"),
        ("resolved", "exact", "Wall Ball"),
        ("resolved", "exact", "Chest-to-bar Pull-up"),
        ("resolved", "exact", "Chest-to-bar Pull-up"),
        ("resolved", "fuzzy", "Thruster"),
        ("ambiguous", None, None),
    ]
    assert out["results"][0]["exercise"]["id"] == global_library["Row"]
    thrustr = succeeded(await run(runner, conv, "exercises_search", {"query": "thrustr"}))["exercises"]
    assert "Dumbbell Thruster" in {e["name"] for e in thrustr}  # a close candidate, passed over
    sandbag = out["results"][6]["candidates"]
    assert {"Sandbag Carry", "Sandbag Clean"} <= {c["name"] for c in sandbag}


async def test_a_name_equal_to_an_exercise_wins_over_an_alias_standing_for_part_of_one(
    pool, runner, conv, studio
) -> None:
    own = await add_exercise(pool, studio.org.id, "C2B Pull-up")
    out = succeeded(await run(runner, conv, "exercises_resolve_batch", {"names": ["c2b pull-ups"]}))
    assert (out["results"][0]["match"], out["results"][0]["exercise"]["id"]) == ("exact", own)


async def test_exercises_resolve_batch_never_resolves_to_another_studios_exercise(
    pool, runner, conv, other_studio
) -> None:
    tag = uuid.uuid4().hex[:8]
    await add_exercise(pool, other_studio.org.id, f"Quokka Hop {tag}")
    out = succeeded(await run(runner, conv, "exercises_resolve_batch", {"names": [f"quokka hop {tag}"]}))
    assert out["results"][0]["status"] == "unknown"


# programs, workouts, members, sessions, assignments and comments ------------------------------------


@dataclass
class Coaching:
    program: str
    workout: str
    assignment: str
    session: str
    crossfit_murph: str
    older_murph: str
    comments: dict[str, str]


async def _insert(pool: asyncpg.Pool, sql: str, *args) -> str:
    return str(await pool.fetchval(sql, *args))


@pytest.fixture
async def coaching(pool: asyncpg.Pool, studio: Studio) -> Coaching:
    """A coaching program with a workout, Dani's personal assignment for Monday 2 March 2026 and its comment
    thread, a class session with bookings, and two Murphs in CrossFit. The studio is in Jerusalem (UTC+2)."""
    await pool.execute("UPDATE organizations SET timezone = 'Asia/Jerusalem' WHERE id = $1", studio.org.id)
    org, dani, saar = studio.org.id, studio.people["Dani Mizrahi"], studio.people["Saar Cohen"]
    program = await _insert(
        pool, "INSERT INTO programs (organization_id, name, kind) VALUES ($1, 'Coaching', 'coaching') RETURNING id", org
    )
    await pool.execute(
        "INSERT INTO program_enrollments (program_id, membership_id) VALUES ($1, $2)", program, dani.membership_id
    )
    workout = await _insert(
        pool,
        """INSERT INTO workouts (organization_id, program_id, title, kind, scheduled_for)
           VALUES ($1, $2, 'Monday WOD', 'structured', '2026-03-02') RETURNING id""",
        org,
        program,
    )
    section = await _insert(
        pool,
        """INSERT INTO workout_sections (workout_id, position, name, format)
           VALUES ($1, 1, 'Metcon', '3 rounds') RETURNING id""",
        workout,
    )
    await pool.execute(
        "INSERT INTO workout_movements (section_id, position, name) VALUES ($1, 1, 'Run'), ($1, 2, 'Thruster')", section
    )
    assignment = await _insert(
        pool,
        """INSERT INTO assignments (organization_id, membership_id, coach_membership_id, program_id, workout_id,
                                    title, notes, scheduled_for, published)
           VALUES ($1, $2, $3, $4, $5, 'Dani - Monday WOD', 'Scale thrusters to 30kg.', '2026-03-02', true)
           RETURNING id""",
        org,
        dani.membership_id,
        studio.coach.membership_id,
        program,
        workout,
    )
    crossfit = studio.programs["CrossFit"]
    crossfit_murph, older_murph = [
        await _insert(
            pool,
            """INSERT INTO workouts (organization_id, program_id, title, scheduled_for)
               VALUES ($1, $2, 'Murph', $3::text::date) RETURNING id""",
            org,
            crossfit,
            day,
        )
        for day in ("2026-05-25", "2025-05-26")
    ]

    async def comment(author: str, body: str, at: str, *, workout_id=None, assignment_id=None, deleted=False) -> str:
        return await _insert(
            pool,
            """INSERT INTO workout_comments (organization_id, workout_id, assignment_id, author_membership_id, body,
                                             created_at, deleted_at)
               VALUES ($1, $2, $3, $4, $5, $6::text::timestamptz, CASE WHEN $7 THEN now() END) RETURNING id""",
            org,
            workout_id,
            assignment_id,
            author,
            body,
            at,
            deleted,
        )

    comments = {
        # On the assignment and on the workout it is based on.
        "dani_heavy": await comment(
            dani.membership_id,
            "Felt heavy on the thrusters",
            "2026-03-02T08:00:00Z",
            assignment_id=assignment,
            workout_id=workout,
        ),
        "coach_reply": await comment(
            studio.coach.membership_id, "Drop to 30kg next time", "2026-03-02T09:00:00Z", assignment_id=assignment
        ),
        "dani_ok": await comment(dani.membership_id, "OK!", "2026-03-02T10:00:00Z", assignment_id=assignment),
        "saar_loved": await comment(saar.membership_id, "Loved it", "2026-03-02T22:30:00Z", workout_id=workout),
        "deleted": await comment(
            dani.membership_id, "oops", "2026-03-02T11:00:00Z", assignment_id=assignment, deleted=True
        ),
        "murph": await comment(saar.membership_id, "Vest on!", "2026-05-25T09:00:00Z", workout_id=crossfit_murph),
    }
    await pool.execute(
        "INSERT INTO workout_comment_reads (comment_id, coach_membership_id) VALUES ($1, $2)",
        comments["dani_heavy"],
        studio.coach.membership_id,
    )
    class_type = await _insert(
        pool,
        "INSERT INTO class_types (organization_id, program_id, name) VALUES ($1, $2, 'Personal Training') RETURNING id",
        org,
        program,
    )
    session = await _insert(
        pool,
        """INSERT INTO class_sessions (organization_id, class_type_id, coach_membership_id, starts_at, ends_at,
                                       capacity, published)
           VALUES ($1, $2, $3, '2026-03-02T05:00:00Z', '2026-03-02T06:00:00Z', 2, true) RETURNING id""",
        org,
        class_type,
        studio.coach.membership_id,
    )
    await pool.execute(
        """INSERT INTO bookings (session_id, membership_id, status, checked_in_at)
           VALUES ($1, $2, 'booked', '2026-03-02T04:55:00Z'), ($1, $3, 'booked', NULL), ($1, $4, 'waitlisted', NULL)""",
        session,
        dani.membership_id,
        saar.membership_id,
        studio.people["Saar Levi"].membership_id,
    )
    return Coaching(program, workout, assignment, session, crossfit_murph, older_murph, comments)


async def test_search_anything_finds_murph_across_kinds(pool, runner, conv, studio, other_studio, coaching) -> None:
    murphy = studio.people["Saar Cohen"]
    await pool.execute("UPDATE users SET full_name = 'Saar Murphy' WHERE id = $1", murphy.user_id)
    await pool.execute(
        "INSERT INTO workouts (organization_id, title, description) VALUES ($1, 'Murph', 'theirs')", other_studio.org.id
    )
    tag = uuid.uuid4().hex[:8]
    vest = await add_exercise(pool, studio.org.id, f"Murph Vest Run {tag}", modality="monostructural")

    out = succeeded(await run(runner, conv, "search_anything", {"query": "murph"}))
    workouts = [h for h in out["hits"] if h["kind"] == "workout"]
    # Equally good titles: the latest first; another studio's Murph never.
    murph = {"kind": "workout", "label": "Murph", "score": 1}
    assert workouts == [
        {**murph, "id": coaching.crossfit_murph, "detail": "2026-05-25, CrossFit"},
        {**murph, "id": coaching.older_murph, "detail": "2025-05-26, CrossFit"},
    ]
    members = [h for h in out["hits"] if h["kind"] == "member"]
    assert [(h["id"], h["label"]) for h in members] == [(murphy.membership_id, "Saar Murphy")]
    assert members[0]["detail"] == f"member, active, {murphy.email}"
    assert vest in {h["id"] for h in out["hits"] if h["kind"] == "exercise"}
    kinds = [h["kind"] for h in out["hits"]]
    assert kinds == sorted(kinds, key=["program", "workout", "exercise", "member"].index)  # grouped by kind
    assert (out["totals"]["program"], out["totals"]["workout"], out["totals"]["member"]) == (0, 2, 1)

    programs = succeeded(await run(runner, conv, "search_anything", {"query": "coaching", "kinds": ["program"]}))
    assert programs == {
        "hits": [{"kind": "program", "id": coaching.program, "label": "Coaching", "detail": "coaching", "score": 1.0}],
        "totals": {"program": 1, "workout": 0, "exercise": 0, "member": 0},
        "matchedBy": "name_only",  # this runner has no rag to ask
    }
    by_email = succeeded(await run(runner, conv, "search_anything", {"query": studio.admin.email, "kinds": ["member"]}))
    assert [h["id"] for h in by_email["hits"]] == [studio.admin.membership_id]
    one = succeeded(await run(runner, conv, "search_anything", {"query": "murph", "kinds": ["workout"], "limit": 1}))
    assert [h["id"] for h in one["hits"]] == [coaching.crossfit_murph] and one["totals"]["workout"] == 2


async def test_lookup_by_id_of_each_type(pool, runner, conv, studio, coaching, library) -> None:
    async def lookup(type: str, id: str) -> dict:
        return succeeded(await run(runner, conv, "lookup_by_id", {"type": type, "id": id}))

    assert await lookup("program", coaching.program) == {
        "type": "program",
        "id": coaching.program,
        "name": "Coaching",
        "kind": "coaching",
        "description": None,
        "isActive": True,
        "workouts": 1,
        "lastWorkoutOn": "2026-03-02",
        "enrolledMembers": 1,
        "classTypes": ["Personal Training"],
    }
    assert await lookup("workout", coaching.workout) == {
        "type": "workout",
        "id": coaching.workout,
        "title": "Monday WOD",
        "kind": "structured",
        "description": None,
        "scheduledFor": "2026-03-02",
        "programId": coaching.program,
        "programName": "Coaching",
        "sections": ["Metcon (3 rounds): Run, Thruster"],
        "comments": 2,  # Dani's first comment is on the workout and the assignment
    }
    assert await lookup("exercise", library["Kettlebell Swing"]) == {
        "type": "exercise",
        "id": library["Kettlebell Swing"],
        "name": "Kettlebell Swing",
        "aliases": ["KB swing", "Russian swing"],
        "modality": "weightlifting",
        "equipment": ["kettlebell"],
        "muscles": ["quads"],
        "description": "A movement.",
        "scope": "studio",
    }
    dani = studio.people["Dani Mizrahi"]
    member = await lookup("member", dani.membership_id)
    assert (member["type"], member["membershipId"], member["name"], member["status"]) == (
        "member",
        dani.membership_id,
        "Dani Mizrahi",
        "paused",
    )
    assert member["programs"] == ["Coaching"]
    assert member["recentAssignments"] == [
        {"id": coaching.assignment, "title": "Dani - Monday WOD", "scheduledFor": "2026-03-02"}
    ]
    assert await lookup("class_session", coaching.session) == {
        "type": "class_session",
        "id": coaching.session,
        "classType": "Personal Training",
        "programName": "Coaching",
        "coachMembershipId": studio.coach.membership_id,
        "coachName": studio.coach.full_name,
        "startsAt": "2026-03-02T07:00:00+02:00",
        "endsAt": "2026-03-02T08:00:00+02:00",
        "capacity": 2,
        "published": True,
        "cancelledAt": None,
        "cancelReason": None,
        "notes": None,
        "booked": 2,
        "waitlisted": 1,
        "checkedIn": 1,
    }
    assert await lookup("assignment", coaching.assignment) == ASSIGNMENT(studio, coaching)


def ASSIGNMENT(studio: Studio, coaching: Coaching) -> dict:
    """Dani's Monday assignment as the coach sees it: Dani's "OK!" is the one unread comment."""
    return {
        "type": "assignment",
        "id": coaching.assignment,
        "title": "Dani - Monday WOD",
        "scheduledFor": "2026-03-02",
        "membershipId": studio.people["Dani Mizrahi"].membership_id,
        "memberName": "Dani Mizrahi",
        "coachMembershipId": studio.coach.membership_id,
        "coachName": studio.coach.full_name,
        "programId": coaching.program,
        "programName": "Coaching",
        "workoutId": coaching.workout,
        "workoutTitle": "Monday WOD",
        "notes": "Scale thrusters to 30kg.",
        "published": True,
        "comments": 3,
        "unreadComments": 1,
    }


async def test_lookup_by_id_of_another_studio_or_of_a_deleted_row_is_not_found(
    pool, runner, conv, studio, other_studio, coaching
) -> None:
    theirs = await add_exercise(pool, other_studio.org.id, f"Their Move {uuid.uuid4().hex[:8]}")
    await pool.execute("UPDATE workouts SET deleted_at = now() WHERE id = $1", coaching.older_murph)
    for type, id in [
        ("program", other_studio.programs["CrossFit"]),
        ("member", other_studio.people["Dani Mizrahi"].membership_id),
        ("exercise", theirs),
        ("workout", coaching.older_murph),
        ("class_session", coaching.assignment),  # an id of another type
        ("assignment", str(uuid.uuid4())),
    ]:
        error = failed(await run(runner, conv, "lookup_by_id", {"type": type, "id": id}), "not_found")
        assert id in error.message and error.hint


async def test_workout_comments_in_program_for_the_calling_coach(pool, runner, conv, studio, coaching) -> None:
    out = succeeded(await run(runner, conv, "workout_comments_in_program", {"programId": coaching.program}))
    ids = coaching.comments
    # Newest first; the deleted comment and the CrossFit Murph's are not in the program's list.
    assert [(c["id"], c["read"]) for c in out["comments"]] == [
        (ids["saar_loved"], False),
        (ids["dani_ok"], False),
        (ids["coach_reply"], True),  # the caller wrote it
        (ids["dani_heavy"], True),  # the caller has a read row
    ]
    assert (out["programId"], out["programName"], out["total"], out["unread"]) == (coaching.program, "Coaching", 4, 2)
    dani = studio.people["Dani Mizrahi"]
    assert out["comments"][1] == {
        "id": ids["dani_ok"],
        "on": "assignment",
        "workoutId": None,
        "assignmentId": coaching.assignment,
        "title": "Dani - Monday WOD",
        "day": "2026-03-02",
        "authorMembershipId": dani.membership_id,
        "authorName": "Dani Mizrahi",
        "authorRole": "member",
        "body": "OK!",
        "createdAt": "2026-03-02T12:00:00+02:00",
        "read": False,
    }
    assert (out["comments"][0]["on"], out["comments"][0]["title"], out["comments"][0]["workoutId"]) == (
        "workout",
        "Monday WOD",
        coaching.workout,
    )

    unread = succeeded(
        await run(runner, conv, "workout_comments_in_program", {"programId": coaching.program, "unreadOnly": True})
    )
    assert [c["id"] for c in unread["comments"]] == [ids["saar_loved"], ids["dani_ok"]]
    assert (unread["total"], unread["unread"]) == (2, 2)

    # 22:30 UTC on 2 March is already 3 March in Jerusalem.
    since = succeeded(
        await run(runner, conv, "workout_comments_in_program", {"programId": coaching.program, "since": "2026-03-03"})
    )
    assert [(c["id"], c["createdAt"]) for c in since["comments"]] == [(ids["saar_loved"], "2026-03-03T00:30:00+02:00")]

    limited = succeeded(
        await run(runner, conv, "workout_comments_in_program", {"programId": coaching.program, "limit": 1})
    )
    assert len(limited["comments"]) == 1 and limited["total"] == 4


async def test_read_state_belongs_to_the_caller(pool, runner, studio, coaching) -> None:
    owner = await new_conversation(pool, studio, studio.owner)
    out = succeeded(await run(runner, owner, "workout_comments_in_program", {"programId": coaching.program}))
    assert [c["read"] for c in out["comments"]] == [False, False, False, False]
    assert out["unread"] == 4


async def test_workout_comments_in_another_studios_program_is_not_found(runner, conv, other_studio) -> None:
    error = failed(
        await run(runner, conv, "workout_comments_in_program", {"programId": other_studio.programs["CrossFit"]}),
        "not_found",
    )
    assert "read__programs_list" in error.hint


async def test_workout_comments_for_assignment_is_the_whole_thread(pool, runner, conv, studio, coaching) -> None:
    out = succeeded(
        await run(runner, conv, "workout_comments_for_assignment", {"assignmentId": coaching.assignment})
    )
    ids = coaching.comments
    dani = studio.people["Dani Mizrahi"]
    assert out["assignment"] == ASSIGNMENT(studio, coaching)
    assert out["total"] == 3
    assert out["comments"] == [
        {
            "id": ids["dani_heavy"],
            "authorMembershipId": dani.membership_id,
            "authorName": "Dani Mizrahi",
            "authorRole": "member",
            "body": "Felt heavy on the thrusters",
            "createdAt": "2026-03-02T10:00:00+02:00",
            "read": True,
        },
        {
            "id": ids["coach_reply"],
            "authorMembershipId": studio.coach.membership_id,
            "authorName": studio.coach.full_name,
            "authorRole": "coach",
            "body": "Drop to 30kg next time",
            "createdAt": "2026-03-02T11:00:00+02:00",
            "read": True,
        },
        {
            "id": ids["dani_ok"],
            "authorMembershipId": dani.membership_id,
            "authorName": "Dani Mizrahi",
            "authorRole": "member",
            "body": "OK!",
            "createdAt": "2026-03-02T12:00:00+02:00",
            "read": False,
        },
    ]


async def test_workout_comments_for_another_studios_assignment_is_not_found(
    pool, runner, studio, other_studio, coaching
) -> None:
    # Seen from the other studio, our assignment does not exist.
    theirs = await new_conversation(pool, other_studio, other_studio.coach)
    failed(
        await run(runner, theirs, "workout_comments_for_assignment", {"assignmentId": coaching.assignment}),
        "not_found",
    )
