"""The `analytics` router (seed 000): the studio's figures, aggregated in Postgres. All reads.

Periods are whole local days in the organization's time zone, `from`..`to` inclusive (default: the
last 30 days; trends: the last 12 calendar months). Money is a decimal string in `currency` (the
currency most of the studio's payments use; payments in another currency are left out). Rates are
fractions rounded to 3 decimals, null when their denominator is 0.

Definitions the summaries state and the tests check:
  * a member is a membership with role member; active = status active and not ended (ended_on null
    or after today); active at the end of a past day d = joined on or before d and not ended by d
    (status history is not kept, so a past count cannot exclude pauses);
  * a session counts when it starts in the period and is neither cancelled nor deleted; a visit is a
    booking with a check-in (checked_in_at) in such a session, dated by the session's start;
  * collected revenue = payments with status paid, by paid_at; refunded = status refunded, by paid_at.

Roles: staff (owner, admin, coach) read everything but money — revenue_* and plan_distribution are
owner/admin, since coaches are not shown the studio's takings; org_insights leaves out the revenue
insight for a coach for the same reason.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, tzinfo
from decimal import Decimal
from typing import Literal, Self

import asyncpg
from pydantic import Field, model_validator

from ..context import ToolContext
from ..declaration import OWNER_ADMIN, ToolFailure, ToolInput, ToolOutput, ToolRouter

router = ToolRouter("analytics")
MAX_DAYS = 731  # two years: enough for any comparison, small enough to stay fast
Interval = Literal["week", "month"]


# periods -------------------------------------------------------------------------------------------


class PeriodInput(ToolInput):
    from_: date | None = Field(
        default=None,
        alias="from",
        description="First day, YYYY-MM-DD, in the studio's time zone; default 30 days ending `to`.",
    )
    to: date | None = Field(default=None, description="Last day (inclusive), YYYY-MM-DD; default today.")

    @model_validator(mode="after")
    def check_order(self) -> PeriodInput:
        if self.from_ and self.to and self.from_ > self.to:
            raise ValueError("from must be on or before to")
        return self


class TrendInput(PeriodInput):
    from_: date | None = Field(
        default=None,
        alias="from",
        description="First day, YYYY-MM-DD; default the 1st of the month 11 months before `to`'s.",
    )
    interval: Interval = Field(default="month", description="Bucket size: week (Monday to Sunday) or month.")


@dataclass(frozen=True)
class Period:
    start: date
    end: date  # inclusive
    tz: tzinfo
    today: date

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1

    @property
    def lo(self) -> datetime:
        return datetime.combine(self.start, time(), tzinfo=self.tz)

    @property
    def hi(self) -> datetime:
        return datetime.combine(self.end + timedelta(days=1), time(), tzinfo=self.tz)

    @property
    def tz_name(self) -> str:
        return str(self.tz)

    def previous(self) -> Period:
        """The period of equal length just before this one."""
        return Period(self.start - timedelta(days=self.days), self.start - timedelta(days=1), self.tz, self.today)


class Span(ToolOutput):
    from_: date = Field(alias="from")
    to: date

    @classmethod
    def of(cls, p: Period) -> Span:
        return cls(from_=p.start, to=p.end)


async def _today(ctx: ToolContext) -> tuple[date, tzinfo]:
    tz = (await ctx.org()).tz
    return ctx.now.astimezone(tz).date(), tz


async def _period(ctx: ToolContext, args: PeriodInput, *, months: int | None = None) -> Period:
    today, tz = await _today(ctx)
    end = args.to or today
    if args.from_ is not None:
        start = args.from_
    elif months is not None:
        start = _add_months(end.replace(day=1), 1 - months)
    else:
        start = end - timedelta(days=29)
    if start > end:
        raise ToolFailure("invalid_input", f"from ({start}) is after to ({end}).", hint="Give from on or before to.")
    if (end - start).days + 1 > MAX_DAYS:
        raise ToolFailure(
            "invalid_input", f"The period is longer than {MAX_DAYS} days.", hint="Ask for a shorter period."
        )
    return Period(start, end, tz, today)


async def _trend_period(ctx: ToolContext, args: TrendInput) -> Period:
    p = await _period(ctx, args, months=12)
    if args.interval == "week" and p.days > 371:
        raise ToolFailure("invalid_input", "Weekly buckets cover at most 371 days.", hint="Use interval month.")
    return p


def _add_months(day: date, months: int) -> date:
    index = day.year * 12 + day.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def _buckets(p: Period, interval: Interval) -> list[tuple[date, date, date]]:
    """(key as date_trunc gives it, first day, last day), clipped to the period."""
    key = p.start - timedelta(days=p.start.weekday()) if interval == "week" else p.start.replace(day=1)
    out = []
    while key <= p.end:
        nxt = key + timedelta(days=7) if interval == "week" else _add_months(key, 1)
        out.append((key, max(key, p.start), min(nxt - timedelta(days=1), p.end)))
        key = nxt
    return out


def _rate(part: float, whole: float) -> float | None:
    return round(part / whole, 3) if whole else None


def _change(now: float, before: float) -> float | None:
    """Relative change, e.g. -0.125 for a drop of 12.5%; null when there was nothing before."""
    return round((now - before) / before, 3) if before else None


def _money(cents: int | Decimal) -> str:
    return str(Decimal(int(cents)).scaleb(-2))


async def _currency(ctx: ToolContext) -> str:
    return await ctx.conn.fetchval(
        """SELECT coalesce(
                    (SELECT currency FROM payments WHERE organization_id = $1
                      GROUP BY currency ORDER BY count(*) DESC, currency LIMIT 1),
                    (SELECT currency FROM plans WHERE organization_id = $1
                      GROUP BY currency ORDER BY count(*) DESC, currency LIMIT 1),
                    'USD')""",
        ctx.organization_id,
    )


# revenue_summary -----------------------------------------------------------------------------------


class RevenueFigures(ToolOutput):
    period: Span
    collected: str = Field(description="Paid payments, by payment time.")
    payments: int
    paying_members: int
    arpu: str | None = Field(description="collected ÷ payingMembers.")


class RevenueSummary(RevenueFigures):
    currency: str
    refunded: str = Field(description="Payments made in the period and since refunded.")
    failed: str = Field(description="Failed payments due in the period.")
    failed_payments: int
    overdue: str = Field(description="Payments due in the period, before today, still pending.")
    overdue_payments: int
    previous: RevenueFigures = Field(description="The period of equal length just before.")
    collected_change: float | None = Field(description="Relative change of collected vs previous, e.g. -0.1.")


_REVENUE = """
SELECT coalesce(sum(amount_cents) FILTER (WHERE paid), 0) AS collected,
       count(*) FILTER (WHERE paid) AS payments,
       count(DISTINCT membership_id) FILTER (WHERE paid) AS paying,
       coalesce(sum(amount_cents) FILTER (WHERE refunded), 0) AS refunded,
       coalesce(sum(amount_cents) FILTER (WHERE status = 'failed' AND due), 0) AS failed,
       count(*) FILTER (WHERE status = 'failed' AND due) AS failed_payments,
       coalesce(sum(amount_cents) FILTER (WHERE status = 'pending' AND due AND due_on < $7), 0) AS overdue,
       count(*) FILTER (WHERE status = 'pending' AND due AND due_on < $7) AS overdue_payments
  FROM (SELECT *, status = 'paid' AND in_period AS paid, status = 'refunded' AND in_period AS refunded,
               due_on BETWEEN $5 AND $6 AS due
          FROM (SELECT *, paid_at >= $3 AND paid_at < $4 AS in_period FROM payments
                 WHERE organization_id = $1 AND currency = $2
                   AND ((paid_at >= $3 AND paid_at < $4) OR due_on BETWEEN $5 AND $6)) x) p
