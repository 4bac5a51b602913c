"""The `class_sessions` router (seed 000): the studio's timetable.

Times are stored UTC; the model gives and reads them as wall time in the studio's time zone (a
local date plus HH:MM in, ISO 8601 with the studio's offset out), so "13:00" means 13:00 at the
studio whatever the season.

Bookings belong to the studio app (the `bookings` table is not the tool-runner's to write): a
cancelled session's bookings are left as they are, and every read treats the bookings of a
cancelled session as cancelled.

Roles: reads, create, update, publish and unpublish are STAFF — coaches run the timetable day to
day. `cancel` is STAFF too because it is create's inverse (a coach must be able to undo the class
they scheduled), but a coach may cancel only a class they coach or created. The bulk writes change
many classes at once and are owner/admin only."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from typing import Any, ClassVar
from zoneinfo import ZoneInfo

import asyncpg
from pydantic import Field, model_validator

from ..context import ToolContext
from ..declaration import OWNER_ADMIN, STAFF, ToolFailure, ToolInput, ToolOutput, ToolRouter
from .bulk import PREVIEW_LIMIT, Preview, SelectionToken, preview, require_unchanged
from .common import MEMBERS_HINT, Name, PatchInput, Table, Text, not_found, require, require_membership

router = ToolRouter("class_sessions", resource="class_session")
SESSIONS = Table(
    "class_sessions", "class session", "id", hint="Use class_sessions__list_for_date to find the session id."
)
CLASS_TYPES_HINT = "Use class_types__list_for_program to find the classTypeId."
MAX_RANGE_DAYS = 366


# Local time ----------------------------------------------------------------------------------------


def local_instant(tz: dt.tzinfo, day: dt.date, at: dt.time) -> dt.datetime:
    """The instant of a wall time at the studio, refusing one a DST change skips (02:30 on a spring-forward night)."""
    instant = dt.datetime.combine(day, at, tzinfo=tz)
    if instant.astimezone(dt.UTC).astimezone(tz).replace(tzinfo=None) != instant.replace(tzinfo=None):
        raise ToolFailure(
            "invalid_input",
            f"{day} {at:%H:%M} does not exist in {tz} (the clocks change that night).",
            hint="Ask the user for another time.",
        )
    return instant.astimezone(dt.UTC)


def local_days(tz: dt.tzinfo, first: dt.date, last: dt.date) -> tuple[dt.datetime, dt.datetime]:
    """[start, end) instants of the local days first..last, both included."""
    return (
        dt.datetime.combine(first, dt.time(), tzinfo=tz).astimezone(dt.UTC),
        dt.datetime.combine(last + dt.timedelta(days=1), dt.time(), tzinfo=tz).astimezone(dt.UTC),
    )


def local_iso(instant: dt.datetime, tz: dt.tzinfo) -> str:
    return instant.astimezone(tz).isoformat(timespec="seconds")


def zone_name(tz: dt.tzinfo) -> str:
    """The IANA name Postgres' AT TIME ZONE takes."""
    return tz.key if isinstance(tz, ZoneInfo) else "UTC"


def check_range(first: dt.date, last: dt.date, *, max_days: int = MAX_RANGE_DAYS) -> None:
    if last < first:
        raise ValueError("dateTo must be on or after dateFrom")
    if (last - first).days >= max_days:
        raise ValueError(f"a range spans at most {max_days} days")


# Inputs --------------------------------------------------------------------------------------------


def _wall_time(at: dt.time | None) -> None:
    if at is not None and at.tzinfo is not None:
        raise ValueError("give times as local wall time (HH:MM) without an offset")


class ListForDateInput(ToolInput):
    date: dt.date | None = Field(default=None, description="Local day, YYYY-MM-DD; omit for today at the studio.")
    class_type_id: uuid.UUID | None = Field(default=None, description="Only classes of this class type.")
    coach_membership_id: uuid.UUID | None = Field(default=None, description="Only classes this coach leads.")
    include_cancelled: bool = Field(default=False, description="Also list cancelled classes.")
    limit: int = Field(default=50, ge=1, le=100, description="Maximum number of sessions returned.")


