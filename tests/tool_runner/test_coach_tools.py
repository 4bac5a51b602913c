"""Seed 003's coach tools against real Postgres and Redis: a workout is validated to the field (four
types, 16 muscles, shares, groups) and becomes an `art_…` artifact kept in Redis; swap, adjust and
remove take an id or an order number and protect id and type; log_workout writes the member's history
once and closes the workout; set_current_location moves the one current flag; a repeated call returns
its first result; the coach's tools and the studio's never mix."""

from __future__ import annotations

import copy
import uuid
from typing import Any

import asyncpg
import pytest
from redis.asyncio import Redis

from spotter_shared.contracts.coach import CoachToolCall
from spotter_tool_runner.coach.tools import BY_NAME, CoachTools
from spotter_tool_runner.tools import REGISTRY
from tests.factories import Studio, actor_of

SQUAT = {"exercise_name": "Goblet Squat", "exercise_type": "reps", "order": 1, "sets": 3, "reps": [10, 10, 8], "rest_sec": 60,
         "load_each": [16, 16, 20], "load_unit": "kg",
         "muscles_utilized": [{"muscle": "Quadriceps", "share": 0.5}, {"muscle": "Glutes", "share": 0.4},
                              {"muscle": "Abs", "share": 0.1}],
         "goals_addressed": [{"goal": "strength", "share": 1.0}], "reasoning": "Legs first, while fresh."}
PLANK = {"exercise_name": "Plank", "exercise_type": "hold", "order": 2, "sets": 3, "hold_sec": [30, 30, 40], "rest_sec": 30,
         "muscles_utilized": [{"muscle": "Abs", "share": 0.8}, {"muscle": "Lower Back", "share": 0.2}],
         "goals_addressed": [{"goal": "strength", "share": 0.6}, {"goal": "endurance", "share": 0.4}], "reasoning": "Core."}
ROW = {"exercise_name": "Row Intervals", "exercise_type": "intervals", "order": 3, "rounds": 8, "work_sec": 20, "rest_sec": 10,
       "muscles_utilized": [{"muscle": "Back", "share": 0.6}, {"muscle": "Quadriceps", "share": 0.4}],
       "goals_addressed": [{"goal": "endurance", "share": 1.0}], "reasoning": "Finisher.",
       "group": {"id": "finisher", "type": "circuit", "position": 1, "name": "Finisher", "rounds": 1}}
WORKOUT = {"workout": {"title": "Legs & Core", "estimated_duration_min": 35, "exercises": [SQUAT, PLANK, ROW]}}


@pytest.fixture
def coach(pool: asyncpg.Pool, redis: Redis) -> CoachTools:
    return CoachTools(pool, redis)


class Session:
    def __init__(self, coach: CoachTools, studio: Studio) -> None:
        self.coach, self.studio, self.id = coach, studio, str(uuid.uuid4())

    async def call(self, name: str, tool_input: dict[str, Any], call_id: str | None = None):
        return await self.coach.execute(CoachToolCall(
            session_id=self.id, call_id=call_id or f"toolu_{uuid.uuid4().hex[:12]}", name=name, input=tool_input,
            actor=actor_of(self.studio, self.studio.member), trace_id="t"))


async def test_a_valid_workout_becomes_an_artifact_and_is_delivered(coach: CoachTools, studio: Studio) -> None:
    s = Session(coach, studio)
    made = await s.call("generate_workout", WORKOUT)
    assert made.success, made.formatted
    art = made.result["artifact_id"]
    assert art.startswith("art_") and made.result["exercise_count"] == 3
    assert f"IMPORTANT: You MUST now call message_notify_user with artifact_id={art}" in made.formatted
    assert made.formatted.startswith('<tool_result tool="generate_workout" status="success">')
    exercises = made.artifact["payload"]["exercises"]
    assert [e["order"] for e in exercises] == [1, 2, 3] and all(uuid.UUID(e["id"]) for e in exercises)
    assert made.artifact["type"] == "exercise_list" and made.artifact["summary"]["muscles"][:2] == ["Abs", "Quadriceps"]
    sent = await s.call("message_notify_user", {"message": "Here it is", "artifact_id": art})
    assert sent.success and sent.result["artifact_id"] == art and sent.result["artifact"]["payload"]["exercises"] == exercises
    missing = await s.call("message_notify_user", {"message": "Here", "artifact_id": "art_000000000000"})
    assert missing.success and "not found" in missing.result["warning"] and "artifact" not in missing.result


