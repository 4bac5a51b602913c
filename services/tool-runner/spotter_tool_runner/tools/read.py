"""The `read` router (seed 000): read-only lookups, staff only, never confirmed.

Every query is scoped to the actor's organization; an id from another organization is "not found".
"""

from __future__ import annotations

import uuid
from datetime import date, datetime
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, model_validator

from ..context import ToolContext
from ..declaration import Role, ToolFailure, ToolInput, ToolOutput, ToolRouter
from .common import require_membership

router = ToolRouter("read")

MembershipStatus = Literal["active", "paused", "cancelled", "pending"]
PaymentStatus = Literal["paid", "due", "overdue", "failed", "none"]


# get_current_context -----------------------------------------------------------------------------


class GetCurrentContextInput(ToolInput):
    pass


class OrganizationInfo(ToolOutput):
    id: uuid.UUID
    name: str
    tier: str
    locale: str
    timezone: str


class CallerInfo(ToolOutput):
    user_id: uuid.UUID
    membership_id: uuid.UUID
    name: str
    email: str
    role: str


class CurrentContext(ToolOutput):
    organization: OrganizationInfo
    caller: CallerInfo
    locale: str = Field(description="Locale to reply in.")
    now: str = Field(description="Current time, ISO 8601 in the organization's timezone.")
    weekday: str = Field(description="Current weekday in the organization's timezone, e.g. Monday.")


@router.read(
    "get_current_context",
    "Who and where the caller is: the organization (name, tier, locale, timezone), the caller's "
    "identity and role, the reply locale, and the current date, time and weekday in the studio's timezone. "
    "Use it to resolve relative dates such as 'tomorrow' or 'next Monday'.",
)
async def get_current_context(ctx: ToolContext, args: GetCurrentContextInput) -> CurrentContext:
    org = await ctx.org()
    caller = await ctx.conn.fetchrow(
        """SELECT u.id AS user_id, m.id AS membership_id, u.full_name AS name, u.email, m.role
             FROM memberships m JOIN users u ON u.id = m.user_id
            WHERE m.id = $1 AND m.organization_id = $2""",
        ctx.actor.membership_id,
        ctx.organization_id,
    )
    if caller is None:
        raise ToolFailure("not_found", "The caller's membership was not found in this organization.")
    local_now = ctx.now.astimezone(org.tz)
    return CurrentContext(
        organization=OrganizationInfo.model_validate(org, from_attributes=True),
        caller=CallerInfo.from_row(caller),
        locale=ctx.actor.locale,
        now=local_now.isoformat(timespec="seconds"),
        weekday=local_now.strftime("%A"),
    )


# programs_list -------------------------------------------------------------------------------------


class ProgramsListInput(ToolInput):
    include_inactive: bool = Field(default=False, description="Also list programs that are not active.")


class ProgramItem(ToolOutput):
    id: uuid.UUID
    name: str
    kind: str = Field(description="group, coaching or feed.")
    description: str | None
    is_active: bool


class ProgramsList(ToolOutput):
    programs: list[ProgramItem]


@router.read(
    "programs_list",
    "List the studio's training programs (id, name, kind, description, active flag), ordered by name. "
    "Only active programs unless includeInactive is true.",
)
async def programs_list(ctx: ToolContext, args: ProgramsListInput) -> ProgramsList:
    rows = await ctx.conn.fetch(
        """SELECT id, name, kind, description, is_active
             FROM programs
            WHERE organization_id = $1 AND deleted_at IS NULL AND ($2 OR is_active)
            ORDER BY name, id""",
        ctx.organization_id,
        args.include_inactive,
    )
    return ProgramsList(programs=[ProgramItem.from_row(r) for r in rows])


# members_search ------------------------------------------------------------------------------------


class MembersSearchInput(ToolInput):
    query: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100)] = Field(
        description='Words of a name or email; every word must match (case-insensitive). "*" lists everyone.'
    )
    role: Role | None = Field(default=None, description="Only this role.")
    status: MembershipStatus | None = Field(default=None, description="Only this membership status.")
    payment_status: PaymentStatus | None = Field(default=None, description="Only this payment status.")
    limit: int = Field(default=10, ge=1, le=25, description="Maximum number of members returned.")


class MemberSummary(ToolOutput):
    membership_id: uuid.UUID
    name: str
    email: str
    role: str
    status: str
    plan: str | None
    payment_status: str