class ClassSessionsCreateInput(ToolInput):
    class_type_id: uuid.UUID | None = Field(
        default=None, description="The class type (class_types__list_for_program); or give className instead."
    )
    class_name: Name | None = Field(
        default=None,
        description="The class type by name, e.g. 'Open Gym' (case-insensitive; a unique part of a name also "
        "works); or classTypeId.",
    )
    date: dt.date = Field(description="Local day of the class at the studio, YYYY-MM-DD.")
    start_time: dt.time = Field(description="Local start time at the studio, HH:MM (24-hour).")
    end_time: dt.time = Field(description="Local end time, HH:MM, later than startTime on the same day.")
    capacity: int | None = Field(
        default=None, ge=1, le=1000, description="Places; omit for the class type's default capacity."
    )
    coach_membership_id: uuid.UUID | None = Field(
        default=None, description="The coach leading it (read__members_search, role coach/admin/owner)."
    )
    published: bool = Field(default=False, description="true makes it visible and bookable for members now.")
    notes: Text | None = Field(default=None, description="Notes for staff.")

    @model_validator(mode="after")
    def check(self) -> ClassSessionsCreateInput:
        if (self.class_type_id is None) == (self.class_name is None):
            raise ValueError("give exactly one of classTypeId and className")
        _wall_time(self.start_time)
        _wall_time(self.end_time)
        if self.end_time <= self.start_time:
            raise ValueError("endTime must be later than startTime")
        return self


class ClassSessionsUpdateInput(PatchInput):
    REQUIRED: ClassVar = frozenset({"date", "start_time", "end_time", "capacity"})

    id: uuid.UUID = Field(description="Class session id.")
    date: dt.date | None = Field(default=None, description="Move it to this local day, keeping its times.")
    start_time: dt.time | None = Field(default=None, description="New local start time, HH:MM.")
    end_time: dt.time | None = Field(default=None, description="New local end time, HH:MM.")
    capacity: int | None = Field(
        default=None, ge=1, le=1000, description="New number of places; not below the members booked."
    )
    coach_membership_id: uuid.UUID | None = Field(default=None, description="New coach; null leaves it without one.")
    notes: Text | None = Field(default=None, description="New notes; null clears them.")

    @model_validator(mode="after")
    def check_times(self) -> ClassSessionsUpdateInput:
        _wall_time(self.start_time)
        _wall_time(self.end_time)
        return self


class SessionIdInput(ToolInput):
    id: uuid.UUID = Field(description="Class session id.")


class CancelInput(ToolInput):
    id: uuid.UUID = Field(description="Class session id.")
    reason: Text | None = Field(default=None, description="Why, e.g. 'coach sick'; kept with the session.")


class SessionSelection(ToolInput):
    """A bulk selection: the live, not cancelled sessions of a local date range, optionally narrowed."""

    date_from: dt.date = Field(description="First local day, YYYY-MM-DD.")
    date_to: dt.date = Field(description=f"Last local day (included); a range spans at most {MAX_RANGE_DAYS} days.")
    class_type_id: uuid.UUID | None = Field(default=None, description="Only classes of this class type.")
    coach_membership_id: uuid.UUID | None = Field(default=None, description="Only classes this coach leads.")
    published: bool | None = Field(default=None, description="Only published (true) or unpublished (false) ones.")

    @model_validator(mode="after")
    def check_range(self) -> SessionSelection:
        check_range(self.date_from, self.date_to)
        return self


class BulkSessionsInput(SelectionToken, SessionSelection):
    pass


# Outputs -------------------------------------------------------------------------------------------


class ClassSession(ToolOutput):
    id: uuid.UUID
    class_type_id: uuid.UUID
    class_name: str
    starts_at: str = Field(description="ISO 8601 in the studio's time zone.")
    ends_at: str
    coach_membership_id: uuid.UUID | None
    coach_name: str | None
    capacity: int
    booked: int = Field(description="Members booked (not cancelled or waitlisted).")
    published: bool
    cancelled: bool
    notes: str | None