@pytest.mark.parametrize(("change", "expected"), [
    (lambda w: w["exercises"][0].update(reps=[10, 10]), "exercises.0: reps must have one value per set (sets=3, got 2)"),
    (lambda w: w["exercises"][0]["muscles_utilized"][0].update(muscle="Pecs"), "exercises.0.muscles_utilized.0.muscle"),
    (lambda w: w["exercises"][1]["muscles_utilized"][0].update(share=0.5), "muscles_utilized shares add up to 0.70"),
    (lambda w: w["exercises"][2].pop("work_sec"), "exercises.2.work_sec: Field required"),
    (lambda w: w["exercises"][0].update(exercise_type="strength"), "exercises.0"),
    (lambda w: w["exercises"][1].update(order=1), "two exercises have the same order"),
    (lambda w: w["exercises"][0].pop("load_unit"), "load_each needs a load_unit"),
])
async def test_an_invalid_workout_is_refused_with_the_field_to_fix(coach: CoachTools, studio: Studio, change, expected) -> None:
    payload = copy.deepcopy(WORKOUT)
    change(payload["workout"])
    made = await Session(coach, studio).call("generate_workout", payload)
    assert not made.success and made.artifact is None
    assert expected in made.formatted and 'status="error"' in made.formatted


async def test_swap_adjust_remove_by_id_or_order_and_protected_fields(coach: CoachTools, studio: Studio) -> None:
    s = Session(coach, studio)
    made = await s.call("generate_workout", WORKOUT)
    first_id = made.artifact["payload"]["exercises"][0]["id"]
    lunge = {**SQUAT, "exercise_name": "Reverse Lunge", "order": 9}
    swapped = await s.call("swap_exercise", {"exercise_id": "1", "new_exercise": lunge, "reason": "knees"})
    assert swapped.success and swapped.result["old_exercise"]["id"] == first_id
    exercises = swapped.artifact["payload"]["exercises"]
    assert exercises[0]["exercise_name"] == "Reverse Lunge" and exercises[0]["order"] == 1 and exercises[0]["id"] != first_id
    assert swapped.artifact["artifact_id"] == made.result["artifact_id"] and swapped.artifact["version"] == 2

    plank_id = exercises[1]["id"]
    adjusted = await s.call("adjust_exercise", {"exercise_id": plank_id, "adjustments": {"sets": 4, "hold_sec": [30, 30, 40, 45]}})
    assert adjusted.success and adjusted.result["old_values"] == {"sets": 3, "hold_sec": [30, 30, 40]}
    assert adjusted.artifact["payload"]["exercises"][1]["sets"] == 4
    for protected in ({"id": "x"}, {"exercise_type": "duration"}):
        refused = await s.call("adjust_exercise", {"exercise_id": "2", "adjustments": protected})
        assert not refused.success and "cannot be adjusted" in refused.formatted
    broken = await s.call("adjust_exercise", {"exercise_id": "2", "adjustments": {"sets": 5}})
    assert not broken.success and "hold_sec must have one value per set (sets=5, got 4)" in broken.formatted
    unknown = await s.call("remove_exercise", {"exercise_id": "7"})
    assert not unknown.success and "No exercise '7'" in unknown.formatted and "1=Reverse Lunge" in unknown.formatted

    removed = await s.call("remove_exercise", {"exercise_id": "1"})
    assert removed.success and removed.result["remaining_count"] == 2
    assert [e["order"] for e in removed.artifact["payload"]["exercises"]] == [1, 2]
    # The artifact delivered now is the current state.
    sent = await s.call("message_notify_user", {"message": "Updated", "artifact_id": made.result["artifact_id"]})
    assert [e["exercise_name"] for e in sent.result["artifact"]["payload"]["exercises"]] == ["Plank", "Row Intervals"]


