"""The `assignments` router (seed 000): personal (1-on-1) workouts for one member on a day.

Assign, patch, publish or unpublish, soft-delete; mark comments read for the calling coach; and bulk
delete / publish over a date range, bound to what bulk_preview showed (tools/bulk.py).

Roles: programming 1-on-1 clients is a coach's daily work, so assigning, editing, publishing,
deleting one assignment (confirmed, like workouts__delete) and marking comments read are open to all
staff; bulk writes touch many members' plans at once, so bulk_delete and bulk_publish are for owners
and admins only (staff may still preview a selection).
"""

from __future__ import annotations

import uuid
from datetime import date, datetime, timedelta
from typing import Any, ClassVar

import asyncpg
from pydantic import Field, model_validator

from ..context import ToolContext
from ..declaration import OWNER_ADMIN, STAFF, ToolFailure, ToolInput, ToolOutput, ToolRouter
from .bulk import Preview, SelectionToken, preview, require_unchanged
from .common import (
    IdInput,
    Name,
    PatchInput,
    Table,
    Text,
    insert,
    not_found,
    patch,
    require,
    require_membership,
    require_program,
    soft_delete,
)

router = ToolRouter("assignments", resource="assignment")
ASSIGNMENTS = Table(
    "assignments", "assignment", "title", hint="Use assignments__bulk_preview over its day to find the assignment id."
)

# A bulk selection spans at most a year: enough for any clean-up, small enough to review.
MAX_RANGE_DAYS = 366
# Ids echoed back by a bulk action; the count is always complete.
IDS_SHOWN = 100
MAX_COMMENTS = 200

# inputs --------------------------------------------------------------------------------------------


class AssignPersonalInput(ToolInput):
    membership_id: uuid.UUID = Field(description="The member it is for (read__members_search).")
    scheduled_for: date = Field(description="Day it is for, YYYY-MM-DD in the studio's calendar.")
    title: Name = Field(description="Title, e.g. 'Lower body strength'.")
    notes: Text | None = Field(default=None, description="Instructions or coaching notes for the member.")
    workout_id: uuid.UUID | None = Field(default=None, description="An existing workout to assign (its id).")
    coach_membership_id: uuid.UUID | None = Field(
        default=None, description="The coach responsible; omit for the caller when the caller is a coach."
    )
    program_id: uuid.UUID | None = Field(
        default=None, description="The coaching program it belongs to (read__programs_list)."
    )
    published: bool = Field(default=False, description="true shows it to the member now; false keeps it a draft.")


class AssignmentsUpdateInput(PatchInput):
    REQUIRED: ClassVar = frozenset({"title", "scheduled_for"})

    id: uuid.UUID = Field(description="Assignment id.")
    title: Name | None = Field(default=None, description="New title.")
    notes: Text | None = Field(default=None, description="New notes; null clears them.")
    scheduled_for: date | None = Field(default=None, description="New day, YYYY-MM-DD.")
    workout_id: uuid.UUID | None = Field(default=None, description="Another workout; null detaches it.")
    coach_membership_id: uuid.UUID | None = Field(default=None, description="Another coach; null leaves none.")
    program_id: uuid.UUID | None = Field(default=None, description="Another program; null detaches it.")


class SetPublishedInput(ToolInput):
    id: uuid.UUID = Field(description="Assignment id.")
    published: bool = Field(description="true shows it to the member; false hides it again (a draft).")


class MarkCommentsReadInput(ToolInput):
    assignment_id: uuid.UUID | None = Field(
        default=None, description="Mark every comment on this assignment read. Give this or commentIds."
    )
    comment_ids: list[uuid.UUID] | None = Field(
        default=None, min_length=1, max_length=MAX_COMMENTS, description="Mark these comments read."
    )

    @model_validator(mode="after")
    def check_one(self) -> MarkCommentsReadInput:
        if (self.assignment_id is None) == (self.comment_ids is None):
            raise ValueError("give either assignmentId or commentIds, not both")
        return self


