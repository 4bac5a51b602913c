"""The demo seed: idempotent, complete, and its two studios kept apart.

The seed writes fixed slugs and emails, so it runs in a database of its own rather than the
session's shared one (where it would collide with any other test seeding it)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from spotter_cli.devstack import StackUrls, create_database, drop_database
from spotter_cli.seed import DemoSummary, seed_demo
from spotter_shared.db import migrate

TABLES = ("organizations", "users", "memberships", "programs")


@pytest.fixture(scope="module")
async def seed_db(stack: StackUrls) -> AsyncIterator[str]:
    name = f"spotter_seed_{uuid.uuid4().hex[:10]}"
    url = await create_database(stack.database_url, name)
    await migrate(url)
    yield url
    await drop_database(stack.database_url, name)


@pytest.fixture(scope="module")
async def seeded(seed_db: str) -> tuple[DemoSummary, DemoSummary, dict, dict]:
    first = await seed_demo(seed_db)
    before = await _snapshot(seed_db)
    second = await seed_demo(seed_db)
    after = await _snapshot(seed_db)
    return first, second, before, after


async def _snapshot(url: str) -> dict[str, list[tuple]]:
    conn = await asyncpg.connect(url)
    try:
        return {t: [tuple(r) for r in await conn.fetch(f"SELECT * FROM {t} ORDER BY id")] for t in TABLES}
    finally:
        await conn.close()


async def _fetch(url: str, sql: str, *args) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetch(sql, *args)
    finally:
        await conn.close()


async def test_seeding_twice_changes_nothing(seeded) -> None:
    first, second, before, after = seeded
    assert first == second
    assert before == after
    assert all(before[t] for t in TABLES)


async def test_demo_gym_and_its_staff(seeded, seed_db: str) -> None:
    summary = seeded[0]
    org = (await _fetch(seed_db, "SELECT * FROM organizations WHERE slug = 'demo-gym'"))[0]
    assert (str(org["id"]), org["name"], org["tier"], org["timezone"], org["locale"]) == (
        summary.demo_org_id, "Demo Gym", "pro", "Asia/Jerusalem", "en",
    )
    logins = {"owner@demo.gym": "owner", "admin@demo.gym": "admin", "coach@demo.gym": "coach", "member@demo.gym": "member"}
    rows = await _fetch(
        seed_db,
        """SELECT u.email, m.role::text FROM memberships m JOIN users u ON u.id = m.user_id
           WHERE m.organization_id = $1 AND u.email = ANY($2::text[])""",
        org["id"], list(logins),
    )
    assert {r["email"]: r["role"] for r in rows} == logins
    assert summary.demo_staff == 3
    assert {"owner@demo.gym", "admin@demo.gym", "coach@demo.gym", "member@demo.gym"} <= set(summary.logins)


async def test_demo_members_are_many_varied_and_include_two_saars(seeded, seed_db: str) -> None:
    summary = seeded[0]
    members = await _fetch(
        seed_db,
        """SELECT u.full_name, m.status::text, m.plan, m.payment_status::text, m.phone, m.joined_at,
                  m.last_visit_at < now() - interval '30 days' AS at_risk
           FROM memberships m JOIN users u ON u.id = m.user_id
           WHERE m.organization_id = $1 AND m.role = 'member'""",
        uuid.UUID(summary.demo_org_id),
    )
    assert len(members) == summary.demo_members >= 41  # the member login plus at least 40 more
    assert sorted(r["full_name"] for r in members if r["full_name"].lower().startswith("saar")) == ["Saar Cohen", "Saar Levi"]
    assert {r["status"] for r in members} == {"active", "paused", "cancelled", "pending"}
    assert {r["payment_status"] for r in members} == {"paid", "due", "overdue", "failed", "none"}
    assert {"Unlimited", "3x/week", "2x/week", "10-class pass", "Drop-in", "Personal training"} <= {r["plan"] for r in members}
    assert sum(r["status"] == "active" for r in members) > len(members) / 2
    assert any(r["at_risk"] for r in members)
    assert all(r["phone"] for r in members)
    assert len({r["phone"] for r in members}) == len(members)
    joined = sorted(r["joined_at"] for r in members)
    assert (joined[-1] - joined[0]).days > 600


async def test_demo_programs(seeded, seed_db: str) -> None:
    summary = seeded[0]
    programs = await _fetch(
        seed_db, "SELECT name, kind::text, description FROM programs WHERE organization_id = $1", uuid.UUID(summary.demo_org_id)
    )
    assert len(programs) == summary.demo_programs >= 4
    assert {"CrossFit", "Olympic Weightlifting", "Open Gym", "Personal Coaching"} <= {p["name"] for p in programs}
    assert {p["kind"] for p in programs} == {"group", "coaching", "feed"}
    assert all(p["description"] for p in programs)


async def test_other_gym_is_lite_and_separate(seeded, seed_db: str) -> None:
    summary = seeded[0]
    org = (await _fetch(seed_db, "SELECT * FROM organizations WHERE slug = 'other-gym'"))[0]
    assert (str(org["id"]), org["name"], org["tier"]) == (summary.other_org_id, "Other Gym", "lite")
    people = await _fetch(
        seed_db,
        """SELECT u.email, u.full_name, m.role::text FROM memberships m JOIN users u ON u.id = m.user_id
           WHERE m.organization_id = $1""",
        org["id"],
    )
    assert ("owner@other.gym", "owner") in {(p["email"], p["role"]) for p in people}
    assert summary.other_members == sum(p["role"] == "member" for p in people) >= 3
    assert any(p["full_name"].startswith("Saar ") and p["full_name"] not in ("Saar Cohen", "Saar Levi") for p in people)
    assert 1 <= summary.other_programs <= 2
    # Nobody belongs to both studios.
    shared = await _fetch(
        seed_db,
        "SELECT user_id FROM memberships WHERE organization_id IN ($1, $2) GROUP BY user_id HAVING count(*) > 1",
        uuid.UUID(summary.demo_org_id), org["id"],
    )
    assert shared == []
