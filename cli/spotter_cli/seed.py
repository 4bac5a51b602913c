"""The demo studio a newcomer can talk to at once (`spotter seed-demo`), and a second, smaller
studio that proves the agent never crosses organizations.

Everything in this module is fixed data — no randomness — and every write is an upsert on its
natural key (org slug, user email, (org, user), (org, program name), (org, workout title), (org,
task title), (program, member)), so seeding twice changes nothing. Workout and task dates are relative to the
day of the first seeding; a re-run leaves existing rows as they are.

Demo Gym then gets a studio year ending on the day of the first seeding (`demo_year`): ~300 more
members with their plans, payments, classes, attendance, workouts, comments, assignments and
forms, drawn from a seeded random generator; that year is written once and then left as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import asyncpg

from spotter_shared.studio import upsert_org, upsert_person, upsert_program

from .demo_year import YearSummary, seed_demo_year

# Any constant; serialises concurrent seeders, whose program upserts are check-then-insert.
_SEED_LOCK = 0x5EED_DE40

DEMO_ORG = dict(name="Demo Gym", slug="demo-gym", tier="pro", timezone="Asia/Jerusalem", locale="en")
OTHER_ORG = dict(name="Other Gym", slug="other-gym", tier="lite", timezone="Europe/London", locale="en")

# (email, full name, role)
DEMO_STAFF = [
    ("owner@demo.gym", "Dana Owner", "owner"),
    ("admin@demo.gym", "Yael Admin", "admin"),
    ("coach@demo.gym", "Tomer Coach", "coach"),
]
DEMO_MEMBER_LOGIN = ("member@demo.gym", "Maya Member")


@dataclass(frozen=True)
class MemberSpec:
    full_name: str
    plan: str | None
    status: str
    payment: str
    joined_days_ago: int
    last_visit_days_ago: int | None
    email: str | None = None  # derived from the name unless given (non-Latin names)


A, P, C, N = "active", "paused", "cancelled", "pending"

# Joined dates spread over two years; last visits over 30 days ago mark the at-risk members.
DEMO_MEMBERS = [
    MemberSpec("Saar Cohen", "Unlimited", A, "paid", 702, 1),
    MemberSpec("Saar Levi", "3x/week", A, "overdue", 341, 12),
    MemberSpec("Noa Mizrahi", "Unlimited", A, "paid", 688, 0),
    MemberSpec("Itai Friedman", "3x/week", A, "paid", 655, 2),
    MemberSpec("Shira Ben-David", "2x/week", A, "due", 610, 3),
    MemberSpec("Omer Peretz", "Unlimited", A, "paid", 590, 1),
    MemberSpec("Tamar Avraham", "10-class pass", A, "paid", 566, 9),
    MemberSpec("Yonatan Katz", "Personal training", A, "paid", 540, 2),
    MemberSpec("Michal Rosen", "3x/week", A, "failed", 521, 5),
    MemberSpec("Daniel Goldberg", "Unlimited", A, "paid", 498, 0),
    MemberSpec("Lior Shapiro", "2x/week", A, "paid", 477, 36),
    MemberSpec("Adi Biton", "Drop-in", A, "none", 452, 14),
    MemberSpec("Eitan Weiss", "Unlimited", A, "overdue", 430, 47),
    MemberSpec("Roni Dahan", "3x/week", A, "paid", 415, 4),
    MemberSpec("Gal Azoulay", "10-class pass", A, "due", 398, 21),
    MemberSpec("Yael Harari", "Unlimited", A, "paid", 380, 1),
    MemberSpec("Nadav Klein", "2x/week", P, "none", 362, 64),
    MemberSpec("Hila Barak", "3x/week", A, "paid", 344, 6),
    MemberSpec("Amit Segal", "Personal training", A, "paid", 330, 3),
    MemberSpec("Maya Hadad", "Unlimited", A, "paid", 311, 2),
    MemberSpec("Ori Navon", "2x/week", C, "none", 296, 120),
    MemberSpec("Keren Sasson", "3x/week", A, "failed", 280, 33),
    MemberSpec("Ido Mor", "Unlimited", A, "paid", 262, 0),
    MemberSpec("Liat Gabay", "10-class pass", P, "none", 247, 52),
    MemberSpec("Alex Ivanov", "3x/week", A, "paid", 233, 4),
    MemberSpec("Olga Petrova", "2x/week", A, "due", 219, 8),
    MemberSpec("Maria Garcia", "Unlimited", A, "paid", 204, 2),
    MemberSpec("James O'Brien", "Drop-in", A, "none", 190, 25),
    MemberSpec("Sophie Martin", "3x/week", A, "paid", 176, 1),
    MemberSpec("Lucas Silva", "Personal training", A, "overdue", 161, 41),
    MemberSpec("Emma Johnson", "2x/week", A, "paid", 149, 7),
    MemberSpec("Kenji Tanaka", "Unlimited", A, "paid", 137, 3),
    MemberSpec("Fatima Haddad", "3x/week", A, "paid", 122, 2),
    MemberSpec("David Schwartz", "10-class pass", C, "none", 110, 95),
    MemberSpec("Rachel Stein", "Unlimited", A, "due", 96, 5),
    MemberSpec("Ben Carter", "2x/week", A, "paid", 83, 11),
    MemberSpec("Anna Kowalski", "3x/week", N, "none", 12, None),
    MemberSpec("Avi Ohayon", "Unlimited", A, "paid", 70, 1),
    MemberSpec("Dor Elbaz", "Drop-in", N, "none", 5, None),
    MemberSpec("Inbar Tal", "3x/week", A, "failed", 58, 38),
    MemberSpec("Yossi Malka", "Personal training", A, "paid", 44, 2),
    MemberSpec("Chen Levy", "2x/week", A, "paid", 31, 6),
    MemberSpec("Nir Ashkenazi", "Unlimited", P, "due", 27, 44),
    MemberSpec("Tal Ben-Ami", "10-class pass", A, "paid", 16, 3),
    MemberSpec("נועה ברק", "3x/week", A, "paid", 140, 4, email="noa.barak@demo.gym"),
    MemberSpec("יוסי אלון", "2x/week", A, "overdue", 95, 45, email="yossi.alon@demo.gym"),
]

# (name, kind, description)
DEMO_PROGRAMS = [
    ("CrossFit", "group", "Daily group WODs: strength, gymnastics and metcons, scaled for every level."),
    ("Olympic Weightlifting", "group", "Snatch and clean & jerk technique, three sessions a week with a coach."),
    ("Open Gym", "group", "Unstructured training time with equipment available and a coach on the floor."),
    ("Personal Coaching", "coaching", "One-on-one programming and weekly check-ins with your own coach."),
    ("Mobility & Recovery", "group", "Stretching, breathing and soft-tissue work to recover between hard days."),
    ("Home Workouts", "feed", "A daily feed of 30-minute workouts for members training away from the box."),
]



@dataclass(frozen=True)
class MovementSpec:
    name: str
    reps: int | None = None
    distance_m: int | None = None
    load_kg: str | None = None  # numeric, as text so it is exact
    duration_s: int | None = None
    notes: str | None = None


@dataclass(frozen=True)
class SectionSpec:
    name: str
    format: str | None
    movements: tuple[MovementSpec, ...]
    notes: str | None = None


@dataclass(frozen=True)
class WorkoutSpec:
    title: str
    program: str | None
    # Days from the first seeding's next Monday, so "Monday WOD" lands on a Monday.
    days_from_monday: int | None
    description: str | None = None
    sections: tuple[SectionSpec, ...] = field(default_factory=tuple)


M = MovementSpec
DEMO_WORKOUTS = [
    WorkoutSpec(
        "Monday WOD", "CrossFit", 0,
        description="Strength, then a short, fast metcon.",
        sections=(
            SectionSpec("Strength", "5x5", (M("Back squat", reps=5, load_kg="80", notes="Build to a heavy 5"),)),
            SectionSpec("Metcon", "3 rounds", (M("Run", distance_m=200), M("Double-under", reps=30))),
        ),
    ),
    WorkoutSpec(
        "Fran", "CrossFit", 2,
        sections=(
            SectionSpec("Fran", "21-15-9 for time", (M("Thruster", load_kg="43"), M("Pull-up")),
                        notes="Reps 21, 15 and 9 of each movement."),
        ),
    ),
    WorkoutSpec(
        "Murph", "CrossFit", 4,
        description="Partition the pull-ups, push-ups and squats as needed. Vest optional.",
        sections=(
            SectionSpec("Murph", "For time", (
                M("Run", distance_m=1600), M("Pull-up", reps=100), M("Push-up", reps=200),
                M("Air squat", reps=300), M("Run", distance_m=1600),
            )),
        ),
    ),
    WorkoutSpec(
        "Snatch complex", "Olympic Weightlifting", 1,
        sections=(
            SectionSpec("Warm-up", "2 rounds", (M("PVC pass-through", reps=10), M("Overhead squat", reps=5))),
            SectionSpec("Complex", "EMOM 10", (M("Snatch pull", reps=1), M("Hang snatch", reps=1), M("Snatch", reps=1)),
                        notes="Start at 60% of your best snatch."),
        ),
    ),
    WorkoutSpec(
        "AMRAP 12", "Home Workouts", 3,
        sections=(
            SectionSpec(
                "AMRAP", "AMRAP 12", (M("Burpee", reps=10), M("Walking lunge", reps=20), M("Plank", duration_s=60))
            ),
        ),
    ),
    WorkoutSpec(
        "Recovery flow", "Mobility & Recovery", 5,
        description="20 minutes: couch stretch, pigeon pose, thoracic rotations, box breathing to finish.",
    ),
]

# (title, assignee email or None, status, due in days from the first seeding or None, description)
DEMO_TASKS = [
    ("Call Eitan Weiss about his overdue payment", "admin@demo.gym", "open", 1,
     "Two months overdue; offer a payment plan."),
    ("Order new jump ropes", "coach@demo.gym", "open", 7, "Ten speed ropes for the double-under sessions."),
    ("Plan the summer throwdown", None, "open", 30, None),
    ("Welcome call for Anna Kowalski", "coach@demo.gym", "open", -2, "She signed up but has not booked a class yet."),
    ("Fix the rower monitor", "coach@demo.gym", "done", -5, None),
    ("Renew the gym insurance", "owner@demo.gym", "done", -10, None),
]

# (program name, member emails)
DEMO_ENROLLMENTS = [
    ("Personal Coaching",
     ("yonatan.katz@demo.gym", "amit.segal@demo.gym", "lucas.silva@demo.gym", "yossi.malka@demo.gym")),
    ("Home Workouts", ("member@demo.gym", "saar.cohen@demo.gym", "olga.petrova@demo.gym")),
]

OTHER_OWNER = ("owner@other.gym", "Omer Shalev", "owner")
OTHER_MEMBERS = [
    MemberSpec("Saar Mizrahi", "Unlimited", A, "paid", 300, 2, email="saar.mizrahi@other.gym"),
    MemberSpec("Rotem Levin", "2x/week", A, "due", 210, 9, email="rotem.levin@other.gym"),
    MemberSpec("Hannah Fischer", "10-class pass", A, "paid", 150, 4, email="hannah.fischer@other.gym"),
    MemberSpec("Marco Rossi", "Drop-in", P, "none", 90, 50, email="marco.rossi@other.gym"),
    MemberSpec("Dana Shalom", "3x/week", A, "paid", 40, 1, email="dana.shalom@other.gym"),
]
OTHER_PROGRAMS = [
    ("Boxing Fundamentals", "group", "Footwork, combinations and pad work for beginners."),
    ("Yoga Flow", "group", "Vinyasa classes for strength, balance and flexibility."),
]
# Look-alikes of the demo gym's rows, to show the agent never mixes studios up.
OTHER_WORKOUTS = [
    WorkoutSpec(
        "Monday WOD", "Boxing Fundamentals", 0,
        sections=(
            SectionSpec("Rounds", "6 rounds", (M("Shadow boxing", duration_s=180), M("Jump rope", duration_s=60))),
        ),
    ),
]
OTHER_TASKS = [("Order new jump ropes", "owner@other.gym", "open", 3, None)]


@dataclass(frozen=True)
class DemoSummary:
    demo_org_id: str
    other_org_id: str
    demo_staff: int
    demo_members: int
    demo_programs: int
    demo_workouts: int
    demo_tasks: int
    demo_enrollments: int
    other_members: int
    other_programs: int
    logins: tuple[str, ...]
    demo_year: YearSummary


def _email(spec: MemberSpec, domain: str) -> str:
    if spec.email:
        return spec.email
    local = spec.full_name.lower().replace("'", "").replace("-", "").replace(" ", ".")
    return f"{local}@{domain}"


def _phone(index: int) -> str:
    # Stable, plausible Israeli mobile numbers (050-…); the index keeps them unique.
    return f"+972-50-{7000000 + index * 1237:07d}"


async def _members(conn: asyncpg.Connection, org_id: str, specs: list[MemberSpec], domain: str, phone_base: int) -> None:
    for i, spec in enumerate(specs):
        await upsert_person(
            conn, org_id,
            email=_email(spec, domain), full_name=spec.full_name, role="member",
            status=spec.status, plan=spec.plan, payment_status=spec.payment, phone=_phone(phone_base + i),
            joined_days_ago=spec.joined_days_ago, last_visit_days_ago=spec.last_visit_days_ago,
        )


async def _membership(conn: asyncpg.Connection, org_id: str, email: str) -> str:
    found = await conn.fetchval(
        """SELECT m.id FROM memberships m JOIN users u ON u.id = m.user_id
           WHERE m.organization_id = $1 AND lower(u.email) = lower($2)""",
        org_id, email,
    )
    if found is None:
        raise LookupError(f"seed data names {email}, who is not in the organization")
    return str(found)


async def _workouts(
    conn: asyncpg.Connection, org_id: str, specs: list[WorkoutSpec], programs: dict[str, str], monday: date
) -> None:
    creator = await conn.fetchval(
        "SELECT user_id FROM memberships WHERE organization_id = $1 AND role = 'owner' ORDER BY created_at LIMIT 1",
        org_id,
    )
    for spec in specs:
        # Insert-if-missing rather than update: a re-run must not move dates or touch updated_at.
        exists = await conn.fetchval(
            "SELECT 1 FROM workouts WHERE organization_id = $1 AND title = $2 AND deleted_at IS NULL",
            org_id, spec.title,
        )
        if exists:
            continue
        workout_id = await conn.fetchval(
            """INSERT INTO workouts (organization_id, program_id, title, description, kind, scheduled_for, created_by)
               VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id""",
            org_id, programs.get(spec.program) if spec.program else None, spec.title, spec.description,
            "structured" if spec.sections else "freeform",
            None if spec.days_from_monday is None else monday + timedelta(days=spec.days_from_monday), creator,
        )
        for position, section in enumerate(spec.sections, start=1):
            section_id = await conn.fetchval(
                """INSERT INTO workout_sections (workout_id, position, name, format, notes)
                   VALUES ($1, $2, $3, $4, $5) RETURNING id""",
                workout_id, position, section.name, section.format, section.notes,
            )
            await conn.executemany(
                """INSERT INTO workout_movements
                          (section_id, position, name, reps, distance_m, load_kg, duration_s, notes)
                   VALUES ($1, $2, $3, $4, $5, $6, $7, $8)""",
                [
                    (section_id, i, m.name, m.reps, m.distance_m, None if m.load_kg is None else Decimal(m.load_kg),
                     m.duration_s, m.notes)
                    for i, m in enumerate(section.movements, start=1)
                ],
            )


async def _tasks(conn: asyncpg.Connection, org_id: str, specs: list[tuple], today: date) -> None:
    for title, assignee, status, due_in, description in specs:
        exists = await conn.fetchval(
            "SELECT 1 FROM tasks WHERE organization_id = $1 AND title = $2 AND deleted_at IS NULL", org_id, title
        )
        if exists:
            continue
        await conn.execute(
            """INSERT INTO tasks (organization_id, title, description, due_date, assignee_membership_id, status,
                                  completed_at)
               VALUES ($1, $2, $3, $4, $5, $6::task_status, CASE WHEN $6::task_status = 'done' THEN now() END)""",
            org_id, title, description, None if due_in is None else today + timedelta(days=due_in),
            await _membership(conn, org_id, assignee) if assignee else None, status,
        )


async def _enrollments(conn: asyncpg.Connection, org_id: str, programs: dict[str, str]) -> None:
    for program, emails in DEMO_ENROLLMENTS:
        for email in emails:
            await conn.execute(
                """INSERT INTO program_enrollments (program_id, membership_id) VALUES ($1, $2)
                   ON CONFLICT (program_id, membership_id) DO NOTHING""",
                programs[program], await _membership(conn, org_id, email),
            )


async def _count(conn: asyncpg.Connection, org_id: str) -> dict[str, int]:
    row = await conn.fetchrow(
        """SELECT (SELECT count(*) FROM memberships WHERE organization_id = $1 AND role <> 'member') AS staff,
                  (SELECT count(*) FROM memberships WHERE organization_id = $1 AND role = 'member') AS members,
                  (SELECT count(*) FROM programs WHERE organization_id = $1 AND deleted_at IS NULL) AS programs,
                  (SELECT count(*) FROM workouts WHERE organization_id = $1 AND deleted_at IS NULL) AS workouts,
                  (SELECT count(*) FROM tasks WHERE organization_id = $1 AND deleted_at IS NULL) AS tasks,
                  (SELECT count(*) FROM program_enrollments e JOIN programs p ON p.id = e.program_id
                    WHERE p.organization_id = $1) AS enrollments""",
        org_id,
    )
    return dict(row)


async def seed_demo(dsn: str) -> DemoSummary:
    from .coach_seed import seed_member_coach  # the member coach's data (seed 003)

    conn = await asyncpg.connect(dsn)
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _SEED_LOCK)
            demo = await upsert_org(conn, **DEMO_ORG)
            for email, name, role in DEMO_STAFF:
                await upsert_person(conn, demo.id, email=email, full_name=name, role=role, joined_days_ago=730, last_visit_days_ago=0)
            login_email, login_name = DEMO_MEMBER_LOGIN
            await upsert_person(
                conn, demo.id, email=login_email, full_name=login_name, role="member",
                plan="Unlimited", payment_status="paid", phone=_phone(0), joined_days_ago=400, last_visit_days_ago=1,
            )
            await _members(conn, demo.id, DEMO_MEMBERS, "demo.gym", phone_base=1)
            demo_programs = {
                name: await upsert_program(conn, demo.id, name=name, description=description, kind=kind)
                for name, kind, description in DEMO_PROGRAMS
            }
            today = date.today()
            monday = today + timedelta(days=(7 - today.weekday()) % 7)
            await _workouts(conn, demo.id, DEMO_WORKOUTS, demo_programs, monday)
            await _tasks(conn, demo.id, DEMO_TASKS, today)
            await _enrollments(conn, demo.id, demo_programs)
            demo_year = await seed_demo_year(conn, demo.id, datetime.now(ZoneInfo(DEMO_ORG["timezone"])).date())
            await seed_member_coach(conn, demo.id, today)

            other = await upsert_org(conn, **OTHER_ORG)
            email, name, role = OTHER_OWNER
            await upsert_person(conn, other.id, email=email, full_name=name, role=role, joined_days_ago=500, last_visit_days_ago=0)
            await _members(conn, other.id, OTHER_MEMBERS, "other.gym", phone_base=100)
            other_programs = {
                name: await upsert_program(conn, other.id, name=name, description=description, kind=kind)
                for name, kind, description in OTHER_PROGRAMS
            }
            await _workouts(conn, other.id, OTHER_WORKOUTS, other_programs, monday)
            await _tasks(conn, other.id, OTHER_TASKS, today)

            demo_counts = await _count(conn, demo.id)
            other_counts = await _count(conn, other.id)
        # Fresh statistics for the year just loaded: without them the planner picks poor plans for
        # the first minute (analytics measured at 70–270 ms instead of ~20 until autovacuum caught up).
        await conn.execute("ANALYZE")
    finally:
        await conn.close()
    return DemoSummary(
        demo_org_id=demo.id,
        other_org_id=other.id,
        demo_staff=demo_counts["staff"],
        demo_members=demo_counts["members"],
        demo_programs=demo_counts["programs"],
        demo_workouts=demo_counts["workouts"],
        demo_tasks=demo_counts["tasks"],
        demo_enrollments=demo_counts["enrollments"],
        other_members=other_counts["members"],
        other_programs=other_counts["programs"],
        logins=tuple(e for e, _, _ in DEMO_STAFF) + (login_email, OTHER_OWNER[0]),
        demo_year=demo_year,
    )