class Selection(ToolInput):
    from_date: date = Field(description="First day of the range, YYYY-MM-DD (inclusive).")
    to_date: date = Field(description=f"Last day of the range, YYYY-MM-DD (inclusive; at most {MAX_RANGE_DAYS} days).")
    membership_id: uuid.UUID | None = Field(default=None, description="Only this member's assignments.")
    coach_membership_id: uuid.UUID | None = Field(default=None, description="Only this coach's assignments.")
    published: bool | None = Field(default=None, description="Only published (true) or only drafts (false).")
    program_id: uuid.UUID | None = Field(default=None, description="Only assignments of this program.")

    @model_validator(mode="after")
    def check_range(self) -> Selection:
        if self.to_date < self.from_date:
            raise ValueError("toDate is before fromDate")
        if self.to_date - self.from_date >= timedelta(days=MAX_RANGE_DAYS):
            raise ValueError(f"the range spans more than {MAX_RANGE_DAYS} days")
        return self


class BulkInput(SelectionToken, Selection):
    pass


# outputs -------------------------------------------------------------------------------------------


class Assignment(ToolOutput):
    id: uuid.UUID
    membership_id: uuid.UUID
    member_name: str
    coach_membership_id: uuid.UUID | None
    coach_name: str | None
    title: str
    notes: str | None
    scheduled_for: date
    workout_id: uuid.UUID | None
    workout_title: str | None
    program_id: uuid.UUID | None
    program_name: str | None
    published: bool
    published_at: str | None = Field(description="When it was published, ISO 8601 in the studio's time zone.")


class DeletedAssignment(ToolOutput):
    id: uuid.UUID
    title: str
    deleted: bool = True


class CommentsMarked(ToolOutput):
    assignment_id: uuid.UUID | None
    marked: int = Field(description="Comments newly marked read by the caller.")
    already_read: int = Field(description="Comments the caller had read before.")


class BulkResult(ToolOutput):
    count: int = Field(description="Assignments in the selection, all handled.")
    changed: int = Field(description="Of those, how many actually changed.")
    ids: list[uuid.UUID] = Field(description=f"Their ids (the first {IDS_SHOWN}).")
    truncated: bool


# handlers ------------------------------------------------------------------------------------------


@router.write(
    "assign_personal",
    "Assign a personal (1-on-1) workout to one member for a day: a title, optional notes, optionally an "
    "existing workout (workoutId) and a coaching program. The coach defaults to the caller when the caller "
    "is a coach. A draft (published false) unless published is true. Returns the assignment with its id.",
    audit_label="assignment.created",
)
async def assign_personal(ctx: ToolContext, args: AssignPersonalInput) -> Assignment:
    await require_membership(ctx, args.membership_id)
    coach = args.coach_membership_id
    if coach is None and ctx.actor.role == "coach":
        coach = uuid.UUID(ctx.actor.membership_id)
    await _check_refs(ctx, coach_membership_id=coach, workout_id=args.workout_id, program_id=args.program_id)
    row = await insert(
        ctx,
        ASSIGNMENTS,
        args,
        coach_membership_id=coach,
        published_at=ctx.now if args.published else None,
        created_by=ctx.actor.user_id,
    )
    return await _load(ctx, row["id"])


@router.write(
    "update",
    "Change an assignment's title, notes, day, workout, coach or program. Send only the fields to change; "
    "null clears notes, workoutId, coachMembershipId or programId. To publish use assignments__set_published.",
)
async def update(ctx: ToolContext, args: AssignmentsUpdateInput) -> Assignment:
    await require(ctx, ASSIGNMENTS, args.id)
    await _check_refs(
        ctx, coach_membership_id=args.coach_membership_id, workout_id=args.workout_id, program_id=args.program_id
    )
    await patch(ctx, ASSIGNMENTS, args)
    return await _load(ctx, args.id)


@router.write(
    "set_published",
    "Publish an assignment (the member sees it) or unpublish it (back to a draft).",
    audit_label="assignment.published_set",
)
async def set_published(ctx: ToolContext, args: SetPublishedInput) -> Assignment:
    current = await require(ctx, ASSIGNMENTS, args.id)
    if current["published"] == args.published:
        state = "published" if args.published else "a draft (unpublished)"
        raise ToolFailure("unchanged", f"That assignment is already {state}.", hint="Nothing to do; tell the user.")
    await ctx.conn.execute(
        """UPDATE assignments SET published = $2, published_at = CASE WHEN $2 THEN $3::timestamptz END,
                  updated_at = now()
            WHERE id = $1""",
        args.id,
        args.published,
        ctx.now,
    )
    return await _load(ctx, args.id)


