"""The `read` router (seed 000): read-only lookups, staff only, never confirmed.

Every query is scoped to the actor's organization; an id from another organization is "not found".
"""

from __future__ import annotations

import uuid
from datetime import date, datetime
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, model_validator

from ..context import ToolContext
from ..declaration import Role, ToolFailure, ToolInput, ToolOutput, agent_tool

MembershipStatus = Literal["active", "paused", "cancelled", "pending"]
PaymentStatus = Literal["paid", "due", "overdue", "failed", "none"]


# get_current_context -----------------------------------------------------------------------------


class GetCurrentContextInput(ToolInput):
    pass


class OrganizationInfo(ToolOutput):
    id: str
    name: str
    tier: str
    locale: str
    timezone: str


class CallerInfo(ToolOutput):
    user_id: str
    membership_id: str
    name: str
    email: str
    role: str


class CurrentContext(ToolOutput):
    organization: OrganizationInfo
    caller: CallerInfo
    locale: str = Field(description="Locale to reply in.")
    now: str = Field(description="Current time, ISO 8601 in the organization's timezone.")
    weekday: str = Field(description="Current weekday in the organization's timezone, e.g. Monday.")


@agent_tool(
    router="read",
    action="get_current_context",
    summary="Who and where the caller is: the organization (name, tier, locale, timezone), the caller's "
    "identity and role, the reply locale, and the current date, time and weekday in the studio's timezone. "
    "Use it to resolve relative dates such as 'tomorrow' or 'next Monday'.",
    input=GetCurrentContextInput,
)
async def get_current_context(ctx: ToolContext, args: GetCurrentContextInput) -> CurrentContext:
    org = await ctx.org()
    caller = await ctx.conn.fetchrow(
        """SELECT u.id AS user_id, m.id AS membership_id, u.full_name, u.email, m.role::text AS role
             FROM memberships m JOIN users u ON u.id = m.user_id
            WHERE m.id = $1 AND m.organization_id = $2""",
        ctx.actor.membership_id,
        ctx.organization_id,
    )
    if caller is None:
        raise ToolFailure("not_found", "The caller's membership was not found in this organization.")
    local_now = ctx.now.astimezone(org.tz)
    return CurrentContext(
        organization=OrganizationInfo(
            id=org.id, name=org.name, tier=org.tier, locale=org.locale, timezone=org.timezone
        ),
        caller=CallerInfo(
            user_id=str(caller["user_id"]),
            membership_id=str(caller["membership_id"]),
            name=caller["full_name"],
            email=caller["email"],
            role=caller["role"],
        ),
        locale=ctx.actor.locale,
        now=local_now.isoformat(timespec="seconds"),
        weekday=local_now.strftime("%A"),
    )


# programs_list -------------------------------------------------------------------------------------


class ProgramsListInput(ToolInput):
    include_inactive: bool = Field(default=False, description="Also list programs that are not active.")


class ProgramItem(ToolOutput):
    id: str
    name: str
    kind: str = Field(description="group, coaching or feed.")
    description: str | None
    is_active: bool


class ProgramsList(ToolOutput):
    programs: list[ProgramItem]


@agent_tool(
    router="read",
    action="programs_list",
    summary="List the studio's training programs (id, name, kind, description, active flag), ordered by name. "
    "Only active programs unless includeInactive is true.",
    input=ProgramsListInput,
)
async def programs_list(ctx: ToolContext, args: ProgramsListInput) -> ProgramsList:
    rows = await ctx.conn.fetch(
        """SELECT id, name, kind::text AS kind, description, is_active
             FROM programs
            WHERE organization_id = $1 AND deleted_at IS NULL AND ($2 OR is_active)
            ORDER BY name, id""",
        ctx.organization_id,
        args.include_inactive,
    )
    return ProgramsList(
        programs=[
            ProgramItem(
                id=str(r["id"]), name=r["name"], kind=r["kind"], description=r["description"], is_active=r["is_active"]
            )
            for r in rows
        ]
    )


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
    membership_id: str
    name: str
    email: str
    role: str
    status: str
    plan: str | None
    payment_status: str


