"""The `program_templates` router (seed 000): reusable programs — list, create, apply, derive from history.

A template is a name, a program kind and workouts by day from its start (dayOffset 0 is the first
day), each with sections in exactly the shape workouts__create takes (`SectionInput`, stored as its
camelCase JSON without nulls). Applying one materializes real workouts; deriving one reads a
program's past workouts back into that shape, so derive → apply round-trips.

Roles: all staff. Designing and scheduling programming is coaches' daily work (as workouts__create
and programs__create are theirs); apply and from_history write many rows at once, so they are
confirmed by the user every time (confirm "always") rather than restricted to owners and admins.
"""

from __future__ import annotations

import uuid
from datetime import date, timedelta
from typing import Any

import asyncpg
from pydantic import Field, TypeAdapter, model_validator

from ..context import ToolContext
from ..declaration import ToolFailure, ToolInput, ToolOutput, ToolRouter
from . import programs
from .common import Name, Table, Text, insert, require_program
from .workouts import SectionInput, Sections, _kind, _write_sections

router = ToolRouter("program_templates", resource="program_template")
TEMPLATES = Table(
    "program_templates", "program template", "name", hint="Use program_templates__list to find the template id."
)

MAX_DAY_OFFSET = 365
# A year of daily workouts, plus doubles: what one template may hold (from_history refuses more).
MAX_TEMPLATE_WORKOUTS = 400
# How many workouts (or workout ids) an output lists; the counts are always complete.
SHOWN = 50

_SECTIONS = TypeAdapter(Sections)

# inputs --------------------------------------------------------------------------------------------


class TemplatesListInput(ToolInput):
    program_kind: programs.ProgramKind | None = Field(default=None, description="Only templates of this kind.")
    limit: int = Field(default=20, ge=1, le=50, description="Maximum number of templates returned.")


class TemplateWorkoutInput(ToolInput):
    day_offset: int = Field(
        ge=0, le=MAX_DAY_OFFSET, description="Day from the template's start: 0 is the first day, 7 a week later."
    )
    title: Name = Field(description="Workout title, e.g. 'Week 1 · Squat day'.")
    description: Text | None = Field(default=None, description="Freeform workout text, or an intro to the sections.")
    sections: Sections | None = Field(
        default=None, description="Structured workout, exactly as workouts__create takes it. Omit for freeform."
    )

    @model_validator(mode="after")
    def check_content(self) -> TemplateWorkoutInput:
        if not self.description and not self.sections:
            raise ValueError("give each workout a freeform description or structured sections")
        return self


class TemplatesCreateInput(ToolInput):
    name: Name = Field(description="Template name, unique among the studio's templates.")
    description: Text | None = Field(default=None, description="What the program is for.")
    program_kind: programs.ProgramKind = Field(
        default="group", description="Kind of the program it makes: group, coaching or feed."
    )
    workouts: list[TemplateWorkoutInput] = Field(
        min_length=1, max_length=100, description="Its workouts; several may share a day."
    )

    @model_validator(mode="after")
    def check_unique_days(self) -> TemplatesCreateInput:
        keys = [(w.day_offset, w.title.lower()) for w in self.workouts]
        if len(set(keys)) != len(keys):
            raise ValueError("two workouts on the same dayOffset need different titles")
        return self


class TemplatesApplyInput(ToolInput):
    id: uuid.UUID = Field(description="Template id (program_templates__list).")
    start_date: date = Field(description="Day the template's dayOffset 0 lands on, YYYY-MM-DD (studio's local date).")
    program_id: uuid.UUID | None = Field(
        default=None, description="Existing program to add the workouts to (read__programs_list)."
    )
    program_name: Name | None = Field(
        default=None, description="Name of a new program to create for them, of the template's kind."
    )

    @model_validator(mode="after")
    def check_target(self) -> TemplatesApplyInput:
        if (self.program_id is None) == (self.program_name is None):
            raise ValueError("give exactly one of programId (an existing program) or programName (a new one)")
        return self


