"""Seed 003's ten coach tools, one registry the operator never sees: talking to the member
(message_notify_user, message_ask_user, idle), the workout artifact (generate_workout, swap, adjust,
remove, log_workout) and the member's data (fetch_data, set_current_location).

The workout in progress and every artifact of a session live in Redis, so any replica continues a
session; `log_workout` writes the member's history in Postgres and clears the workout. A repeated
call (same session and call id — a redelivered run) returns its stored result and changes nothing."""

from __future__ import annotations

import html
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

import asyncpg
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from redis.asyncio import Redis

from spotter_shared import coach_data
from spotter_shared.contracts.coach import CoachCatalog, CoachToolCall, CoachToolResult, CoachToolSpec

from .workout import EXERCISE, EXERCISE_TYPES, MUSCLES, WorkoutPayload, artifact_from, artifact_of, explain, listing, renumbered

_TTL_S: Final = 7 * 24 * 3600
_CALL_TTL_S: Final = 24 * 3600


class CoachToolError(Exception):
    """An expected failure: the model reads the message and may fix its call."""


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NotifyInput(_Input):
    message: str = Field(min_length=1, max_length=4000, description="What to tell the member.")
    artifact_id: str | None = Field(default=None, max_length=40, description="An artifact to deliver with it (art_…).")


class AskInput(_Input):
    question: str = Field(min_length=1, max_length=1000)
    options: list[str] | None = Field(default=None, max_length=6, description="Suggested answers.")


class IdleInput(_Input):
    reason: str = Field(min_length=1, max_length=500, description="Why you are done.")


class SwapInput(_Input):
    exercise_id: str = Field(min_length=1, max_length=40, description="The exercise's id or its order number (\"1\").")
    new_exercise: dict[str, Any] = Field(description="The full replacement exercise (same fields as in generate_workout).")
    reason: str | None = Field(default=None, max_length=500)


class AdjustInput(_Input):
    exercise_id: str = Field(min_length=1, max_length=40, description="The exercise's id or its order number.")
    adjustments: dict[str, Any] = Field(min_length=1, description="Fields to change, e.g. {\"sets\": 4, \"reps\": [8, 8, 8, 8]}; "
                                        "id and exercise_type cannot change.")


class RemoveInput(_Input):
    exercise_id: str = Field(min_length=1, max_length=40, description="The exercise's id or its order number.")
    reason: str | None = Field(default=None, max_length=500)


class CompletedExercise(_Input):
    exercise_id: str = Field(min_length=1, max_length=40, description="Id or order number.")
    completed: bool = True
    sets_done: int | None = Field(default=None, ge=0, le=50)
    reps_done: list[int] | None = Field(default=None, max_length=50)
    load_used: list[float] | None = Field(default=None, max_length=50)
    duration_min_done: float | None = Field(default=None, ge=0, le=600)
    notes: str | None = Field(default=None, max_length=500)


class LogInput(_Input):
    completed_exercises: list[CompletedExercise] = Field(min_length=1, max_length=60)
    workout_notes: str | None = Field(default=None, max_length=2000)


class FetchInput(_Input):
    sources: list[str] = Field(min_length=1, max_length=8, description=f"Any of: {', '.join(coach_data.SOURCES)}.")
    params: dict[str, dict[str, Any]] | None = Field(default=None, description="Per source, e.g. "
                                                     "{\"workout_history\": {\"days_back\": 30, \"limit\": 20}}.")


class LocationInput(_Input):
    location_id: str | None = Field(default=None, max_length=40)
    location_name: str | None = Field(default=None, max_length=120)


@dataclass(frozen=True)
class Context:
    pool: asyncpg.Pool
    redis: Redis
    call: CoachToolCall

    @property
    def membership_id(self) -> str:
        return self.call.actor.membership_id

    @property
    def organization_id(self) -> str:
        return self.call.actor.organization_id


@dataclass(frozen=True)
class Outcome:
    result: dict[str, Any]
    text: str
    artifact: dict[str, Any] | None = None


Handler = Callable[[Context, Any], Awaitable[Outcome]]