class SessionsOfDay(ToolOutput):
    date: dt.date
    timezone: str
    sessions: list[ClassSession]
    total: int = Field(description="Number of matches, which may exceed the sessions returned.")


class CancelledSession(ToolOutput):
    id: uuid.UUID
    class_name: str
    starts_at: str
    cancelled: bool = True
    bookings_cancelled: int = Field(description="Bookings (booked or waitlisted) that the cancellation voids.")


class BulkDeleted(ToolOutput):
    deleted: int = Field(description="Sessions deleted.")
    bookings: int = Field(description="Bookings those sessions had.")


class BulkPublished(ToolOutput):
    published: int = Field(description="Sessions published by this call.")
    already_published: int


_SELECT = """
SELECT s.id, s.class_type_id, ct.name AS class_name, s.starts_at, s.ends_at, s.coach_membership_id,
       u.full_name AS coach_name, s.capacity, s.published, s.cancelled_at IS NOT NULL AS cancelled, s.notes,
       CASE WHEN s.cancelled_at IS NULL
            THEN (SELECT count(*) FROM bookings b WHERE b.session_id = s.id AND b.status = 'booked')::int
            ELSE 0 END AS booked,
       count(*) OVER () AS total
  FROM class_sessions s
  JOIN class_types ct ON ct.id = s.class_type_id
  LEFT JOIN memberships m ON m.id = s.coach_membership_id
  LEFT JOIN users u ON u.id = m.user_id
"""


def _session(row: asyncpg.Record, tz: dt.tzinfo) -> ClassSession:
    return ClassSession.from_row(row, starts_at=local_iso(row["starts_at"], tz), ends_at=local_iso(row["ends_at"], tz))


# Tools ---------------------------------------------------------------------------------------------


@router.read(
    "list_for_date",
    "The timetable of one local day (default today at the studio): each class with its id, class type, "
    "start and end in the studio's time zone, coach, capacity, members booked, published and cancelled "
    "flags, by start time. Filter by classTypeId or coachMembershipId; cancelled classes only with "
    "includeCancelled.",
)
async def list_for_date(ctx: ToolContext, args: ListForDateInput) -> SessionsOfDay:
    tz = (await ctx.org()).tz
    day = args.date or ctx.now.astimezone(tz).date()
    start, end = local_days(tz, day, day)
    rows = await ctx.conn.fetch(
        f"""{_SELECT}
             WHERE s.organization_id = $1 AND s.deleted_at IS NULL AND s.starts_at >= $2 AND s.starts_at < $3
               AND ($4::uuid IS NULL OR s.class_type_id = $4)
               AND ($5::uuid IS NULL OR s.coach_membership_id = $5)
               AND ($6 OR s.cancelled_at IS NULL)
             ORDER BY s.starts_at, ct.name, s.id
             LIMIT $7""",
        ctx.organization_id, start, end, args.class_type_id, args.coach_membership_id, args.include_cancelled,
        args.limit,
    )
    return SessionsOfDay(
        date=day, timezone=zone_name(tz), sessions=[_session(r, tz) for r in rows],
        total=rows[0]["total"] if rows else 0,
    )


@router.write(
    "create",
    "Schedule a class: a class type (classTypeId, or className such as 'Open Gym'), a local date and "
    "start/end times at the studio, optionally capacity (default: the type's), coach, notes, and "
    "published (default false: staff-only until published). Resolve relative days ('tomorrow') with "
    "read__get_current_context first. Returns the session with its id.",
    inverse="cancel",
)
async def create(ctx: ToolContext, args: ClassSessionsCreateInput) -> ClassSession:
    tz = (await ctx.org()).tz
    class_type = await _class_type(ctx, args.class_type_id, args.class_name)
    if args.coach_membership_id is not None:
        await _require_coach(ctx, args.coach_membership_id)
    session_id = await ctx.conn.fetchval(
        """INSERT INTO class_sessions (organization_id, class_type_id, coach_membership_id, starts_at, ends_at,
                                       capacity, published, notes, created_by)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id""",
        ctx.organization_id, class_type["id"], args.coach_membership_id,
        local_instant(tz, args.date, args.start_time), local_instant(tz, args.date, args.end_time),
        args.capacity or class_type["default_capacity"], args.published, args.notes, ctx.actor.user_id,
    )
    return await _load(ctx, session_id, tz)


