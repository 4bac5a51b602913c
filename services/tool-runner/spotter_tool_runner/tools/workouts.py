"""The `workouts` router (seed 000): create, patch, replace sections, soft-delete. Staff only.

A workout is freeform (a description) or structured (sections of movements). Every write returns
the whole workout as it now stands, read back from the database, with its `id` for audit and undo.
A movement is linked to its exercise in the library: the exerciseId given, or the one exercise its
name or an alias spells (the studio's own before the global library's).
"""

from __future__ import annotations

import uuid
from datetime import date
from decimal import Decimal
from typing import Annotated, Any, ClassVar

import asyncpg
from pydantic import Field, StringConstraints, model_serializer, model_validator

from ..context import ToolContext
from ..declaration import ToolInput, ToolOutput, ToolRouter
from .common import (
    IdInput,
    Name,
    PatchInput,
    Table,
    Text,
    insert,
    not_found,
    patch,
    require,
    require_program,
    soft_delete,
)

router = ToolRouter("workouts", resource="workout")
WORKOUTS = Table(
    "workouts", "workout", "title", hint="Use the id returned by workouts__create; never invent ids.", scope="workout"
)

# inputs --------------------------------------------------------------------------------------------


class MovementInput(ToolInput):
    name: Name = Field(description="Movement, e.g. 'Run', 'Double-under', 'Back squat'.")
    exercise_id: uuid.UUID | None = Field(
        default=None,
        description="The exercise it is (read__exercises_resolve_batch). Omitted: linked when the name is "
        "exactly one exercise's name or alias.",
    )
    reps: int | None = Field(default=None, ge=1, le=10_000, description="Repetitions.")
    distance_m: int | None = Field(default=None, ge=1, le=100_000, description="Distance in metres (200m run → 200).")
    load_kg: float | None = Field(default=None, ge=0, le=1_000, description="Load in kilograms.")
    duration_s: int | None = Field(default=None, ge=1, le=86_400, description="Duration in seconds (1:00 → 60).")
    notes: Text | None = Field(default=None, description="Scaling or coaching notes.")


class SectionInput(ToolInput):
    name: Name = Field(description="Section name, e.g. 'Warm-up', 'Strength', 'Metcon'.")
    format: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64)] | None = Field(
        default=None, description="How it is performed, e.g. '3 rounds', 'AMRAP 12', 'EMOM 10', 'For time'."
    )
    notes: Text | None = Field(default=None, description="Notes for the whole section.")
    movements: list[MovementInput] = Field(default_factory=list, max_length=30, description="Movements, in order.")


Sections = Annotated[list[SectionInput], Field(max_length=20)]


class WorkoutsCreateInput(ToolInput):
    title: Name = Field(description="Title, e.g. 'Monday WOD' or 'Murph'.")
    description: Text | None = Field(default=None, description="Freeform workout text, or an intro to the sections.")
    sections: Sections | None = Field(
        default=None, description="Structured workout: sections in order. Omit for a freeform workout."
    )
    program_id: uuid.UUID | None = Field(default=None, description="Program it belongs to (read__programs_list).")
    scheduled_for: date | None = Field(default=None, description="Day it is programmed for, YYYY-MM-DD.")

    @model_validator(mode="after")
    def check_content(self) -> WorkoutsCreateInput:
        if not self.description and not self.sections:
            raise ValueError("give a freeform description or structured sections")
        return self


class WorkoutsUpdateInput(PatchInput):
    REQUIRED: ClassVar = frozenset({"title"})

    id: uuid.UUID = Field(description="Workout id.")
    title: Name | None = Field(default=None, description="New title.")
    description: Text | None = Field(default=None, description="New description; null clears it.")
    scheduled_for: date | None = Field(default=None, description="New day, YYYY-MM-DD; null unschedules it.")
    program_id: uuid.UUID | None = Field(default=None, description="New program; null detaches it.")


class WorkoutsSetSectionsInput(ToolInput):
    id: uuid.UUID = Field(description="Workout id.")
    sections: Sections = Field(description="The complete new list of sections; [] makes the workout freeform.")


# outputs -------------------------------------------------------------------------------------------


