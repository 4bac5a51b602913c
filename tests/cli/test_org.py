"""`spotter org`: onboarding a studio from the command line, run as the real `spotter` entry point
against the session's database; every refusal is a message, exit code 2 and no change."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from spotter_cli.org import slug_of

SPOTTER = str(Path(sys.executable).with_name("spotter"))


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str


async def spotter(db_url: str, *args: str) -> Run:
    proc = await asyncio.create_subprocess_exec(
        SPOTTER, *args, env={**os.environ, "DATABASE_URL": db_url},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    return Run(proc.returncode or 0, out.decode(), err.decode())


async def counts(pool: asyncpg.Pool) -> tuple[int, int, int]:
    row = await pool.fetchrow("""SELECT (SELECT count(*) FROM organizations) AS o, (SELECT count(*) FROM users) AS u,
                                        (SELECT count(*) FROM memberships) AS m""")
    return row["o"], row["u"], row["m"]


async def test_create_makes_the_studio_its_owner_and_prints_the_id(db_url: str, pool: asyncpg.Pool) -> None:
    name, email = f"Harbor Strength {uuid.uuid4().hex[:6]}", f"owner-{uuid.uuid4().hex[:6]}@harbor.gym"
    run = await spotter(db_url, "org", "create", name, "--tier", "elite", "--owner", email,
                        "--owner-name", "Noa Harbor", "--timezone", "Asia/Jerusalem", "--locale", "he")
    assert run.code == 0, run.err
    org_id = run.out.strip()
    org = await pool.fetchrow("SELECT name, slug, tier::text AS tier, timezone, locale FROM organizations WHERE id = $1", uuid.UUID(org_id))
    assert dict(org) == {"name": name, "slug": slug_of(name), "tier": "elite", "timezone": "Asia/Jerusalem", "locale": "he"}
    owner = await pool.fetchrow(
        """SELECT u.email, u.full_name, m.role::text AS role, m.status::text AS status FROM memberships m
             JOIN users u ON u.id = m.user_id WHERE m.organization_id = $1""", uuid.UUID(org_id))
    assert dict(owner) == {"email": email, "full_name": "Noa Harbor", "role": "owner", "status": "active"}

    listed = await spotter(db_url, "org", "list")
    line = next(line for line in listed.out.splitlines() if line.startswith(org_id))
    assert "elite" in line and slug_of(name) in line and line.split()[2] == "1"


async def test_an_existing_user_becomes_the_owner_unchanged(db_url: str, pool: asyncpg.Pool) -> None:
    email = f"coach-{uuid.uuid4().hex[:6]}@elsewhere.gym"
    user_id = await pool.fetchval("INSERT INTO users (email, full_name) VALUES ($1, 'Dana Existing') RETURNING id", email)
    run = await spotter(db_url, "org", "create", f"Second Home {uuid.uuid4().hex[:6]}", "--tier", "lite",
                        "--owner", email.upper(), "--owner-name", "Someone Else")
    assert run.code == 0, run.err
    assert await pool.fetchval("SELECT full_name FROM users WHERE id = $1", user_id) == "Dana Existing"
    assert await pool.fetchval("SELECT count(*) FROM users WHERE lower(email) = lower($1)", email) == 1
    assert await pool.fetchval("SELECT role::text FROM memberships WHERE user_id = $1 AND organization_id = $2",
                               user_id, uuid.UUID(run.out.strip())) == "owner"


async def test_set_tier_by_id_or_slug(db_url: str, pool: asyncpg.Pool) -> None:
    name = f"Tier Box {uuid.uuid4().hex[:6]}"
    created = await spotter(db_url, "org", "create", name, "--tier", "lite", "--owner", f"t-{uuid.uuid4().hex[:6]}@tier.gym")
    org_id = created.out.strip()
    assert (await spotter(db_url, "org", "set-tier", org_id, "pro")).code == 0
    assert await pool.fetchval("SELECT tier::text FROM organizations WHERE id = $1", uuid.UUID(org_id)) == "pro"
    run = await spotter(db_url, "org", "set-tier", slug_of(name), "unmetered")
    assert run.code == 0 and "pro → unmetered" in run.err
    assert await pool.fetchval("SELECT tier::text FROM organizations WHERE id = $1", uuid.UUID(org_id)) == "unmetered"


async def test_bad_input_is_refused_and_changes_nothing(db_url: str, pool: asyncpg.Pool) -> None:
    taken = f"Taken Gym {uuid.uuid4().hex[:6]}"
    assert (await spotter(db_url, "org", "create", taken, "--tier", "pro", "--owner", f"a-{uuid.uuid4().hex[:6]}@t.gym")).code == 0
    before = await counts(pool)
    refused = {
        "unknown tier": (["org", "create", "New Gym x1", "--tier", "platinum", "--owner", "x@y.gym"], "unknown tier 'platinum'"),
        "bad email": (["org", "create", "New Gym x2", "--tier", "pro", "--owner", "not-an-email"], "is not an email address"),
        "bad zone": (["org", "create", "New Gym x3", "--tier", "pro", "--owner", "x@y.gym", "--timezone", "Mars/Olympus"], "IANA time zone"),
        "bad locale": (["org", "create", "New Gym x4", "--tier", "pro", "--owner", "x@y.gym", "--locale", "fr"], "--locale must be one of"),
        "duplicate": (["org", "create", taken.upper(), "--tier", "pro", "--owner", "x@y.gym"], "already exists"),
        "blank name": (["org", "create", "   ", "--tier", "pro", "--owner", "x@y.gym"], "NAME must be"),
        "unknown org": (["org", "set-tier", "no-such-studio", "pro"], "no organization with id or slug"),
        "tier of set-tier": (["org", "set-tier", slug_of(taken), "gold"], "unknown tier 'gold'"),
    }
    for case, (args, message) in refused.items():
        run = await spotter(db_url, *args)
        assert run.code == 2 and message in run.err and run.out == "", (case, run)
    assert (await spotter(db_url, "org", "create", "Missing Owner", "--tier", "pro")).code == 2  # argparse: --owner required
    assert await counts(pool) == before
    assert await pool.fetchval("SELECT tier::text FROM organizations WHERE slug = $1", slug_of(taken)) == "pro"


def test_slugs() -> None:
    assert slug_of("Demo Gym") == "demo-gym"
    assert slug_of("  CrossFit   Jaffa!! ") == "crossfit-jaffa"
    assert slug_of("Café Fitness") == "cafe-fitness"
    assert slug_of("סטודיו") == "סטודיו"