"""


async def _revenue(ctx: ToolContext, p: Period, currency: str) -> asyncpg.Record:
    return await ctx.conn.fetchrow(_REVENUE, ctx.organization_id, currency, p.lo, p.hi, p.start, p.end, p.today)


def _figures(p: Period, row: asyncpg.Record) -> dict:
    paying = row["paying"]
    return {
        "period": Span.of(p),
        "collected": _money(row["collected"]),
        "payments": row["payments"],
        "paying_members": paying,
        "arpu": _money(round(row["collected"] / paying)) if paying else None,
    }


@router.read(
    "revenue_summary",
    "The studio's revenue in a period (default the last 30 days): collected (paid payments), refunded, "
    "failed and overdue (pending past due) amounts, paying members and revenue per paying member, compared "
    "with the period of equal length just before. Money as decimal strings in `currency`.",
    roles=OWNER_ADMIN,
)
async def revenue_summary(ctx: ToolContext, args: PeriodInput) -> RevenueSummary:
    p = await _period(ctx, args)
    currency = await _currency(ctx)
    now, before = await _revenue(ctx, p, currency), await _revenue(ctx, p.previous(), currency)
    return RevenueSummary(
        **_figures(p, now),
        currency=currency,
        refunded=_money(now["refunded"]),
        failed=_money(now["failed"]),
        failed_payments=now["failed_payments"],
        overdue=_money(now["overdue"]),
        overdue_payments=now["overdue_payments"],
        previous=RevenueFigures(**_figures(p.previous(), before)),
        collected_change=_change(now["collected"], before["collected"]),
    )


# revenue_trend -------------------------------------------------------------------------------------


class RevenueBucket(ToolOutput):
    from_: date = Field(alias="from")
    to: date
    collected: str
    payments: int
    paying_members: int


class RevenueTrend(ToolOutput):
    currency: str
    interval: str
    buckets: list[RevenueBucket]
    total: str = Field(description="Collected over the whole period.")


@router.read(
    "revenue_trend",
    "Collected revenue (paid payments, by payment time) per week or month over a period (default the last "
    "12 calendar months), with payments and paying members per bucket. The first and last buckets are clipped "
    "to the period.",
    roles=OWNER_ADMIN,
)
async def revenue_trend(ctx: ToolContext, args: TrendInput) -> RevenueTrend:
    p = await _trend_period(ctx, args)
    currency = await _currency(ctx)
    rows = await ctx.conn.fetch(
        """SELECT date_trunc($5, paid_at AT TIME ZONE $6)::date AS bucket, sum(amount_cents) AS cents,
                  count(*) AS payments, count(DISTINCT membership_id) AS paying
             FROM payments
            WHERE organization_id = $1 AND currency = $2 AND status = 'paid' AND paid_at >= $3 AND paid_at < $4
            GROUP BY 1""",
        ctx.organization_id,
        currency,
        p.lo,
        p.hi,
        args.interval,
        p.tz_name,
    )
    by_key = {r["bucket"]: r for r in rows}
    buckets = []
    for key, first, last in _buckets(p, args.interval):
        r = by_key.get(key)
        buckets.append(
            RevenueBucket(
                from_=first,
                to=last,
                collected=_money(r["cents"] if r else 0),
                payments=r["payments"] if r else 0,
                paying_members=r["paying"] if r else 0,
            )
        )
    return RevenueTrend(
        currency=currency, interval=args.interval, buckets=buckets, total=_money(sum(r["cents"] for r in rows))
    )


# members_summary -----------------------------------------------------------------------------------

PAYMENT_STATUSES = ("paid", "due", "overdue", "failed", "none")


class MembersSummary(ToolOutput):
    period: Span
    active: int = Field(description="Members now active (status active, not ended).")
    paused: int = Field(description="Members now paused, not ended.")
    pending: int = Field(description="Members now pending, not ended.")
    joined: int = Field(description="Members who joined in the period.")
    churned: int = Field(description="Members whose membership ended in the period.")
    at_start: int = Field(description="Members (joined, not ended) on the day before the period.")
    churn_rate: float | None = Field(description="churned ÷ atStart.")
    active_by_payment_status: dict[str, int] = Field(description="Active members by payment status.")


@router.read(
    "members_summary",
    "Members now (active, paused, pending — not ended), and in a period (default the last 30 days): joined, "
    "churned (membership ended), members at the start and churn rate (churned ÷ at start); active members "
    "by payment status.",
)
async def members_summary(ctx: ToolContext, args: PeriodInput) -> MembersSummary:
    p = await _period(ctx, args)
    row = await ctx.conn.fetchrow(
        """SELECT count(*) FILTER (WHERE live AND status = 'active') AS active,
                  count(*) FILTER (WHERE live AND status = 'paused') AS paused,
                  count(*) FILTER (WHERE live AND status = 'pending') AS pending,
                  count(*) FILTER (WHERE joined_at BETWEEN $2 AND $3) AS joined,
                  count(*) FILTER (WHERE ended_on BETWEEN $2 AND $3) AS churned,
                  count(*) FILTER (WHERE joined_at < $2 AND (ended_on IS NULL OR ended_on >= $2)) AS at_start
             FROM (SELECT status, joined_at, ended_on, (ended_on IS NULL OR ended_on > $4) AS live
                     FROM memberships WHERE organization_id = $1 AND role = 'member') m""",
        ctx.organization_id,
        p.start,
        p.end,
        p.today,
    )
    by_payment = await ctx.conn.fetch(
        """SELECT payment_status::text AS payment_status, count(*) AS n FROM memberships
            WHERE organization_id = $1 AND role = 'member' AND status = 'active' AND (ended_on IS NULL OR ended_on > $2)
            GROUP BY 1""",
        ctx.organization_id,
        p.today,
    )
    counts = {r["payment_status"]: r["n"] for r in by_payment}
    return MembersSummary.from_row(
        row,
        period=Span.of(p),
        churn_rate=_rate(row["churned"], row["at_start"]),
        active_by_payment_status={s: counts.get(s, 0) for s in PAYMENT_STATUSES},
    )


# members_growth ------------------------------------------------------------------------------------


class GrowthBucket(ToolOutput):
    from_: date = Field(alias="from")
    to: date
    joined: int
    churned: int
    net: int
    active_at_end: int = Field(description="Members joined and not ended on the bucket's last day.")


class MembersGrowth(ToolOutput):
    interval: str
    at_start: int = Field(description="Members (joined, not ended) on the day before the period.")
    buckets: list[GrowthBucket]


@router.read(
    "members_growth",
    "Membership growth per week or month over a period (default the last 12 calendar months): members "
    "joined, churned (membership ended), net, and members at the end of each bucket (joined and not ended "
    "by its last day; past pauses are not known, so paused members count).",
)
async def members_growth(ctx: ToolContext, args: TrendInput) -> MembersGrowth:
    p = await _trend_period(ctx, args)
    rows = await ctx.conn.fetch(
        """SELECT 'joined' AS what, date_trunc($4, joined_at::timestamp)::date AS bucket, count(*) AS n
             FROM memberships WHERE organization_id = $1 AND role = 'member' AND joined_at BETWEEN $2 AND $3 GROUP BY 2
           UNION ALL
           SELECT 'churned', date_trunc($4, ended_on::timestamp)::date, count(*)
             FROM memberships WHERE organization_id = $1 AND role = 'member' AND ended_on BETWEEN $2 AND $3 GROUP BY 2
           UNION ALL
           SELECT 'start', NULL, count(*)
             FROM memberships WHERE organization_id = $1 AND role = 'member'
              AND joined_at < $2 AND (ended_on IS NULL OR ended_on >= $2)""",
        ctx.organization_id,
        p.start,
        p.end,
        args.interval,
    )
    counts = {(r["what"], r["bucket"]): r["n"] for r in rows}
    active = at_start = counts[("start", None)]
    buckets = []
    for key, first, last in _buckets(p, args.interval):
        joined, churned = counts.get(("joined", key), 0), counts.get(("churned", key), 0)
        active += joined - churned
        buckets.append(
            GrowthBucket(
                from_=first, to=last, joined=joined, churned=churned, net=joined - churned, active_at_end=active
            )
        )
    return MembersGrowth(interval=args.interval, at_start=at_start, buckets=buckets)


# at_risk_members -----------------------------------------------------------------------------------


class AtRiskInput(ToolInput):
    recent_days: int = Field(default=14, ge=7, le=60, description="The recent window: the last N days, today included.")
    baseline_days: int = Field(
        default=30, ge=7, le=120, description="The baseline: the N days just before the recent window."
    )
    min_visits_before: int = Field(default=6, ge=1, le=100, description="At least this many visits in the baseline.")
    max_visits_recent: int = Field(default=1, ge=0, le=20, description="At most this many visits in the recent window.")
    include_payments: bool = Field(default=True, description="Also list members whose payments are overdue or failed.")
    limit: int = Field(default=20, ge=1, le=50, description="Maximum number of members returned.")


class AtRiskMember(ToolOutput):
    membership_id: uuid.UUID
    name: str
    last_visit: datetime | None
    visits_before: int = Field(description="Visits in the baseline window.")
    visits_recent: int = Field(description="Visits in the recent window.")
    overdue: str | None = Field(description="Pending payments due before today.")
    reasons: list[str] = Field(description="attendance_drop, payment_overdue, payment_failed.")


class AtRiskMembers(ToolOutput):
    recent: Span
    baseline: Span
    currency: str
    members: list[AtRiskMember]
    total: int = Field(description="Members at risk, which may exceed those returned.")
    attendance_drops: int = Field(description="Of total, members with an attendance drop.")
    payment_issues: int = Field(description="Of total, members with overdue or failed payments.")


_AT_RISK = """
WITH visits AS (
    SELECT b.membership_id,
           count(*) FILTER (WHERE s.starts_at < $3) AS before,
           count(*) FILTER (WHERE s.starts_at >= $3) AS recent,
           max(s.starts_at) AS last_class
      FROM class_sessions s JOIN bookings b ON b.session_id = s.id
     WHERE s.organization_id = $1 AND s.deleted_at IS NULL AND s.cancelled_at IS NULL
       AND s.starts_at >= $2 AND s.starts_at < $4 AND b.checked_in_at IS NOT NULL
     GROUP BY 1),