@router.write("delete", "Delete one assignment. The user is asked to confirm before it runs.", confirm="destructive")
async def delete(ctx: ToolContext, args: IdInput) -> DeletedAssignment:
    return DeletedAssignment.from_row(await soft_delete(ctx, ASSIGNMENTS, args.id))


@router.write(
    "mark_comments_read",
    f"Mark workout comments read for the calling coach: all comments on one assignment (assignmentId) or "
    f"up to {MAX_COMMENTS} given commentIds (from read__workout_comments_in_program). Comments already "
    "read stay as they were.",
    resource="workout_comment",
    audit_label="workout_comment.marked_read",
)
async def mark_comments_read(ctx: ToolContext, args: MarkCommentsReadInput) -> CommentsMarked:
    if args.assignment_id is not None:
        await require(ctx, ASSIGNMENTS, args.assignment_id)
        comments = await ctx.conn.fetch(
            """SELECT id FROM workout_comments
                WHERE assignment_id = $1 AND organization_id = $2 AND deleted_at IS NULL""",
            args.assignment_id,
            ctx.organization_id,
        )
    else:
        comments = await ctx.conn.fetch(
            """SELECT id FROM workout_comments
                WHERE id = ANY($1::uuid[]) AND organization_id = $2 AND deleted_at IS NULL""",
            args.comment_ids,
            ctx.organization_id,
        )
        if missing := set(args.comment_ids or ()) - {c["id"] for c in comments}:
            raise ToolFailure(
                "not_found",
                f"{len(missing)} of the commentIds are no comments in this organization (e.g. {min(missing)}); "
                "nothing was marked.",
                hint="Use read__workout_comments_in_program to find the comment ids.",
            )
    ids = [c["id"] for c in comments]
    # ON CONFLICT: marking a comment read twice (or concurrently) is no change, not an error.
    marked = await ctx.conn.fetchval(
        """WITH new AS (
               INSERT INTO workout_comment_reads (comment_id, coach_membership_id, read_at)
               SELECT unnest($1::uuid[]), $2, $3
               ON CONFLICT (comment_id, coach_membership_id) DO NOTHING
               RETURNING 1)
           SELECT count(*) FROM new""",
        ids,
        ctx.actor.membership_id,
        ctx.now,
    )
    return CommentsMarked(assignment_id=args.assignment_id, marked=marked, already_read=len(ids) - marked)


@router.read(
    "bulk_preview",
    "Dry run of a bulk delete or publish: the assignments between fromDate and toDate (inclusive), "
    "optionally only one member's, one coach's, one program's, or only published / only drafts. Returns "
    "the count, the first items and a selectionToken; show them to the user, then call "
    "assignments__bulk_delete or assignments__bulk_publish with the same filters and that token.",
)
async def bulk_preview(ctx: ToolContext, args: Selection) -> Preview:
    rows = await _select(ctx, args)
    return preview(rows, _item)


@router.write(
    "bulk_delete",
    "Delete every assignment of a selection previewed with assignments__bulk_preview (owners and admins only): "
    "the same filters plus its selectionToken. Refuses, deleting nothing, if the selection changed since. "
    "The user is asked to confirm before it runs.",
    confirm="destructive",
    audit_label="assignment.bulk_deleted",
    roles=OWNER_ADMIN,
)
async def bulk_delete(ctx: ToolContext, args: BulkInput) -> BulkResult:
    rows = await _select(ctx, args, lock=True)
    require_unchanged(rows, args.selection_token, router.name)
    ids = [r["id"] for r in rows]
    await ctx.conn.execute(
        "UPDATE assignments SET deleted_at = now(), updated_at = now() WHERE id = ANY($1::uuid[])", ids
    )
    return _bulk_result(ids, changed=len(ids))


@router.write(
    "bulk_publish",
    "Publish every assignment of a selection previewed with assignments__bulk_preview (owners and admins "
    "only): the same filters plus its selectionToken. Already published ones stay as they are. Refuses, "
    "publishing nothing, if the selection changed since. The user is asked to confirm before it runs.",
    confirm="always",
    audit_label="assignment.bulk_published",
    roles=OWNER_ADMIN,
)
async def bulk_publish(ctx: ToolContext, args: BulkInput) -> BulkResult:
    rows = await _select(ctx, args, lock=True)
    require_unchanged(rows, args.selection_token, router.name)
    ids = [r["id"] for r in rows]
    changed = await ctx.conn.fetchval(
        """WITH done AS (
               UPDATE assignments SET published = true, published_at = $2, updated_at = now()
                WHERE id = ANY($1::uuid[]) AND NOT published
            RETURNING 1)
           SELECT count(*) FROM done""",
        ids,
        ctx.now,
    )
    return _bulk_result(ids, changed=changed)