@dataclass(frozen=True)
class CoachTool:
    name: str
    description: str
    input: type[_Input]
    handler: Handler
    status_start: str | None = None
    status_done: str | None = None
    ends_run: bool = False

    def spec(self) -> CoachToolSpec:
        schema = self.input.model_json_schema()
        schema.pop("title", None)
        return CoachToolSpec(name=self.name, description=self.description, input_schema=schema,
                             status_start=self.status_start, status_done=self.status_done, ends_run=self.ends_run)


# The workout store -----------------------------------------------------------------------------------

def _current_key(session_id: str) -> str:
    return f"spotter:coach:workout:{session_id}"


def _artifacts_key(session_id: str) -> str:
    return f"spotter:coach:artifacts:{session_id}"


async def _current(ctx: Context) -> dict[str, Any]:
    raw = await ctx.redis.get(_current_key(ctx.call.session_id))
    if raw is None:
        raise CoachToolError("There is no active workout in this session. Generate one first (generate_workout).")
    return json.loads(raw)


async def _keep(ctx: Context, artifact: dict[str, Any]) -> None:
    data = json.dumps(artifact)
    async with ctx.redis.pipeline(transaction=True) as pipe:
        pipe.set(_current_key(ctx.call.session_id), data, ex=_TTL_S)
        pipe.hset(_artifacts_key(ctx.call.session_id), artifact["artifact_id"], data)
        pipe.expire(_artifacts_key(ctx.call.session_id), _TTL_S)
        await pipe.execute()


def _find(exercises: list[dict[str, Any]], ref: str) -> dict[str, Any]:
    ref = ref.strip()
    for exercise in exercises:
        if exercise["id"] == ref or (ref.isdigit() and exercise["order"] == int(ref)):
            return exercise
    listed = "; ".join(f"{e['order']}={e['exercise_name']}" for e in exercises)
    raise CoachToolError(f"No exercise {ref!r} in the current workout (by order: {listed}).")


def _revised(artifact: dict[str, Any], exercises: list[dict[str, Any]]) -> dict[str, Any]:
    payload = artifact["payload"]
    return artifact_from(artifact["artifact_id"], payload["title"], payload.get("description"),
                         payload.get("estimated_duration_min"), renumbered(exercises), artifact.get("version", 1) + 1)


def _validated_exercise(raw: dict[str, Any], field: str) -> dict[str, Any]:
    try:
        return EXERCISE.validate_python(raw).model_dump(mode="json", exclude_none=True)
    except ValidationError as exc:
        raise CoachToolError(explain(exc, f"{field}.")) from None


# Handlers ------------------------------------------------------------------------------------------------

async def notify(ctx: Context, args: NotifyInput) -> Outcome:
    result: dict[str, Any] = {"success": True, "message": args.message}
    artifact = None
    if args.artifact_id:
        raw = await ctx.redis.hget(_artifacts_key(ctx.call.session_id), args.artifact_id)
        if raw is None:
            result["warning"] = f"Artifact {args.artifact_id} was not found in this session; the message went without it."
        else:
            artifact = json.loads(raw)
            result.update(artifact=artifact, artifact_id=args.artifact_id)
    text = "Message delivered" + (f" with artifact {args.artifact_id}." if artifact else ".")
    if "warning" in result:
        text += " " + result["warning"]
    return Outcome(result, text, artifact)


async def ask(ctx: Context, args: AskInput) -> Outcome:
    result = {"success": True, "question": args.question, "options": args.options or [], "awaiting_response": True}
    return Outcome(result, "Question sent; the run ends until the member answers.")


async def idle(ctx: Context, args: IdleInput) -> Outcome:
    return Outcome({"success": True, "idle": True, "reason": args.reason}, "Idle.")