overdue AS (
    SELECT membership_id, sum(amount_cents) AS cents FROM payments
     WHERE organization_id = $1 AND status = 'pending' AND due_on < $5 GROUP BY 1),
flagged AS (
    SELECT m.id AS membership_id, u.full_name AS name, m.payment_status::text AS payment_status,
           greatest(m.last_visit_at, v.last_class) AS last_visit,
           coalesce(v.before, 0) AS visits_before, coalesce(v.recent, 0) AS visits_recent, o.cents AS overdue_cents,
           coalesce(v.before, 0) >= $6 AND coalesce(v.recent, 0) <= $7 AS dropped,
           m.payment_status IN ('overdue', 'failed') OR o.cents IS NOT NULL AS owes
      FROM memberships m JOIN users u ON u.id = m.user_id
      LEFT JOIN visits v ON v.membership_id = m.id
      LEFT JOIN overdue o ON o.membership_id = m.id
     WHERE m.organization_id = $1 AND m.role = 'member' AND m.status = 'active'
       AND (m.ended_on IS NULL OR m.ended_on > $5))
SELECT *, count(*) OVER () AS total, count(*) FILTER (WHERE dropped) OVER () AS drops,
       count(*) FILTER (WHERE owes) OVER () AS owing
  FROM flagged
 WHERE dropped OR ($8 AND owes)
 ORDER BY dropped DESC, visits_before DESC, name, membership_id
 LIMIT $9
