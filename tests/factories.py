"""Unique, isolated studio data for a test: a fresh org per call, never shared between tests."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import date, datetime
from zoneinfo import ZoneInfo

import asyncpg

from spotter_shared.studio import Org, Person, upsert_org, upsert_person, upsert_program


@dataclass
class Studio:
    org: Org
    owner: Person
    admin: Person
    coach: Person
    member: Person
    people: dict[str, Person] = field(default_factory=dict)
    programs: dict[str, str] = field(default_factory=dict)


async def make_studio(pool: asyncpg.Pool, *, tier: str = "pro", extra_members: list[dict] | None = None, programs: list[str] = ("CrossFit", "Olympic Lifting")) -> Studio:
    tag = uuid.uuid4().hex[:8]
    async with pool.acquire() as conn, conn.transaction():
        org = await upsert_org(conn, name=f"Test Gym {tag}", slug=f"test-{tag}", tier=tier)
        staff = {
            role: await upsert_person(conn, org.id, email=f"{role}-{tag}@test.gym", full_name=f"{role.title()} {tag}", role=role)
            for role in ("owner", "admin", "coach", "member")
        }
        studio = Studio(org=org, owner=staff["owner"], admin=staff["admin"], coach=staff["coach"], member=staff["member"])
        for spec in extra_members or []:
            email = spec.get("email") or f"{spec['full_name'].lower().replace(' ', '.')}-{tag}@test.gym"
            person = await upsert_person(conn, org.id, role="member", **{**spec, "email": email})
            studio.people[spec["full_name"]] = person
        for name in programs:
            studio.programs[name] = await upsert_program(conn, org.id, name=name, description=f"{name} classes")
    return studio


async def make_demo_year_studio(pool: asyncpg.Pool, zone: str) -> tuple[Studio, ZoneInfo, date]:
    """A studio in `zone` holding the demo seed's whole year, ending on the studio's real today (so
    "tomorrow" and "this week" are real days too); returns it with its zone and that day."""
    from spotter_cli.demo_year import seed_demo_year  # the CLI's seeder; a few seconds

    studio = await make_studio(pool)
    await pool.execute("UPDATE organizations SET timezone = $2 WHERE id = $1", uuid.UUID(studio.org.id), zone)
    tz = ZoneInfo(zone)
    today = datetime.now(tz).date()
    async with pool.acquire() as conn:
        await seed_demo_year(conn, studio.org.id, today)
    return studio, tz, today


async def make_task(pool: asyncpg.Pool, organization_id: str, title: str, *, status: str = "open") -> str:
    """A studio task (the tool-runner's table, written directly as the studio app would)."""
    return str(await pool.fetchval(
        "INSERT INTO tasks (organization_id, title, status) VALUES ($1, $2, $3::task_status) RETURNING id",
        uuid.UUID(organization_id), title, status,
    ))


def actor_of(studio: Studio, person: Person) -> "Actor":
    from spotter_shared.contracts.commands import Actor

    return Actor(user_id=person.user_id, organization_id=studio.org.id, membership_id=person.membership_id, role=person.role)


async def new_send(pool: asyncpg.Pool, *, message: str = "hello", locale: str = "en-US", is_new: bool = True,
                   conversation_id: str | None = None) -> "SendMessage":
    """A send by the owner of a new studio, into a new conversation unless one is given."""
    from spotter_shared.contracts.commands import Actor, SendMessage

    studio = await make_studio(pool)
    owner = studio.owner
    actor = Actor(user_id=owner.user_id, organization_id=studio.org.id, membership_id=owner.membership_id,
                  role="owner", locale=locale)
    return SendMessage(command_id=str(uuid.uuid4()), turn_id=str(uuid.uuid4()),
                       conversation_id=conversation_id or str(uuid.uuid4()), actor=actor, trace_id="t",
                       is_new=is_new, message=message)
