"""The demo studio a newcomer can talk to at once (`spotter seed-demo`), and a second, smaller
studio that proves the agent never crosses organizations.

Everything here is fixed data — no randomness — and every write is an upsert on its natural key
(org slug, user email, (org, user), (org, program name)), so seeding twice changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from spotter_shared.studio import upsert_org, upsert_person, upsert_program

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


@dataclass(frozen=True)
class DemoSummary:
    demo_org_id: str
    other_org_id: str
    demo_staff: int
    demo_members: int
    demo_programs: int
    other_members: int
    other_programs: int
    logins: tuple[str, ...]


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


async def _count(conn: asyncpg.Connection, org_id: str) -> tuple[int, int, int]:
    row = await conn.fetchrow(
        """SELECT (SELECT count(*) FROM memberships WHERE organization_id = $1 AND role <> 'member') AS staff,
                  (SELECT count(*) FROM memberships WHERE organization_id = $1 AND role = 'member') AS members,
                  (SELECT count(*) FROM programs WHERE organization_id = $1 AND deleted_at IS NULL) AS programs""",
        org_id,
    )
    return row["staff"], row["members"], row["programs"]


async def seed_demo(dsn: str) -> DemoSummary:
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
            for name, kind, description in DEMO_PROGRAMS:
                await upsert_program(conn, demo.id, name=name, description=description, kind=kind)

            other = await upsert_org(conn, **OTHER_ORG)
            email, name, role = OTHER_OWNER
            await upsert_person(conn, other.id, email=email, full_name=name, role=role, joined_days_ago=500, last_visit_days_ago=0)
            await _members(conn, other.id, OTHER_MEMBERS, "other.gym", phone_base=100)
            for name, kind, description in OTHER_PROGRAMS:
                await upsert_program(conn, other.id, name=name, description=description, kind=kind)

            demo_staff, demo_members, demo_programs = await _count(conn, demo.id)
            _, other_members, other_programs = await _count(conn, other.id)
    finally:
        await conn.close()
    return DemoSummary(
        demo_org_id=demo.id,
        other_org_id=other.id,
        demo_staff=demo_staff,
        demo_members=demo_members,
        demo_programs=demo_programs,
        other_members=other_members,
        other_programs=other_programs,
        logins=tuple(e for e, _, _ in DEMO_STAFF) + (login_email, OTHER_OWNER[0]),
    )