"""


async def _at_risk(ctx: ToolContext, args: AtRiskInput) -> tuple[Period, Period, list[asyncpg.Record]]:
    today, tz = await _today(ctx)
    recent = Period(today - timedelta(days=args.recent_days - 1), today, tz, today)
    baseline = Period(recent.start - timedelta(days=args.baseline_days), recent.start - timedelta(days=1), tz, today)
    rows = await ctx.conn.fetch(
        _AT_RISK,
        ctx.organization_id,
        baseline.lo,
        recent.lo,
        recent.hi,
        today,
        args.min_visits_before,
        args.max_visits_recent,
        args.include_payments,
        args.limit,
    )
    return recent, baseline, rows


def _reasons(r: asyncpg.Record) -> list[str]:
    reasons = ["attendance_drop"] if r["dropped"] else []
    if r["payment_status"] == "failed":
        reasons.append("payment_failed")
    if r["payment_status"] == "overdue" or r["overdue_cents"] is not None:
        reasons.append("payment_overdue")
    return reasons


@router.read(
    "at_risk_members",
    "Active members who may leave. Attendance drop: at least minVisitsBefore visits (checked-in classes) "
    "in the baseline (default the 30 days before the recent window) and at most maxVisitsRecent in the "
    "recent window (default the last 14 days, today included). Payment issue (unless includePayments is "
    "false): payment status overdue or failed, or a pending payment due before today. Each member with "
    "last visit, visits before and recent, overdue amount and reasons; attendance drops first.",
)
async def at_risk_members(ctx: ToolContext, args: AtRiskInput) -> AtRiskMembers:
    recent, baseline, rows = await _at_risk(ctx, args)
    tz = recent.tz
    members = [
        AtRiskMember.from_row(
            r,
            last_visit=r["last_visit"] and r["last_visit"].astimezone(tz),
            overdue=None if r["overdue_cents"] is None else _money(r["overdue_cents"]),
            reasons=_reasons(r),
        )
        for r in rows
    ]
    first = rows[0] if rows else None
    return AtRiskMembers(
        recent=Span.of(recent),
        baseline=Span.of(baseline),
        currency=await _currency(ctx),
        members=members,
        total=first["total"] if first else 0,
        attendance_drops=first["drops"] if first else 0,
        payment_issues=first["owing"] if first and args.include_payments else 0,
    )


# popular_classes / class_utilization --------------------------------------------------------------


_CLASS_STATS = """
WITH per_session AS (
    SELECT s.id, s.class_type_id, s.capacity,
           count(b.id) FILTER (WHERE b.status = 'booked') AS booked,
           count(b.id) FILTER (WHERE b.checked_in_at IS NOT NULL) AS attended,
           count(b.id) FILTER (WHERE b.status = 'waitlisted') AS waitlisted
      FROM class_sessions s LEFT JOIN bookings b ON b.session_id = s.id
     WHERE s.organization_id = $1 AND s.deleted_at IS NULL AND s.cancelled_at IS NULL
       AND s.starts_at >= $2 AND s.starts_at < $3
     GROUP BY s.id)