class Movement(ToolOutput):
    position: int
    name: str
    exercise_id: uuid.UUID | None = Field(default=None, description="The library exercise, when linked.")
    reps: int | None = None
    distance_m: int | None = None
    load_kg: float | None = None
    duration_s: int | None = None
    notes: str | None = None

    @model_serializer(mode="wrap")
    def drop_unset(self, handler: Any) -> dict[str, Any]:
        # Movements are sparse (a run has a distance, a squat a load): nulls would only cost tokens.
        return {k: v for k, v in handler(self).items() if v is not None}


class Section(ToolOutput):
    position: int
    name: str
    format: str | None
    notes: str | None
    movements: list[Movement]


class Workout(ToolOutput):
    id: uuid.UUID
    title: str
    description: str | None
    kind: str = Field(description="freeform or structured.")
    scheduled_for: date | None
    program_id: uuid.UUID | None
    program_name: str | None
    sections: list[Section]


class DeletedWorkout(ToolOutput):
    id: uuid.UUID
    title: str
    deleted: bool = True



# handlers ------------------------------------------------------------------------------------------


@router.write(
    "create",
    "Create a workout. Freeform: give a description. Structured: give sections, each with a format "
    "('3 rounds', 'AMRAP 12', …) and movements with reps, distanceM, loadKg or durationS — e.g. "
    "'3 rounds — 200m run, 30 double-unders' is one section, format '3 rounds', movements "
    "[{name: 'Run', distanceM: 200}, {name: 'Double-under', reps: 30}]; give each movement the exerciseId from "
    "read__exercises_resolve_batch when you have it. Optionally attach it to a program "
    "and schedule it for a day. Returns the workout with its id.",
    inverse="delete",
)
async def create(ctx: ToolContext, args: WorkoutsCreateInput) -> Workout:
    if args.program_id is not None:
        await require_program(ctx, args.program_id)
    sections = args.sections or []
    workout = await insert(
        ctx, WORKOUTS, args, exclude={"sections"}, kind=_kind(sections), created_by=ctx.actor.user_id
    )
    await _write_sections(ctx.conn, workout["id"], sections)
    return await _load(ctx, workout["id"])


@router.write(
    "update",
    "Change a workout's title, description, scheduled day or program. Send only the fields to change; "
    "null clears description, scheduledFor or programId. To change the movements use workouts__set_sections.",
)
async def update(ctx: ToolContext, args: WorkoutsUpdateInput) -> Workout:
    await require(ctx, WORKOUTS, args.id)
    if args.program_id is not None:
        await require_program(ctx, args.program_id)
    await patch(ctx, WORKOUTS, args)
    return await _load(ctx, args.id)


@router.write(
    "set_sections",
    "Replace ALL sections and movements of a workout with the given list (not a merge: send the "
    "complete workout). Use it to edit the movements of a structured workout.",
    audit_label="workout.sections_replaced",
)
async def set_sections(ctx: ToolContext, args: WorkoutsSetSectionsInput) -> Workout:
    await require(ctx, WORKOUTS, args.id)
    kind = _kind(args.sections)
    await ctx.conn.execute("UPDATE workouts SET kind = $2, updated_at = now() WHERE id = $1", args.id, kind)
    ctx.touch("workout", args.id)
    await _write_sections(ctx.conn, args.id, args.sections)
    return await _load(ctx, args.id)


@router.write("delete", "Delete a workout. The user is asked to confirm before it runs.", confirm="destructive")
async def delete(ctx: ToolContext, args: IdInput) -> DeletedWorkout:
    return DeletedWorkout.from_row(await soft_delete(ctx, WORKOUTS, args.id))


# storage -------------------------------------------------------------------------------------------

_WORKOUT = """
SELECT w.id, w.title, w.description, w.kind, w.scheduled_for, w.program_id, p.name AS program_name
  FROM workouts w LEFT JOIN programs p ON p.id = w.program_id AND p.deleted_at IS NULL
 WHERE w.id = $1 AND w.organization_id = $2 AND w.deleted_at IS NULL
"""

# The movements of each section as one jsonb array of its rows (an empty one for a section without any).
_SECTIONS = """
SELECT s.position, s.name, s.format, s.notes,
       coalesce(jsonb_agg(to_jsonb(m) ORDER BY m.position) FILTER (WHERE m.id IS NOT NULL), '[]') AS movements
  FROM workout_sections s LEFT JOIN workout_movements m ON m.section_id = s.id
 WHERE s.workout_id = $1
 GROUP BY s.id
 ORDER BY s.position
"""