class TemplatesFromHistoryInput(ToolInput):
    program_id: uuid.UUID = Field(description="Program whose scheduled workouts are read (read__programs_list).")
    from_: date = Field(alias="from", description="First day, YYYY-MM-DD; it becomes dayOffset 0.")
    to: date = Field(description="Last day, inclusive, YYYY-MM-DD.")
    name: Name = Field(description="Name of the new template, unique among the studio's templates.")
    description: Text | None = Field(default=None, description="What the template is for; defaults to the program's.")

    @model_validator(mode="after")
    def check_range(self) -> TemplatesFromHistoryInput:
        if self.to < self.from_:
            raise ValueError("to must not be before from")
        if (self.to - self.from_).days > MAX_DAY_OFFSET:
            raise ValueError(f"the range may span at most {MAX_DAY_OFFSET + 1} days")
        return self


# outputs -------------------------------------------------------------------------------------------


class TemplateSummary(ToolOutput):
    id: uuid.UUID
    name: str
    description: str | None
    program_kind: str = Field(description="Kind of the program it makes: group, coaching or feed.")
    workout_count: int
    span_days: int = Field(description="Days from the first day to the last workout's day, inclusive.")


class TemplatesList(ToolOutput):
    templates: list[TemplateSummary]
    total: int = Field(description="Number of matches, which may exceed the templates returned.")


class TemplateWorkout(ToolOutput):
    day_offset: int
    title: str
    section_count: int


class Template(TemplateSummary):
    workouts: list[TemplateWorkout] = Field(description=f"Its first {SHOWN} workouts by day; workoutCount has all.")


class Applied(ToolOutput):
    id: uuid.UUID = Field(description="The template's id.")
    template_name: str
    program_id: uuid.UUID
    program_name: str
    program_created: bool = Field(description="true when a new program was created for the workouts.")
    start_date: date
    end_date: date = Field(description="Day of the last workout.")
    workouts_created: int
    workout_ids: list[uuid.UUID] = Field(description=f"Ids of the first {SHOWN} workouts created, by day.")


# handlers ------------------------------------------------------------------------------------------

_SUMMARY = """
SELECT t.id, t.name, t.description, t.program_kind,
       count(w.id)::int AS workout_count, coalesce(max(w.day_offset) + 1, 0)::int AS span_days,
       count(*) OVER () AS total
  FROM program_templates t LEFT JOIN program_template_workouts w ON w.template_id = t.id
"""


@router.read(
    "list",
    "List the studio's program templates (reusable programs) by name: id, name, kind, description, "
    "number of workouts and span in days. Apply one with program_templates__apply.",
)
async def list_templates(ctx: ToolContext, args: TemplatesListInput) -> TemplatesList:
    rows = await ctx.conn.fetch(
        f"""{_SUMMARY}
             WHERE t.organization_id = $1 AND t.deleted_at IS NULL
               AND ($2::text IS NULL OR t.program_kind::text = $2)
             GROUP BY t.id
             ORDER BY lower(t.name), t.id
             LIMIT $3""",
        ctx.organization_id,
        args.program_kind,
        args.limit,
    )
    return TemplatesList(templates=[TemplateSummary.from_row(r) for r in rows], total=rows[0]["total"] if rows else 0)


@router.write(
    "create",
    "Create a program template: a name, a kind and its workouts, each on a dayOffset from the start "
    "(0 = first day) with a title and a freeform description or sections exactly as workouts__create "
    "takes them. Returns the template with its id.",
)
async def create(ctx: ToolContext, args: TemplatesCreateInput) -> Template:
    await _check_name_free(ctx, args.name)
    template = await insert(ctx, TEMPLATES, args, exclude={"workouts"}, created_by=ctx.actor.user_id)
    await _write_workouts(
        ctx.conn,
        template["id"],
        [(w.day_offset, w.title, w.description, _section_json(w.sections or [])) for w in args.workouts],
    )
    return await _load(ctx, template["id"])