SELECT ct.id AS class_type_id, ct.name, count(*) AS sessions, sum(ps.capacity)::int AS capacity,
       sum(ps.booked)::int AS booked, sum(ps.attended)::int AS attended, sum(ps.waitlisted)::int AS waitlisted,
       count(*) FILTER (WHERE ps.booked >= ps.capacity) AS full_sessions
  FROM per_session ps JOIN class_types ct ON ct.id = ps.class_type_id
 GROUP BY ct.id, ct.name
 ORDER BY ct.name, ct.id
"""


COUNTS = ("sessions", "capacity", "booked", "attended", "waitlisted", "full_sessions")


class ClassStats(ToolOutput):
    sessions: int = Field(description="Sessions held (not cancelled).")
    capacity: int = Field(description="Places offered (sum of capacities).")
    booked: int = Field(description="Bookings with status booked.")
    attended: int = Field(description="Bookings checked in.")
    waitlisted: int
    full_sessions: int
    fill_rate: float | None = Field(description="booked ÷ capacity.")
    attendance_rate: float | None = Field(description="attended ÷ capacity.")

    @classmethod
    def from_counts(cls, counts: asyncpg.Record | dict, **values: object) -> Self:
        """The counts, their rates, and `values` for a subclass's own fields."""
        stats = {k: int(counts[k]) for k in COUNTS}
        fill, attendance = _rate(stats["booked"], stats["capacity"]), _rate(stats["attended"], stats["capacity"])
        return cls(**stats, fill_rate=fill, attendance_rate=attendance, **values)


class ClassTypeStats(ClassStats):
    class_type_id: uuid.UUID
    name: str
    avg_attended: float = Field(description="attended ÷ sessions, 1 decimal.")


async def _class_stats(ctx: ToolContext, p: Period) -> list[ClassTypeStats]:
    rows = await ctx.conn.fetch(_CLASS_STATS, ctx.organization_id, p.lo, p.hi)
    return [
        ClassTypeStats.from_counts(
            r, class_type_id=r["class_type_id"], name=r["name"], avg_attended=round(r["attended"] / r["sessions"], 1)
        )
        for r in rows
    ]


class ClassesInput(PeriodInput):
    limit: int = Field(default=10, ge=1, le=25, description="Maximum number of class types returned.")


class PopularClasses(ToolOutput):
    period: Span
    class_types: list[ClassTypeStats]
    total: int = Field(description="Class types with sessions in the period.")


@router.read(
    "popular_classes",
    "Class types ranked by attendance in a period (default the last 30 days): sessions held (cancelled "
    "ones left out), bookings, check-ins, waitlisted, full sessions, fill rate (booked ÷ capacity) and "
    "average attendance per session. Most attended first.",
)
async def popular_classes(ctx: ToolContext, args: ClassesInput) -> PopularClasses:
    p = await _period(ctx, args)
    stats = sorted(await _class_stats(ctx, p), key=lambda s: (-s.attended, -s.booked, s.name))
    return PopularClasses(period=Span.of(p), class_types=stats[: args.limit], total=len(stats))


class ClassUtilization(ToolOutput):
    period: Span
    overall: ClassStats
    cancelled_sessions: int
    class_types: list[ClassTypeStats] = Field(description="By class type name (at most 25).")
    total: int = Field(description="Class types with sessions in the period.")


@router.read(
    "class_utilization",
    "How full classes are in a period (default the last 30 days), overall and per class type: places "
    "offered, booked and attended, fill rate (booked ÷ capacity) and attendance rate (attended ÷ capacity). "
    "Cancelled sessions are left out and counted apart.",
)
async def class_utilization(ctx: ToolContext, args: PeriodInput) -> ClassUtilization:
    p = await _period(ctx, args)
    stats = await _class_stats(ctx, p)
    overall = {k: sum(getattr(s, k) for s in stats) for k in COUNTS}
    cancelled = await ctx.conn.fetchval(
        """SELECT count(*) FROM class_sessions WHERE organization_id = $1 AND deleted_at IS NULL
              AND cancelled_at IS NOT NULL AND starts_at >= $2 AND starts_at < $3""",
        ctx.organization_id,
        p.lo,
        p.hi,
    )
    return ClassUtilization(
        period=Span.of(p),
        overall=ClassStats.from_counts(overall),
        cancelled_sessions=cancelled,
        class_types=stats[:25],
        total=len(stats),
    )