async def generate(ctx: Context, args: WorkoutPayload) -> Outcome:
    artifact = artifact_of(args.workout)
    await _keep(ctx, artifact)
    exercises = artifact["payload"]["exercises"]
    result = {"success": True, "artifact_id": artifact["artifact_id"], "exercise_count": len(exercises),
              "summary": artifact["summary"], "exercises": [{"id": e["id"], "order": e["order"], "exercise_name": e["exercise_name"],
                                                             "exercise_type": e["exercise_type"]} for e in exercises]}
    text = "\n".join([
        f'Created workout {artifact["artifact_id"]}: "{html.escape(artifact["title"])}" with {len(exercises)} exercises.',
        *listing(exercises),
        f"IMPORTANT: You MUST now call message_notify_user with artifact_id={artifact['artifact_id']} to deliver it.",
    ])
    return Outcome(result, text, artifact)


async def swap(ctx: Context, args: SwapInput) -> Outcome:
    artifact = await _current(ctx)
    exercises = artifact["payload"]["exercises"]
    old = _find(exercises, args.exercise_id)
    new = _validated_exercise({**args.new_exercise, "order": old["order"], "id": None}, "new_exercise")
    new["id"] = str(uuid.uuid4())
    revised = _revised(artifact, [new if e["id"] == old["id"] else e for e in exercises])
    await _keep(ctx, revised)
    result = {"success": True, "old_exercise": old, "new_exercise": new, "new_id": new["id"], "artifact_id": revised["artifact_id"]}
    text = "\n".join([f"Swapped {old['exercise_name']} for {new['exercise_name']} in {revised['artifact_id']}.",
                      *listing(revised["payload"]["exercises"])])
    return Outcome(result, text, revised)


_PROTECTED: Final = frozenset({"id", "exercise_type", "type"})


async def adjust(ctx: Context, args: AdjustInput) -> Outcome:
    if protected := sorted(_PROTECTED & set(args.adjustments)):
        raise CoachToolError(f"{', '.join(protected)} cannot be adjusted; swap the exercise to change its type.")
    artifact = await _current(ctx)
    exercises = artifact["payload"]["exercises"]
    old = _find(exercises, args.exercise_id)
    changed = _validated_exercise({**old, **args.adjustments, "order": old["order"]}, "adjustments")
    changed["id"] = old["id"]
    revised = _revised(artifact, [changed if e["id"] == old["id"] else e for e in exercises])
    await _keep(ctx, revised)
    before = {k: old.get(k) for k in args.adjustments}
    result = {"success": True, "exercise_name": changed["exercise_name"], "adjustments": args.adjustments,
              "old_values": before, "artifact_id": revised["artifact_id"]}
    text = "\n".join([f"Adjusted {changed['exercise_name']}: {json.dumps(args.adjustments)} (was {json.dumps(before)}).",
                      *listing(revised["payload"]["exercises"])])
    return Outcome(result, text, revised)


async def remove(ctx: Context, args: RemoveInput) -> Outcome:
    artifact = await _current(ctx)
    exercises = artifact["payload"]["exercises"]
    old = _find(exercises, args.exercise_id)
    if len(exercises) == 1:
        raise CoachToolError("That is the workout's only exercise; generate a new workout instead.")
    revised = _revised(artifact, [e for e in exercises if e["id"] != old["id"]])
    await _keep(ctx, revised)
    result = {"success": True, "removed_exercise": old, "remaining_count": len(revised["payload"]["exercises"]),
              "artifact_id": revised["artifact_id"]}
    text = "\n".join([f"Removed {old['exercise_name']}.", *listing(revised["payload"]["exercises"])])
    return Outcome(result, text, revised)


async def log_workout(ctx: Context, args: LogInput) -> Outcome:
    artifact = await _current(ctx)
    exercises = artifact["payload"]["exercises"]
    done = {}
    for item in args.completed_exercises:
        done[_find(exercises, item.exercise_id)["id"]] = item
    logged = []
    for exercise in exercises:
        item = done.get(exercise["id"])
        entry = {k: v for k, v in exercise.items() if k not in ("id", "reasoning", "goals_addressed", "group", "order")}
        entry["completed"] = bool(item and item.completed)
        if item is not None:
            for key in ("sets_done", "reps_done", "load_used", "duration_min_done", "notes"):
                if getattr(item, key) is not None:
                    entry[key] = getattr(item, key)
        logged.append(entry)
    await ctx.pool.execute(
        """INSERT INTO member_workout_logs (membership_id, organization_id, session_id, call_id, title, notes, exercises)
           VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb) ON CONFLICT (session_id, call_id) DO NOTHING""",
        uuid.UUID(ctx.membership_id), uuid.UUID(ctx.organization_id), uuid.UUID(ctx.call.session_id), ctx.call.call_id,
        artifact["title"], args.workout_notes, logged,
    )
    await ctx.redis.delete(_current_key(ctx.call.session_id))
    count = sum(1 for e in logged if e["completed"])
    result = {"success": True, "logged_count": count, "total_in_workout": len(exercises), "artifact_id": artifact["artifact_id"]}
    return Outcome(result, f"Logged {count} of {len(exercises)} exercises of \"{html.escape(artifact['title'])}\" to the "
                           "member's history; the workout is closed.")


