"""The `workouts` router (seed 000): create, patch, replace sections, soft-delete. Staff only.

A workout is freeform (a description) or structured (sections of movements). Every write returns
the whole workout as it now stands, read back from the database, with its `id` for audit and undo.
"""

from __future__ import annotations

import uuid
from datetime import date
from decimal import Decimal
from itertools import groupby
from typing import Annotated, Any, ClassVar

import asyncpg
from pydantic import Field, StringConstraints, model_serializer, model_validator

from ..context import ToolContext
from ..declaration import Audit, Inverse, ToolFailure, ToolInput, ToolOutput, agent_tool
from .common import IdInput, Name, PatchInput, Text, id_of, require_program, soft_delete, str_or_none

# inputs --------------------------------------------------------------------------------------------


class MovementInput(ToolInput):
    name: Name = Field(description="Movement, e.g. 'Run', 'Double-under', 'Back squat'.")
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
    COLUMNS: ClassVar = {
        "title": "title",
        "description": "description",
        "scheduled_for": "scheduled_for",
        "program_id": "program_id",
    }
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
    id: str
    title: str
    description: str | None
    kind: str = Field(description="freeform or structured.")
    scheduled_for: date | None
    program_id: str | None
    program_name: str | None
    sections: list[Section]


class DeletedWorkout(ToolOutput):
    id: str
    title: str
    deleted: bool = True


# handlers ------------------------------------------------------------------------------------------

AUDIT_RESOURCE = "workout"


@agent_tool(
    router="workouts",
    action="create",
    summary="Create a workout. Freeform: give a description. Structured: give sections, each with a format "
    "('3 rounds', 'AMRAP 12', …) and movements with reps, distanceM, loadKg or durationS — e.g. "
    "'3 rounds — 200m run, 30 double-unders' is one section, format '3 rounds', movements "
    "[{name: 'Run', distanceM: 200}, {name: 'Double-under', reps: 30}]. Optionally attach it to a program "
    "and schedule it for a day. Returns the workout with its id.",
    input=WorkoutsCreateInput,
    side_effects="write",
    audit=Audit(resource=AUDIT_RESOURCE, action_label="workout.created"),
    inverse=Inverse(router="workouts", action="delete", build_input=id_of),
)
async def create(ctx: ToolContext, args: WorkoutsCreateInput) -> Workout:
    if args.program_id is not None:
        await require_program(ctx.conn, ctx.organization_id, args.program_id)
    workout_id = await ctx.conn.fetchval(
        """INSERT INTO workouts (organization_id, program_id, title, description, kind, scheduled_for, created_by)
           VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id""",
        ctx.organization_id,
        args.program_id,
        args.title,
        args.description,
        "structured" if args.sections else "freeform",
        args.scheduled_for,
        ctx.actor.user_id,
    )
    await _write_sections(ctx.conn, workout_id, args.sections or [])
    return await _load(ctx, workout_id)


@agent_tool(
    router="workouts",
    action="update",
    summary="Change a workout's title, description, scheduled day or program. Send only the fields to change; "
    "null clears description, scheduledFor or programId. To change the movements use workouts__set_sections.",
    input=WorkoutsUpdateInput,
    side_effects="write",
    audit=Audit(resource=AUDIT_RESOURCE, action_label="workout.updated"),
)
async def update(ctx: ToolContext, args: WorkoutsUpdateInput) -> Workout:
    await _require(ctx, args.id)
    if args.program_id is not None:
        await require_program(ctx.conn, ctx.organization_id, args.program_id)
    assignments, values = args.assignments(first_param=3)
    await ctx.conn.execute(
        f"UPDATE workouts SET {assignments}, updated_at = now() WHERE id = $1 AND organization_id = $2",
        args.id,
        ctx.organization_id,
        *values,
    )
    return await _load(ctx, args.id)


@agent_tool(
    router="workouts",
    action="set_sections",
    summary="Replace ALL sections and movements of a workout with the given list (not a merge: send the "
    "complete workout). Use it to edit the movements of a structured workout.",
    input=WorkoutsSetSectionsInput,
    side_effects="write",
    audit=Audit(resource=AUDIT_RESOURCE, action_label="workout.sections_replaced"),
)
async def set_sections(ctx: ToolContext, args: WorkoutsSetSectionsInput) -> Workout:
    await _require(ctx, args.id)
    await ctx.conn.execute(
        "UPDATE workouts SET kind = $2, updated_at = now() WHERE id = $1",
        args.id,
        "structured" if args.sections else "freeform",
    )
    await _write_sections(ctx.conn, args.id, args.sections)
    return await _load(ctx, args.id)