@router.write(
    "update",
    "Change a class: its local day (date), startTime or endTime (local HH:MM), capacity, coach or notes. "
    "Send only the fields to change. Capacity cannot go below the members booked; cancelled classes "
    "cannot be changed.",
)
async def update(ctx: ToolContext, args: ClassSessionsUpdateInput) -> ClassSession:
    tz = (await ctx.org()).tz
    session = await _require_live(ctx, args.id)
    sent = args.model_fields_set
    starts, ends = session["starts_at"].astimezone(tz), session["ends_at"].astimezone(tz)
    if sent & {"date", "start_time", "end_time"}:
        day = args.date or starts.date()
        start_time, end_time = args.start_time or starts.time(), args.end_time or ends.time()
        if end_time <= start_time:
            raise ToolFailure(
                "invalid_input",
                f"The class would end ({end_time:%H:%M}) before it starts ({start_time:%H:%M}).",
                hint="Send both startTime and endTime.",
            )
        starts, ends = local_instant(tz, day, start_time), local_instant(tz, day, end_time)
    if args.capacity is not None:
        booked = await _booked(ctx, args.id)
        if args.capacity < booked:
            raise ToolFailure(
                "capacity_below_bookings",
                f"{booked} members are booked, so capacity cannot go down to {args.capacity}.",
                hint=f"Tell the user; the capacity can be at least {booked}.",
            )
    if args.coach_membership_id is not None:
        await _require_coach(ctx, args.coach_membership_id)
    await ctx.conn.execute(
        """UPDATE class_sessions SET starts_at = $2, ends_at = $3, capacity = $4, coach_membership_id = $5,
                  notes = $6, updated_at = now()
            WHERE id = $1""",
        args.id, starts, ends,
        args.capacity or session["capacity"],
        args.coach_membership_id if "coach_membership_id" in sent else session["coach_membership_id"],
        args.notes if "notes" in sent else session["notes"],
    )
    return await _load(ctx, args.id, tz)


@router.write(
    "publish",
    "Publish a class: members can see and book it.",
    inverse="unpublish",
    audit_label="class_session.published",
)
async def publish(ctx: ToolContext, args: SessionIdInput) -> ClassSession:
    return await _set_published(ctx, args.id, True)


@router.write(
    "unpublish",
    "Unpublish a class: it is hidden from members again (bookings are kept).",
    audit_label="class_session.unpublished",
)
async def unpublish(ctx: ToolContext, args: SessionIdInput) -> ClassSession:
    return await _set_published(ctx, args.id, False)


@router.write(
    "cancel",
    "Cancel a class, with an optional reason; its bookings are cancelled with it. Coaches may cancel only "
    "classes they coach or scheduled. The user is asked to confirm before it runs.",
    confirm="destructive",
    audit_label="class_session.cancelled",
)
async def cancel(ctx: ToolContext, args: CancelInput) -> CancelledSession:
    session = await _require_live(ctx, args.id)
    if ctx.actor.role not in OWNER_ADMIN and ctx.actor.membership_id != str(session["coach_membership_id"]) and (
        ctx.actor.user_id != str(session["created_by"])
    ):
        raise ToolFailure(
            "forbidden", "Coaches may cancel only classes they coach or scheduled.", hint="Ask an owner or admin."
        )
    row = await ctx.conn.fetchrow(
        """UPDATE class_sessions s SET cancelled_at = now(), cancel_reason = $2, updated_at = now()
             FROM class_types ct
            WHERE s.id = $1 AND ct.id = s.class_type_id
        RETURNING s.id, ct.name AS class_name, s.starts_at,
                  (SELECT count(*) FROM bookings b WHERE b.session_id = s.id AND b.status <> 'cancelled')::int
                      AS bookings_cancelled""",
        args.id, args.reason,
    )
    # The members' bookings go with the class (counted above, before this changes them).
    await ctx.conn.execute(
        "UPDATE bookings SET status = 'cancelled' WHERE session_id = $1 AND status <> 'cancelled'", args.id
    )
    tz = (await ctx.org()).tz
    return CancelledSession.from_row(row, starts_at=local_iso(row["starts_at"], tz))


