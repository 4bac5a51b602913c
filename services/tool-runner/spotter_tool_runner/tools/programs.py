"""The `programs` router (seed 000): create, patch, soft-delete (owner/admin only), enroll a member.

Program names are unique (case-insensitive) among an organization's live programs: the model and
the user refer to programs by name, and two "CrossFit"s could not be told apart."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import ClassVar, Literal

from pydantic import Field

from ..context import ToolContext
from ..declaration import OWNER_ADMIN, ToolFailure, ToolInput, ToolOutput, ToolRouter
from .common import (
    PROGRAMS,
    IdInput,
    Name,
    PatchInput,
    Text,
    insert,
    patch,
    require_membership,
    require_program,
    soft_delete,
)

router = ToolRouter("programs", resource="program")

ProgramKind = Literal["group", "coaching", "feed"]

# Group programs are attended by booking classes; only these take enrollments (seed 000).
ENROLLABLE_KINDS = frozenset({"coaching", "feed"})


class ProgramsCreateInput(ToolInput):
    name: Name = Field(description="Program name, unique in the studio.")
    description: Text | None = Field(default=None, description="What the program is.")
    kind: ProgramKind = Field(
        default="group",
        description="group (classes on the schedule), coaching (1-on-1 programming) or feed (workouts to follow).",
    )


class ProgramsUpdateInput(PatchInput):
    REQUIRED: ClassVar = frozenset({"name", "kind", "is_active"})

    id: uuid.UUID = Field(description="Program id.")
    name: Name | None = Field(default=None, description="New name.")
    description: Text | None = Field(default=None, description="New description; null clears it.")
    kind: ProgramKind | None = Field(default=None, description="New kind.")
    is_active: bool | None = Field(default=None, description="false hides it from the active programs.")


class EnrollMemberInput(ToolInput):
    program_id: uuid.UUID = Field(description="A coaching or feed program (read__programs_list).")
    membership_id: uuid.UUID = Field(description="The member (read__members_search).")


class Program(ToolOutput):
    id: uuid.UUID
    name: str
    description: str | None
    kind: str
    is_active: bool


class DeletedProgram(ToolOutput):
    id: uuid.UUID
    name: str
    deleted: bool = True


class Enrollment(ToolOutput):
    id: uuid.UUID = Field(description="Enrollment id.")
    program_id: uuid.UUID
    program_name: str
    membership_id: uuid.UUID
    member_name: str
    enrolled_at: datetime


@router.write(
    "create",
    "Create a training program: a name, an optional description and a kind — group (classes), "
    "coaching (1-on-1) or feed (workouts to follow). Returns the program with its id.",
    inverse="delete",
)
async def create(ctx: ToolContext, args: ProgramsCreateInput) -> Program:
    await _check_name_free(ctx, args.name)
    return Program.from_row(await insert(ctx, PROGRAMS, args))


@router.write(
    "update", "Change a program's name, description, kind or active flag. Send only the fields to change."
)
async def update(ctx: ToolContext, args: ProgramsUpdateInput) -> Program:
    await require_program(ctx, args.id)
    if args.name is not None:
        await _check_name_free(ctx, args.name, besides=args.id)
    return Program.from_row(await patch(ctx, PROGRAMS, args))


@router.write(
    "delete",
    "Delete a program (owners and admins only). The user is asked to confirm before it runs.",
    confirm="destructive",
    roles=OWNER_ADMIN,
)
async def delete(ctx: ToolContext, args: IdInput) -> DeletedProgram:
    return DeletedProgram.from_row(await soft_delete(ctx, PROGRAMS, args.id))


@router.write(
    "enroll_member",
    "Enroll a member in a coaching or feed program (group programs are attended by booking classes "
    "instead). Fails with already_enrolled if the member is enrolled already.",
    resource="program_enrollment",
    audit_label="program.member_enrolled",
)
async def enroll_member(ctx: ToolContext, args: EnrollMemberInput) -> Enrollment:
    program = await require_program(ctx, args.program_id)
    if program["kind"] not in ENROLLABLE_KINDS:
        raise ToolFailure(
            "not_enrollable",
            f"{program['name']} is a group program; only coaching and feed programs take enrollments.",
            hint="Members join group programs by booking its classes; tell the user so.",
        )
    member = await require_membership(ctx, args.membership_id)
    # ON CONFLICT: a concurrent enrollment of the same pair is "already enrolled", not a crash.
    row = await ctx.conn.fetchrow(
        """INSERT INTO program_enrollments (program_id, membership_id) VALUES ($1, $2)
           ON CONFLICT (program_id, membership_id) DO NOTHING
        RETURNING *""",
        args.program_id,
        args.membership_id,
    )
    if row is None:
        raise ToolFailure(
            "already_enrolled",
            f"{member['full_name']} is already enrolled in {program['name']}.",
            hint="Nothing to do; tell the user.",
        )
    return Enrollment.from_row(row, program_name=program["name"], member_name=member["full_name"])


async def _check_name_free(ctx: ToolContext, name: str, *, besides: uuid.UUID | None = None) -> None:
    # The lock serialises name checks per organization, so two concurrent writes cannot both find a name free.
    await ctx.conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('programs:' || $1::text, 0))", ctx.organization_id
    )
    taken = await ctx.conn.fetchval(
        """SELECT id FROM programs
            WHERE organization_id = $1 AND lower(name) = lower($2) AND deleted_at IS NULL
              AND ($3::uuid IS NULL OR id <> $3)""",
        ctx.organization_id,
        name,
        besides,
    )
    if taken:
        raise ToolFailure(
            "conflict",
            f"A program named {name} already exists (id {taken}).",
            hint="Use that program, or choose another name.",
        )
