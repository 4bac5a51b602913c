"""Pieces the write routers share: input types, patch inputs, and org-scoped lookups.

Declares no tool, so `Registry.register_module` finds nothing here."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

import asyncpg
from pydantic import Field, StringConstraints, model_validator

from ..declaration import ToolFailure, ToolInput

Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=255)]
Text = Annotated[str, StringConstraints(strip_whitespace=True, max_length=5000)]


class IdInput(ToolInput):
    id: uuid.UUID = Field(description="Id of the entity.")


def id_of(out: Mapping[str, Any]) -> dict[str, Any]:
    """Inverse input of a create: its stored output carries the new row's id."""
    return {"id": out["id"]}


class PatchInput(ToolInput):
    """A partial update: a field that is sent is set (null clears it), an omitted one is kept.

    `COLUMNS` maps patchable fields to their columns; `REQUIRED` are fields that may be changed but
    never cleared. Sending nothing to change is invalid input, not a silent no-op."""

    COLUMNS: ClassVar[Mapping[str, str]] = {}
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
        return [f for f in self.COLUMNS if f in self.model_fields_set]

    def assignments(self, first_param: int) -> tuple[str, list[Any]]:
        """`col = $n, …` for the changed fields, numbered from `first_param`, and their values."""
        fields = self.changed()
        sql = ", ".join(f"{self.COLUMNS[f]} = ${first_param + i}" for i, f in enumerate(fields))
        return sql, [getattr(self, f) for f in fields]


async def require_program(conn: asyncpg.Connection, organization_id: str, program_id: uuid.UUID) -> asyncpg.Record:
    row = await conn.fetchrow(
        """SELECT id, name, kind::text AS kind FROM programs
            WHERE id = $1 AND organization_id = $2 AND deleted_at IS NULL""",
        program_id,
        organization_id,
    )
    if row is None:
        raise ToolFailure(
            "not_found",
            f"No program {program_id} in this organization.",
            hint="Use read__programs_list to find the programId.",
        )
    return row


async def require_membership(
    conn: asyncpg.Connection, organization_id: str, membership_id: uuid.UUID
) -> asyncpg.Record:
    row = await conn.fetchrow(
        """SELECT m.id, u.full_name FROM memberships m JOIN users u ON u.id = m.user_id
            WHERE m.id = $1 AND m.organization_id = $2""",
        membership_id,
        organization_id,
    )
    if row is None:
        raise ToolFailure(
            "not_found",
            f"No member with membershipId {membership_id} in this organization.",
            hint="Use read__members_search to find the membershipId.",
        )
    return row


def str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


# Tables with a soft delete, and the column that names a row in the deleted-result.
_SOFT_DELETABLE = {"workouts": "title", "tasks": "title", "programs": "name"}


async def soft_delete(conn: asyncpg.Connection, table: str, organization_id: str, row_id: uuid.UUID) -> tuple[str, str] | None:
    """Mark one live row of the organization deleted; (id, its name) or None when there is none."""
    label = _SOFT_DELETABLE[table]  # a fixed map, never caller text, so the SQL below is safe
    row = await conn.fetchrow(
        f"""UPDATE {table} SET deleted_at = now(), updated_at = now()
             WHERE id = $1 AND organization_id = $2 AND deleted_at IS NULL
         RETURNING id, {label} AS label""",
        row_id,
        organization_id,
    )
    return (str(row["id"]), row["label"]) if row else None