@agent_tool(
    router="workouts",
    action="delete",
    summary="Delete a workout. The user is asked to confirm before it runs.",
    input=IdInput,
    side_effects="write",
    confirm="destructive",
    audit=Audit(resource=AUDIT_RESOURCE, action_label="workout.deleted"),
)
async def delete(ctx: ToolContext, args: IdInput) -> DeletedWorkout:
    deleted = await soft_delete(ctx.conn, "workouts", ctx.organization_id, args.id)
    if deleted is None:
        raise _not_found(args.id)
    return DeletedWorkout(id=deleted[0], title=deleted[1])


# storage -------------------------------------------------------------------------------------------

_WORKOUT = """
SELECT w.id, w.title, w.description, w.kind::text AS kind, w.scheduled_for, w.program_id, p.name AS program_name
  FROM workouts w LEFT JOIN programs p ON p.id = w.program_id AND p.deleted_at IS NULL
 WHERE w.id = $1 AND w.organization_id = $2 AND w.deleted_at IS NULL
"""

_SECTIONS = """
SELECT s.id AS section_id, s.position AS section_position, s.name AS section_name, s.format,
       s.notes AS section_notes, m.position, m.name, m.reps, m.distance_m, m.load_kg, m.duration_s, m.notes
  FROM workout_sections s LEFT JOIN workout_movements m ON m.section_id = s.id
 WHERE s.workout_id = $1
 ORDER BY s.position, m.position
"""


def _not_found(workout_id: uuid.UUID) -> ToolFailure:
    return ToolFailure(
        "not_found",
        f"No workout {workout_id} in this organization (it may have been deleted).",
        hint="Use the id returned by workouts__create; never invent ids.",
    )


async def _require(ctx: ToolContext, workout_id: uuid.UUID) -> None:
    # FOR UPDATE: two patches of one workout in parallel conversations apply one after the other.
    found = await ctx.conn.fetchval(
        "SELECT 1 FROM workouts WHERE id = $1 AND organization_id = $2 AND deleted_at IS NULL FOR UPDATE",
        workout_id,
        ctx.organization_id,
    )
    if not found:
        raise _not_found(workout_id)


async def _write_sections(conn: asyncpg.Connection, workout_id: uuid.UUID, sections: list[SectionInput]) -> None:
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
            """INSERT INTO workout_movements (section_id, position, name, reps, distance_m, load_kg, duration_s, notes)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8)""",
            [
                (
                    section_id,
                    i,
                    m.name,
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
    w = await ctx.conn.fetchrow(_WORKOUT, workout_id, ctx.organization_id)
    if w is None:
        raise _not_found(workout_id)
    rows = await ctx.conn.fetch(_SECTIONS, workout_id)
    sections = [
        Section(
            position=first["section_position"],
            name=first["section_name"],
            format=first["format"],
            notes=first["section_notes"],
            # A section without movements comes back as one row of NULL movement columns.
            movements=[_movement(r) for r in group if r["position"] is not None],
        )
        for first, group in _by_section(rows)
    ]
    return Workout(
        id=str(w["id"]),
        title=w["title"],
        description=w["description"],
        kind=w["kind"],
        scheduled_for=w["scheduled_for"],
        program_id=str_or_none(w["program_id"]),
        program_name=w["program_name"],
        sections=sections,
    )


def _by_section(rows: list[asyncpg.Record]) -> list[tuple[asyncpg.Record, list[asyncpg.Record]]]:
    groups = [list(g) for _, g in groupby(rows, key=lambda r: r["section_id"])]
    return [(g[0], g) for g in groups]


def _movement(r: asyncpg.Record) -> Movement:
    return Movement(
        position=r["position"],
        name=r["name"],
        reps=r["reps"],
        distance_m=r["distance_m"],
        load_kg=None if r["load_kg"] is None else float(r["load_kg"]),
        duration_s=r["duration_s"],
        notes=r["notes"],
    )
