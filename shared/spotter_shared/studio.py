"""Writes of the studio's core rows, shared by `spotter seed-demo` and the test factories.
Each is idempotent on its natural key so seeding twice changes nothing."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg


@dataclass(frozen=True)
class Org:
    id: str
    name: str
    slug: str
    tier: str


@dataclass(frozen=True)
class Person:
    user_id: str
    membership_id: str
    email: str
    full_name: str
    role: str


async def upsert_org(conn: asyncpg.Connection, *, name: str, slug: str, tier: str, timezone: str = "UTC", locale: str = "en") -> Org:
    row = await conn.fetchrow(
        """INSERT INTO organizations (name, slug, tier, timezone, locale) VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT (slug) DO UPDATE SET name = excluded.name, tier = excluded.tier
           RETURNING id, name, slug, tier""",
        name, slug, tier, timezone, locale,
    )
    return Org(id=str(row["id"]), name=row["name"], slug=row["slug"], tier=row["tier"])


async def upsert_person(
    conn: asyncpg.Connection,
    org_id: str,
    *,
    email: str,
    full_name: str,
    role: str,
    status: str = "active",
    plan: str | None = None,
    payment_status: str = "none",
    phone: str | None = None,
    joined_days_ago: int = 0,
    last_visit_days_ago: int | None = None,
) -> Person:
    user = await conn.fetchrow(
        """INSERT INTO users (email, full_name) VALUES ($1, $2)
           ON CONFLICT (lower(email)) DO UPDATE SET full_name = excluded.full_name
           RETURNING id""",
        email, full_name,
    )
    membership = await conn.fetchrow(
        """INSERT INTO memberships (organization_id, user_id, role, status, plan, payment_status, phone,
                                    joined_at, last_visit_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, current_date - $8::int,
                   CASE WHEN $9::int IS NULL THEN NULL ELSE now() - make_interval(days => $9::int) END)
           ON CONFLICT (organization_id, user_id) DO UPDATE
             SET role = excluded.role, status = excluded.status, plan = excluded.plan,
                 payment_status = excluded.payment_status, phone = excluded.phone
           RETURNING id""",
        org_id, user["id"], role, status, plan, payment_status, phone, joined_days_ago, last_visit_days_ago,
    )
    return Person(user_id=str(user["id"]), membership_id=str(membership["id"]), email=email, full_name=full_name, role=role)


async def upsert_program(conn: asyncpg.Connection, org_id: str, *, name: str, description: str, kind: str = "group", active: bool = True) -> str:
    existing = await conn.fetchval(
        "SELECT id FROM programs WHERE organization_id = $1 AND name = $2 AND deleted_at IS NULL", org_id, name
    )
    if existing:
        await conn.execute("UPDATE programs SET description = $2, kind = $3, is_active = $4 WHERE id = $1", existing, description, kind, active)
        return str(existing)
    new_id = await conn.fetchval(
        "INSERT INTO programs (organization_id, name, description, kind, is_active) VALUES ($1, $2, $3, $4, $5) RETURNING id",
        org_id, name, description, kind, active,
    )
    return str(new_id)
