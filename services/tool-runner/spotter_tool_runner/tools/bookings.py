"""The `bookings` router (seed 000): who booked which class and who came, all read.

A booking counts when its status is `booked` and its class is live and not cancelled (a cancelled
class voids its bookings); it was attended when the member checked in. Days are the studio's local
days.

Roles: STAFF. `list_mine` lists the caller's own bookings; owners and admins may name any member,
a coach only themself (a coach has no business reading members' histories through it). The
attendance reads are not financial, so every staff role has them."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Literal

from pydantic import Field, model_validator

from ..context import ToolContext
from ..declaration import ToolFailure, ToolInput, ToolOutput, ToolRouter
from .class_sessions import check_range, local_days, local_iso, zone_name
from .common import require_membership

router = ToolRouter("bookings")

DEFAULT_DAYS = {"day": 30, "week": 12 * 7}
MAX_POINTS = {"day": 92, "week": 53}

# Classes held — those of [$2, $3) that started before $4 and were not cancelled — each with its
# bookings (status booked) and check-ins. Counting per class first avoids a DISTINCT over every booking.
_HELD = """
WITH held AS (
    SELECT s.id, s.class_type_id, s.starts_at, count(b.id)::int AS bookings, count(b.checked_in_at)::int AS attended
      FROM class_sessions s
      LEFT JOIN bookings b ON b.session_id = s.id AND b.status = 'booked'
     WHERE s.organization_id = $1 AND s.deleted_at IS NULL AND s.cancelled_at IS NULL
       AND s.starts_at >= $2 AND s.starts_at < $3 AND s.starts_at < $4
     GROUP BY s.id)