# Of the exercise ids $2, those the workout's organization $1 sees (the global library and its own).
_VISIBLE_IDS = """
SELECT e.id FROM exercises e
 WHERE e.id = ANY ($2::uuid[]) AND (e.organization_id IS NULL OR e.organization_id = $1) AND e.deleted_at IS NULL
"""

# The exercises each name $2 spells, as name or alias (case-insensitive), among those $1 sees.
_BY_NAME = """
SELECT k.name, e.id, e.organization_id IS NOT NULL AS own
  FROM unnest($2::text[]) AS k(name)
  JOIN exercises e ON (e.organization_id IS NULL OR e.organization_id = $1) AND e.deleted_at IS NULL
   AND (lower(e.name) = lower(k.name) OR lower(k.name) = ANY (SELECT lower(a) FROM unnest(e.aliases) AS a))
"""

_EXERCISE_HINT = "Use read__exercises_resolve_batch to find the exerciseId, or omit it to link by name."


def _kind(sections: list[SectionInput]) -> str:
    return "structured" if sections else "freeform"


async def _exercise_ids(
    conn: asyncpg.Connection, org_id: uuid.UUID, movements: list[MovementInput]
) -> list[uuid.UUID | None]:
    """Each movement's exercise: the exerciseId given, which the studio must see; else the one exercise its name
    spells — the studio's own first, so its entry wins over a global one of the same name; else none."""
    given = {m.exercise_id for m in movements if m.exercise_id is not None}
    visible = {r["id"] for r in await conn.fetch(_VISIBLE_IDS, org_id, list(given))} if given else set()
    if missing := sorted(given - visible):
        raise not_found("exercise", missing[0], _EXERCISE_HINT)
    names = sorted({m.name for m in movements if m.exercise_id is None})
    spelled: dict[str, dict[bool, set[uuid.UUID]]] = {}
    for r in await conn.fetch(_BY_NAME, org_id, names) if names else []:
        spelled.setdefault(r["name"], {True: set(), False: set()})[r["own"]].add(r["id"])
    return [m.exercise_id or _only(spelled.get(m.name)) for m in movements]


def _only(ids: dict[bool, set[uuid.UUID]] | None) -> uuid.UUID | None:
    matches = (ids[True] or ids[False]) if ids else set()
    return next(iter(matches)) if len(matches) == 1 else None


async def _write_sections(conn: asyncpg.Connection, workout_id: uuid.UUID, sections: list[SectionInput]) -> None:
    # The workout's own organization, so that program_templates (which writes sections too) need not pass it.
    org_id = await conn.fetchval("SELECT organization_id FROM workouts WHERE id = $1", workout_id)
    exercise_ids = iter(await _exercise_ids(conn, org_id, [m for s in sections for m in s.movements]))
    await conn.execute("DELETE FROM workout_sections WHERE workout_id = $1", workout_id)
    for position, section in enumerate(sections, start=1):
        section_id = await conn.fetchval(
            """INSERT INTO workout_sections (workout_id, position, name, format, notes)
               VALUES ($1, $2, $3, $4, $5) RETURNING id""",
            workout_id,
            position,
            section.name,
            section.format,
            section.notes,
        )
        await conn.executemany(
            """INSERT INTO workout_movements
                      (section_id, position, name, exercise_id, reps, distance_m, load_kg, duration_s, notes)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)""",
            [
                (
                    section_id,
                    i,
                    m.name,
                    next(exercise_ids),
                    m.reps,
                    m.distance_m,
                    None if m.load_kg is None else Decimal(str(m.load_kg)),
                    m.duration_s,
                    m.notes,
                )
                for i, m in enumerate(section.movements, start=1)
            ],
        )


async def _load(ctx: ToolContext, workout_id: uuid.UUID) -> Workout:
    workout = await ctx.conn.fetchrow(_WORKOUT, workout_id, ctx.organization_id)
    if workout is None:
        raise WORKOUTS.not_found(workout_id)
    sections = await ctx.conn.fetch(_SECTIONS, workout_id)
    return Workout.from_row(workout, sections=[dict(s) for s in sections])