@router.read(
    "bulk_preview",
    "Dry run of class_sessions__bulk_delete / bulk_publish: the classes of a local date range (not "
    "cancelled), optionally only of a class type, a coach or a published state. Returns the count, the "
    "first classes and a selectionToken; show them to the user, then call the bulk action with the same "
    "selection and the token.",
)
async def bulk_preview(ctx: ToolContext, args: SessionSelection) -> Preview:
    tz = (await ctx.org()).tz
    rows = await _selection(ctx, args, tz, lock=False)
    booked = dict(await ctx.conn.fetch(
        """SELECT session_id, count(*)::int FROM bookings
            WHERE session_id = ANY($1) AND status = 'booked' GROUP BY session_id""",
        [r["id"] for r in rows[:PREVIEW_LIMIT]],
    ))
    return preview(rows, lambda r: {
        "id": str(r["id"]), "className": r["class_name"], "startsAt": local_iso(r["starts_at"], tz),
        "published": r["published"], "booked": booked.get(r["id"], 0),
    })


@router.write(
    "bulk_delete",
    "Delete every class of a selection previewed with class_sessions__bulk_preview (same selection and its "
    "selectionToken); refuses with selection_changed, deleting nothing, if the classes changed since. "
    "Owners and admins only; the user is asked to confirm.",
    confirm="destructive",
    audit_label="class_session.bulk_deleted",
    roles=OWNER_ADMIN,
)
async def bulk_delete(ctx: ToolContext, args: BulkSessionsInput) -> BulkDeleted:
    rows = await _selection(ctx, args, (await ctx.org()).tz, lock=True)
    require_unchanged(rows, args.selection_token, router.name)
    ids = [r["id"] for r in rows]
    await ctx.conn.execute(
        "UPDATE class_sessions SET deleted_at = now(), updated_at = now() WHERE id = ANY($1) AND organization_id = $2",
        ids, ctx.organization_id,
    )
    bookings = await ctx.conn.fetchval(
        "SELECT count(*)::int FROM bookings WHERE session_id = ANY($1) AND status = 'booked'", ids
    )
    return BulkDeleted(deleted=len(rows), bookings=bookings)


@router.write(
    "bulk_publish",
    "Publish every class of a selection previewed with class_sessions__bulk_preview (same selection and its "
    "selectionToken); refuses with selection_changed, changing nothing, if the classes changed since. "
    "Owners and admins only; the user is always asked to confirm.",
    confirm="always",
    audit_label="class_session.bulk_published",
    roles=OWNER_ADMIN,
)
async def bulk_publish(ctx: ToolContext, args: BulkSessionsInput) -> BulkPublished:
    rows = await _selection(ctx, args, (await ctx.org()).tz, lock=True)
    require_unchanged(rows, args.selection_token, router.name)
    status = await ctx.conn.execute(
        """UPDATE class_sessions SET published = true, updated_at = now()
            WHERE id = ANY($1) AND organization_id = $2 AND NOT published""",
        [r["id"] for r in rows], ctx.organization_id,
    )
    published = int(status.split()[-1])
    return BulkPublished(published=published, already_published=len(rows) - published)


# Helpers -------------------------------------------------------------------------------------------


async def _load(ctx: ToolContext, session_id: uuid.UUID, tz: dt.tzinfo) -> ClassSession:
    row = await ctx.conn.fetchrow(
        f"{_SELECT} WHERE s.id = $1 AND s.organization_id = $2", session_id, ctx.organization_id
    )
    return _session(row, tz)


async def _require_live(ctx: ToolContext, session_id: uuid.UUID) -> asyncpg.Record:
    """The session, locked, refused when it is cancelled."""
    session = await require(ctx, SESSIONS, session_id)
    if session["cancelled_at"] is not None:
        raise ToolFailure(
            "session_cancelled", f"Class session {session_id} is cancelled.", hint="Schedule a new class instead."
        )
    return session