"""


class ListMineInput(ToolInput):
    membership_id: uuid.UUID | None = Field(
        default=None,
        description="Whose bookings (owners and admins: any member, read__members_search); omit for the caller's own.",
    )
    limit: int = Field(default=10, ge=1, le=50, description="Maximum upcoming, and maximum recent, bookings returned.")


class DateRangeInput(ToolInput):
    date_from: dt.date | None = Field(default=None, description="First local day, YYYY-MM-DD.")
    date_to: dt.date | None = Field(default=None, description="Last local day (included); default today.")

    @model_validator(mode="after")
    def check_dates(self) -> DateRangeInput:
        if self.date_from is not None and self.date_to is not None:
            check_range(self.date_from, self.date_to)
        return self


class SummaryInput(DateRangeInput):
    date_from: dt.date | None = Field(
        default=None, description="First local day, YYYY-MM-DD; default 29 days before dateTo."
    )


class TrendInput(DateRangeInput):
    interval: Literal["day", "week"] = Field(
        default="day", description="One point per day, or per week (weeks start on Monday)."
    )
    date_from: dt.date | None = Field(
        default=None,
        description="First local day, YYYY-MM-DD; default 30 days (interval day) or 12 weeks (week) before dateTo. "
        f"At most {MAX_POINTS['day']} days or {MAX_POINTS['week']} weeks.",
    )


class Booking(ToolOutput):
    id: uuid.UUID = Field(description="Booking id.")
    session_id: uuid.UUID
    class_name: str
    starts_at: str = Field(description="ISO 8601 in the studio's time zone.")
    status: str = Field(description="booked, waitlisted or cancelled (also when the class was cancelled).")
    attended: bool


class MemberBookings(ToolOutput):
    membership_id: uuid.UUID
    member_name: str
    upcoming: list[Booking] = Field(description="Next classes first.")
    upcoming_total: int
    recent: list[Booking] = Field(description="Past classes, latest first.")
    recent_total: int


class Attendance(ToolOutput):
    sessions: int = Field(description="Classes held (started, not cancelled).")
    bookings: int = Field(description="Bookings of those classes (status booked).")
    attended: int = Field(description="Bookings checked in.")
    no_shows: int = Field(description="Bookings not checked in.")
    attendance_rate: float | None = Field(description="attended / bookings, 0–1; null without bookings.")


class ClassTypeAttendance(Attendance):
    class_type_id: uuid.UUID
    class_name: str


class AttendanceSummary(Attendance):
    date_from: dt.date
    date_to: dt.date
    by_class_type: list[ClassTypeAttendance] = Field(description="Most classes held first.")


class TrendPoint(ToolOutput):
    period: dt.date = Field(description="The day, or the Monday of the week.")
    sessions: int
    bookings: int
    attended: int
    attendance_rate: float | None


class AttendanceTrend(ToolOutput):
    interval: str
    date_from: dt.date
    date_to: dt.date
    points: list[TrendPoint] = Field(description="Every period of the range, oldest first, empty ones included.")


def _rate(attended: int, bookings: int) -> float | None:
    return round(attended / bookings, 3) if bookings else None


def _attendance(sessions: int, bookings: int, attended: int) -> dict[str, int | float | None]:
    return {
        "sessions": sessions, "bookings": bookings, "attended": attended,
        "no_shows": bookings - attended, "attendance_rate": _rate(attended, bookings),
    }


@router.read(
    "list_mine",
    "The caller's own class bookings — upcoming and recent, each with the class, its start time, status and "
    "whether the member attended. Owners and admins may pass a membershipId to list a member's bookings.",
)
async def list_mine(ctx: ToolContext, args: ListMineInput) -> MemberBookings:
    target = args.membership_id or uuid.UUID(ctx.actor.membership_id)
    if ctx.actor.role == "coach" and str(target) != ctx.actor.membership_id:
        raise ToolFailure(
            "forbidden",
            "A coach may list only their own bookings.",
            hint="Use analytics or read__members_get for a member; owners and admins can list their bookings.",
        )
    member = await require_membership(ctx, target)
    tz = (await ctx.org()).tz

    async def bookings(upcoming: bool) -> list:
        return await ctx.conn.fetch(
            f"""SELECT b.id, b.session_id, ct.name AS class_name, s.starts_at, b.checked_in_at IS NOT NULL AS attended,
                       CASE WHEN s.cancelled_at IS NULL THEN b.status::text ELSE 'cancelled' END AS status,
                       count(*) OVER () AS total
                  FROM bookings b
                  JOIN class_sessions s ON s.id = b.session_id
                  JOIN class_types ct ON ct.id = s.class_type_id
                 WHERE b.membership_id = $1 AND s.organization_id = $2 AND s.deleted_at IS NULL
                   AND (s.starts_at >= $3) = $4
                 ORDER BY s.starts_at {"ASC" if upcoming else "DESC"}, b.id
                 LIMIT $5""",
            target, ctx.organization_id, ctx.now, upcoming, args.limit,
        )

    upcoming, recent = await bookings(True), await bookings(False)

    def listed(rows: list) -> list[Booking]:
        return [Booking.from_row(r, starts_at=local_iso(r["starts_at"], tz)) for r in rows]

    return MemberBookings(
        membership_id=target, member_name=member["full_name"],
        upcoming=listed(upcoming), upcoming_total=upcoming[0]["total"] if upcoming else 0,
        recent=listed(recent), recent_total=recent[0]["total"] if recent else 0,
    )


@router.read(
    "attendance_summary",
    "Attendance over a range of local days (default the last 30 days): classes held, bookings, attended "
    "(checked in), no-shows and attendance rate, in all and by class type. Cancelled classes are left out.",
)
async def attendance_summary(ctx: ToolContext, args: SummaryInput) -> AttendanceSummary:
    tz = (await ctx.org()).tz
    last = args.date_to or ctx.now.astimezone(tz).date()
    first = args.date_from or last - dt.timedelta(days=29)
    _check(first, last)
    start, end = local_days(tz, first, last)
    rows = await ctx.conn.fetch(
        f"""{_HELD}
            SELECT h.class_type_id, ct.name AS class_name, count(*)::int AS sessions,
                   sum(h.bookings)::int AS bookings, sum(h.attended)::int AS attended
              FROM held h JOIN class_types ct ON ct.id = h.class_type_id
             GROUP BY h.class_type_id, ct.name
             ORDER BY sessions DESC, ct.name""",
        ctx.organization_id, start, end, ctx.now,
    )
    by_type = [
        ClassTypeAttendance(
            class_type_id=r["class_type_id"], class_name=r["class_name"],
            **_attendance(r["sessions"], r["bookings"], r["attended"]),
        )
        for r in rows
    ]
    return AttendanceSummary(
        date_from=first, date_to=last, by_class_type=by_type,
        **_attendance(*(sum(getattr(t, f) for t in by_type) for f in ("sessions", "bookings", "attended"))),
    )


@router.read(
    "attendance_trend",
    "Attendance as a series, one point per local day or per week (interval): classes held, bookings, "
    "attended and attendance rate. Default range: the last 30 days (day) or 12 weeks (week).",
)
async def attendance_trend(ctx: ToolContext, args: TrendInput) -> AttendanceTrend:
    tz = (await ctx.org()).tz
    last = args.date_to or ctx.now.astimezone(tz).date()
    first = args.date_from or last - dt.timedelta(days=DEFAULT_DAYS[args.interval] - 1)
    _check(first, last)
    # Weeks are whole from Monday to Sunday: the first point is the Monday of dateFrom's week.
    period_start = first - dt.timedelta(days=first.weekday()) if args.interval == "week" else first
    points = (last - period_start).days // (7 if args.interval == "week" else 1) + 1
    if points > MAX_POINTS[args.interval]:
        raise ToolFailure(
            "invalid_input",
            f"That range has {points} {args.interval}s; at most {MAX_POINTS[args.interval]} are returned.",
            hint="Shorten the range, or use interval week.",
        )
    start, end = local_days(tz, first, last)
    rows = await ctx.conn.fetch(
        f"""{_HELD}, periods AS (
                SELECT date_trunc($5, h.starts_at AT TIME ZONE $6)::date AS period, count(*)::int AS sessions,
                       sum(h.bookings)::int AS bookings, sum(h.attended)::int AS attended
                  FROM held h
                 GROUP BY 1)
            SELECT p.period::date AS period, coalesce(pe.sessions, 0) AS sessions,
                   coalesce(pe.bookings, 0) AS bookings, coalesce(pe.attended, 0) AS attended
              FROM generate_series($7::date::timestamp, $8::date::timestamp, $9::interval) AS p(period)
              LEFT JOIN periods pe ON pe.period = p.period::date
             ORDER BY 1""",
        ctx.organization_id, start, end, ctx.now, args.interval, zone_name(tz), period_start, last,
        dt.timedelta(days=7 if args.interval == "week" else 1),
    )
    return AttendanceTrend(
        interval=args.interval, date_from=first, date_to=last,
        points=[TrendPoint.from_row(r, attendance_rate=_rate(r["attended"], r["bookings"])) for r in rows],
    )


def _check(first: dt.date, last: dt.date) -> None:
    try:
        check_range(first, last)
    except ValueError as exc:
        raise ToolFailure(
            "invalid_input", f"{exc}.", hint="Give dateFrom on or before dateTo, within a year."
        ) from None
