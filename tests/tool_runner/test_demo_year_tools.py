"""Every read tool, and the seed's example writes, through ToolRunner.execute on the demo year.

One fresh studio (Asia/Jerusalem) is filled by `seed_demo_year` for a fixed day, and the runner's
clock is fixed early that morning (before the first class), so the tools' relative windows — the
last 30 days, the recent and baseline windows of at-risk, "today" — fall on the seeded year. Each
read action has one case with an input a person would ask for; what it returns is checked against
facts of the demo year and against the same figure counted here in SQL, independently of the tool.
The year gets a database of its own, since it fills the global exercise library.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import asyncpg
import pytest

from spotter_cli.demo_year import PROGRAMS, TIMETABLE, YEAR_TASKS, seed_demo_year
from spotter_cli.devstack import StackUrls, create_database, drop_database
from spotter_shared.contracts.tools import UndoRequest
from spotter_shared.db import create_pool, migrate
from spotter_tool_runner.runner import ToolRunner
from spotter_tool_runner.tools import REGISTRY

from tests.factories import Studio, make_studio

from .helpers import Conversation, failed, new_conversation, succeeded

TZ = ZoneInfo("Asia/Jerusalem")
ZONE = "Asia/Jerusalem"
TODAY = date(2026, 11, 23)  # a Monday; winter time (UTC+2)
NOW = datetime(2026, 11, 23, 3, 30, tzinfo=UTC)  # 05:30 at the studio, before the 06:00 WOD
TOMORROW = TODAY + timedelta(days=1)
LAST_30 = (TODAY - timedelta(days=29), TODAY)  # the tools' default period
MURPH_DAY = date(2026, 5, 25)  # Memorial Day 2026
DANI = "Dani Rubin"

READS = sorted(d.name for d in REGISTRY if d.side_effects == "read" and d.kind == "normal")

# Held classes of the organization $1 starting in the local days [$2, $3] and before $4, with their bookings.
_HELD = f"""
FROM class_sessions s LEFT JOIN bookings b ON b.session_id = s.id AND b.status = 'booked'
WHERE s.organization_id = $1 AND s.deleted_at IS NULL AND s.cancelled_at IS NULL
  AND s.starts_at >= ($2::date)::timestamp AT TIME ZONE '{ZONE}'
  AND s.starts_at < ($3::date + 1)::timestamp AT TIME ZONE '{ZONE}'
  AND s.starts_at < $4