# coach_overview ------------------------------------------------------------------------------------


class CoachStats(ToolOutput):
    membership_id: uuid.UUID
    name: str
    role: str
    sessions: int = Field(description="Sessions coached (not cancelled).")
    attended: int = Field(description="Check-ins in those sessions.")
    avg_attended: float | None = Field(description="attended ÷ sessions, 1 decimal.")
    assignments: int = Field(description="Personal assignments scheduled in the period.")
    published_assignments: int
    comments: int = Field(description="Comments the coach wrote in the period.")
    unread_comments: int = Field(
        description="Others' comments on the coach's assignments the coach has not read (any time)."
    )


class CoachOverview(ToolOutput):
    period: Span
    coaches: list[CoachStats]


_COACHES = """
WITH sess AS (
    SELECT s.coach_membership_id AS mid, count(*) AS sessions,
           sum((SELECT count(*) FROM bookings b
                 WHERE b.session_id = s.id AND b.checked_in_at IS NOT NULL))::int AS attended
      FROM class_sessions s
     WHERE s.organization_id = $1 AND s.deleted_at IS NULL AND s.cancelled_at IS NULL
       AND s.starts_at >= $2 AND s.starts_at < $3 AND s.coach_membership_id IS NOT NULL
     GROUP BY 1),
asg AS (
    SELECT coach_membership_id AS mid, count(*) AS assignments, count(*) FILTER (WHERE published) AS published
      FROM assignments
     WHERE organization_id = $1 AND deleted_at IS NULL AND scheduled_for BETWEEN $4 AND $5
       AND coach_membership_id IS NOT NULL
     GROUP BY 1),
com AS (
    SELECT author_membership_id AS mid, count(*) AS comments FROM workout_comments
     WHERE organization_id = $1 AND deleted_at IS NULL AND created_at >= $2 AND created_at < $3
     GROUP BY 1),
unread AS (
    SELECT a.coach_membership_id AS mid, count(*) AS unread
      FROM workout_comments c JOIN assignments a ON a.id = c.assignment_id
     WHERE c.organization_id = $1 AND c.deleted_at IS NULL AND a.deleted_at IS NULL
       AND c.author_membership_id <> a.coach_membership_id
       AND NOT EXISTS (SELECT 1 FROM workout_comment_reads r
                        WHERE r.comment_id = c.id AND r.coach_membership_id = a.coach_membership_id)
     GROUP BY 1)
SELECT m.id AS membership_id, u.full_name AS name, m.role::text AS role,
       coalesce(sess.sessions, 0) AS sessions, coalesce(sess.attended, 0) AS attended,
       coalesce(asg.assignments, 0) AS assignments, coalesce(asg.published, 0) AS published_assignments,
       coalesce(com.comments, 0) AS comments, coalesce(unread.unread, 0) AS unread_comments
  FROM memberships m JOIN users u ON u.id = m.user_id
  LEFT JOIN sess ON sess.mid = m.id
  LEFT JOIN asg ON asg.mid = m.id
  LEFT JOIN com ON com.mid = m.id
  LEFT JOIN unread ON unread.mid = m.id
 WHERE m.organization_id = $1 AND m.role IN ('owner', 'admin', 'coach')
   AND ((m.role = 'coach' AND m.status = 'active')
        OR sess.mid IS NOT NULL OR asg.mid IS NOT NULL OR unread.mid IS NOT NULL)
 ORDER BY sessions DESC, assignments DESC, name, m.id
 LIMIT 25
"""


@router.read(
    "coach_overview",
    "Per coach in a period (default the last 30 days): sessions coached (cancelled ones left out), "
    "check-ins in them and average per session, personal assignments scheduled (and published), comments "
    "written, and unread comments on their assignments. Lists active coaches and any staff with sessions "
    "or assignments; busiest first.",
)
async def coach_overview(ctx: ToolContext, args: PeriodInput) -> CoachOverview:
    p = await _period(ctx, args)
    rows = await ctx.conn.fetch(_COACHES, ctx.organization_id, p.lo, p.hi, p.start, p.end)
    coaches = [
        CoachStats.from_row(r, avg_attended=round(r["attended"] / r["sessions"], 1) if r["sessions"] else None)
        for r in rows
    ]
    return CoachOverview(period=Span.of(p), coaches=coaches)


# plan_distribution ---------------------------------------------------------------------------------


class PlanInput(ToolInput):
    pass


class PlanShare(ToolOutput):
    plan_id: uuid.UUID | None = Field(description="Null when the plan name matches no plan (or no plan).")
    plan: str | None = Field(description="Plan name; null for members without a plan.")
    price: str | None
    currency: str | None
    billing_interval: str | None
    members: int
    share: float | None = Field(description="members ÷ all active members.")


class PlanDistribution(ToolOutput):
    active_members: int
    plans: list[PlanShare]


