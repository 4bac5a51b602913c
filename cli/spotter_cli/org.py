"""`spotter org …`: onboard a studio without SQL.

    spotter org create NAME --tier TIER --owner EMAIL [--owner-name NAME] [--timezone TZ] [--locale L]
    spotter org set-tier ORG TIER          (ORG: the organization's id or slug)
    spotter org list

`create` makes the organization (its slug from the name), its owner user (or takes the existing
user with that email, unchanged) and an owner membership in one transaction, and prints the
organization's id on stdout. Bad input is refused with a message on stderr and exit code 2, and
changes nothing. The tier is read by billing on every check, so a new tier counts at once."""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import unicodedata
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import asyncpg

from spotter_shared.settings import CommonSettings

LOCALES = ("en", "he", "ru")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


class Refused(Exception):
    """Input the command will not act on; the message is for the person who typed it."""


@dataclass(frozen=True)
class NewOrg:
    name: str
    tier: str
    owner_email: str
    owner_name: str
    timezone: str
    locale: str

    @classmethod
    def checked(cls, args: argparse.Namespace) -> NewOrg:
        name = " ".join(args.name.split())
        if not name or len(name) > 255:
            raise Refused("NAME must be 1 to 255 characters")
        email = args.owner.strip()
        if not _EMAIL.match(email) or len(email) > 320:
            raise Refused(f"--owner {args.owner!r} is not an email address")
        try:
            ZoneInfo(args.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise Refused(f"--timezone {args.timezone!r} is not an IANA time zone (e.g. Asia/Jerusalem)") from None
        if args.locale not in LOCALES:
            raise Refused(f"--locale must be one of {', '.join(LOCALES)}")
        owner_name = " ".join((args.owner_name or email.split("@")[0]).split())
        return cls(name=name, tier=args.tier, owner_email=email, owner_name=owner_name, timezone=args.timezone, locale=args.locale)


async def checked_tier(conn: asyncpg.Connection, value: str) -> str:
    # The tiers are the database's enum (migration 0001); billing maps each to its daily cap.
    tiers = await conn.fetchval("SELECT enum_range(NULL::org_tier)::text[]")
    if value not in tiers:
        raise Refused(f"unknown tier {value!r}: one of {', '.join(tiers)}")
    return value


def slug_of(name: str) -> str:
    """"Demo Gym" → "demo-gym"; letters outside ASCII (Hebrew, Cyrillic) are kept as they are."""
    ascii_folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode() or name
    slug = re.sub(r"[^\w]+", "-", ascii_folded.lower()).strip("-")
    return slug[:80] or "studio"


async def create(conn: asyncpg.Connection, new: NewOrg) -> str:
    slug = slug_of(new.name)
    await checked_tier(conn, new.tier)
    async with conn.transaction():
        if await conn.fetchval("SELECT 1 FROM organizations WHERE slug = $1 OR lower(name) = lower($2)", slug, new.name):
            raise Refused(f"an organization named {new.name!r} (slug {slug!r}) already exists")
        org_id = await conn.fetchval(
            "INSERT INTO organizations (name, slug, tier, timezone, locale) VALUES ($1, $2, $3, $4, $5) RETURNING id",
            new.name, slug, new.tier, new.timezone, new.locale,
        )
        user_id = await conn.fetchval("SELECT id FROM users WHERE lower(email) = lower($1)", new.owner_email)
        if user_id is None:
            user_id = await conn.fetchval(
                "INSERT INTO users (email, full_name) VALUES ($1, $2) RETURNING id", new.owner_email, new.owner_name)
        await conn.execute(
            "INSERT INTO memberships (organization_id, user_id, role, status) VALUES ($1, $2, 'owner', 'active')",
            org_id, user_id,
        )
    return str(org_id)


async def find_org(conn: asyncpg.Connection, ref: str) -> asyncpg.Record:
    try:
        by_id = uuid.UUID(ref)
    except ValueError:
        by_id = None
    row = await conn.fetchrow(
        "SELECT id, slug, name, tier::text AS tier FROM organizations WHERE id = $1 OR slug = $2", by_id, ref)
    if row is None:
        raise Refused(f"no organization with id or slug {ref!r}")
    return row


async def set_tier(conn: asyncpg.Connection, ref: str, tier: str) -> tuple[str, str]:
    tier = await checked_tier(conn, tier)
    org = await find_org(conn, ref)
    await conn.execute("UPDATE organizations SET tier = $2 WHERE id = $1", org["id"], tier)
    return org["tier"], tier


async def listing(conn: asyncpg.Connection) -> list[asyncpg.Record]:
    return await conn.fetch(
        """SELECT o.id, o.slug, o.name, o.tier::text AS tier,
                  count(m.id) FILTER (WHERE m.status = 'active') AS people
             FROM organizations o LEFT JOIN memberships m ON m.organization_id = o.id
            GROUP BY o.id ORDER BY o.created_at, o.slug""")


async def _run(args: argparse.Namespace) -> int:
    conn = await asyncpg.connect(CommonSettings().database_url)
    try:
        if args.org_command == "create":
            print(await create(conn, NewOrg.checked(args)))
        elif args.org_command == "set-tier":
            before, after = await set_tier(conn, args.org, args.tier)
            print(f"{args.org}: {before} → {after}", file=sys.stderr)
        else:
            rows = await listing(conn)
            print(f"{'id':36}  {'tier':9}  {'people':>6}  {'slug':24}  name")
            for r in rows:
                print(f"{r['id']!s:36}  {r['tier']:9}  {r['people']:>6}  {r['slug']:24}  {r['name']}")
    finally:
        await conn.close()
    return 0


def refusable(label: str, main: Coroutine[Any, Any, int]) -> int:
    """Run a command; a refusal is its message on stderr and exit code 2 (nothing was changed)."""
    try:
        return asyncio.run(main)
    except Refused as exc:
        print(f"spotter {label}: {exc}", file=sys.stderr)
        return 2


def command(args: argparse.Namespace) -> int:
    return refusable(f"org {args.org_command}", _run(args))


def register(sub: argparse._SubParsersAction) -> None:
    org = sub.add_parser("org", help="onboard studios: create, set-tier, list")
    cmds = org.add_subparsers(dest="org_command", required=True)
    create_p = cmds.add_parser("create", help="a new organization with its owner; prints its id")
    create_p.add_argument("name")
    create_p.add_argument("--tier", required=True, help="lite, pro, elite or unmetered")
    create_p.add_argument("--owner", required=True, metavar="EMAIL", help="the owner's email (an existing user is reused)")
    create_p.add_argument("--owner-name", help="the owner's full name for a new user (default: the email's local part)")
    create_p.add_argument("--timezone", default="UTC", help="IANA time zone (default UTC)")
    create_p.add_argument("--locale", default="en", help=f"one of {', '.join(LOCALES)} (default en)")
    tier_p = cmds.add_parser("set-tier", help="change an organization's tier (its daily AI budget)")
    tier_p.add_argument("org", metavar="ORG", help="organization id or slug")
    tier_p.add_argument("tier", help="lite, pro, elite or unmetered")
    cmds.add_parser("list", help="every organization with its tier and active people")
    org.set_defaults(func=command)

