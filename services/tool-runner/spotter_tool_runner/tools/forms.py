"""The `forms` router (seed 000): which forms (waiver, PAR-Q, …) members still owe. Read only.

A form has a type_key that groups its versions for compliance: a member is compliant for a type when
their latest assignment of that type (of any form with that key, so a signed older version counts)
is completed and still valid (forms.valid_days after completion, or forever when it is null).

Roles: all staff — the front desk, coaches included, checks waivers before a member trains.
"""

from __future__ import annotations

import uuid
from datetime import date, datetime, tzinfo
from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from ..context import ToolContext
from ..declaration import ToolInput, ToolOutput, ToolRouter
from .common import require_membership

router = ToolRouter("forms")

TypeKey = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64)]
Compliance = Literal["compliant", "pending", "missing", "expired"]

# inputs --------------------------------------------------------------------------------------------


class ListPendingInput(ToolInput):
    type_key: TypeKey | None = Field(default=None, description="Only forms of this type, e.g. 'waiver' or 'par_q'.")
    overdue_only: bool = Field(default=False, description="Only assignments past their due day.")
    limit: int = Field(default=20, ge=1, le=50, description="Maximum number of assignments returned.")


class ComplianceInput(ToolInput):
    membership_id: uuid.UUID = Field(description="The member (read__members_search).")


# outputs -------------------------------------------------------------------------------------------


class PendingForm(ToolOutput):
    assignment_id: uuid.UUID
    membership_id: uuid.UUID
    member_name: str
    form_title: str
    type_key: str
    assigned_at: datetime
    due_on: date | None
    overdue: bool = Field(description="true when the due day has passed.")


class PendingForms(ToolOutput):
    assignments: list[PendingForm]
    total: int = Field(description="Number of matches, which may exceed the assignments returned.")
    overdue_total: int = Field(description="How many of the matches are overdue.")


class TypeCompliance(ToolOutput):
    type_key: str
    form_title: str
    status: Compliance = Field(
        description="compliant (completed, still valid), pending (sent, not completed), expired (validity "
        "passed, or the assignment expired) or missing (never sent)."
    )
    assignment_id: uuid.UUID | None = Field(description="The latest assignment of this type, if any.")
    assigned_at: datetime | None
    due_on: date | None
    completed_at: datetime | None
    valid_until: datetime | None = Field(description="When a completed form stops counting; null: it never does.")


class MemberCompliance(ToolOutput):
    membership_id: uuid.UUID
    member_name: str
    compliant: bool = Field(description="true when every required form type is compliant.")
    forms: list[TypeCompliance]


# handlers ------------------------------------------------------------------------------------------


@router.read(
    "list_pending_for_org",
    "Form assignments members have not completed yet (status pending), overdue first then by due day: "
    "member, form title and typeKey, when it was sent, due day and an overdue flag. Filter by typeKey or "
    "overdueOnly. Members who have left are not listed.",
)
async def list_pending_for_org(ctx: ToolContext, args: ListPendingInput) -> PendingForms:
    tz = (await ctx.org()).tz
    today = ctx.now.astimezone(tz).date()
    rows = await ctx.conn.fetch(
        """SELECT a.id AS assignment_id, a.membership_id, u.full_name AS member_name, f.title AS form_title,
                  f.type_key, a.assigned_at, a.due_on, coalesce(a.due_on < $2, false) AS overdue,
                  count(*) OVER () AS total, count(*) FILTER (WHERE a.due_on < $2) OVER () AS overdue_total
             FROM form_assignments a
             JOIN forms f ON f.id = a.form_id AND f.deleted_at IS NULL
             JOIN memberships m ON m.id = a.membership_id
             JOIN users u ON u.id = m.user_id
            WHERE a.organization_id = $1 AND a.status = 'pending'
              AND m.status <> 'cancelled' AND (m.ended_on IS NULL OR m.ended_on > $2)
              AND ($3::text IS NULL OR f.type_key = $3)
              AND (NOT $4 OR a.due_on < $2)
            ORDER BY coalesce(a.due_on < $2, false) DESC, a.due_on NULLS LAST, a.assigned_at, a.id
            LIMIT $5""",
        ctx.organization_id,
        today,
        args.type_key,
        args.overdue_only,
        args.limit,
    )
    return PendingForms(
        assignments=[PendingForm.from_row(r, assigned_at=_local(r["assigned_at"], tz)) for r in rows],
        total=rows[0]["total"] if rows else 0,
        overdue_total=rows[0]["overdue_total"] if rows else 0,
    )


@router.read(
    "compliance_status_for_member",
    "One member's compliance with each type of form the studio requires (waiver, PAR-Q, …): compliant, "
    "pending, expired or missing, from the latest assignment of that type, with its dates and how long a "
    "completed form stays valid.",
)
async def compliance_status_for_member(ctx: ToolContext, args: ComplianceInput) -> MemberCompliance:
    tz = (await ctx.org()).tz
    member = await require_membership(ctx, args.membership_id)
    rows = await ctx.conn.fetch(_COMPLIANCE, ctx.organization_id, member["id"], ctx.now)
    forms = [
        TypeCompliance.from_row(
            r,
            assigned_at=_local(r["assigned_at"], tz),
            completed_at=_local(r["completed_at"], tz),
            valid_until=_local(r["valid_until"], tz),
        )
        for r in rows
    ]
    return MemberCompliance(
        membership_id=member["id"],
        member_name=member["full_name"],
        compliant=all(f.status == "compliant" for f in forms),
        forms=forms,
    )


# The required types, each with the member's latest assignment of any form of that type (deleted
# versions included: a waiver signed before the form was replaced still counts until it expires).
_COMPLIANCE = """
WITH required AS (
    SELECT type_key, min(title) AS title FROM forms
     WHERE organization_id = $1 AND required AND deleted_at IS NULL
     GROUP BY type_key
), latest AS (
    SELECT DISTINCT ON (f.type_key) f.type_key, f.title, a.id, a.status, a.assigned_at, a.due_on, a.completed_at,
           a.completed_at + make_interval(days => f.valid_days) AS valid_until
      FROM form_assignments a JOIN forms f ON f.id = a.form_id
     WHERE a.organization_id = $1 AND a.membership_id = $2 AND f.type_key IN (SELECT type_key FROM required)
     ORDER BY f.type_key, a.assigned_at DESC, a.id DESC
)
SELECT r.type_key, coalesce(l.title, r.title) AS form_title, l.id AS assignment_id, l.assigned_at, l.due_on,
       l.completed_at, l.valid_until,
       CASE WHEN l.id IS NULL THEN 'missing'
            WHEN l.status = 'pending' THEN 'pending'
            WHEN l.status = 'completed' AND (l.valid_until IS NULL OR l.valid_until > $3) THEN 'compliant'
            ELSE 'expired' END AS status
  FROM required r LEFT JOIN latest l USING (type_key)
 ORDER BY r.type_key
"""


def _local(moment: datetime | None, tz: tzinfo) -> datetime | None:
    return moment.astimezone(tz) if moment is not None else None
