"""The `programs` router (seed 000): create, patch, soft-delete (owner/admin only), enroll a member.

Program names are unique (case-insensitive) among an organization's live programs: the model and
the user refer to programs by name, and two "CrossFit"s could not be told apart."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import ClassVar, Literal

import asyncpg
from pydantic import Field

from ..context import ToolContext
from ..declaration import Audit, Inverse, ToolFailure, ToolInput, ToolOutput, agent_tool
from .common import IdInput, Name, PatchInput, Text, id_of, require_membership, require_program, soft_delete

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
    COLUMNS: ClassVar = {"name": "name", "description": "description", "kind": "kind", "is_active": "is_active"}
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
    id: str
    name: str
    description: str | None
    kind: str
    is_active: bool


class DeletedProgram(ToolOutput):
    id: str
    name: str
    deleted: bool = True


class Enrollment(ToolOutput):
    id: str = Field(description="Enrollment id.")
    program_id: str
    program_name: str
    membership_id: str
    member_name: str
    enrolled_at: datetime


AUDIT_RESOURCE = "program"


@agent_tool(
    router="programs",
    action="create",
    summary="Create a training program: a name, an optional description and a kind — group (classes), "
    "coaching (1-on-1) or feed (workouts to follow). Returns the program with its id.",
    input=ProgramsCreateInput,
    side_effects="write",
    audit=Audit(resource=AUDIT_RESOURCE, action_label="program.created"),
    inverse=Inverse(router="programs", action="delete", build_input=id_of),
)
async def create(ctx: ToolContext, args: ProgramsCreateInput) -> Program:
    await _lock_names(ctx)
    await _check_name_free(ctx, args.name)
    row = await ctx.conn.fetchrow(
        """INSERT INTO programs (organization_id, name, description, kind) VALUES ($1, $2, $3, $4)
        RETURNING id, name, description, kind::text AS kind, is_active""",
        ctx.organization_id,
        args.name,
        args.description,
        args.kind,
    )
    return _program(row)


@agent_tool(
    router="programs",
    action="update",
    summary="Change a program's name, description, kind or active flag. Send only the fields to change.",
    input=ProgramsUpdateInput,
    side_effects="write",
    audit=Audit(resource=AUDIT_RESOURCE, action_label="program.updated"),
)
async def update(ctx: ToolContext, args: ProgramsUpdateInput) -> Program:
    await require_program(ctx.conn, ctx.organization_id, args.id)
    if args.name is not None:
        await _lock_names(ctx)
        await _check_name_free(ctx, args.name, besides=args.id)
    assignments, values = args.assignments(first_param=3)
    row = await ctx.conn.fetchrow(
        f"""UPDATE programs SET {assignments}, updated_at = now()
             WHERE id = $1 AND organization_id = $2 AND deleted_at IS NULL
         RETURNING id, name, description, kind::text AS kind, is_active""",
        args.id,
        ctx.organization_id,
        *values,
    )
    return _program(row)


@agent_tool(
    router="programs",
    action="delete",
    summary="Delete a program (owners and admins only). The user is asked to confirm before it runs.",
    input=IdInput,
    roles=frozenset({"owner", "admin"}),
    side_effects="write",
    confirm="destructive",
    audit=Audit(resource=AUDIT_RESOURCE, action_label="program.deleted"),
)
async def delete(ctx: ToolContext, args: IdInput) -> DeletedProgram:
    deleted = await soft_delete(ctx.conn, "programs", ctx.organization_id, args.id)
    if deleted is None:
        raise ToolFailure(
            "not_found",
            f"No program {args.id} in this organization (it may have been deleted).",
            hint="Use read__programs_list to find the programId.",
        )
    return DeletedProgram(id=deleted[0], name=deleted[1])


@agent_tool(
    router="programs",
    action="enroll_member",
    summary="Enroll a member in a coaching or feed program (group programs are attended by booking classes "
    "instead). Fails with already_enrolled if the member is enrolled already.",
    input=EnrollMemberInput,
    side_effects="write",
    audit=Audit(resource="program_enrollment", action_label="program.member_enrolled"),
)
async def enroll_member(ctx: ToolContext, args: EnrollMemberInput) -> Enrollment:
    program = await require_program(ctx.conn, ctx.organization_id, args.program_id)
    if program["kind"] not in ENROLLABLE_KINDS:
        raise ToolFailure(
            "not_enrollable",
            f"{program['name']} is a group program; only coaching and feed programs take enrollments.",
            hint="Members join group programs by booking its classes; tell the user so.",
        )
    member = await require_membership(ctx.conn, ctx.organization_id, args.membership_id)
    # ON CONFLICT: a concurrent enrollment of the same pair is "already enrolled", not a crash.
    row = await ctx.conn.fetchrow(
        """INSERT INTO program_enrollments (program_id, membership_id) VALUES ($1, $2)
           ON CONFLICT (program_id, membership_id) DO NOTHING
        RETURNING id, enrolled_at""",
        args.program_id,
        args.membership_id,
    )
    if row is None:
        raise ToolFailure(
            "already_enrolled",
            f"{member['full_name']} is already enrolled in {program['name']}.",
            hint="Nothing to do; tell the user.",
        )
    return Enrollment(
        id=str(row["id"]),
        program_id=str(program["id"]),
        program_name=program["name"],
        membership_id=str(member["id"]),
        member_name=member["full_name"],
        enrolled_at=row["enrolled_at"],
    )


async def _lock_names(ctx: ToolContext) -> None:
    # Serialises name checks per organization, so two concurrent creates cannot both find a name free.
    await ctx.conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('programs:' || $1::text, 0))", ctx.organization_id
    )


async def _check_name_free(ctx: ToolContext, name: str, *, besides: uuid.UUID | None = None) -> None:
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


def _program(row: asyncpg.Record) -> Program:
    return Program(
        id=str(row["id"]),
        name=row["name"],
        description=row["description"],
        kind=row["kind"],
        is_active=row["is_active"],
    )