async def test_log_workout_writes_history_once_and_closes_the_workout(coach: CoachTools, studio: Studio, pool: asyncpg.Pool) -> None:
    s = Session(coach, studio)
    made = await s.call("generate_workout", WORKOUT)
    ids = [e["id"] for e in made.artifact["payload"]["exercises"]]
    log_input = {"completed_exercises": [{"exercise_id": ids[0], "reps_done": [10, 10, 9]}, {"exercise_id": "2"},
                                         {"exercise_id": "3", "completed": False}], "workout_notes": "felt good"}
    logged = await s.call("log_workout", log_input, call_id="toolu_log1")
    assert logged.success and (logged.result["logged_count"], logged.result["total_in_workout"]) == (2, 3)
    again = await s.call("log_workout", log_input, call_id="toolu_log1")  # the run was redelivered
    assert again == logged
    rows = await pool.fetch("SELECT title, notes, exercises FROM member_workout_logs WHERE session_id = $1", uuid.UUID(s.id))
    assert len(rows) == 1 and rows[0]["title"] == "Legs & Core" and rows[0]["notes"] == "felt good"
    exercises = rows[0]["exercises"]
    assert [e["completed"] for e in exercises] == [True, True, False] and exercises[0]["reps_done"] == [10, 10, 9]
    closed = await s.call("swap_exercise", {"exercise_id": "1", "new_exercise": SQUAT})
    assert not closed.success and "no active workout" in closed.formatted


async def test_set_current_location_moves_the_one_current_flag(coach: CoachTools, studio: Studio, pool: asyncpg.Pool) -> None:
    member = uuid.UUID(studio.member.membership_id)
    org = uuid.UUID(studio.org.id)
    for name, current in (("Home", True), ("Downtown Gym", False), ("Downtown Park", False)):
        await pool.execute(
            """INSERT INTO member_locations (membership_id, organization_id, name, is_current, equipment)
               VALUES ($1, $2, $3, $4, '[{"name": "Dumbbells", "category": "free_weights", "weights": [5, 10]}]')""",
            member, org, name, current)
    s = Session(coach, studio)
    ambiguous = await s.call("set_current_location", {"location_name": "downtown"})
    assert not ambiguous.success and "Several locations match" in ambiguous.formatted
    moved = await s.call("set_current_location", {"location_name": "downtown gym"})
    assert moved.success and moved.result["location"]["name"] == "Downtown Gym"
    assert moved.result["location"]["equipment_count"] == 1
    current = await pool.fetch("SELECT name FROM member_locations WHERE membership_id = $1 AND is_current", member)
    assert [r["name"] for r in current] == ["Downtown Gym"]
    nowhere = await s.call("set_current_location", {})
    assert not nowhere.success


async def test_the_coach_and_the_studio_have_separate_tools(coach: CoachTools, studio: Studio) -> None:
    names = {t.name for t in coach.catalog().tools}
    assert names == {"message_notify_user", "message_ask_user", "idle", "generate_workout", "swap_exercise", "adjust_exercise",
                     "remove_exercise", "log_workout", "fetch_data", "set_current_location"} == set(BY_NAME)
    studio_tools = {spec.name for role in ("owner", "admin", "coach", "member") for spec in REGISTRY.for_role(role)}
    assert not names & studio_tools and not {n.split("__")[-1] for n in studio_tools} & {"generate_workout", "log_workout"}
    unknown = await Session(coach, studio).call("workouts__delete", {"id": str(uuid.uuid4())})
    assert not unknown.success and "Unknown tool" in unknown.formatted
    specs = {t.name: t for t in coach.catalog().tools}
    assert specs["idle"].ends_run and specs["message_ask_user"].ends_run and not specs["message_notify_user"].ends_run
    assert (specs["generate_workout"].status_start, specs["generate_workout"].status_done) == ("Creating your workout...", "Workout ready")
    assert specs["message_notify_user"].status_start is None