class MembersSearchResult(ToolOutput):
    members: list[MemberSummary]
    total: int = Field(description="Number of matches, which may exceed the members returned.")


@agent_tool(
    router="read",
    action="members_search",
    summary="Search the studio's people (members and staff) by name or email, optionally filtered by role, "
    "membership status and payment status. Returns membershipIds for read__members_get. "
    'Use query "*" to list everyone matching the filters.',
    input=MembersSearchInput,
)
async def members_search(ctx: ToolContext, args: MembersSearchInput) -> MembersSearchResult:
    patterns = [f"%{_escape_like(token)}%" for token in args.query.split() if token != "*"]
    rows = await ctx.conn.fetch(
        """SELECT m.id, u.full_name, u.email, m.role::text AS role, m.status::text AS status, m.plan,
                  m.payment_status::text AS payment_status, count(*) OVER () AS total
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
    return MembersSearchResult(
        members=[
            MemberSummary(
                membership_id=str(r["id"]),
                name=r["full_name"],
                email=r["email"],
                role=r["role"],
                status=r["status"],
                plan=r["plan"],
                payment_status=r["payment_status"],
            )
            for r in rows
        ],
        total=rows[0]["total"] if rows else 0,
    )


def _escape_like(text: str) -> str:
    # Backslash is ILIKE's default escape character; the user's % and _ must match literally.
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


# members_get ---------------------------------------------------------------------------------------


class MembersGetInput(ToolInput):
    membership_id: uuid.UUID = Field(description="membershipId from read__members_search.")


class MemberDetail(ToolOutput):
    membership_id: str
    user_id: str
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


@agent_tool(
    router="read",
    action="members_get",
    summary="Full detail of one member by membershipId: contact, role, status, plan, payment status, "
    "join date and last visit (with days since).",
    input=MembersGetInput,
)
async def members_get(ctx: ToolContext, args: MembersGetInput) -> MemberDetail:
    r = await ctx.conn.fetchrow(
        """SELECT m.id, m.user_id, u.full_name, u.email, m.phone, m.role::text AS role, m.status::text AS status,
                  m.plan, m.payment_status::text AS payment_status, m.joined_at, m.last_visit_at
             FROM memberships m JOIN users u ON u.id = m.user_id
            WHERE m.id = $1 AND m.organization_id = $2""",
        args.membership_id,
        ctx.organization_id,
    )
    if r is None:
        raise ToolFailure(
            "not_found",
            f"No member with membershipId {args.membership_id} in this organization.",
            hint="Use read__members_search to find the membershipId",
        )
    last_visit: datetime | None = r["last_visit_at"]
    return MemberDetail(
        membership_id=str(r["id"]),
        user_id=str(r["user_id"]),
        name=r["full_name"],
        email=r["email"],
        phone=r["phone"],
        role=r["role"],
        status=r["status"],
        plan=r["plan"],
        payment_status=r["payment_status"],
        joined_at=r["joined_at"],
        last_visit_at=last_visit,
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


@agent_tool(
    router="read",
    action="ask_user_to_pick",
    summary="Ask the user to choose when several entities match what they said — e.g. two members named Saar: "
    "prompt 'Which Saar?' with one candidate per match (id, label, and a sublabel that tells them apart). "
    "Do not guess between plausible matches. The conversation pauses until the user picks; the result is "
    "{pickedId, pickedLabel, kind}.",
    input=AskUserToPickInput,
    kind="user_picker",
)
async def ask_user_to_pick(ctx: ToolContext, args: AskUserToPickInput) -> dict:
    # Never called: the runner only holds picker calls, and the user's pick becomes the result.
    raise ToolFailure("not_executable", "read__ask_user_to_pick is answered by the user's pick.")