async def _booked(ctx: ToolContext, session_id: uuid.UUID) -> int:
    return await ctx.conn.fetchval(
        "SELECT count(*)::int FROM bookings WHERE session_id = $1 AND status = 'booked'", session_id
    )


async def _set_published(ctx: ToolContext, session_id: uuid.UUID, published: bool) -> ClassSession:
    session = await _require_live(ctx, session_id)
    if session["published"] == published:
        # Refused rather than a no-op, so that undoing a publish never hides a class published before it.
        state = "published" if published else "unpublished"
        raise ToolFailure(f"already_{state}", f"That class is already {state}.", hint="Nothing to do; tell the user.")
    await ctx.conn.execute(
        "UPDATE class_sessions SET published = $2, updated_at = now() WHERE id = $1", session_id, published
    )
    return await _load(ctx, session_id, (await ctx.org()).tz)


async def _require_coach(ctx: ToolContext, membership_id: uuid.UUID) -> None:
    coach = await require_membership(ctx, membership_id, MEMBERS_HINT)
    if coach["role"] not in STAFF:
        raise ToolFailure(
            "not_staff", f"{coach['full_name']} is a member, not a coach.", hint="Pick a coach, admin or owner."
        )


async def _class_type(ctx: ToolContext, class_type_id: uuid.UUID | None, name: str | None) -> asyncpg.Record:
    """A live class type by id, or by name: the exact (case-insensitive) name, else the one name containing it."""
    if class_type_id is not None:
        row = await ctx.conn.fetchrow(
            """SELECT id, name, default_capacity FROM class_types
                WHERE id = $1 AND organization_id = $2 AND deleted_at IS NULL""",
            class_type_id, ctx.organization_id,
        )
        if row is None:
            raise not_found("class type", class_type_id, CLASS_TYPES_HINT)
        return row
    rows = await ctx.conn.fetch(
        """SELECT id, name, default_capacity, lower(name) = lower($2) AS exact FROM class_types
            WHERE organization_id = $1 AND deleted_at IS NULL AND strpos(lower(name), lower($2)) > 0
            ORDER BY exact DESC, name LIMIT 10""",
        ctx.organization_id, name,
    )
    if rows and (rows[0]["exact"] or len(rows) == 1):
        return rows[0]
    if rows:
        raise ToolFailure(
            "ambiguous_class_type",
            f"{len(rows)} class types match {name!r}.",
            hint=f"Ask the user which one, then pass its classTypeId: {_candidates(rows)}.",
        )
    every = await ctx.conn.fetch(
        "SELECT id, name FROM class_types WHERE organization_id = $1 AND deleted_at IS NULL ORDER BY name LIMIT 20",
        ctx.organization_id,
    )
    raise ToolFailure(
        "not_found",
        f"No class type is named {name!r}.",
        hint=f"The studio's class types: {_candidates(every)}." if every else "The studio has no class types yet.",
    )


def _candidates(rows: Sequence[asyncpg.Record]) -> str:
    return "; ".join(f"{r['name']} (classTypeId {r['id']})" for r in rows)


async def _selection(ctx: ToolContext, sel: SessionSelection, tz: dt.tzinfo, *, lock: bool) -> list[Any]:
    start, end = local_days(tz, sel.date_from, sel.date_to)
    return await ctx.conn.fetch(
        f"""SELECT s.id, s.updated_at, s.starts_at, s.published, ct.name AS class_name
              FROM class_sessions s JOIN class_types ct ON ct.id = s.class_type_id
             WHERE s.organization_id = $1 AND s.deleted_at IS NULL AND s.cancelled_at IS NULL
               AND s.starts_at >= $2 AND s.starts_at < $3
               AND ($4::uuid IS NULL OR s.class_type_id = $4)
               AND ($5::uuid IS NULL OR s.coach_membership_id = $5)
               AND ($6::boolean IS NULL OR s.published = $6)
             ORDER BY s.starts_at, s.id
             {"FOR UPDATE OF s" if lock else ""}""",
        ctx.organization_id, start, end, sel.class_type_id, sel.coach_membership_id, sel.published,
    )