async def fetch(ctx: Context, args: FetchInput) -> Outcome:
    unknown = [s for s in args.sources if s not in coach_data.SOURCES]
    if unknown:
        raise CoachToolError(f"Unknown source(s) {', '.join(unknown)}; use any of {', '.join(coach_data.SOURCES)}.")
    fetched = await coach_data.fetch_sources(ctx.pool, ctx.organization_id, ctx.membership_id, args.sources, args.params)
    data = {s: v for s, v in fetched.items() if not isinstance(v, Exception)}
    failed = {s: str(v) for s, v in fetched.items() if isinstance(v, Exception)}
    if not data:
        raise CoachToolError(f"Could not fetch {', '.join(failed)}: {'; '.join(failed.values())}")
    blocks = [coach_data.knowledge_block(s, text) for s, text in data.items()]
    result: dict[str, Any] = {"success": True, "data": data}
    if failed:
        result["failed"] = failed
    return Outcome(result, "\n".join(blocks))


async def set_location(ctx: Context, args: LocationInput) -> Outcome:
    if not args.location_id and not args.location_name:
        raise CoachToolError("Give location_id (preferred) or location_name.")
    async with ctx.pool.acquire() as conn, conn.transaction():
        rows = await conn.fetch(
            """SELECT id, name, description, equipment FROM member_locations
                WHERE membership_id = $1 AND organization_id = $2 ORDER BY name FOR UPDATE""",
            uuid.UUID(ctx.membership_id), uuid.UUID(ctx.organization_id),
        )
        if args.location_id:
            target = [r for r in rows if str(r["id"]) == args.location_id.strip()]
        else:
            wanted = args.location_name.strip().casefold()  # type: ignore[union-attr]
            target = [r for r in rows if r["name"].casefold() == wanted] or [r for r in rows if wanted in r["name"].casefold()]
        names = ", ".join(r["name"] for r in rows) or "none"
        if not target:
            raise CoachToolError(f"No such location. The member's locations: {names}.")
        if len(target) > 1:
            raise CoachToolError(f"Several locations match: {', '.join(r['name'] for r in target)}. Use location_id.")
        chosen = target[0]
        await conn.execute("UPDATE member_locations SET is_current = false WHERE membership_id = $1 AND is_current",
                           uuid.UUID(ctx.membership_id))
        await conn.execute("UPDATE member_locations SET is_current = true WHERE id = $1", chosen["id"])
    equipment = chosen["equipment"] if isinstance(chosen["equipment"], list) else json.loads(chosen["equipment"] or "[]")
    summary = ", ".join(item.get("name", "?") for item in equipment) or "no equipment listed"
    location = {"id": str(chosen["id"]), "name": chosen["name"], "description": chosen["description"],
                "equipment_count": len(equipment), "equipment_summary": summary}
    return Outcome({"success": True, "location": location},
                   f"Current location is now {html.escape(chosen['name'])} ({summary}).")