"""


@dataclass(frozen=True)
class Demo:
    pool: asyncpg.Pool
    runner: ToolRunner
    studio: Studio
    org: uuid.UUID
    owner: Conversation
    coach: Conversation  # the head coach's: the studio's own coach, who reads the Coaching comments

    async def call(self, router: str, action: str, input: dict | None = None, *, conv: Conversation | None = None) -> Any:
        return succeeded(await self.runner.execute((conv or self.owner).command(router, action, input)))

    async def val(self, sql: str, *args: Any) -> Any:
        return await self.pool.fetchval(sql, self.org, *args)

    async def rows(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        return await self.pool.fetch(sql, self.org, *args)

    async def id_of(self, table: str, column: str, value: str) -> str:
        return str(await self.val(f"SELECT id FROM {table} WHERE organization_id = $1 AND {column} = $2", value))

    async def dani(self) -> asyncpg.Record:
        return await self.pool.fetchrow(
            """SELECT m.* FROM memberships m JOIN users u ON u.id = m.user_id
                WHERE m.organization_id = $1 AND u.full_name = $2""",
            self.org, DANI,
        )


@pytest.fixture(scope="module")
async def year_pool(stack: StackUrls) -> AsyncIterator[asyncpg.Pool]:
    """A database of this module's own: the demo year adds ~160 exercises to the global library, which the
    other tool-runner tests expect to hold only their own entries (test_read_more's fuzzy matches)."""
    name = f"spotter_demo_tools_{uuid.uuid4().hex[:10]}"
    url = await create_database(stack.database_url, name)
    await migrate(url)
    pool = await create_pool(url, max_size=5)
    yield pool
    await pool.close()
    await drop_database(stack.database_url, name)


@pytest.fixture(scope="module")
async def demo(year_pool: asyncpg.Pool) -> Demo:
    pool = year_pool
    studio = await make_studio(pool, programs=())
    async with pool.acquire() as conn:
        await conn.execute("UPDATE organizations SET timezone = $2 WHERE id = $1", studio.org.id, ZONE)
        # make_studio dates its people by the database's clock; the year is relative to TODAY, whatever the date.
        await conn.execute(
            "UPDATE memberships SET joined_at = $2 WHERE organization_id = $1", studio.org.id, TODAY - timedelta(days=400)
        )
        await seed_demo_year(conn, studio.org.id, TODAY)
    return Demo(
        pool=pool,
        runner=ToolRunner(pool, REGISTRY, clock=lambda: NOW),
        studio=studio,
        org=uuid.UUID(studio.org.id),
        owner=await new_conversation(pool, studio, studio.owner),
        coach=await new_conversation(pool, studio, studio.coach),
    )


Case = Callable[[Demo], Awaitable[None]]
CASES: dict[str, Case] = {}


def case(name: str) -> Callable[[Case], Case]:
    def register(fn: Case) -> Case:
        CASES[name] = fn
        return fn

    return register


def test_every_read_action_has_a_case() -> None:
    assert sorted(CASES) == READS


@pytest.mark.parametrize("name", READS)
async def test_read_action_on_the_demo_year(demo: Demo, name: str) -> None:
    await CASES[name](demo)


def cents(money: str) -> int:
    return int(Decimal(money) * 100)


# read ----------------------------------------------------------------------------------------------


@case("read__get_current_context")
async def _(d: Demo) -> None:
    out = await d.call("read", "get_current_context")
    assert out["organization"]["timezone"] == ZONE and out["organization"]["id"] == str(d.org)
    assert (out["now"], out["weekday"]) == ("2026-11-23T05:30:00+02:00", "Monday")
    assert (out["caller"]["membershipId"], out["caller"]["role"]) == (d.studio.owner.membership_id, "owner")


@case("read__programs_list")
async def _(d: Demo) -> None:
    out = await d.call("read", "programs_list")
    assert {p["name"]: p["kind"] for p in out["programs"]} == {name: kind for name, kind, _ in PROGRAMS}
    assert all(p["isActive"] and p["description"] for p in out["programs"])


@case("read__members_search")
async def _(d: Demo) -> None:
    out = await d.call("read", "members_search", {"query": "Dani"})
    [dani] = [m for m in out["members"] if m["name"] == DANI]
    assert (dani["role"], dani["status"], dani["plan"], dani["paymentStatus"]) == (
        "member", "active", "Personal training", "due"
    )
    assert out["total"] == await d.val(
        """SELECT count(*) FROM memberships m JOIN users u ON u.id = m.user_id
            WHERE m.organization_id = $1 AND (u.full_name ILIKE '%dani%' OR u.email ILIKE '%dani%')"""
    )


@case("read__members_get")
async def _(d: Demo) -> None:
    dani = await d.dani()
    out = await d.call("read", "members_get", {"membershipId": str(dani["id"])})
    assert (out["name"], out["plan"], out["paymentStatus"], out["status"]) == (DANI, "Personal training", "due", "active")
    assert out["joinedAt"] == str(TODAY - timedelta(days=240)) and out["phone"]
    last = dani["last_visit_at"]
    assert last is not None and datetime.fromisoformat(out["lastVisitAt"]) == last
    # Elapsed whole days or calendar days (see test_days_since_last_visit_counts_the_studio_calendar).
    assert out["daysSinceLastVisit"] in ((NOW - last).days, (TODAY - last.astimezone(TZ).date()).days)


@case("read__exercises_search")
async def _(d: Demo) -> None:
    out = await d.call("read", "exercises_search", {"query": "sled push"})
    scopes = {e["name"]: e["scope"] for e in out["exercises"]}
    assert scopes["Sled Push"] == "global" and scopes["Parking Lot Sled Push"] == "studio"
    assert out["exercises"][0]["score"] == 1.0 and out["exercises"][0]["name"] in ("Sled Push", "Parking Lot Sled Push")


@case("read__exercises_resolve_batch")
async def _(d: Demo) -> None:
    out = await d.call("read", "exercises_resolve_batch", {"names": ["200m run", "double unders", "KB swing", "wall balls"]})
    assert (out["resolved"], out["ambiguous"], out["unknown"]) == (4, 0, 0)
    names = ["Run", "Double-under", "Kettlebell Swing", "Wall Ball"]
    assert [r["exercise"]["name"] for r in out["results"]] == names
    library = dict(await d.pool.fetch(
        "SELECT name, id::text FROM exercises WHERE organization_id IS NULL AND deleted_at IS NULL AND name = ANY($1)", names
    ))
    assert [r["exercise"]["id"] for r in out["results"]] == [library[n] for n in names]


@case("read__search_anything")
async def _(d: Demo) -> None:
    out = await d.call("read", "search_anything", {"query": "Murph"})
    workouts = [h for h in out["hits"] if h["kind"] == "workout"]
    assert workouts[0]["label"] == "Murph" and workouts[0]["detail"] == f"{MURPH_DAY}, CrossFit"
    assert workouts[0]["id"] == await d.id_of("workouts", "title", "Murph")


@case("read__lookup_by_id")
async def _(d: Demo) -> None:
    murph = await d.id_of("workouts", "title", "Murph")
    out = await d.call("read", "lookup_by_id", {"type": "workout", "id": murph})
    assert (out["type"], out["title"], out["kind"], out["scheduledFor"], out["programName"]) == (
        "workout", "Murph", "structured", str(MURPH_DAY), "CrossFit"
    )
    assert out["sections"] == ["Murph (For time): Run, Pull-up, Push-up, Air Squat, Run"]


@case("read__workout_comments_in_program")
async def _(d: Demo) -> None:
    coaching = await d.id_of("programs", "name", "Coaching")
    out = await d.call(
        "read", "workout_comments_in_program", {"programId": coaching, "unreadOnly": True, "limit": 50}, conv=d.coach
    )
    assert out["programName"] == "Coaching" and out["total"] >= 1 and out["unread"] == out["total"]
    assert all(not c["read"] and c["authorRole"] == "member" and c["on"] == "workout" for c in out["comments"])
    assert all(date.fromisoformat(c["day"]) < TODAY for c in out["comments"])
    assert out["total"] == await d.val(
        """SELECT count(*) FROM workout_comments c JOIN workouts w ON w.id = c.workout_id
            WHERE c.organization_id = $1 AND w.program_id = $2 AND c.author_membership_id <> $3
              AND NOT EXISTS (SELECT 1 FROM workout_comment_reads r WHERE r.comment_id = c.id
                                AND r.coach_membership_id = $3)""",
        uuid.UUID(coaching), uuid.UUID(d.studio.coach.membership_id),
    )


@case("read__workout_comments_for_assignment")
async def _(d: Demo) -> None:
    monday = TODAY - timedelta(days=7)
    assignment = await d.val(
        "SELECT id FROM assignments WHERE organization_id = $1 AND membership_id = $2 AND scheduled_for = $3 AND title = $4",
        (await d.dani())["id"], monday, "Monday's WOD",
    )
    out = await d.call("read", "workout_comments_for_assignment", {"assignmentId": str(assignment)}, conv=d.coach)
    a = out["assignment"]
    assert (a["memberName"], a["title"], a["scheduledFor"], a["published"]) == (DANI, "Monday's WOD", str(monday), True)
    assert (a["coachMembershipId"], a["comments"], a["unreadComments"]) == (d.studio.coach.membership_id, 1, 1)
    [comment] = out["comments"]
    assert comment["authorName"] == DANI and "knee" in comment["body"] and not comment["read"]
    assert comment["createdAt"] == f"{monday}T19:40:00+02:00" and out["total"] == 1


# assignments, bookings, class sessions, class types -------------------------------------------------


@case("assignments__bulk_preview")
async def _(d: Demo) -> None:
    week = (date(2026, 11, 30), date(2026, 12, 6))
    out = await d.call("assignments", "bulk_preview", {"fromDate": str(week[0]), "toDate": str(week[1])})
    expected = await d.rows(
        """SELECT a.id::text, a.published FROM assignments a
            WHERE a.organization_id = $1 AND a.deleted_at IS NULL AND a.scheduled_for BETWEEN $2 AND $3""",
        *week,
    )
    assert out["count"] == len(expected) > 0 and len(out["selectionToken"]) == 32
    assert {i["id"] for i in out["items"]} <= {r["id"] for r in expected}
    assert any(not r["published"] for r in expected)  # next week is still partly drafts
    dani = {i["title"]: i["date"] for i in out["items"] if i["member"] == DANI}
    assert dani == {"Monday's WOD": "2026-11-30", "Thursday strength": "2026-12-03"}


@case("bookings__list_mine")
async def _(d: Demo) -> None:
    dani = await d.dani()
    out = await d.call("bookings", "list_mine", {"membershipId": str(dani["id"]), "limit": 5})
    counts = await d.pool.fetchrow(
        """SELECT count(*) FILTER (WHERE s.starts_at < $2) AS recent, count(*) FILTER (WHERE s.starts_at >= $2) AS upcoming
             FROM bookings b JOIN class_sessions s ON s.id = b.session_id
            WHERE b.membership_id = $1 AND s.deleted_at IS NULL""",
        dani["id"], NOW,
    )
    assert out["memberName"] == DANI
    assert (out["recentTotal"], out["upcomingTotal"]) == (counts["recent"], counts["upcoming"])
    assert len(out["recent"]) == 5 and any(b["attended"] for b in out["recent"])
    starts = [b["startsAt"] for b in out["recent"]]
    assert starts == sorted(starts, reverse=True) and starts[0] < "2026-11-23"


@case("bookings__attendance_summary")
async def _(d: Demo) -> None:
    out = await d.call("bookings", "attendance_summary")
    assert (out["dateFrom"], out["dateTo"]) == tuple(map(str, LAST_30))
    row = await d.pool.fetchrow(
        f"""SELECT count(DISTINCT s.id) AS sessions, count(b.id) AS bookings, count(b.checked_in_at) AS attended
            {_HELD}""",
        d.org, *LAST_30, NOW,
    )
    assert (out["sessions"], out["bookings"], out["attended"]) == (row["sessions"], row["bookings"], row["attended"])
    assert out["noShows"] == row["bookings"] - row["attended"]
    assert 0 < out["attendanceRate"] < 1 and out["attendanceRate"] == round(row["attended"] / row["bookings"], 3)
    assert sum(t["sessions"] for t in out["byClassType"]) == out["sessions"]
    assert out["byClassType"][0]["className"] == "WOD"


@case("bookings__attendance_trend")
async def _(d: Demo) -> None:
    out = await d.call("bookings", "attendance_trend", {"interval": "week"})
    first, last = date.fromisoformat(out["dateFrom"]), date.fromisoformat(out["dateTo"])
    assert last == TODAY
    weeks = await d.rows(
        f"""SELECT date_trunc('week', s.starts_at AT TIME ZONE '{ZONE}')::date AS period, count(DISTINCT s.id) AS sessions,
                   count(b.id) AS bookings, count(b.checked_in_at) AS attended
            {_HELD} GROUP BY 1""",
        first, last, NOW,
    )
    by_week = {r["period"]: (r["sessions"], r["bookings"], r["attended"]) for r in weeks}
    mondays = [first - timedelta(days=first.weekday()) + timedelta(weeks=i) for i in range(len(out["points"]))]
    assert mondays[-1] == TODAY
    assert [(p["period"], p["sessions"], p["bookings"], p["attended"]) for p in out["points"]] == [
        (str(m), *by_week.get(m, (0, 0, 0))) for m in mondays
    ]
    # Nothing has started yet this week (05:30 on Monday); every whole week before had its classes.
    assert out["points"][-1]["sessions"] == 0 and all(p["sessions"] >= 50 for p in out["points"][1:-1])
    assert all(0 < p["attendanceRate"] < 1 for p in out["points"][:-1])


@case("class_sessions__list_for_date")
async def _(d: Demo) -> None:
    wednesday = date(2026, 11, 18)
    out = await d.call("class_sessions", "list_for_date", {"date": str(wednesday)})
    timetable = sorted((at, name) for days, at, name, _, _ in TIMETABLE if wednesday.weekday() in days)
    cancelled = {
        (r["at"], r["name"]) for r in await d.rows(
            f"""SELECT to_char(s.starts_at AT TIME ZONE '{ZONE}', 'HH24:MI') AS at, t.name
                  FROM class_sessions s JOIN class_types t ON t.id = s.class_type_id
                 WHERE s.organization_id = $1 AND s.cancelled_at IS NOT NULL
                   AND (s.starts_at AT TIME ZONE '{ZONE}')::date = $2""",
            wednesday,
        )
    }
    listed = [(s["startsAt"][11:16], s["className"]) for s in out["sessions"]]
    assert out["timezone"] == ZONE and out["total"] == len(listed)
    assert sorted(listed + sorted(cancelled)) == timetable and len(listed) >= len(timetable) - 1
    assert all(s["startsAt"].startswith("2026-11-18T") and s["startsAt"].endswith("+02:00") for s in out["sessions"])
    assert all(s["coachName"] and s["published"] and not s["cancelled"] for s in out["sessions"])
    assert all(0 <= s["booked"] <= s["capacity"] for s in out["sessions"]) and any(s["booked"] for s in out["sessions"])


@case("class_sessions__bulk_preview")
async def _(d: Demo) -> None:
    open_gym = await d.id_of("class_types", "name", "Open Gym")
    week = (date(2026, 11, 30), date(2026, 12, 6))
    out = await d.call(
        "class_sessions", "bulk_preview", {"dateFrom": str(week[0]), "dateTo": str(week[1]), "classTypeId": open_gym}
    )
    expected = await d.val(
        f"""SELECT count(*) FROM class_sessions s
             WHERE s.organization_id = $1 AND s.class_type_id = $4 AND s.deleted_at IS NULL AND s.cancelled_at IS NULL
               AND (s.starts_at AT TIME ZONE '{ZONE}')::date BETWEEN $2 AND $3""",
        *week, uuid.UUID(open_gym),
    )
    assert out["count"] == expected >= 10 and not out["truncated"]  # weekdays 10:00 and 13:00, Saturday 11:00
    assert all(i["className"] == "Open Gym" and i["published"] for i in out["items"])


@case("class_types__list_for_program")
async def _(d: Demo) -> None:
    out = await d.call("class_types", "list_for_program")
    types = {t["name"]: t for t in out["classTypes"]}
    assert set(types) == {"WOD", "Foundations", "Open Gym", "Olympic Lifting", "Mobility"} and out["total"] == 5
    open_gym = types["Open Gym"]
    assert (open_gym["programName"], open_gym["defaultCapacity"], open_gym["durationMin"]) == ("Open Gym", 20, 60)
    assert open_gym["upcomingSessions"] == await d.val(
        """SELECT count(*) FROM class_sessions WHERE organization_id = $1 AND class_type_id = $2
              AND deleted_at IS NULL AND cancelled_at IS NULL AND starts_at >= $3""",
        uuid.UUID(open_gym["id"]), NOW,
    ) > 0


# analytics -----------------------------------------------------------------------------------------


async def _collected(d: Demo, first: date, last: date) -> asyncpg.Record:
    return await d.pool.fetchrow(
        f"""SELECT coalesce(sum(amount_cents), 0) AS cents, count(*) AS payments, count(DISTINCT membership_id) AS paying
              FROM payments WHERE organization_id = $1 AND status = 'paid'
               AND paid_at >= ($2::date)::timestamp AT TIME ZONE '{ZONE}'
               AND paid_at < ($3::date + 1)::timestamp AT TIME ZONE '{ZONE}'""",
        d.org, first, last,
    )


@case("analytics__revenue_summary")
async def _(d: Demo) -> None:
    out = await d.call("analytics", "revenue_summary")
    assert (out["period"]["from"], out["period"]["to"]) == tuple(map(str, LAST_30))
    assert [out["currency"]] == [r["currency"] for r in await d.rows(
        "SELECT DISTINCT currency FROM payments WHERE organization_id = $1")]
    now, before = await _collected(d, *LAST_30), await _collected(d, TODAY - timedelta(days=59), TODAY - timedelta(days=30))
    assert (cents(out["collected"]), out["payments"], out["payingMembers"]) == (now["cents"], now["payments"], now["paying"])
    assert now["cents"] > 0 and cents(out["previous"]["collected"]) == before["cents"] > 0
    assert out["collectedChange"] == round((now["cents"] - before["cents"]) / before["cents"], 3)
    assert out["failedPayments"] >= 1 and cents(out["failed"]) > 0


@case("analytics__revenue_trend")
async def _(d: Demo) -> None:
    out = await d.call("analytics", "revenue_trend")
    buckets = out["buckets"]
    assert len(buckets) == 12 and (buckets[0]["from"], buckets[-1]["to"]) == ("2025-12-01", str(TODAY))
    for b in buckets:
        paid = await _collected(d, date.fromisoformat(b["from"]), date.fromisoformat(b["to"]))
        assert (cents(b["collected"]), b["payments"], b["payingMembers"]) == (paid["cents"], paid["payments"], paid["paying"])
        assert paid["cents"] > 0
    assert cents(out["total"]) == sum(cents(b["collected"]) for b in buckets)


_MEMBERS = "FROM memberships WHERE organization_id = $1 AND role = 'member'"


@case("analytics__members_summary")
async def _(d: Demo) -> None:
    out = await d.call("analytics", "members_summary")
    first, last = LAST_30
    now = await d.rows(
        f"SELECT status::text, count(*) {_MEMBERS} AND (ended_on IS NULL OR ended_on > $2) GROUP BY 1", TODAY
    )
    counts = {r["status"]: r["count"] for r in now}
    assert (out["active"], out["paused"], out["pending"]) == (counts["active"], counts["paused"], counts.get("pending", 0))
    assert out["joined"] == await d.val(f"SELECT count(*) {_MEMBERS} AND joined_at BETWEEN $2 AND $3", first, last) > 0
    assert out["churned"] == await d.val(f"SELECT count(*) {_MEMBERS} AND ended_on BETWEEN $2 AND $3", first, last) > 0
    assert out["atStart"] == await d.val(
        f"SELECT count(*) {_MEMBERS} AND joined_at < $2 AND (ended_on IS NULL OR ended_on >= $2)", first
    )
    assert out["churnRate"] == round(out["churned"] / out["atStart"], 3)
    assert sum(out["activeByPaymentStatus"].values()) == out["active"] and out["activeByPaymentStatus"]["due"] >= 1


@case("analytics__members_growth")
async def _(d: Demo) -> None:
    out = await d.call("analytics", "members_growth")
    buckets = out["buckets"]
    assert len(buckets) == 12 and buckets[-1]["to"] == str(TODAY)
    for b in buckets:
        first, last = date.fromisoformat(b["from"]), date.fromisoformat(b["to"])
        row = await d.pool.fetchrow(
            f"""SELECT count(*) FILTER (WHERE joined_at BETWEEN $2 AND $3) AS joined,
                       count(*) FILTER (WHERE ended_on BETWEEN $2 AND $3) AS churned,
                       count(*) FILTER (WHERE joined_at <= $3 AND (ended_on IS NULL OR ended_on > $3)) AS active
                {_MEMBERS}""",
            d.org, first, last,
        )
        assert (b["joined"], b["churned"], b["activeAtEnd"]) == (row["joined"], row["churned"], row["active"]), b
        assert b["net"] == b["joined"] - b["churned"]
    assert buckets[-1]["activeAtEnd"] > out["atStart"]  # the studio grew over the year


@case("analytics__at_risk_members")
async def _(d: Demo) -> None:
    out = await d.call("analytics", "at_risk_members", {"limit": 50})
    recent_from, baseline_from = TODAY - timedelta(days=13), TODAY - timedelta(days=43)
    assert (out["recent"]["from"], out["baseline"]["from"], out["baseline"]["to"]) == (
        str(recent_from), str(baseline_from), str(recent_from - timedelta(days=1))
    )
    visits = await d.rows(
        f"""SELECT m.id::text AS id,
                   count(b.id) FILTER (WHERE s.starts_at < ($3::date)::timestamp AT TIME ZONE '{ZONE}') AS before,
                   count(b.id) FILTER (WHERE s.starts_at >= ($3::date)::timestamp AT TIME ZONE '{ZONE}') AS recent
              FROM memberships m
              LEFT JOIN bookings b ON b.membership_id = m.id AND b.checked_in_at IS NOT NULL
              LEFT JOIN class_sessions s ON s.id = b.session_id AND s.deleted_at IS NULL AND s.cancelled_at IS NULL
                   AND s.starts_at >= ($2::date)::timestamp AT TIME ZONE '{ZONE}'
                   AND s.starts_at < ($4::date + 1)::timestamp AT TIME ZONE '{ZONE}'
             WHERE m.organization_id = $1 AND m.role = 'member' AND m.status = 'active'
               AND (m.ended_on IS NULL OR m.ended_on > $4)
             GROUP BY m.id""",
        baseline_from, recent_from, TODAY,
    )
    by_id = {r["id"]: (r["before"], r["recent"]) for r in visits}
    dropped = {i for i, (before, recent) in by_id.items() if before >= 6 and recent <= 1}
    assert out["attendanceDrops"] == len(dropped) >= 1 and out["members"]
    for m in out["members"]:
        assert (m["visitsBefore"], m["visitsRecent"]) == by_id[m["membershipId"]], m
        assert ("attendance_drop" in m["reasons"]) == (m["membershipId"] in dropped) and m["reasons"]
    assert out["paymentIssues"] >= 1 and any("payment_overdue" in m["reasons"] for m in out["members"])


async def _class_totals(d: Demo, first: date, last: date) -> dict[str, dict[str, int]]:
    rows = await d.rows(
        f"""SELECT t.name, count(*) AS sessions, sum(s.capacity) AS capacity, sum(x.booked) AS booked,
                   sum(x.attended) AS attended
              FROM class_sessions s JOIN class_types t ON t.id = s.class_type_id
              JOIN LATERAL (SELECT count(*) FILTER (WHERE b.status = 'booked') AS booked,
                                   count(b.checked_in_at) AS attended
                              FROM bookings b WHERE b.session_id = s.id) x ON true
             WHERE s.organization_id = $1 AND s.deleted_at IS NULL AND s.cancelled_at IS NULL
               AND (s.starts_at AT TIME ZONE '{ZONE}')::date BETWEEN $2 AND $3
             GROUP BY t.name""",
        first, last,
    )
    return {r["name"]: dict(r) for r in rows}


@case("analytics__popular_classes")
async def _(d: Demo) -> None:
    out = await d.call("analytics", "popular_classes")
    totals = await _class_totals(d, *LAST_30)
    ranked = [t["name"] for t in out["classTypes"]]
    assert ranked[0] == "WOD" and sorted(ranked) == sorted(totals) and out["total"] == 5
    for t in out["classTypes"]:
        want = totals[t["name"]]
        assert (t["sessions"], t["booked"], t["attended"]) == (want["sessions"], want["booked"], want["attended"]), t
    attended = [t["attended"] for t in out["classTypes"]]
    assert attended == sorted(attended, reverse=True)


@case("analytics__class_utilization")
async def _(d: Demo) -> None:
    out = await d.call("analytics", "class_utilization")
    totals = (await _class_totals(d, *LAST_30)).values()
    overall = out["overall"]
    assert (overall["sessions"], overall["capacity"], overall["booked"], overall["attended"]) == tuple(
        sum(t[k] for t in totals) for k in ("sessions", "capacity", "booked", "attended")
    )
    assert 0 < overall["fillRate"] < 1 and overall["fillRate"] == round(overall["booked"] / overall["capacity"], 3)
    assert out["cancelledSessions"] == await d.val(
        f"""SELECT count(*) FROM class_sessions WHERE organization_id = $1 AND deleted_at IS NULL
              AND cancelled_at IS NOT NULL AND (starts_at AT TIME ZONE '{ZONE}')::date BETWEEN $2 AND $3""",
        *LAST_30,
    )


@case("analytics__coach_overview")
async def _(d: Demo) -> None:
    out = await d.call("analytics", "coach_overview")
    coaches = {c["membershipId"]: c for c in out["coaches"]}
    staff = {str(r["id"]) for r in await d.rows(
        "SELECT id FROM memberships WHERE organization_id = $1 AND role = 'coach' AND status = 'active'")}
    assert staff <= set(coaches) and len(staff) == 4  # the studio's own coach and the demo's three
    assert sum(c["sessions"] for c in out["coaches"]) == await d.val(
        f"""SELECT count(*) FROM class_sessions WHERE organization_id = $1 AND deleted_at IS NULL
              AND cancelled_at IS NULL AND coach_membership_id IS NOT NULL
              AND (starts_at AT TIME ZONE '{ZONE}')::date BETWEEN $2 AND $3""",
        *LAST_30,
    )
    assert all(coaches[c]["sessions"] > 0 for c in staff)
    head = coaches[d.studio.coach.membership_id]
    assert head["unreadComments"] >= 1 and head["assignments"] >= 1  # Dani's knee, on the head coach's assignment


@case("analytics__plan_distribution")
async def _(d: Demo) -> None:
    out = await d.call("analytics", "plan_distribution")
    counts = {r["plan"]: r["n"] for r in await d.rows(
        f"SELECT plan, count(*) AS n {_MEMBERS} AND status = 'active' AND (ended_on IS NULL OR ended_on > $2) GROUP BY 1",
        TODAY,
    )}
    assert out["activeMembers"] == sum(counts.values())
    assert {p["plan"]: p["members"] for p in out["plans"] if p["members"]} == counts
    assert abs(sum(p["share"] for p in out["plans"]) - 1) <= 0.0005 * len(out["plans"])
    unlimited = next(p for p in out["plans"] if p["plan"] == "Unlimited")
    assert (unlimited["price"], unlimited["billingInterval"]) == ("189.00", "month")


@case("analytics__members_activation")
async def _(d: Demo) -> None:
    out = await d.call("analytics", "members_activation")
    rows = await d.rows(
        f"""SELECT m.id, m.joined_at,
                   EXISTS (SELECT 1 FROM bookings b JOIN class_sessions s ON s.id = b.session_id
                            WHERE b.membership_id = m.id AND b.checked_in_at IS NOT NULL
                              AND s.deleted_at IS NULL AND s.cancelled_at IS NULL
                              AND (s.starts_at AT TIME ZONE '{ZONE}')::date BETWEEN m.joined_at AND m.joined_at + 13)
                       AS activated
              FROM memberships m WHERE m.organization_id = $1 AND m.role = 'member' AND m.joined_at BETWEEN $2 AND $3""",
        *LAST_30,
    )
    activated = sum(r["activated"] for r in rows)
    assert (out["joined"], out["activated"]) == (len(rows), activated) and activated >= 1
    assert out["rate"] == round(activated / len(rows), 3)
    lost = [r for r in rows if not r["activated"] and r["joined_at"] + timedelta(days=14) <= TODAY]
    assert out["notActivatedTotal"] == len(lost)
    assert out["stillInWindow"] == sum(not r["activated"] and r["joined_at"] + timedelta(days=14) > TODAY for r in rows)


@case("analytics__workouts_summary")
async def _(d: Demo) -> None:
    out = await d.call("analytics", "workouts_summary")
    by_program = {p["program"]: p["workouts"] for p in out["byProgram"]}
    assert by_program["CrossFit"] == 30  # one a day
    assert by_program["Coaching"] == sum((TODAY - timedelta(days=i)).weekday() < 5 for i in range(30))
    assert out["workouts"] == await d.val(
        "SELECT count(*) FROM workouts WHERE organization_id = $1 AND deleted_at IS NULL AND scheduled_for BETWEEN $2 AND $3",
        *LAST_30,
    )
    assert (out["assignments"], out["publishedAssignments"]) == tuple(await d.pool.fetchrow(
        """SELECT count(*), count(*) FILTER (WHERE published) FROM assignments
            WHERE organization_id = $1 AND deleted_at IS NULL AND scheduled_for BETWEEN $2 AND $3""",
        d.org, *LAST_30,
    ))
    assert out["comments"] == await d.val(
        f"""SELECT count(*) FROM workout_comments WHERE organization_id = $1 AND deleted_at IS NULL
              AND (created_at AT TIME ZONE '{ZONE}')::date BETWEEN $2 AND $3""",
        *LAST_30,
    ) > 0


@case("analytics__org_insights")
async def _(d: Demo) -> None:
    out = await d.call("analytics", "org_insights")
    insights = {i["key"]: i for i in out["insights"]}
    assert {"attendance_change", "best_filled_class", "at_risk_members", "payment_issues", "net_members",
            "revenue_change"} <= set(insights)
    at_risk = await d.call("analytics", "at_risk_members")
    assert insights["at_risk_members"]["value"] == at_risk["attendanceDrops"] >= 1
    assert insights["payment_issues"]["value"] == at_risk["paymentIssues"] >= 1
    summary = await d.call("analytics", "members_summary")
    assert insights["net_members"]["value"] == summary["joined"] - summary["churned"]
    revenue = await d.call("analytics", "revenue_summary")
    assert insights["revenue_change"]["value"] == revenue["collectedChange"]


# tasks, templates, forms ---------------------------------------------------------------------------


@case("tasks__list")
async def _(d: Demo) -> None:
    out = await d.call("tasks", "list", {"status": "open"})
    open_tasks = sorted((due, title) for title, _, status, due, _ in YEAR_TASKS if status == "open")
    assert out["total"] == len(open_tasks) == 6
    assert [(t["title"], t["dueDate"]) for t in out["tasks"]] == [
        (title, str(TODAY + timedelta(days=due))) for due, title in open_tasks
    ]
    assert out["tasks"][0]["assigneeMembershipId"] == d.studio.coach.membership_id
    assert out["tasks"][0]["assigneeName"] == d.studio.coach.full_name


@case("program_templates__list")
async def _(d: Demo) -> None:
    out = await d.call("program_templates", "list")
    assert out["total"] == 2
    assert [(t["name"], t["programKind"], t["workoutCount"], t["spanDays"]) for t in out["templates"]] == [
        ("Beginner Foundations (4 weeks)", "group", 12, 26),
        ("Home Strength (3 weeks)", "feed", 12, 20),
    ]


@case("forms__list_pending_for_org")
async def _(d: Demo) -> None:
    out = await d.call("forms", "list_pending_for_org", {"limit": 50})
    row = await d.pool.fetchrow(
        """SELECT count(*) AS total, count(*) FILTER (WHERE a.due_on < $2) AS overdue
             FROM form_assignments a JOIN memberships m ON m.id = a.membership_id
            WHERE a.organization_id = $1 AND a.status = 'pending' AND m.status <> 'cancelled'
              AND (m.ended_on IS NULL OR m.ended_on > $2)""",
        d.org, TODAY,
    )
    assert (out["total"], out["overdueTotal"]) == (row["total"], row["overdue"]) and row["overdue"] > 0
    assert out["assignments"] and out["assignments"][0]["overdue"]
    assert {a["typeKey"] for a in out["assignments"]} <= {"waiver", "par_q", "health_update"}


@case("forms__compliance_status_for_member")
async def _(d: Demo) -> None:
    dani = await d.dani()
    out = await d.call("forms", "compliance_status_for_member", {"membershipId": str(dani["id"])})
    latest = await d.rows(
        """SELECT DISTINCT ON (f.type_key) f.type_key, a.status::text FROM form_assignments a JOIN forms f ON f.id = a.form_id
            WHERE a.organization_id = $1 AND a.membership_id = $2 AND f.required
            ORDER BY f.type_key, a.assigned_at DESC""",
        dani["id"],
    )
    assert out["memberName"] == DANI
    assert {f["typeKey"]: f["status"] for f in out["forms"]} == {
        r["type_key"]: {"completed": "compliant"}.get(r["status"], r["status"]) for r in latest
    }
    assert [f["typeKey"] for f in out["forms"]] == ["par_q", "waiver"]
    assert out["compliant"] == all(f["status"] == "compliant" for f in out["forms"])


# bugs this file found, fixed since ---------------------------------------------------------------


async def test_resolve_batch_ignores_trailing_quantities(demo: Demo) -> None:
    out = await demo.call("read", "exercises_resolve_batch", {"names": ["row 500m", "21 thrusters 43kg"]})
    assert [r["exercise"] and r["exercise"]["name"] for r in out["results"]] == ["Row", "Thruster"]


async def test_days_since_last_visit_counts_the_studio_calendar(demo: Demo) -> None:
    dani = await demo.dani()
    out = await demo.call("read", "members_get", {"membershipId": str(dani["id"])})
    assert out["daysSinceLastVisit"] == (TODAY - dani["last_visit_at"].astimezone(TZ).date()).days


# the seed's example writes ---------------------------------------------------------------------------


async def test_open_gym_tomorrow_is_scheduled_then_undone(demo: Demo) -> None:
    d = demo
    cmd = d.owner.command(
        "class_sessions", "create",
        {"className": "Open Gym", "date": str(TOMORROW), "startTime": "13:00", "endTime": "14:00", "published": True},
    )
    outcome = await d.runner.execute(cmd)
    created = succeeded(outcome)
    assert outcome.inverse_available
    assert (created["className"], created["startsAt"], created["endsAt"]) == (
        "Open Gym", "2026-11-24T13:00:00+02:00", "2026-11-24T14:00:00+02:00"
    )
    assert (created["capacity"], created["booked"], created["published"], created["cancelled"]) == (20, 0, True, False)
    day = await d.call("class_sessions", "list_for_date", {"date": str(TOMORROW)})
    assert created["id"] in {s["id"] for s in day["sessions"]}

    undone = await d.runner.undo(
        UndoRequest(conversation_id=d.owner.id, tool_use_id=cmd.tool_use_id, actor=d.owner.actor, trace_id=uuid.uuid4().hex)
    )
    assert (undone.router, undone.action, undone.input) == ("class_sessions", "cancel", {"id": created["id"]})
    assert succeeded(undone.outcome) == {
        "id": created["id"], "className": "Open Gym", "startsAt": created["startsAt"], "cancelled": True,
        "bookingsCancelled": 0,
    }
    assert await d.pool.fetchval("SELECT cancelled_at FROM class_sessions WHERE id = $1", uuid.UUID(created["id"]))
    day = await d.call("class_sessions", "list_for_date", {"date": str(TOMORROW)})
    assert created["id"] not in {s["id"] for s in day["sessions"]}
    assert ("13:00", "Open Gym") in {(s["startsAt"][11:16], s["className"]) for s in day["sessions"]}  # the timetable's


async def _build_three_rounds(d: Demo) -> tuple[dict, dict[str, str]]:
    """'3 rounds — 200m run, 30 double-unders' as the agent builds it: resolve the movements, then create."""
    resolved = await d.call("read", "exercises_resolve_batch", {"names": ["200m run", "30 double-unders"]})
    assert resolved["resolved"] == 2
    run, du = (r["exercise"] for r in resolved["results"])
    workout = await d.call("workouts", "create", {
        "title": "3 rounds: run + double-unders",
        "programId": await d.id_of("programs", "name", "CrossFit"),
        "scheduledFor": str(TOMORROW),
        "sections": [{"name": "Metcon", "format": "3 rounds", "movements": [
            {"name": run["name"], "distanceM": 200}, {"name": du["name"], "reps": 30},
        ]}],
    })
    return workout, {run["name"]: run["id"], du["name"]: du["id"]}


async def test_a_workout_is_built_from_resolved_movements(demo: Demo) -> None:
    workout, exercises = await _build_three_rounds(demo)
    assert set(exercises) == {"Run", "Double-under"}
    assert (workout["kind"], workout["programName"], workout["scheduledFor"]) == ("structured", "CrossFit", str(TOMORROW))
    assert workout["sections"] == [{
        "position": 1, "name": "Metcon", "format": "3 rounds", "notes": None,
        "movements": [{"position": 1, "name": "Run", "distanceM": 200, "exerciseId": exercises["Run"]},
                      {"position": 2, "name": "Double-under", "reps": 30, "exerciseId": exercises["Double-under"]}],
    }]
    seen = await demo.call("read", "lookup_by_id", {"type": "workout", "id": workout["id"]})
    assert seen["sections"] == ["Metcon (3 rounds): Run, Double-under"]


async def test_a_built_workout_links_its_movements_to_the_resolved_exercises(demo: Demo) -> None:
    workout, exercises = await _build_three_rounds(demo)
    linked = await demo.pool.fetch(
        """SELECT m.name, m.exercise_id::text FROM workout_movements m JOIN workout_sections s ON s.id = m.section_id
            WHERE s.workout_id = $1 ORDER BY m.position""",
        uuid.UUID(workout["id"]),
    )
    assert {r["name"]: r["exercise_id"] for r in linked} == exercises


async def test_a_future_week_of_assignments_is_published_with_its_token(demo: Demo) -> None:
    d = demo
    week = {"fromDate": "2026-12-07", "toDate": "2026-12-13"}
    preview = await d.call("assignments", "bulk_preview", week)
    drafts = sum(not i["published"] for i in preview["items"])
    assert preview["count"] > 0 and not preview["truncated"] and drafts > 0
    result = await d.call("assignments", "bulk_publish", {**week, "selectionToken": preview["selectionToken"]})
    assert (result["count"], result["changed"]) == (preview["count"], drafts)
    assert sorted(result["ids"]) == sorted(i["id"] for i in preview["items"])
    rows = await d.rows(
        "SELECT published, published_at FROM assignments WHERE organization_id = $1 AND deleted_at IS NULL "
        "AND scheduled_for BETWEEN $2 AND $3", date(2026, 12, 7), date(2026, 12, 13),
    )
    assert len(rows) == preview["count"] and all(r["published"] for r in rows)
    assert sum(r["published_at"] == NOW for r in rows) == drafts
    assert (await d.call("assignments", "bulk_preview", {**week, "published": False}))["count"] == 0


async def test_bulk_delete_is_refused_after_a_previewed_class_changed(demo: Demo) -> None:
    d = demo
    selection = {"dateFrom": "2026-12-01", "dateTo": "2026-12-02"}
    preview = await d.call("class_sessions", "bulk_preview", selection)
    assert preview["count"] >= 20  # a Tuesday and a Wednesday of the timetable
    moved = preview["items"][3]["id"]
    await d.call("class_sessions", "update", {"id": moved, "notes": "Ayelet covers this one"})
    state = f"""SELECT id, deleted_at, published, updated_at, notes FROM class_sessions
                 WHERE organization_id = $1 AND (starts_at AT TIME ZONE '{ZONE}')::date BETWEEN $2 AND $3 ORDER BY id"""
    days = (date(2026, 12, 1), date(2026, 12, 2))
    before = await d.rows(state, *days)

    error = failed(
        await d.runner.execute(d.owner.command(
            "class_sessions", "bulk_delete", {**selection, "selectionToken": preview["selectionToken"]}
        )),
        "selection_changed",
    )
    assert "nothing was changed" in error.message and "bulk_preview" in error.hint
    after = await d.rows(state, *days)
    assert after == before and not any(r["deleted_at"] for r in after)