@router.write(
    "apply",
    "Materialize a template: create one workout per template workout, scheduled on startDate + its "
    "dayOffset, with its sections, in an existing program (programId) or in a new program of the "
    "template's kind (programName). The user is asked to confirm before it runs.",
    confirm="always",
    audit_label="program_template.applied",
)
async def apply(ctx: ToolContext, args: TemplatesApplyInput) -> Applied:
    template = await _require(ctx, args.id)
    workouts = await ctx.conn.fetch(
        """SELECT day_offset, title, description, sections FROM program_template_workouts
            WHERE template_id = $1 ORDER BY day_offset, title, id""",
        template["id"],
    )
    if not workouts:
        raise ToolFailure(
            "empty_template", f"{template['name']} has no workouts to apply.", hint="Tell the user; nothing was created."
        )
    if args.program_id is not None:
        program = programs.Program.from_row(await require_program(ctx, args.program_id))
    else:
        # programs__create's own handler: the same name check and row as when the model creates one.
        program = await programs.create(
            ctx,
            programs.ProgramsCreateInput(
                name=args.program_name, description=template["description"], kind=template["program_kind"]
            ),
        )
    ids = [await _create_workout(ctx, program.id, args.start_date, w) for w in workouts]
    return Applied(
        id=template["id"],
        template_name=template["name"],
        program_id=program.id,
        program_name=program.name,
        program_created=args.program_id is None,
        start_date=args.start_date,
        end_date=args.start_date + timedelta(days=workouts[-1]["day_offset"]),
        workouts_created=len(ids),
        workout_ids=ids[:SHOWN],
    )


@router.write(
    "from_history",
    "Derive a new template from a program's workouts scheduled from `from` to `to` (inclusive): each "
    "becomes a template workout on dayOffset = its day − from, with its sections. The template's kind "
    "is the program's. The user is asked to confirm before it runs.",
    confirm="always",
    audit_label="program_template.derived",
)
async def from_history(ctx: ToolContext, args: TemplatesFromHistoryInput) -> Template:
    program = await require_program(ctx, args.program_id)
    workouts = await ctx.conn.fetch(_HISTORY, ctx.organization_id, program["id"], args.from_, args.to)
    if not workouts:
        raise ToolFailure(
            "no_workouts",
            f"{program['name']} has no scheduled workouts from {args.from_} to {args.to}.",
            hint="Check the program and the dates with the user.",
        )
    if len(workouts) > MAX_TEMPLATE_WORKOUTS:
        raise ToolFailure(
            "too_many",
            f"{len(workouts)} workouts in that range; a template holds at most {MAX_TEMPLATE_WORKOUTS}.",
            hint="Choose a shorter range.",
        )
    seen: set[tuple[int, str]] = set()
    for w in workouts:
        if (key := (w["day_offset"], w["title"].lower())) in seen:
            raise ToolFailure(
                "conflict",
                f"Two workouts titled {w['title']} on {args.from_ + timedelta(days=w['day_offset'])}; "
                "a template day needs distinct titles.",
                hint="Rename one of them with workouts__update, then try again.",
            )
        seen.add(key)
    await _check_name_free(ctx, args.name)
    template = await ctx.conn.fetchrow(
        """INSERT INTO program_templates (organization_id, name, description, program_kind, created_by)
           VALUES ($1, $2, $3, $4, $5) RETURNING id""",
        ctx.organization_id,
        args.name,
        args.description if args.description is not None else program["description"],
        program["kind"],
        ctx.actor.user_id,
    )
    await _write_workouts(
        ctx.conn, template["id"], [(w["day_offset"], w["title"], w["description"], w["sections"]) for w in workouts]
    )
    return await _load(ctx, template["id"])


# storage -------------------------------------------------------------------------------------------