class MembersSearchResult(ToolOutput):
    members: list[MemberSummary]
    total: int = Field(description="Number of matches, which may exceed the members returned.")


@router.read(
    "members_search",
    "Search the studio's people (members and staff) by name or email, optionally filtered by role, "
    "membership status and payment status. Returns membershipIds for read__members_get. "
    'Use query "*" to list everyone matching the filters.',
)
async def members_search(ctx: ToolContext, args: MembersSearchInput) -> MembersSearchResult:
    patterns = [f"%{_escape_like(token)}%" for token in args.query.split() if token != "*"]
    rows = await ctx.conn.fetch(
        """SELECT m.id AS membership_id, u.full_name AS name, u.email, m.role, m.status, m.plan, m.payment_status,
                  count(*) OVER () AS total
             FROM memberships m JOIN users u ON u.id = m.user_id
            WHERE m.organization_id = $1
              AND NOT EXISTS (SELECT 1 FROM unnest($2::text[]) AS p(pattern)
                               WHERE NOT (u.full_name ILIKE p.pattern OR u.email ILIKE p.pattern))
              AND ($3::text IS NULL OR m.role::text = $3)
              AND ($4::text IS NULL OR m.status::text = $4)
              AND ($5::text IS NULL OR m.payment_status::text = $5)
            ORDER BY u.full_name, m.id
            LIMIT $6""",
        ctx.organization_id,
        patterns,
        args.role,
        args.status,
        args.payment_status,
        args.limit,
    )
    members = [MemberSummary.from_row(r) for r in rows]
    return MembersSearchResult(members=members, total=rows[0]["total"] if rows else 0)


def _escape_like(text: str) -> str:
    # Backslash is ILIKE's default escape character; the user's % and _ must match literally.
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


# members_get ---------------------------------------------------------------------------------------


class MembersGetInput(ToolInput):
    membership_id: uuid.UUID = Field(description="membershipId from read__members_search.")


class MemberDetail(ToolOutput):
    membership_id: uuid.UUID
    user_id: uuid.UUID
    name: str
    email: str
    phone: str | None
    role: str
    status: str
    plan: str | None
    payment_status: str
    joined_at: date
    last_visit_at: datetime | None
    days_since_last_visit: int | None


@router.read(
    "members_get",
    "Full detail of one member by membershipId: contact, role, status, plan, payment status, "
    "join date and last visit (with days since).",
)
async def members_get(ctx: ToolContext, args: MembersGetInput) -> MemberDetail:
    # This tool's hint has always lacked the final period of the shared one; kept, so its output is unchanged.
    member = await require_membership(ctx, args.membership_id, "Use read__members_search to find the membershipId")
    last_visit: datetime | None = member["last_visit_at"]
    return MemberDetail.from_row(
        member,
        membership_id=member["id"],
        name=member["full_name"],
        days_since_last_visit=(ctx.now - last_visit).days if last_visit else None,
    )


# ask_user_to_pick ----------------------------------------------------------------------------------

Label = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=255)]


class PickCandidate(ToolInput):
    id: Label = Field(description="Id of the entity, e.g. a membershipId; returned as pickedId.")
    label: Label = Field(description="What the button says, e.g. the member's full name.")
    sublabel: Label | None = Field(default=None, description="What tells it apart, e.g. plan or email.")
    detail: Annotated[str, StringConstraints(strip_whitespace=True, max_length=500)] | None = Field(
        default=None, description="Optional extra line, e.g. last visit."
    )


class AskUserToPickInput(ToolInput):
    kind: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=32)] = Field(
        description="What is being picked: member, program, workout, exercise, …"
    )
    prompt: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)] = Field(
        description="The question, in the user's language, e.g. 'Which Saar?'."
    )
    candidates: list[PickCandidate] = Field(min_length=2, max_length=8, description="2 to 8 options.")

    @model_validator(mode="after")
    def check_unique_ids(self) -> AskUserToPickInput:
        ids = [c.id for c in self.candidates]
        if len(set(ids)) != len(ids):
            raise ValueError("candidate ids must be unique")
        return self


ask_user_to_pick = router.picker(
    "ask_user_to_pick",
    "Ask the user to choose when several entities match what they said — e.g. two members named Saar: "
    "prompt 'Which Saar?' with one candidate per match (id, label, and a sublabel that tells them apart). "
    "Do not guess between plausible matches. The conversation pauses until the user picks; the result is "
    "{pickedId, pickedLabel, kind}.",
    input=AskUserToPickInput,
)