# storage -------------------------------------------------------------------------------------------

_ASSIGNMENT = """
SELECT a.*, mu.full_name AS member_name, cu.full_name AS coach_name, w.title AS workout_title, p.name AS program_name
  FROM assignments a
  JOIN memberships m ON m.id = a.membership_id
  JOIN users mu ON mu.id = m.user_id
  LEFT JOIN memberships c ON c.id = a.coach_membership_id
  LEFT JOIN users cu ON cu.id = c.user_id
  LEFT JOIN workouts w ON w.id = a.workout_id AND w.deleted_at IS NULL
  LEFT JOIN programs p ON p.id = a.program_id AND p.deleted_at IS NULL
 WHERE a.id = $1 AND a.organization_id = $2 AND a.deleted_at IS NULL
"""

# The selection of a bulk action. Locked (FOR UPDATE OF a: the assignments, not the members) when it is
# about to be changed, so nothing changes between the check against the token and the write.
_SELECTION = """
SELECT a.id, a.updated_at, a.scheduled_for, a.title, a.published, u.full_name AS member_name
  FROM assignments a
  JOIN memberships m ON m.id = a.membership_id
  JOIN users u ON u.id = m.user_id
 WHERE a.organization_id = $1 AND a.deleted_at IS NULL
   AND a.scheduled_for BETWEEN $2 AND $3
   AND ($4::uuid IS NULL OR a.membership_id = $4)
   AND ($5::uuid IS NULL OR a.coach_membership_id = $5)
   AND ($6::boolean IS NULL OR a.published = $6)
   AND ($7::uuid IS NULL OR a.program_id = $7)
 ORDER BY a.scheduled_for, u.full_name, a.id
"""


async def _select(ctx: ToolContext, args: Selection, *, lock: bool = False) -> list[asyncpg.Record]:
    return await ctx.conn.fetch(
        _SELECTION + (" FOR UPDATE OF a" if lock else ""),
        ctx.organization_id,
        args.from_date,
        args.to_date,
        args.membership_id,
        args.coach_membership_id,
        args.published,
        args.program_id,
    )


def _item(row: asyncpg.Record) -> dict[str, Any]:
    return {
        "id": str(row["id"]),
        "date": row["scheduled_for"].isoformat(),
        "member": row["member_name"],
        "title": row["title"],
        "published": row["published"],
    }


def _bulk_result(ids: list[uuid.UUID], *, changed: int) -> BulkResult:
    return BulkResult(count=len(ids), changed=changed, ids=ids[:IDS_SHOWN], truncated=len(ids) > IDS_SHOWN)


async def _check_refs(
    ctx: ToolContext,
    *,
    coach_membership_id: uuid.UUID | None,
    workout_id: uuid.UUID | None,
    program_id: uuid.UUID | None,
) -> None:
    """The coach, workout and program an assignment refers to exist in the organization (None: not given)."""
    if coach_membership_id is not None:
        coach = await require_membership(ctx, coach_membership_id)
        if coach["role"] not in STAFF:
            raise ToolFailure(
                "not_a_coach",
                f"{coach['full_name']} is a {coach['role']}, not staff; only staff coach assignments.",
                hint="Use read__members_search with role coach to find the coach's membershipId.",
            )
    if workout_id is not None:
        found = await ctx.conn.fetchval(
            "SELECT 1 FROM workouts WHERE id = $1 AND organization_id = $2 AND deleted_at IS NULL",
            workout_id,
            ctx.organization_id,
        )
        if not found:
            hint = "Use read__search_anything to find the workout id."
            raise not_found("workout", workout_id, hint, maybe_deleted=True)
    if program_id is not None:
        await require_program(ctx, program_id)


async def _load(ctx: ToolContext, assignment_id: uuid.UUID) -> Assignment:
    row = await ctx.conn.fetchrow(_ASSIGNMENT, assignment_id, ctx.organization_id)
    published_at: datetime | None = row["published_at"]
    local = published_at.astimezone((await ctx.org()).tz).isoformat(timespec="seconds") if published_at else None
    return Assignment.from_row(row, published_at=local)
