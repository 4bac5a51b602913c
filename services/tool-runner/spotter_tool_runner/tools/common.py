"""Pieces the routers share: input types, patch inputs, and org-scoped lookups and writes.

Declares no tool, so `Registry.register_module` finds nothing here."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

import asyncpg
from pydantic import Field, StringConstraints, model_validator

from spotter_shared.contracts.rag import Scope

from ..context import ToolContext
from ..declaration import ToolFailure, ToolInput

Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=255)]
Text = Annotated[str, StringConstraints(strip_whitespace=True, max_length=5000)]


class IdInput(ToolInput):
    id: uuid.UUID = Field(description="Id of the entity.")


class PatchInput(ToolInput):
    """A partial update: a field that is sent is set (null clears it), an omitted one is kept.

    Every field besides `id` is the column of the same name. `REQUIRED` are fields that may be changed
    but never cleared. Sending nothing to change is invalid input, not a silent no-op."""

    REQUIRED: ClassVar[frozenset[str]] = frozenset()

    id: uuid.UUID = Field(description="Id of the entity to change.")

    @model_validator(mode="after")
    def check_patch(self) -> PatchInput:
        changed = self.changed()
        if not changed:
            raise ValueError("send at least one field to change besides id")
        if cleared := sorted(f for f in changed if f in self.REQUIRED and getattr(self, f) is None):
            raise ValueError(f"{', '.join(cleared)} cannot be cleared")
        return self

    def changed(self) -> list[str]:
        # In declaration order, so the generated SQL is stable for the same input.
        return [f for f in type(self).model_fields if f != "id" and f in self.model_fields_set]


@dataclass(frozen=True)
class Table:
    """An organization's table of soft-deletable rows that tools change by id: its `name`, the `entity`
    a message calls a row, the `label` column that names one, and where the model finds an id. Name
    and label are constants, never caller text, so they are safe to put in SQL. `scope`: rag indexes its
    rows under this scope, so the helpers below note every row they write for the runner to announce."""

    name: str
    entity: str
    label: str
    hint: str
    scope: Scope | None = None

    def not_found(self, row_id: uuid.UUID) -> ToolFailure:
        return not_found(self.entity, row_id, self.hint, maybe_deleted=True)


PROGRAMS = Table(
    "programs", "program", "name", hint="Use read__programs_list to find the programId.", scope="program"
)
MEMBERS_HINT = "Use read__members_search to find the membershipId."


def not_found(entity: str, row_id: uuid.UUID, hint: str, *, maybe_deleted: bool = False) -> ToolFailure:
    # Another organization's id is "not found" too: a tool never tells the two apart.
    gone = " (it may have been deleted)" if maybe_deleted else ""
    return ToolFailure("not_found", f"No {entity} {row_id} in this organization{gone}.", hint=hint)


async def require(ctx: ToolContext, table: Table, row_id: uuid.UUID) -> asyncpg.Record:
    """The live row, locked so that concurrent changes to it apply one after the other."""
    row = await ctx.conn.fetchrow(
        f"""SELECT * FROM {table.name}
             WHERE id = $1 AND organization_id = $2 AND deleted_at IS NULL FOR UPDATE""",
        row_id,
        ctx.organization_id,
    )
    if row is None:
        raise table.not_found(row_id)
    return row


async def insert(
    ctx: ToolContext, table: Table, args: ToolInput, *, exclude: set[str] | None = None, **values: Any
) -> asyncpg.Record:
    """Insert a row of the organization: each field of `args` (but `exclude`) and of `values` is the column
    of the same name. Column names come from code, never from the caller's text."""
    row = {"organization_id": ctx.organization_id, **args.model_dump(by_alias=False, exclude=exclude), **values}
    params = ", ".join(f"${i}" for i in range(1, len(row) + 1))
    inserted = await ctx.conn.fetchrow(
        f"INSERT INTO {table.name} ({', '.join(row)}) VALUES ({params}) RETURNING *", *row.values()
    )
    _touch(ctx, table, inserted)
    return inserted


async def patch(ctx: ToolContext, table: Table, args: PatchInput) -> asyncpg.Record:
    """Set the fields `args` sends on its live row; the row as it now stands. Every router's update."""
    fields = args.changed()
    assignments = ", ".join(f"{f} = ${i}" for i, f in enumerate(fields, start=3))
    row = await ctx.conn.fetchrow(
        f"""UPDATE {table.name} SET {assignments}, updated_at = now()
             WHERE id = $1 AND organization_id = $2 AND deleted_at IS NULL RETURNING *""",
        args.id,
        ctx.organization_id,
        *(getattr(args, f) for f in fields),
    )
    if row is None:
        raise table.not_found(args.id)
    _touch(ctx, table, row)
    return row


async def soft_delete(ctx: ToolContext, table: Table, row_id: uuid.UUID) -> asyncpg.Record:
    """Mark one live row deleted; its id and label."""
    row = await ctx.conn.fetchrow(
        f"""UPDATE {table.name} SET deleted_at = now(), updated_at = now()
             WHERE id = $1 AND organization_id = $2 AND deleted_at IS NULL
         RETURNING id, {table.label}""",
        row_id,
        ctx.organization_id,
    )
    if row is None:
        raise table.not_found(row_id)
    _touch(ctx, table, row)
    return row


def _touch(ctx: ToolContext, table: Table, row: asyncpg.Record) -> None:
    if table.scope is not None:
        ctx.touch(table.scope, row["id"])


async def require_program(ctx: ToolContext, program_id: uuid.UUID) -> asyncpg.Record:
    """A live program another entity refers to."""
    row = await ctx.conn.fetchrow(
        "SELECT * FROM programs WHERE id = $1 AND organization_id = $2 AND deleted_at IS NULL",
        program_id,
        ctx.organization_id,
    )
    if row is None:
        raise not_found("program", program_id, PROGRAMS.hint)
    return row


async def require_membership(ctx: ToolContext, membership_id: uuid.UUID, hint: str = MEMBERS_HINT) -> asyncpg.Record:
    """A member of the organization, with the user's name and email."""
    row = await ctx.conn.fetchrow(
        """SELECT m.*, u.full_name, u.email FROM memberships m JOIN users u ON u.id = m.user_id
            WHERE m.id = $1 AND m.organization_id = $2""",
        membership_id,
        ctx.organization_id,
    )
    if row is None:
        raise not_found("member with membershipId", membership_id, hint)
    return row