@router.read(
    "plan_distribution",
    "Active members (status active, not ended) per plan, by their current plan, with price, billing interval "
    "and share of all active members. Active plans nobody is on are listed with 0; most members first.",
    roles=OWNER_ADMIN,
)
async def plan_distribution(ctx: ToolContext, args: PlanInput) -> PlanDistribution:
    today, _ = await _today(ctx)
    rows = await ctx.conn.fetch(
        """WITH counts AS (
               SELECT plan, count(*) AS n FROM memberships
                WHERE organization_id = $1 AND role = 'member' AND status = 'active'
                  AND (ended_on IS NULL OR ended_on > $2)
                GROUP BY plan),
           p AS (SELECT * FROM plans WHERE organization_id = $1)
           SELECT p.id AS plan_id, coalesce(p.name, counts.plan) AS plan, p.price_cents, p.currency,
                  p.billing_interval::text AS billing_interval, coalesce(counts.n, 0) AS members
             FROM counts FULL JOIN p ON p.name = counts.plan
            WHERE counts.n IS NOT NULL OR p.is_active
            ORDER BY members DESC, plan NULLS LAST""",
        ctx.organization_id,
        today,
    )
    total = sum(r["members"] for r in rows)
    plans = [
        PlanShare.from_row(
            r,
            price=None if r["price_cents"] is None else _money(r["price_cents"]),
            share=_rate(r["members"], total),
        )
        for r in rows
    ]
    return PlanDistribution(active_members=total, plans=plans)


# members_activation --------------------------------------------------------------------------------


class ActivationInput(PeriodInput):
    within_days: int = Field(
        default=14, ge=1, le=60, description="A member is activated by a visit within N days of joining."
    )


class NewMember(ToolOutput):
    membership_id: uuid.UUID
    name: str
    joined_on: date


class MembersActivation(ToolOutput):
    period: Span
    joined: int = Field(description="Members who joined in the period.")
    activated: int = Field(description="Of them, those with a visit within withinDays of joining (join day = day 1).")
    rate: float | None = Field(description="activated ÷ joined.")
    still_in_window: int = Field(description="Not activated yet, but their withinDays have not passed.")
    not_activated: list[NewMember] = Field(description="Window over, no visit; earliest joiners first (at most 10).")
    not_activated_total: int


@router.read(
    "members_activation",
    "Of the members who joined in a period (default the last 30 days), how many attended a class (checked "
    "in) within withinDays (default 14) of joining, the rate, how many are still inside that window, and "
    "who never came.",
)
async def members_activation(ctx: ToolContext, args: ActivationInput) -> MembersActivation:
    p = await _period(ctx, args)
    rows = await ctx.conn.fetch(
        """SELECT m.id AS membership_id, u.full_name AS name, m.joined_at AS joined_on,
                  EXISTS (SELECT 1 FROM bookings b JOIN class_sessions s ON s.id = b.session_id
                           WHERE b.membership_id = m.id AND b.checked_in_at IS NOT NULL
                             AND s.deleted_at IS NULL AND s.cancelled_at IS NULL
                             AND s.starts_at >= m.joined_at::timestamp AT TIME ZONE $4
                             AND s.starts_at < (m.joined_at + $5::int)::timestamp AT TIME ZONE $4) AS activated,
                  m.joined_at + $5::int > $6 AS window_open
             FROM memberships m JOIN users u ON u.id = m.user_id
            WHERE m.organization_id = $1 AND m.role = 'member' AND m.joined_at BETWEEN $2 AND $3
            ORDER BY m.joined_at, u.full_name, m.id""",
        ctx.organization_id,
        p.start,
        p.end,
        p.tz_name,
        args.within_days,
        p.today,
    )
    activated = sum(r["activated"] for r in rows)
    lost = [NewMember.from_row(r) for r in rows if not r["activated"] and not r["window_open"]]
    return MembersActivation(
        period=Span.of(p),
        joined=len(rows),
        activated=activated,
        rate=_rate(activated, len(rows)),
        still_in_window=sum(1 for r in rows if not r["activated"] and r["window_open"]),
        not_activated=lost[:10],
        not_activated_total=len(lost),
    )


# workouts_summary ----------------------------------------------------------------------------------


class ProgramWorkouts(ToolOutput):
    program_id: uuid.UUID | None
    program: str | None = Field(description="Null: workouts outside any program.")
    workouts: int
    structured: int
    freeform: int


class WorkoutsSummary(ToolOutput):
    period: Span
    workouts: int = Field(description="Workouts scheduled in the period.")
    structured: int
    freeform: int
    by_program: list[ProgramWorkouts] = Field(description="Most workouts first (at most 25).")
    assignments: int = Field(description="Personal assignments scheduled in the period.")
    published_assignments: int
    unpublished_assignments: int
    comments: int = Field(description="Comments written in the period, on workouts or assignments.")


