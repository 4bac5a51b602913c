"""The `class_types` router (seed 000): the kinds of class on the timetable (Open Gym, WOD, …).

Roles: STAFF — a read every coach needs to schedule classes."""

from __future__ import annotations

import uuid

from pydantic import Field

from ..context import ToolContext
from ..declaration import ToolInput, ToolOutput, ToolRouter
from .common import require_program

router = ToolRouter("class_types")


class ListForProgramInput(ToolInput):
    program_id: uuid.UUID | None = Field(
        default=None, description="The program (read__programs_list); omit for the class types of every program."
    )
    limit: int = Field(default=50, ge=1, le=100, description="Maximum number of class types returned.")


class ClassType(ToolOutput):
    id: uuid.UUID = Field(description="classTypeId.")
    name: str
    program_id: uuid.UUID | None
    program_name: str | None
    default_capacity: int
    duration_min: int = Field(description="Default length in minutes.")
    upcoming_sessions: int = Field(description="Classes of this type from now on, not cancelled.")


class ClassTypeList(ToolOutput):
    class_types: list[ClassType]
    total: int = Field(description="Number of matches, which may exceed the class types returned.")


@router.read(
    "list_for_program",
    "The class types of a program (or of every program when programId is omitted), by name: id "
    "(classTypeId), program, default capacity, default length in minutes, and how many classes of the "
    "type are scheduled from now on.",
)
async def list_for_program(ctx: ToolContext, args: ListForProgramInput) -> ClassTypeList:
    if args.program_id is not None:
        await require_program(ctx, args.program_id)
    rows = await ctx.conn.fetch(
        """SELECT ct.id, ct.name, ct.program_id, p.name AS program_name, ct.default_capacity, ct.duration_min,
                  (SELECT count(*) FROM class_sessions s
                    WHERE s.class_type_id = ct.id AND s.deleted_at IS NULL AND s.cancelled_at IS NULL
                      AND s.starts_at >= $3)::int AS upcoming_sessions,
                  count(*) OVER () AS total
             FROM class_types ct
             LEFT JOIN programs p ON p.id = ct.program_id AND p.deleted_at IS NULL
            WHERE ct.organization_id = $1 AND ct.deleted_at IS NULL AND ($2::uuid IS NULL OR ct.program_id = $2)
            ORDER BY ct.name, ct.id
            LIMIT $4""",
        ctx.organization_id, args.program_id, ctx.now, args.limit,
    )
    return ClassTypeList(class_types=[ClassType.from_row(r) for r in rows], total=rows[0]["total"] if rows else 0)
