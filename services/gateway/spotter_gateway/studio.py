"""The studio app's read side under /organizations/{orgId}/studio: members, schedule, programs,
tasks and analytics, straight from Postgres (the gateway reads any table and writes none of these;
the one button here that changes something, creating a task, asks the tool-runner to run its tool).

Figures mean what the tool-runner's tools mean, so the page and Spotter agree:
  * a member is a membership with role member; active = status active and not ended;
  * payment status is the membership's, and owing money raises it: a pending payment (or a failed
    one no later payment settled) due before today makes it overdue, one due today or later due;
  * a session counts when it is neither cancelled nor deleted; attended = booking checked in;
    attendance rate = attended ÷ capacity (analytics__class_utilization), over whole local days;
  * revenue = paid payments by paid_at, in the studio's main currency; coaches are not shown it.
Times are timestamptz; days and weeks (Monday–Sunday) are the studio's, in its time zone."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo

import asyncpg
from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from spotter_shared.contracts.commands import Actor
from spotter_shared.contracts.tools import AppAction
from spotter_shared.errors import ErrorCode, SpotterError

from . import edges
from .deps import Member, Pool, parse_uuid
from .errors import trace_id

router = APIRouter(prefix="/organizations/{orgId}/studio")

RECENT_DAYS = 30
TREND_WEEKS = 8


async def studio_staff(actor: Member) -> Actor:
    if actor.role == "member":
        raise SpotterError(ErrorCode.FORBIDDEN, "This part of the studio is for staff only.")
    return actor


Staff = Annotated[Actor, Depends(studio_staff)]


# The studio's clock ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Clock:
    tz: ZoneInfo
    today: date
    currency: str

    def midnight(self, day: date) -> datetime:
        return datetime.combine(day, time(), tzinfo=self.tz)

    def recent(self) -> tuple[datetime, datetime]:
        """The last RECENT_DAYS whole local days, today included (the tools' default period)."""
        return self.midnight(self.today - timedelta(days=RECENT_DAYS - 1)), self.midnight(self.today + timedelta(days=1))


# The currency most of the studio's payments use, else its plans', else USD (analytics' rule).
_CLOCK = """
SELECT o.timezone,
       coalesce((SELECT currency FROM payments WHERE organization_id = o.id
                  GROUP BY currency ORDER BY count(*) DESC, currency LIMIT 1),
                (SELECT currency FROM plans WHERE organization_id = o.id
                  GROUP BY currency ORDER BY count(*) DESC, currency LIMIT 1),
                'USD') AS currency
  FROM organizations o WHERE o.id = $1
"""


async def clock(db: asyncpg.Pool, actor: Actor) -> Clock:
    row = await db.fetchrow(_CLOCK, uuid.UUID(actor.organization_id))
    tz = ZoneInfo(row["timezone"])
    return Clock(tz=tz, today=datetime.now(tz).date(), currency=row["currency"].strip())


def monday_of(day: date) -> date:
    return day - timedelta(days=day.weekday())


# Members --------------------------------------------------------------------------------------------

# One row per client with plan and payment state; $1 org, $2 today, $3 the studio's currency.
_MEMBER_ROWS = """
WITH owed AS (
    SELECT p.membership_id,
           coalesce(sum(p.amount_cents), 0) AS due_cents,
           coalesce(sum(p.amount_cents) FILTER (WHERE p.due_on < $2), 0) AS overdue_cents
      FROM payments p
     WHERE p.organization_id = $1
       AND (p.status = 'pending'
            OR (p.status = 'failed' AND NOT EXISTS (
                    SELECT 1 FROM payments q
                     WHERE q.membership_id = p.membership_id AND q.status = 'paid' AND q.due_on >= p.due_on)))
     GROUP BY p.membership_id),
paid AS (
    SELECT membership_id, max(paid_at) AS last_paid_at FROM payments
     WHERE organization_id = $1 AND status = 'paid' GROUP BY membership_id),
clients AS (
    SELECT m.id AS membership_id, m.user_id, u.full_name, u.email, m.status::text AS status,
           m.joined_at, m.ended_on, m.last_visit_at,
           m.plan AS plan_name, pl.sessions_per_week, coalesce(pl.currency, $3) AS currency,
           coalesce(o.due_cents, 0) AS amount_due_cents, pd.last_paid_at,
           CASE WHEN m.payment_status IN ('overdue', 'failed') OR o.overdue_cents > 0 THEN 'overdue'
                WHEN m.payment_status = 'due' OR o.due_cents > 0 THEN 'due'
                WHEN m.payment_status = 'paid' THEN 'paid'
                ELSE 'none' END AS payment_status
      FROM memberships m
      JOIN users u ON u.id = m.user_id
      LEFT JOIN plans pl ON pl.organization_id = m.organization_id AND pl.name = m.plan
      LEFT JOIN owed o ON o.membership_id = m.id
      LEFT JOIN paid pd ON pd.membership_id = m.id
     WHERE m.organization_id = $1 AND m.role = 'member')
"""

# $4 name/email patterns (every one must match), $5 limit, $6 offset.
_MEMBERS = _MEMBER_ROWS + """
SELECT *, count(*) OVER () AS total FROM clients c
 WHERE NOT EXISTS (SELECT 1 FROM unnest($4::text[]) AS w(pattern)
                    WHERE NOT (c.full_name ILIKE w.pattern OR c.email ILIKE w.pattern))
 ORDER BY c.full_name, c.membership_id
 LIMIT $5 OFFSET $6
"""

_MEMBER = _MEMBER_ROWS + "SELECT * FROM clients WHERE membership_id = $4"

_MEMBER_PAYMENTS = """
SELECT id, amount_cents, currency, status::text AS status, due_on, paid_at FROM payments
 WHERE membership_id = $1 ORDER BY due_on DESC, created_at DESC LIMIT 12
"""

_MEMBER_PROGRAMS = """
SELECT p.id, p.name FROM program_enrollments e JOIN programs p ON p.id = e.program_id
 WHERE e.membership_id = $1 AND p.deleted_at IS NULL ORDER BY p.name, p.id
"""

_MEMBER_BOOKINGS = """
SELECT s.id AS session_id, ct.name AS class_name, s.starts_at, b.status::text AS status,
       b.checked_in_at IS NOT NULL AS attended
  FROM bookings b JOIN class_sessions s ON s.id = b.session_id JOIN class_types ct ON ct.id = s.class_type_id
 WHERE b.membership_id = $1 AND s.deleted_at IS NULL
 ORDER BY s.starts_at DESC LIMIT 10
"""

_MEMBER_VISITS = """
SELECT count(*) FROM bookings b JOIN class_sessions s ON s.id = b.session_id
 WHERE b.membership_id = $1 AND b.checked_in_at IS NOT NULL
   AND s.deleted_at IS NULL AND s.cancelled_at IS NULL AND s.starts_at >= $2 AND s.starts_at < $3
"""


def member_item(r: asyncpg.Record) -> dict[str, Any]:
    plan = {"name": r["plan_name"], "sessionsPerWeek": r["sessions_per_week"]} if r["plan_name"] else None
    return {
        "membershipId": str(r["membership_id"]), "userId": str(r["user_id"]), "fullName": r["full_name"],
        "email": r["email"], "status": r["status"], "plan": plan,
        "payment": {"status": r["payment_status"], "amountDueCents": int(r["amount_due_cents"]),
                    "currency": r["currency"].strip(), "lastPaidAt": iso(r["last_paid_at"])},
    }


def like_patterns(q: str | None) -> list[str]:
    return [f"%{escape_like(word)}%" for word in (q or "").split()]


def escape_like(text: str) -> str:
    # Backslash is ILIKE's escape character; the user's % and _ match literally.
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


@router.get("/members")
async def members(
    actor: Staff, db: Pool,
    q: Annotated[str | None, Query(max_length=100)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> dict[str, Any]:
    """The studio's clients by name; every word of `q` must match the name or the email."""
    now = await clock(db, actor)
    rows = await db.fetch(_MEMBERS, uuid.UUID(actor.organization_id), now.today, now.currency,
                          like_patterns(q), limit, offset)
    total = rows[0]["total"] if rows else await _count_beyond(db, actor, now, q, offset)
    return {"members": [member_item(r) for r in rows], "total": total}


async def _count_beyond(db: asyncpg.Pool, actor: Actor, now: Clock, q: str | None, offset: int) -> int:
    # A page past the end has no row to carry the total.
    if offset == 0:
        return 0
    rows = await db.fetch(_MEMBERS, uuid.UUID(actor.organization_id), now.today, now.currency, like_patterns(q), 1, 0)
    return rows[0]["total"] if rows else 0


@router.get("/members/{membershipId}")
async def member(actor: Staff, db: Pool, membership_id: Annotated[str, Path(alias="membershipId")]) -> dict[str, Any]:
    mid = parse_uuid(membership_id, "membershipId")
    now = await clock(db, actor)
    row = await db.fetchrow(_MEMBER, uuid.UUID(actor.organization_id), now.today, now.currency, mid)
    if row is None:
        raise SpotterError(ErrorCode.NOT_FOUND, "Member not found.")
    payments = await db.fetch(_MEMBER_PAYMENTS, mid)
    programs = await db.fetch(_MEMBER_PROGRAMS, mid)
    bookings = await db.fetch(_MEMBER_BOOKINGS, mid)
    visits = await db.fetchval(_MEMBER_VISITS, mid, *now.recent())
    return {
        **member_item(row),
        "joinedAt": iso(row["joined_at"]), "endedOn": iso(row["ended_on"]), "lastVisitAt": iso(row["last_visit_at"]),
        "payments": [{"id": str(p["id"]), "amountCents": p["amount_cents"], "currency": p["currency"].strip(),
                      "status": p["status"], "dueDate": iso(p["due_on"]), "paidAt": iso(p["paid_at"])} for p in payments],
        "programs": [{"id": str(p["id"]), "name": p["name"]} for p in programs],
        "bookings": [{"classSessionId": str(b["session_id"]), "className": b["class_name"],
                      "startsAt": iso(b["starts_at"]), "status": b["status"], "attended": b["attended"]} for b in bookings],
        "visitsLast30d": visits,
    }


# Schedule -------------------------------------------------------------------------------------------

# $1 org, $2..$3 the week's instants, $4 whether unpublished sessions show (staff only).
_SCHEDULE = """
SELECT s.id, s.class_type_id, ct.name AS class_name, s.starts_at, s.ends_at, s.capacity, s.published,
       s.cancelled_at IS NOT NULL AS cancelled, cm.user_id AS coach_user_id, cu.full_name AS coach_name,
       (SELECT count(*) FROM bookings b WHERE b.session_id = s.id AND b.status = 'booked') AS booked
  FROM class_sessions s
  JOIN class_types ct ON ct.id = s.class_type_id
  LEFT JOIN memberships cm ON cm.id = s.coach_membership_id
  LEFT JOIN users cu ON cu.id = cm.user_id
 WHERE s.organization_id = $1 AND s.deleted_at IS NULL AND s.starts_at >= $2 AND s.starts_at < $3
   AND (s.published OR $4)
 ORDER BY s.starts_at, ct.name, s.id
"""


def session_item(r: asyncpg.Record) -> dict[str, Any]:
    status = "cancelled" if r["cancelled"] else "published" if r["published"] else "draft"
    coach = {"userId": str(r["coach_user_id"]), "fullName": r["coach_name"]} if r["coach_user_id"] else None
    return {
        "id": str(r["id"]), "classType": {"id": str(r["class_type_id"]), "name": r["class_name"]},
        "startsAt": iso(r["starts_at"]), "endsAt": iso(r["ends_at"]), "capacity": r["capacity"],
        "booked": r["booked"], "coach": coach, "status": status,
    }


@router.get("/schedule")
async def schedule(actor: Member, db: Pool, week: date | None = None) -> dict[str, Any]:
    """The week (Monday to Sunday) holding `week`, default this one; members see published classes only."""
    now = await clock(db, actor)
    monday = monday_of(week or now.today)
    rows = await db.fetch(_SCHEDULE, uuid.UUID(actor.organization_id), now.midnight(monday),
                          now.midnight(monday + timedelta(days=7)), actor.role != "member")
    return {"timezone": str(now.tz), "weekStart": monday.isoformat(),
            "weekEnd": (monday + timedelta(days=6)).isoformat(), "sessions": [session_item(r) for r in rows]}


# Programs -------------------------------------------------------------------------------------------

_PROGRAMS = """
SELECT p.id, p.name, p.description, p.kind::text AS kind, p.is_active,
       (SELECT count(*) FROM workouts w WHERE w.program_id = p.id AND w.deleted_at IS NULL) AS workout_count,
       (SELECT count(*) FROM program_enrollments e WHERE e.program_id = p.id) AS member_count
  FROM programs p
 WHERE p.organization_id = $1 AND p.deleted_at IS NULL AND ($2::uuid IS NULL OR p.id = $2)
 ORDER BY p.name, p.id
"""

# Newest first: the coming days' workouts lead; $2 how many.
_WORKOUTS = """
SELECT id, title, scheduled_for, description FROM workouts
 WHERE program_id = $1 AND deleted_at IS NULL
 ORDER BY scheduled_for DESC NULLS LAST, created_at DESC LIMIT $2
"""

_SECTIONS = """
SELECT s.workout_id, s.id AS section_id, s.name AS section, s.format, s.notes AS section_notes,
       mv.name, mv.reps, mv.distance_m, mv.load_kg, mv.duration_s, mv.notes
  FROM workout_sections s LEFT JOIN workout_movements mv ON mv.section_id = s.id
 WHERE s.workout_id = ANY($1::uuid[])
 ORDER BY s.workout_id, s.position, mv.position
"""


def program_item(r: asyncpg.Record) -> dict[str, Any]:
    return {"id": str(r["id"]), "name": r["name"], "description": r["description"], "kind": r["kind"],
            "isActive": r["is_active"], "workoutCount": r["workout_count"], "memberCount": r["member_count"]}


def prescription(r: asyncpg.Record) -> str:
    """"5 reps × 60 kg", "400 m", "1:30" and the movement's note, as a coach writes them."""
    parts = []
    if r["reps"]:
        parts.append(f"{r['reps']} reps")
    if r["distance_m"]:
        parts.append(f"{r['distance_m']} m")
    if r["duration_s"]:
        minutes, seconds = divmod(r["duration_s"], 60)
        parts.append(f"{minutes}:{seconds:02d}" if minutes else f"{seconds} s")
    if r["load_kg"] is not None:
        parts.append(f"{Decimal(r['load_kg']).normalize():f} kg")
    text = " × ".join(parts)
    return f"{text} — {r['notes']}" if text and r["notes"] else text or (r["notes"] or "")


def sections_by_workout(rows: list[asyncpg.Record]) -> dict[uuid.UUID, list[dict[str, Any]]]:
    out: dict[uuid.UUID, list[dict[str, Any]]] = {}
    current: dict[uuid.UUID, dict[str, Any]] = {}
    for r in rows:
        section = current.get(r["section_id"])
        if section is None:
            section = {"title": r["section"], "format": r["format"], "notes": r["section_notes"], "movements": []}
            current[r["section_id"]] = section
            out.setdefault(r["workout_id"], []).append(section)
        if r["name"] is not None:
            section["movements"].append({"name": r["name"], "prescription": prescription(r)})
    return out


@router.get("/programs")
async def programs(actor: Member, db: Pool) -> dict[str, Any]:
    rows = await db.fetch(_PROGRAMS, uuid.UUID(actor.organization_id), None)
    return {"programs": [program_item(r) for r in rows]}


@router.get("/programs/{programId}")
async def program(
    actor: Member, db: Pool, program_id: Annotated[str, Path(alias="programId")],
    limit: Annotated[int, Query(ge=1, le=200)] = 60,
) -> dict[str, Any]:
    """A program with its newest `limit` workouts (future ones first), sections and movements."""
    row = await db.fetchrow(_PROGRAMS, uuid.UUID(actor.organization_id), parse_uuid(program_id, "programId"))
    if row is None:
        raise SpotterError(ErrorCode.NOT_FOUND, "Program not found.")
    workouts = await db.fetch(_WORKOUTS, row["id"], limit)
    sections = sections_by_workout(await db.fetch(_SECTIONS, [w["id"] for w in workouts]))
    return {**program_item(row), "workouts": [
        {"id": str(w["id"]), "title": w["title"], "date": iso(w["scheduled_for"]), "description": w["description"],
         "sections": sections.get(w["id"], [])}
        for w in workouts
    ]}


# Tasks ----------------------------------------------------------------------------------------------

_TASKS = """
SELECT t.id, t.title, t.description, t.status::text AS status, t.due_date, t.created_at, t.completed_at,
       am.user_id AS assignee_user_id, au.full_name AS assignee_name
  FROM tasks t
  LEFT JOIN memberships am ON am.id = t.assignee_membership_id
  LEFT JOIN users au ON au.id = am.user_id
 WHERE t.organization_id = $1 AND t.deleted_at IS NULL AND ($2::text IS NULL OR t.status::text = $2)
 ORDER BY t.status, t.due_date NULLS LAST, t.created_at, t.id
 LIMIT 500
"""


@router.get("/tasks")
async def tasks(actor: Staff, db: Pool, status: Literal["open", "done", "all"] = "open") -> dict[str, Any]:
    """Open ones first, soonest due first."""
    rows = await db.fetch(_TASKS, uuid.UUID(actor.organization_id), None if status == "all" else status)
    return {"tasks": [
        {"id": str(r["id"]), "title": r["title"], "description": r["description"], "status": r["status"],
         "dueDate": iso(r["due_date"]), "createdAt": iso(r["created_at"]), "completedAt": iso(r["completed_at"]),
         "assignee": {"userId": str(r["assignee_user_id"]), "fullName": r["assignee_name"]}
         if r["assignee_user_id"] else None}
        for r in rows
    ]}


class NewTask(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, extra="forbid")

    title: str = Field(min_length=1, max_length=255)
    description: str | None = Field(default=None, max_length=4000)
    due_date: date | None = None


@router.post("/tasks", status_code=201)
async def create_task(request: Request, body: NewTask, actor: Staff) -> dict[str, Any]:
    """A task the person creates from the app ("What are you working on?" → new task): the
    tool-runner runs the same tasks.create tool the agent uses, audited as not the agent's."""
    ask = AppAction(router="tasks", action="create", input=body.model_dump(mode="json", by_alias=True, exclude_none=True),
                    actor=actor, trace_id=trace_id(request))
    task = (await edges.ask(edges.app_action, ask, trace_id=ask.trace_id)).output
    return {key: task.get(key) for key in ("id", "title", "description", "status", "dueDate", "completedAt")}


# Analytics ------------------------------------------------------------------------------------------

# $1 org, $2 today, $3 currency; $4..$5 this week, $6..$7 the last 30 days.
_FIGURES = _MEMBER_ROWS + """,
held AS (
    SELECT s.id, s.starts_at, s.capacity FROM class_sessions s
     WHERE s.organization_id = $1 AND s.deleted_at IS NULL AND s.cancelled_at IS NULL)
SELECT (SELECT count(*) FROM clients WHERE status = 'active' AND (ended_on IS NULL OR ended_on > $2)) AS active_members,
       (SELECT count(*) FROM clients WHERE status = 'active' AND (ended_on IS NULL OR ended_on > $2)
                                       AND payment_status = 'overdue') AS overdue_members,
       (SELECT coalesce(sum(amount_cents), 0) FROM payments
         WHERE organization_id = $1 AND currency = $3 AND status = 'pending' AND due_on < $2) AS overdue_cents,
       (SELECT count(*) FROM held h JOIN bookings b ON b.session_id = h.id
         WHERE b.status = 'booked' AND h.starts_at >= $4 AND h.starts_at < $5) AS bookings_this_week,
       (SELECT coalesce(sum(h.capacity), 0) FROM held h WHERE h.starts_at >= $6 AND h.starts_at < $7) AS capacity_30d,
       (SELECT count(*) FROM held h JOIN bookings b ON b.session_id = h.id
         WHERE b.checked_in_at IS NOT NULL AND h.starts_at >= $6 AND h.starts_at < $7) AS attended_30d,
       (SELECT coalesce(sum(amount_cents), 0) FROM payments
         WHERE organization_id = $1 AND currency = $3 AND status = 'paid' AND paid_at >= $6 AND paid_at < $7) AS revenue_30d
"""

# Weeks (Monday, local) from $2 to $3; $4 the time zone.
_BY_WEEK = """
SELECT date_trunc('week', s.starts_at AT TIME ZONE $4)::date AS week_start,
       count(b.id) FILTER (WHERE b.status = 'booked') AS booked,
       count(b.id) FILTER (WHERE b.checked_in_at IS NOT NULL) AS attended
  FROM class_sessions s JOIN bookings b ON b.session_id = s.id
 WHERE s.organization_id = $1 AND s.deleted_at IS NULL AND s.cancelled_at IS NULL
   AND s.starts_at >= $2 AND s.starts_at < $3
 GROUP BY 1
"""


@router.get("/analytics")
async def analytics(actor: Staff, db: Pool) -> dict[str, Any]:
    now = await clock(db, actor)
    monday = monday_of(now.today)
    week = (now.midnight(monday), now.midnight(monday + timedelta(days=7)))
    f = await db.fetchrow(_FIGURES, uuid.UUID(actor.organization_id), now.today, now.currency, *week, *now.recent())
    first = monday - timedelta(weeks=TREND_WEEKS - 1)
    weeks = {r["week_start"]: r for r in await db.fetch(
        _BY_WEEK, uuid.UUID(actor.organization_id), now.midnight(first), week[1], str(now.tz))}
    trend = []
    for i in range(TREND_WEEKS):
        start = first + timedelta(weeks=i)
        r = weeks.get(start)
        trend.append({"weekStart": start.isoformat(), "booked": r["booked"] if r else 0, "attended": r["attended"] if r else 0})
    capacity = f["capacity_30d"]
    return {
        "figures": {
            "activeMembers": f["active_members"], "overdueMembers": f["overdue_members"],
            "overdueAmountCents": int(f["overdue_cents"]), "bookingsThisWeek": f["bookings_this_week"],
            "attendanceRate30d": round(f["attended_30d"] / capacity, 3) if capacity else None,
            # Coaches are not shown the studio's takings (as analytics__revenue_* are owner/admin).
            "revenue30dCents": int(f["revenue_30d"]) if actor.role in ("owner", "admin") else None,
            "currency": now.currency,
        },
        "attendanceByWeek": trend,
    }


def iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None