@router.read(
    "workouts_summary",
    "Programming in a period (default the last 30 days): workouts scheduled, structured vs freeform, per "
    "program; personal assignments scheduled, published and not; comments written.",
)
async def workouts_summary(ctx: ToolContext, args: PeriodInput) -> WorkoutsSummary:
    p = await _period(ctx, args)
    programs = await ctx.conn.fetch(
        """SELECT w.program_id, p.name AS program, count(*) AS workouts,
                  count(*) FILTER (WHERE w.kind = 'structured') AS structured,
                  count(*) FILTER (WHERE w.kind = 'freeform') AS freeform
             FROM workouts w LEFT JOIN programs p ON p.id = w.program_id
            WHERE w.organization_id = $1 AND w.deleted_at IS NULL AND w.scheduled_for BETWEEN $2 AND $3
            GROUP BY 1, 2 ORDER BY workouts DESC, program NULLS LAST""",
        ctx.organization_id,
        p.start,
        p.end,
    )
    other = await ctx.conn.fetchrow(
        """SELECT (SELECT count(*) FROM assignments WHERE organization_id = $1 AND deleted_at IS NULL
                      AND scheduled_for BETWEEN $2 AND $3) AS assignments,
                  (SELECT count(*) FROM assignments WHERE organization_id = $1 AND deleted_at IS NULL
                      AND scheduled_for BETWEEN $2 AND $3 AND published) AS published,
                  (SELECT count(*) FROM workout_comments WHERE organization_id = $1 AND deleted_at IS NULL
                      AND created_at >= $4 AND created_at < $5) AS comments""",
        ctx.organization_id,
        p.start,
        p.end,
        p.lo,
        p.hi,
    )
    by_program = [ProgramWorkouts.from_row(r) for r in programs]
    return WorkoutsSummary(
        period=Span.of(p),
        workouts=sum(r.workouts for r in by_program),
        structured=sum(r.structured for r in by_program),
        freeform=sum(r.freeform for r in by_program),
        by_program=by_program[:25],
        assignments=other["assignments"],
        published_assignments=other["published"],
        unpublished_assignments=other["assignments"] - other["published"],
        comments=other["comments"],
    )


# org_insights --------------------------------------------------------------------------------------


class Insight(ToolOutput):
    key: str
    text: str
    value: float | int | str | None
    unit: str


class OrgInsights(ToolOutput):
    period: Span
    previous: Span
    insights: list[Insight]


def _pct(change: float | None) -> str:
    return "n/a" if change is None else f"{'up' if change >= 0 else 'down'} {abs(change) * 100:.1f}%"


async def _insights(ctx: ToolContext, p: Period) -> list[Insight]:
    prev = p.previous()
    now_stats, prev_stats = await _class_stats(ctx, p), await _class_stats(ctx, prev)
    attended, attended_before = sum(s.attended for s in now_stats), sum(s.attended for s in prev_stats)
    out = [
        Insight(
            key="attendance_change",
            text=f"{attended} check-ins, {_pct(_change(attended, attended_before))} on the previous period "
            f"({attended_before}).",
            value=_change(attended, attended_before),
            unit="fraction",
        )
    ]
    # A class type that had check-ins before and none now (no sessions, say) has dropped by all of them.
    after = {s.class_type_id: s.attended for s in now_stats}
    drops = sorted(
        ((b.attended - after.get(b.class_type_id, 0), b.name, b) for b in prev_stats), key=lambda d: (-d[0], d[1])
    )
    if drops and drops[0][0] > 0:
        drop, name, was = drops[0]
        out.append(
            Insight(
                key="biggest_attendance_drop",
                text=f"Biggest drop: {name}, {was.attended} → {was.attended - drop} check-ins.",
                value=-drop,
                unit="check-ins",
            )
        )
    if now_stats:
        best = min(now_stats, key=lambda s: (-(s.fill_rate or 0), s.name))
        out.append(
            Insight(
                key="best_filled_class",
                text=f"Fullest class: {best.name}, {best.fill_rate} of places booked.",
                value=best.fill_rate,
                unit="fraction",
            )
        )
    _, _, risk = await _at_risk(ctx, AtRiskInput(limit=1))
    drops_n, owing_n = (risk[0]["drops"], risk[0]["owing"]) if risk else (0, 0)
    out.append(
        Insight(
            key="at_risk_members",
            text=f"Active members who stopped coming: {drops_n} (analytics__at_risk_members).",
            value=drops_n,
            unit="members",
        )
    )
    out.append(
        Insight(
            key="payment_issues",
            text=f"Active members with overdue or failed payments: {owing_n}.",
            value=owing_n,
            unit="members",
        )
    )
    growth = await ctx.conn.fetchrow(
        """SELECT count(*) FILTER (WHERE joined_at BETWEEN $2 AND $3) AS joined,
                  count(*) FILTER (WHERE ended_on BETWEEN $2 AND $3) AS churned
             FROM memberships WHERE organization_id = $1 AND role = 'member'""",
        ctx.organization_id,
        p.start,
        p.end,
    )
    net = growth["joined"] - growth["churned"]
    out.append(
        Insight(
            key="net_members",
            text=f"{growth['joined']} members joined and {growth['churned']} left: net {net:+d}.",
            value=net,
            unit="members",
        )
    )
    if ctx.actor.role in OWNER_ADMIN:
        currency = await _currency(ctx)
        now_r, prev_r = await _revenue(ctx, p, currency), await _revenue(ctx, prev, currency)
        change = _change(now_r["collected"], prev_r["collected"])
        out.append(
            Insight(
                key="revenue_change",
                text=f"Collected {_money(now_r['collected'])} {currency}, {_pct(change)} on the previous period "
                f"({_money(prev_r['collected'])}).",
                value=change,
                unit="fraction",
            )
        )
    return out


@router.read(
    "org_insights",
    "A few notable facts about a period (default the last 30 days) vs the one just before, each a sentence "
    "plus its figure: attendance change, the class type with the biggest attendance drop, the fullest class, "
    "members at risk (attendance drop; payment issues), net member growth, and — for owners and admins — "
    "the change in collected revenue.",
)
async def org_insights(ctx: ToolContext, args: PeriodInput) -> OrgInsights:
    p = await _period(ctx, args)
    return OrgInsights(period=Span.of(p), previous=Span.of(p.previous()), insights=await _insights(ctx, p))