TOOLS: Final[tuple[CoachTool, ...]] = (
    CoachTool("message_notify_user", "Send a message to the member without waiting for an answer. To deliver a workout "
              "you generated or changed, pass its artifact_id: the member sees nothing of it otherwise.", NotifyInput, notify),
    CoachTool("message_ask_user", "Ask the member a question and stop until they answer (offer short options when you "
              "can).", AskInput, ask, ends_run=True),
    CoachTool("idle", "Signal that everything asked is done. Always deliver results with message_notify_user first.",
              IdleInput, idle, "Wrapping up...", "All done", ends_run=True),
    CoachTool("generate_workout", "Generate a workout as an artifact. Exercise types and their required fields: reps "
              "(sets, reps[] one per set, rest_sec; optional load_each[] one per set + load_unit), hold (sets, hold_sec[] "
              "one per set, rest_sec), duration (duration_min; optional distance + distance_unit, target_pace), intervals "
              "(rounds, work_sec, rest_sec). Every exercise: exercise_name, exercise_type, order (1..n), muscles_utilized "
              f"(muscles from: {', '.join(MUSCLES)}; "
              "shares add up to 1.0), goals_addressed (shares add up to 1.0), reasoning; optional group {id, type "
              "(circuit|superset|giant_set|warmup|cooldown|sequence), position, name, rounds, rest_between_rounds_sec}. "
              "Then deliver it with message_notify_user(artifact_id).", WorkoutPayload, generate,
              "Creating your workout...", "Workout ready"),
    CoachTool("swap_exercise", "Replace one exercise of the current workout (by id or order number) with a new full "
              "exercise.", SwapInput, swap, "Finding alternative...", "Exercise swapped"),
    CoachTool("adjust_exercise", "Change fields of one exercise of the current workout (sets, reps, loads, rest, "
              "duration, …); id and exercise_type are protected.", AdjustInput, adjust, "Adjusting exercise...", "Exercise updated"),
    CoachTool("remove_exercise", "Remove one exercise from the current workout (by id or order number).", RemoveInput,
              remove, "Removing exercise...", "Exercise removed"),
    CoachTool("log_workout", "Log the exercises the member completed to their history; this closes the current "
              "workout.", LogInput, log_workout, "Saving your workout...", "Workout logged"),
    CoachTool("fetch_data", "Fetch more of the member's data into context (several sources at once).", FetchInput, fetch,
              "Gathering your info...", "Context ready"),
    CoachTool("set_current_location", "Switch the member's current workout location (by id, or by name).",
              LocationInput, set_location, "Switching location...", "Location updated"),
)
BY_NAME: Final = {t.name: t for t in TOOLS}


class CoachTools:
    """The tool-runner's coach core."""

    def __init__(self, pool: asyncpg.Pool, redis: Redis) -> None:
        self._pool, self._redis = pool, redis

    def catalog(self) -> CoachCatalog:
        return CoachCatalog(tools=[t.spec() for t in TOOLS])

    async def execute(self, call: CoachToolCall) -> CoachToolResult:
        key = f"spotter:coach:call:{call.session_id}:{call.call_id}"
        if (stored := await self._redis.get(key)) is not None:
            return CoachToolResult.model_validate_json(stored)
        started = time.perf_counter()
        tool = BY_NAME.get(call.name)
        try:
            if tool is None:
                raise CoachToolError(f"Unknown tool: {call.name}. The tools are {', '.join(BY_NAME)}.")
            try:
                args = tool.input.model_validate(call.input)
            except ValidationError as exc:
                raise CoachToolError(explain(exc)) from None
            outcome = await tool.handler(Context(self._pool, self._redis, call), args)
            answer = CoachToolResult(name=call.name, success=True, result=outcome.result, artifact=outcome.artifact,
                                     formatted=_wrap(call.name, "success", outcome.text),
                                     duration_ms=int((time.perf_counter() - started) * 1000))
        except CoachToolError as exc:
            answer = CoachToolResult(name=call.name, success=False, result={"success": False, "error": str(exc)},
                                     formatted=_wrap(call.name, "error", str(exc)),
                                     duration_ms=int((time.perf_counter() - started) * 1000))
        await self._redis.set(key, answer.model_dump_json(), ex=_CALL_TTL_S, nx=True)
        return answer


def _wrap(name: str, status: str, text: str) -> str:
    return f'<tool_result tool="{name}" status="{status}">\n{text}\n</tool_result>'


__all__ = ["BY_NAME", "EXERCISE_TYPES", "TOOLS", "CoachTools"]
