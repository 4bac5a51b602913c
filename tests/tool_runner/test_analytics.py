"""The `analytics` router over a real Postgres, through ToolRunner.execute.

One studio year is generated (seeded, so the same every run) and kept as plain Python rows as well:
each figure a tool returns is checked against the same definition computed here in Python, so a
wrong filter, time zone or join in the SQL shows up as a mismatch. The clock is fixed.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import asyncpg
import pytest

from spotter_tool_runner.runner import ToolRunner
from spotter_tool_runner.tools import REGISTRY

from tests.factories import Studio, make_studio

from .helpers import Conversation, actor_of, failed, new_conversation, succeeded

TZ = ZoneInfo("Asia/Jerusalem")
NOW = datetime(2026, 6, 15, 9, 0, tzinfo=UTC)  # 12:00 in the studio
TODAY = date(2026, 6, 15)
D = timedelta(days=1)


@dataclass
class Member:
    id: str
    name: str
    joined: date
    ended: date | None = None
    status: str = "active"
    plan: str | None = "Unlimited"
    payment_status: str = "paid"


@dataclass
class Session:
    id: str
    type_id: str
    coach_id: str | None
    starts: datetime
    capacity: int
    cancelled: bool = False
    bookings: list[tuple[str, str, bool]] = field(default_factory=list)  # member, status, checked in


@dataclass
class Payment:
    member: str
    cents: int
    status: str
    due_on: date
    paid_at: datetime | None
    currency: str = "USD"


@dataclass
class Year:
    studio: Studio
    members: list[Member]
    types: dict[str, tuple[str, int]]  # id → (name, capacity)
    sessions: list[Session]
    payments: list[Payment]
    workouts: list[tuple[str | None, str, date]]  # program id, kind, day
    assignments: list[tuple[str, bool, date]]  # coach, published, day
    comments: list[tuple[str, datetime]]  # author, created
    plans: dict[str, tuple[str, int, str]]  # name → (id, cents, interval)
    dropper: Member  # attends in the baseline, not in the recent window
    late_payer: Member  # keeps coming, owes a payment
    coach2: str


def local(dt: datetime) -> date:
    return dt.astimezone(TZ).date()


def at(day: date, hour: int, minute: int = 0) -> datetime:
    return datetime.combine(day, time(hour, minute), tzinfo=TZ)


def money(cents: int) -> str:
    return str(Decimal(cents).scaleb(-2))


def rate(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


def live(m: Member, day: date) -> bool:
    return m.ended is None or m.ended > day


# the studio year ---------------------------------------------------------------------------------


def generate(studio: Studio) -> Year:
    rnd = random.Random(7)
    members = [Member(studio.member.membership_id, studio.member.full_name, date(2025, 1, 1))]
    plans = {
        "Unlimited": (str(uuid.uuid4()), 18900, "month"),
        "8 per month": (str(uuid.uuid4()), 12900, "month"),
        "Annual": (str(uuid.uuid4()), 150000, "year"),
        "Drop-in": (str(uuid.uuid4()), 2500, "once"),
    }
    for i in range(60):
        joined = date(2025, 7, 1) + timedelta(days=rnd.randrange(0, 350))
        m = Member(
            str(uuid.uuid4()),
            f"Member {i:02d}",
            joined,
            plan=rnd.choice(["Unlimited", "8 per month", "Annual", None]),
            payment_status=rnd.choice(["paid", "paid", "paid", "due", "overdue", "failed", "none"]),
        )
        if rnd.random() < 0.25:
            m.ended = min(joined + timedelta(days=rnd.randrange(10, 200)), TODAY + 20 * D)
            m.status = "cancelled" if m.ended <= TODAY else "active"
        elif rnd.random() < 0.1:
            m.status = "paused"
        elif rnd.random() < 0.05:
            m.status = "pending"
        members.append(m)
    dropper = Member(str(uuid.uuid4()), "Aaron Dropper", date(2025, 9, 1), payment_status="paid")
    late_payer = Member(str(uuid.uuid4()), "Lena Late", date(2025, 9, 1), payment_status="due")
    members += [dropper, late_payer]

    coach2 = str(uuid.uuid4())
    types = {
        str(uuid.uuid4()): ("CrossFit", 12),
        str(uuid.uuid4()): ("Olympic Lifting", 8),
        str(uuid.uuid4()): ("Open Gym", 20),
        str(uuid.uuid4()): ("Yoga", 10),
    }
    type_ids = list(types)
    coaches = [studio.coach.membership_id, coach2, studio.owner.membership_id, None]
    sessions: list[Session] = []
    day = date(2026, 2, 1)
    n = 0
    while day <= TODAY + 5 * D:
        # 00:30 and 23:30 local fall on another UTC day: periods must be cut in the studio's time zone.
        for hour, minute in ((0, 30), (7, 0), (18, 0), (23, 30)):
            n += 1
            tid = type_ids[(n + day.day) % 4]
            if tid == type_ids[3] and day >= TODAY - 35 * D:
                continue  # Yoga stops: the biggest drop in attendance
            s = Session(
                str(uuid.uuid4()), tid, coaches[n % 4], at(day, hour, minute), types[tid][1], cancelled=n % 13 == 0
            )
            eligible = [m for m in members if m.joined <= day and live(m, day) and m not in (dropper, late_payer)]
            for m in rnd.sample(eligible, min(len(eligible), rnd.randrange(0, s.capacity + 4))):
                status = rnd.choices(["booked", "cancelled", "waitlisted"], [8, 1, 1])[0]
                s.bookings.append((m.id, status, status == "booked" and s.starts < NOW and rnd.random() < 0.8))
            sessions.append(s)
        day += D
    # Aaron came twice a week in the baseline, never in the last 14 days; Lena kept coming but owes.
    for i, s in enumerate(
        x for x in sessions if TODAY - 40 * D <= local(x.starts) <= TODAY - 15 * D and not x.cancelled
    ):
        if i % 12 == 0:
            s.bookings.append((dropper.id, "booked", True))
    for i, s in enumerate(
        x for x in sessions if TODAY - 40 * D <= local(x.starts) <= TODAY and not x.cancelled and x.starts < NOW
    ):
        if i % 12 == 0:
            s.bookings.append((late_payer.id, "booked", True))

    payments: list[Payment] = []
    for m in members:
        if m.plan is None or m in (dropper, late_payer):
            continue
        due = m.joined
        while due <= min(TODAY + 10 * D, m.ended or TODAY + 10 * D):
            status = rnd.choices(["paid", "failed", "refunded", "pending"], [20, 2, 1, 2])[0]
            if due > TODAY:
                status = "pending"
            paid_at = at(due, rnd.choice([0, 10, 23]), rnd.choice([5, 30])) if status in ("paid", "refunded") else None
            payments.append(Payment(m.id, plans[m.plan][1], status, due, paid_at))
            due = date(due.year + (due.month == 12), due.month % 12 + 1, min(due.day, 28))
    payments.append(Payment(late_payer.id, 18900, "pending", TODAY - 10 * D, None))
    payments.append(Payment(dropper.id, 18900, "paid", TODAY - 10 * D, at(TODAY - 10 * D, 9)))
    payments.append(Payment(members[1].id, 99900, "paid", TODAY - 3 * D, at(TODAY - 3 * D, 12), currency="EUR"))

    programs = list(studio.programs.values())
    workouts = [
        (rnd.choice(programs + [None]), rnd.choice(["freeform", "structured"]), TODAY - rnd.randrange(0, 90) * D)
        for _ in range(70)
    ]
    assignments = [
        (rnd.choice([studio.coach.membership_id, coach2]), rnd.random() < 0.6, TODAY - rnd.randrange(0, 60) * D)
        for _ in range(40)
    ]
    comments = [
        (
            rnd.choice([m.id for m in members[:20]] + [studio.coach.membership_id]),
            NOW - timedelta(hours=rnd.randrange(0, 24 * 60)),
        )
        for _ in range(30)
    ]
    return Year(
        studio, members, types, sessions, payments, workouts, assignments, comments, plans, dropper, late_payer, coach2
    )


async def store(conn: asyncpg.Connection, y: Year) -> None:
    org = y.studio.org.id
    await conn.execute("UPDATE organizations SET timezone = $2 WHERE id = $1", org, str(TZ))
    await conn.execute("UPDATE memberships SET joined_at = '2025-01-01' WHERE organization_id = $1", org)
    uid = await conn.fetchval(
        "INSERT INTO users (email, full_name) VALUES ($1, 'Coach Two') RETURNING id",
        f"coach2-{uuid.uuid4().hex[:8]}@test.gym",
    )
    await conn.execute(
        """INSERT INTO memberships (id, organization_id, user_id, role, joined_at)
           VALUES ($1, $2, $3, 'coach', '2025-01-01')""",
        y.coach2,
        org,
        uid,
    )
    for m in y.members[1:]:
        uid = await conn.fetchval(
            "INSERT INTO users (email, full_name) VALUES ($1, $2) RETURNING id", f"{m.id}@test.gym", m.name
        )
        await conn.execute(
            """INSERT INTO memberships (id, organization_id, user_id, role, status, plan, payment_status,
                                        joined_at, ended_on)
               VALUES ($1, $2, $3, 'member', $4, $5, $6, $7, $8)""",
            m.id,
            org,
            uid,
            m.status,
            m.plan,
            m.payment_status,
            m.joined,
            m.ended,
        )
    await conn.execute(
        "UPDATE memberships SET plan = 'Unlimited', payment_status = 'paid' WHERE id = $1", y.members[0].id
    )
    await conn.executemany(
        """INSERT INTO plans (id, organization_id, name, price_cents, billing_interval, is_active)
           VALUES ($1, $2, $3, $4, $5, $6)""",
        [(pid, org, name, cents, interval, name != "Drop-in") for name, (pid, cents, interval) in y.plans.items()],
    )
    await conn.executemany(
        "INSERT INTO class_types (id, organization_id, name, default_capacity) VALUES ($1, $2, $3, $4)",
        [(tid, org, name, cap) for tid, (name, cap) in y.types.items()],
    )
    await conn.executemany(
        """INSERT INTO class_sessions (id, organization_id, class_type_id, coach_membership_id, starts_at, ends_at,
                                       capacity, published, cancelled_at)
           VALUES ($1, $2, $3, $4, $5::timestamptz, $5::timestamptz + interval '1 hour', $6, true, $7)""",
        [
            (s.id, org, s.type_id, s.coach_id, s.starts, s.capacity, s.starts - D if s.cancelled else None)
            for s in y.sessions
        ],
    )
    await conn.executemany(
        """INSERT INTO bookings (session_id, membership_id, status, booked_at, checked_in_at)
           VALUES ($1, $2, $3, $4, $5)""",
        [
            (s.id, mid, status, s.starts - D, s.starts if checked else None)
            for s in y.sessions
            for mid, status, checked in s.bookings
        ],
    )
    await conn.executemany(
        """INSERT INTO payments (organization_id, membership_id, amount_cents, currency, status, due_on, paid_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7)""",
        [(org, p.member, p.cents, p.currency, p.status, p.due_on, p.paid_at) for p in y.payments],
    )
    await conn.executemany(
        """INSERT INTO workouts (organization_id, program_id, title, kind, scheduled_for)
           VALUES ($1, $2, 'WOD', $3, $4)""",
        [(org, pid, kind, day) for pid, kind, day in y.workouts],
    )
    # A deleted workout and a deleted assignment never count.
    await conn.execute(
        "INSERT INTO workouts (organization_id, title, scheduled_for, deleted_at) VALUES ($1, 'Gone', $2, now())",
        org,
        TODAY,
    )
    await conn.executemany(
        """INSERT INTO assignments (organization_id, membership_id, coach_membership_id, title, scheduled_for,
                                    published) VALUES ($1, $2, $3, 'PT', $4, $5)""",
        [(org, y.members[i % 10].id, coach, day, pub) for i, (coach, pub, day) in enumerate(y.assignments)],
    )
    await conn.execute(
        """INSERT INTO assignments (organization_id, membership_id, coach_membership_id, title, scheduled_for,
                                    deleted_at) VALUES ($1, $2, $3, 'Gone', $4, now())""",
        org,
        y.members[0].id,
        y.coach2,
        TODAY,
    )
    # Two comments by a member on a Coach Two assignment, one of which Coach Two has read.
    aid = await conn.fetchval(
        "SELECT id FROM assignments WHERE coach_membership_id = $1 AND deleted_at IS NULL LIMIT 1",
        y.coach2,
    )
    read_id, _ = [
        await conn.fetchval(
            """INSERT INTO workout_comments (organization_id, assignment_id, author_membership_id, body, created_at)
               VALUES ($1, $2, $3, 'sore knees', $4) RETURNING id""",
            org,
            aid,
            y.members[0].id,
            NOW - 100 * D,
        )
        for _ in range(2)
    ]
    await conn.execute(
        "INSERT INTO workout_comment_reads (comment_id, coach_membership_id) VALUES ($1, $2)",
        read_id,
        y.coach2,
    )
    wid = await conn.fetchval("SELECT id FROM workouts WHERE organization_id = $1 AND deleted_at IS NULL LIMIT 1", org)
    await conn.executemany(
        """INSERT INTO workout_comments (organization_id, workout_id, author_membership_id, body, created_at)
           VALUES ($1, $2, $3, 'nice', $4)""",
        [(org, wid, author, created) for author, created in y.comments],
    )


@pytest.fixture(scope="module")
async def year(pool: asyncpg.Pool) -> Year:
    y = generate(await make_studio(pool))
    async with pool.acquire() as conn, conn.transaction():
        await store(conn, y)
    # Another studio with money and classes of its own, which must never leak into these figures.
    other = await make_studio(pool)
    await pool.execute(
        """INSERT INTO payments (organization_id, membership_id, amount_cents, status, due_on, paid_at)
           VALUES ($1, $2, 777700, 'paid', $3, $4)""",
        other.org.id,
        other.member.membership_id,
        TODAY - 2 * D,
        NOW - D,
    )
    return y


@pytest.fixture(scope="module")
def clocked(pool: asyncpg.Pool) -> ToolRunner:
    return ToolRunner(pool, REGISTRY, clock=lambda: NOW)


@pytest.fixture(scope="module")
async def conv(pool: asyncpg.Pool, year: Year) -> Conversation:
    return await new_conversation(pool, year.studio, year.studio.owner)


async def run(runner: ToolRunner, conv: Conversation, action: str, input: dict | None = None, **kw):
    return succeeded(await runner.execute(conv.command("analytics", action, input, **kw)))


def period(start: date, end: date) -> dict:
    return {"from": start.isoformat(), "to": end.isoformat()}


DEFAULT = (TODAY - 29 * D, TODAY)
PREVIOUS = (TODAY - 59 * D, TODAY - 30 * D)


# revenue -----------------------------------------------------------------------------------------


def revenue(y: Year, start: date, end: date) -> dict:
    usd = [p for p in y.payments if p.currency == "USD"]
    paid = [p for p in usd if p.status == "paid" and start <= local(p.paid_at) <= end]
    failed = [p for p in usd if p.status == "failed" and start <= p.due_on <= end]
    overdue = [p for p in usd if p.status == "pending" and start <= p.due_on <= end and p.due_on < TODAY]
    paying = len({p.member for p in paid})
    collected = sum(p.cents for p in paid)
    return {
        "period": period(start, end),
        "collected": money(collected),
        "payments": len(paid),
        "payingMembers": paying,
        "arpu": money(round(collected / paying)) if paying else None,
        "refunded": money(sum(p.cents for p in usd if p.status == "refunded" and start <= local(p.paid_at) <= end)),
        "failed": money(sum(p.cents for p in failed)),
        "failedPayments": len(failed),
        "overdue": money(sum(p.cents for p in overdue)),
        "overduePayments": len(overdue),
        "_cents": collected,
    }


async def test_revenue_summary_matches_the_payments(clocked, conv, year) -> None:
    out = await run(clocked, conv, "revenue_summary")
    now, before = revenue(year, *DEFAULT), revenue(year, *PREVIOUS)
    assert out["currency"] == "USD"
    for key in (
        "period",
        "collected",
        "payments",
        "payingMembers",
        "arpu",
        "refunded",
        "failed",
        "failedPayments",
        "overdue",
        "overduePayments",
    ):
        assert out[key] == now[key], key
    assert out["previous"] == {k: before[k] for k in ("period", "collected", "payments", "payingMembers", "arpu")}
    assert out["collectedChange"] == round((now["_cents"] - before["_cents"]) / before["_cents"], 3)
    assert now["_cents"] > 0 and now["failedPayments"] + now["overduePayments"] > 0  # the data exercises every figure

    # An explicit period, cut at local midnight: a payment at 00:05 local belongs to that local day.
    start, end = date(2026, 3, 1), date(2026, 3, 31)
    out = await run(clocked, conv, "revenue_summary", period(start, end))
    assert (out["collected"], out["payingMembers"]) == (
        revenue(year, start, end)["collected"],
        revenue(year, start, end)["payingMembers"],
    )


async def test_revenue_trend_per_month_and_week(clocked, conv, year) -> None:
    out = await run(clocked, conv, "revenue_trend")
    assert out["interval"] == "month"
    assert out["buckets"][0]["from"] == "2025-07-01" and out["buckets"][-1] == {
        **out["buckets"][-1],
        "from": "2026-06-01",
        "to": "2026-06-15",
    }
    assert len(out["buckets"]) == 12
    for b in out["buckets"]:
        expected = revenue(year, date.fromisoformat(b["from"]), date.fromisoformat(b["to"]))
        assert (b["collected"], b["payments"], b["payingMembers"]) == (
            expected["collected"],
            expected["payments"],
            expected["payingMembers"],
        ), b
    assert out["total"] == revenue(year, date(2025, 7, 1), TODAY)["collected"]

    weekly = await run(
        clocked, conv, "revenue_trend", {**period(date(2026, 5, 6), date(2026, 6, 2)), "interval": "week"}
    )
    # 2026-05-06 is a Wednesday: the first week is clipped to start there, the last ends on Tuesday 2 June.
    assert [(b["from"], b["to"]) for b in weekly["buckets"]] == [
        ("2026-05-06", "2026-05-10"),
        ("2026-05-11", "2026-05-17"),
        ("2026-05-18", "2026-05-24"),
        ("2026-05-25", "2026-05-31"),
        ("2026-06-01", "2026-06-02"),
    ]
    for b in weekly["buckets"]:
        assert b["collected"] == revenue(year, date.fromisoformat(b["from"]), date.fromisoformat(b["to"]))["collected"]


async def test_money_tools_are_for_owners_and_admins(pool, clocked, conv, year) -> None:
    coach = actor_of(year.studio, year.studio.coach)
    admin = actor_of(year.studio, year.studio.admin)
    for action in ("revenue_summary", "revenue_trend", "plan_distribution"):
        failed(await clocked.execute(conv.command("analytics", action, {}, actor=coach)), "forbidden")
        succeeded(await clocked.execute(conv.command("analytics", action, {}, actor=admin)))
    # Coaches get every other analytics tool.
    succeeded(await clocked.execute(conv.command("analytics", "members_summary", {}, actor=coach)))


async def test_invalid_periods_are_refused(clocked, conv) -> None:
    for action in (
        "revenue_summary",
        "revenue_trend",
        "members_summary",
        "members_growth",
        "popular_classes",
        "class_utilization",
        "coach_overview",
        "org_insights",
        "members_activation",
        "workouts_summary",
    ):
        failed(await clocked.execute(conv.command("analytics", action, period(TODAY, TODAY - D))), "invalid_input")
    # A `from` after the default `to` (today), an unknown field, a too-long weekly trend, a bad interval.
    failed(await clocked.execute(conv.command("analytics", "members_summary", {"from": "2026-07-01"})), "invalid_input")
    failed(
        await clocked.execute(conv.command("analytics", "members_summary", {"since": "2026-01-01"})), "invalid_input"
    )
    failed(
        await clocked.execute(conv.command("analytics", "members_growth", {"from": "2025-01-01", "interval": "week"})),
        "invalid_input",
    )
    failed(await clocked.execute(conv.command("analytics", "members_growth", {"interval": "day"})), "invalid_input")
    failed(await clocked.execute(conv.command("analytics", "at_risk_members", {"recentDays": 2})), "invalid_input")
    failed(
        await clocked.execute(conv.command("analytics", "plan_distribution", {"from": "2026-01-01"})), "invalid_input"
    )


# members -----------------------------------------------------------------------------------------


async def test_members_summary(clocked, conv, year) -> None:
    out = await run(clocked, conv, "members_summary")
    start, end = DEFAULT
    ms = year.members
    current = [m for m in ms if live(m, TODAY)]
    at_start = sum(1 for m in ms if m.joined < start and live(m, start - D))
    churned = sum(1 for m in ms if m.ended and start <= m.ended <= end)
    active = [m for m in current if m.status == "active"]
    assert out == {
        "period": period(start, end),
        "active": len(active),
        "paused": sum(1 for m in current if m.status == "paused"),
        "pending": sum(1 for m in current if m.status == "pending"),
        "joined": sum(1 for m in ms if start <= m.joined <= end),
        "churned": churned,
        "atStart": at_start,
        "churnRate": rate(churned, at_start),
        "activeByPaymentStatus": {
            s: sum(1 for m in active if m.payment_status == s) for s in ("paid", "due", "overdue", "failed", "none")
        },
    }
    assert out["churned"] > 0 and out["joined"] > 0


async def test_members_growth(clocked, conv, year) -> None:
    out = await run(clocked, conv, "members_growth", {"from": "2025-10-15", "to": "2026-06-15"})
    ms = year.members
    assert out["atStart"] == sum(1 for m in ms if m.joined <= date(2025, 10, 14) and live(m, date(2025, 10, 14)))
    assert [b["from"] for b in out["buckets"]][:2] == ["2025-10-15", "2025-11-01"]
    for b in out["buckets"]:
        first, last = date.fromisoformat(b["from"]), date.fromisoformat(b["to"])
        joined = sum(1 for m in ms if first <= m.joined <= last)
        churned = sum(1 for m in ms if m.ended and first <= m.ended <= last)
        active = sum(1 for m in ms if m.joined <= last and live(m, last))
        assert b == {
            "from": b["from"],
            "to": b["to"],
            "joined": joined,
            "churned": churned,
            "net": joined - churned,
            "activeAtEnd": active,
        }, b
    assert sum(b["churned"] for b in out["buckets"]) > 0


def visits(y: Year, member: str, first: date, last: date) -> int:
    return sum(
        1
        for s in y.sessions
        if not s.cancelled and first <= local(s.starts) <= last
        for mid, _, checked in s.bookings
        if mid == member and checked
    )


async def test_at_risk_members(clocked, conv, year) -> None:
    out = await run(clocked, conv, "at_risk_members", {"limit": 50})
    recent, baseline = (TODAY - 13 * D, TODAY), (TODAY - 43 * D, TODAY - 14 * D)
    assert (out["recent"], out["baseline"]) == (period(*recent), period(*baseline))
    overdue = {}
    for p in year.payments:
        if p.status == "pending" and p.due_on < TODAY:
            overdue[p.member] = overdue.get(p.member, 0) + p.cents
    expected = []
    for m in year.members:
        if not (m.status == "active" and live(m, TODAY)):
            continue
        before, now = visits(year, m.id, *baseline), visits(year, m.id, *recent)
        reasons = ["attendance_drop"] if before >= 6 and now <= 1 else []
        if m.payment_status == "failed":
            reasons.append("payment_failed")
        if m.payment_status == "overdue" or m.id in overdue:
            reasons.append("payment_overdue")
        if reasons:
            expected.append((m.id, m.name, before, now, money(overdue[m.id]) if m.id in overdue else None, reasons))
    expected.sort(key=lambda e: ("attendance_drop" not in e[5], -e[2], e[1], e[0]))
    got = [
        (r["membershipId"], r["name"], r["visitsBefore"], r["visitsRecent"], r["overdue"], r["reasons"])
        for r in out["members"]
    ]
    assert got == expected
    assert out["total"] == len(expected)
    assert out["attendanceDrops"] == sum(1 for e in expected if "attendance_drop" in e[5])
    by_id = {r["membershipId"]: r for r in out["members"]}
    aaron = by_id[year.dropper.id]
    assert aaron["reasons"] == ["attendance_drop"] and aaron["visitsRecent"] == 0
    last = max(
        s.starts for s in year.sessions if not s.cancelled for mid, _, c in s.bookings if mid == year.dropper.id and c
    )
    assert datetime.fromisoformat(aaron["lastVisit"]) == last and aaron["lastVisit"].endswith("+03:00")
    assert by_id[year.late_payer.id]["reasons"] == ["payment_overdue"]
    assert by_id[year.late_payer.id]["overdue"] == "189.00"

    only_drops = await run(clocked, conv, "at_risk_members", {"includePayments": False, "limit": 2})
    assert only_drops["total"] == out["attendanceDrops"] and len(only_drops["members"]) == min(
        2, out["attendanceDrops"]
    )
    assert all("attendance_drop" in r["reasons"] for r in only_drops["members"])


async def test_members_activation(clocked, conv, year) -> None:
    start, end = date(2026, 3, 1), TODAY
    out = await run(clocked, conv, "members_activation", period(start, end))
    joined = [m for m in year.members if start <= m.joined <= end]

    def came(m: Member) -> bool:
        return any(
            mid == m.id and checked
            for s in year.sessions
            if not s.cancelled and m.joined <= local(s.starts) < m.joined + 14 * D
            for mid, _, checked in s.bookings
        )

    activated = [m for m in joined if came(m)]
    lost = sorted((m for m in joined if not came(m) and m.joined + 14 * D <= TODAY), key=lambda m: (m.joined, m.name))
    assert out["joined"] == len(joined) and out["activated"] == len(activated) and len(activated) > 0
    assert out["rate"] == rate(len(activated), len(joined))
    assert out["stillInWindow"] == sum(1 for m in joined if not came(m) and m.joined + 14 * D > TODAY)
    assert out["notActivatedTotal"] == len(lost)
    assert [r["membershipId"] for r in out["notActivated"]] == [m.id for m in lost[:10]]


# classes -----------------------------------------------------------------------------------------


def class_stats(y: Year, start: date, end: date) -> dict[str, dict]:
    stats: dict[str, dict] = {}
    for s in y.sessions:
        if s.cancelled or not start <= local(s.starts) <= end:
            continue
        st = stats.setdefault(
            s.type_id, dict.fromkeys(("sessions", "capacity", "booked", "attended", "waitlisted", "fullSessions"), 0)
        )
        booked = sum(1 for _, status, _ in s.bookings if status == "booked")
        st["sessions"] += 1
        st["capacity"] += s.capacity
        st["booked"] += booked
        st["attended"] += sum(1 for _, _, c in s.bookings if c)
        st["waitlisted"] += sum(1 for _, status, _ in s.bookings if status == "waitlisted")
        st["fullSessions"] += booked >= s.capacity
    for st in stats.values():
        st["fillRate"] = rate(st["booked"], st["capacity"])
        st["attendanceRate"] = rate(st["attended"], st["capacity"])
    return stats


async def test_popular_classes(clocked, conv, year) -> None:
    out = await run(clocked, conv, "popular_classes", {"limit": 2})
    stats = class_stats(year, *DEFAULT)
    ranked = sorted(stats, key=lambda t: (-stats[t]["attended"], -stats[t]["booked"], year.types[t][0]))
    assert out["total"] == len(stats) == 3  # Yoga stopped 35 days ago: no session in the period
    assert [c["classTypeId"] for c in out["classTypes"]] == ranked[:2]
    for c in out["classTypes"]:
        st = stats[c["classTypeId"]]
        assert c == {
            **st,
            "classTypeId": c["classTypeId"],
            "name": year.types[c["classTypeId"]][0],
            "avgAttended": round(st["attended"] / st["sessions"], 1),
        }


async def test_class_utilization(clocked, conv, year) -> None:
    start, end = date(2026, 4, 1), date(2026, 4, 30)
    out = await run(clocked, conv, "class_utilization", period(start, end))
    stats = class_stats(year, start, end)
    keys = ("sessions", "capacity", "booked", "attended", "waitlisted", "fullSessions")
    overall = {k: sum(st[k] for st in stats.values()) for k in keys}
    assert out["overall"] == {
        **overall,
        "fillRate": rate(overall["booked"], overall["capacity"]),
        "attendanceRate": rate(overall["attended"], overall["capacity"]),
    }
    assert (
        out["cancelledSessions"] == sum(1 for s in year.sessions if s.cancelled and start <= local(s.starts) <= end) > 0
    )
    assert [c["name"] for c in out["classTypes"]] == sorted(year.types[t][0] for t in stats)
    for c in out["classTypes"]:
        assert {k: c[k] for k in (*keys, "fillRate", "attendanceRate")} == stats[c["classTypeId"]]


async def test_coach_overview(clocked, conv, year) -> None:
    out = await run(clocked, conv, "coach_overview")
    start, end = DEFAULT
    lo, hi = at(start, 0), at(end + D, 0)
    by_id = {c["membershipId"]: c for c in out["coaches"]}
    for coach in (year.studio.coach.membership_id, year.coach2, year.studio.owner.membership_id):
        sessions = [
            s for s in year.sessions if s.coach_id == coach and not s.cancelled and start <= local(s.starts) <= end
        ]
        attended = sum(1 for s in sessions for _, _, c in s.bookings if c)
        given = [a for a in year.assignments if a[0] == coach and start <= a[2] <= end]
        c = by_id[coach]
        assert (c["sessions"], c["attended"], c["avgAttended"]) == (
            len(sessions),
            attended,
            round(attended / len(sessions), 1),
        )
        assert (c["assignments"], c["publishedAssignments"]) == (len(given), sum(1 for a in given if a[1]))
        assert c["comments"] == sum(1 for a, t in year.comments if a == coach and lo <= t < hi)
        assert c["unreadComments"] == (1 if coach == year.coach2 else 0)
    # The admin neither coaches nor assigns: not listed. Busiest first.
    assert year.studio.admin.membership_id not in by_id
    assert [c["sessions"] for c in out["coaches"]] == sorted((c["sessions"] for c in out["coaches"]), reverse=True)


# plans, workouts, insights -----------------------------------------------------------------------


async def test_plan_distribution(clocked, conv, year) -> None:
    out = await run(clocked, conv, "plan_distribution")
    active = [m for m in year.members if m.status == "active" and live(m, TODAY)]
    counts = {name: sum(1 for m in active if m.plan == name) for name in {m.plan for m in active}}
    for name in ("Unlimited", "8 per month", "Annual"):
        counts.setdefault(name, 0)  # active plans are listed even when empty; Drop-in is inactive and unused
    assert out["activeMembers"] == len(active)
    expected = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0] is None, kv[0] or ""))
    assert [(p["plan"], p["members"], p["share"]) for p in out["plans"]] == [
        (name, n, rate(n, len(active))) for name, n in expected
    ]
    unlimited = next(p for p in out["plans"] if p["plan"] == "Unlimited")
    assert unlimited | {"members": 0, "share": 0} == {
        "planId": year.plans["Unlimited"][0],
        "plan": "Unlimited",
        "price": "189.00",
        "currency": "USD",
        "billingInterval": "month",
        "members": 0,
        "share": 0,
    }


async def test_workouts_summary(clocked, conv, year) -> None:
    out = await run(clocked, conv, "workouts_summary")
    start, end = DEFAULT
    ws = [w for w in year.workouts if start <= w[2] <= end]
    asg = [a for a in year.assignments if start <= a[2] <= end]
    lo, hi = at(start, 0), at(end + D, 0)
    names = {pid: name for name, pid in year.studio.programs.items()}
    by_program = {}
    for pid, kind, _ in ws:
        row = by_program.setdefault(
            pid, {"programId": pid, "program": names.get(pid), "workouts": 0, "structured": 0, "freeform": 0}
        )
        row["workouts"] += 1
        row[kind] += 1
    assert out == {
        "period": period(start, end),
        "workouts": len(ws),
        "structured": sum(1 for w in ws if w[1] == "structured"),
        "freeform": sum(1 for w in ws if w[1] == "freeform"),
        "byProgram": sorted(
            by_program.values(), key=lambda r: (-r["workouts"], r["program"] is None, r["program"] or "")
        ),
        "assignments": len(asg),
        "publishedAssignments": sum(1 for a in asg if a[1]),
        "unpublishedAssignments": sum(1 for a in asg if not a[1]),
        "comments": sum(1 for _, t in year.comments if lo <= t < hi),
    }


async def test_org_insights(clocked, conv, year) -> None:
    out = await run(clocked, conv, "org_insights")
    assert (out["period"], out["previous"]) == (period(*DEFAULT), period(*PREVIOUS))
    insights = {i["key"]: i for i in out["insights"]}
    assert list(insights) == [
        "attendance_change",
        "biggest_attendance_drop",
        "best_filled_class",
        "at_risk_members",
        "payment_issues",
        "net_members",
        "revenue_change",
    ]
    now, before = class_stats(year, *DEFAULT), class_stats(year, *PREVIOUS)
    attended, attended_before = sum(s["attended"] for s in now.values()), sum(s["attended"] for s in before.values())
    assert insights["attendance_change"]["value"] == round((attended - attended_before) / attended_before, 3)
    yoga = next(t for t, (name, _) in year.types.items() if name == "Yoga")
    drops = {t: before[t]["attended"] - now.get(t, {"attended": 0})["attended"] for t in before}
    assert max(drops, key=drops.get) == yoga  # Yoga stopped
    assert insights["biggest_attendance_drop"]["value"] == -drops[yoga]
    assert insights["biggest_attendance_drop"]["text"].startswith("Biggest drop: Yoga")
    best = min(now, key=lambda t: (-now[t]["fillRate"], year.types[t][0]))
    assert insights["best_filled_class"]["value"] == now[best]["fillRate"]
    risk = await run(clocked, conv, "at_risk_members", {"limit": 1})
    assert (insights["at_risk_members"]["value"], insights["payment_issues"]["value"]) == (
        risk["attendanceDrops"],
        risk["paymentIssues"],
    )
    summary = await run(clocked, conv, "members_summary")
    assert insights["net_members"]["value"] == summary["joined"] - summary["churned"]
    money_now = await run(clocked, conv, "revenue_summary")
    assert insights["revenue_change"]["value"] == money_now["collectedChange"]
    # Deterministic: the same question gives the same answer. A coach is not told the revenue.
    assert (await run(clocked, conv, "org_insights"))["insights"] == out["insights"]
    coach = actor_of(year.studio, year.studio.coach)
    coach_view = await run(clocked, conv, "org_insights", actor=coach)
    assert [i["key"] for i in coach_view["insights"]] == list(insights)[:-1]