# A program's scheduled workouts with their sections as SectionInput JSON (camelCase, nulls left out).
_HISTORY = """
SELECT w.title, w.description, (w.scheduled_for - $3::date) AS day_offset,
       coalesce((
         SELECT jsonb_agg(
                  jsonb_strip_nulls(jsonb_build_object('name', s.name, 'format', s.format, 'notes', s.notes))
                  || jsonb_build_object('movements', coalesce((
                       SELECT jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
                                'name', m.name, 'reps', m.reps, 'distanceM', m.distance_m,
                                'loadKg', m.load_kg, 'durationS', m.duration_s, 'notes', m.notes))
                              ORDER BY m.position)
                         FROM workout_movements m WHERE m.section_id = s.id), '[]'::jsonb))
                  ORDER BY s.position)
           FROM workout_sections s WHERE s.workout_id = w.id), '[]'::jsonb) AS sections
  FROM workouts w
 WHERE w.organization_id = $1 AND w.program_id = $2 AND w.deleted_at IS NULL
   AND w.scheduled_for BETWEEN $3 AND $4
 ORDER BY w.scheduled_for, w.created_at, w.id
"""


def _section_json(sections: list[SectionInput]) -> list[dict[str, Any]]:
    return [s.model_dump(by_alias=True, exclude_none=True) for s in sections]


async def _write_workouts(
    conn: asyncpg.Connection, template_id: uuid.UUID, workouts: list[tuple[int, str, str | None, list[Any]]]
) -> None:
    await conn.executemany(
        """INSERT INTO program_template_workouts (template_id, day_offset, title, description, sections)
           VALUES ($1, $2, $3, $4, $5)""",
        [(template_id, *w) for w in workouts],
    )


async def _create_workout(ctx: ToolContext, program_id: uuid.UUID, start: date, w: asyncpg.Record) -> uuid.UUID:
    sections = _SECTIONS.validate_python(w["sections"])
    workout_id = await ctx.conn.fetchval(
        """INSERT INTO workouts (organization_id, program_id, title, description, kind, scheduled_for, created_by)
           VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id""",
        ctx.organization_id,
        program_id,
        w["title"],
        w["description"],
        _kind(sections),
        start + timedelta(days=w["day_offset"]),
        ctx.actor.user_id,
    )
    ctx.touch("workout", workout_id)
    await _write_sections(ctx.conn, workout_id, sections)
    return workout_id


async def _require(ctx: ToolContext, template_id: uuid.UUID) -> asyncpg.Record:
    row = await ctx.conn.fetchrow(
        """SELECT * FROM program_templates WHERE id = $1 AND organization_id = $2 AND deleted_at IS NULL""",
        template_id,
        ctx.organization_id,
    )
    if row is None:
        raise TEMPLATES.not_found(template_id)
    return row


async def _load(ctx: ToolContext, template_id: uuid.UUID) -> Template:
    summary = await ctx.conn.fetchrow(f"{_SUMMARY} WHERE t.id = $1 GROUP BY t.id", template_id)
    workouts = await ctx.conn.fetch(
        """SELECT day_offset, title, jsonb_array_length(sections) AS section_count
             FROM program_template_workouts WHERE template_id = $1
            ORDER BY day_offset, title, id LIMIT $2""",
        template_id,
        SHOWN,
    )
    return Template.from_row(summary, workouts=[dict(w) for w in workouts])


async def _check_name_free(ctx: ToolContext, name: str) -> None:
    # The lock serialises name checks per organization, so two concurrent writes cannot both find a name free.
    await ctx.conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('program_templates:' || $1::text, 0))", ctx.organization_id
    )
    taken = await ctx.conn.fetchval(
        """SELECT id FROM program_templates
            WHERE organization_id = $1 AND lower(name) = lower($2) AND deleted_at IS NULL""",
        ctx.organization_id,
        name,
    )
    if taken:
        raise ToolFailure(
            "conflict",
            f"A program template named {name} already exists (id {taken}).",
            hint="Use that template, or choose another name.",
        )
