"""`spotter packs …`: connect a studio's other systems (seed 002) from their OpenAPI documents.

    spotter packs add NAME --spec FILE_OR_URL --base-url URL [--org ORG]... [--header "Name: value"]...
                           [--rules FILE] [--org-rules FILE]
    spotter packs list
    spotter packs remove NAME

`add` validates the document (openapi-spec-validator), builds its tools (at least one operation), checks
the rules (each condition must parse as CEL, refused with its line), stores the pack with its header
values encrypted, and enables it for each --org (ORG: id or slug); running tool-runners reload it at once
(a notification on the `spotter_packs` channel), without a restart. Adding a name that exists replaces
its document, base URL, headers and rules, and enables the new orgs as well. Header values are never
printed back. Bad input is refused with a message on stderr and exit code 2, and changes nothing."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import httpx

from spotter_shared.packs import CHANGED_CHANNEL
from spotter_shared.packs.openapi import PACK_NAME, InvalidSpec, load_spec, operations
from spotter_shared.packs.rules import RuleError, load_rules
from spotter_shared.secrets import SecretError, SecretSettings, cipher, seal

from .org import Refused, find_org, refusable

_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$")


def read_source(ref: str) -> str:
    """A file's text, or a URL's body (fetched now, by the person adding the pack)."""
    if urlsplit(ref).scheme in ("http", "https"):
        try:
            response = httpx.get(ref, timeout=20, follow_redirects=True)
            response.raise_for_status()
        except httpx.HTTPError as exc:
            raise Refused(f"--spec {ref}: {exc}") from None
        return response.text
    path = Path(ref)
    if not path.is_file():
        raise Refused(f"--spec {ref}: no such file")
    return path.read_text(encoding="utf-8")


def headers_of(values: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for raw in values:
        name, sep, value = raw.partition(":")
        name, value = name.strip(), value.strip()
        if not sep or not _HEADER_NAME.match(name) or not value:
            raise Refused('--header must be "Name: value"')
        out[name] = value
    return out


def checked_base_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise Refused(f"--base-url {value!r} is not an http(s) URL")
    return value.rstrip("/")


def checked_rules(path: str | None, flag: str) -> str | None:
    if path is None:
        return None
    file = Path(path)
    if not file.is_file():
        raise Refused(f"{flag} {path}: no such file")
    text = file.read_text(encoding="utf-8")
    try:
        load_rules(text, source=file.name)
    except RuleError as exc:
        raise Refused(str(exc)) from None
    return text


async def add(conn: asyncpg.Connection, args: argparse.Namespace) -> tuple[str, int]:
    if not PACK_NAME.match(args.name):
        raise Refused("NAME: lowercase letters, digits and single _, starting with a letter, at most 24 characters")
    from spotter_tool_runner.tools import REGISTRY  # noqa: PLC0415 — only `add` needs Spotter's own routers

    if args.name in {decl.router for decl in REGISTRY}:
        raise Refused(f"NAME: {args.name!r} is one of Spotter's own routers; its tools would be ambiguous")
    try:
        spec = load_spec(read_source(args.spec))
        count = len(operations(args.name, spec))
    except InvalidSpec as exc:
        raise Refused(f"--spec {args.spec}: {exc}") from None
    if count == 0:
        raise Refused(f"--spec {args.spec}: the document has no operations")
    base_url = checked_base_url(args.base_url)
    headers = headers_of(args.header or [])
    rules = checked_rules(args.rules, "--rules")
    org_rules = checked_rules(args.org_rules, "--org-rules")
    orgs = [await find_org(conn, ref) for ref in args.org or []]
    try:
        sealed = seal(headers, cipher(SecretSettings())) if headers else None
    except SecretError as exc:
        raise Refused(str(exc)) from None
    title = str(spec.get("info", {}).get("title") or args.name)
    async with conn.transaction():
        pack_id = await conn.fetchval(
            """INSERT INTO tool_packs (name, title, spec, spec_source, base_url, header_names, headers_encrypted,
                                       rules_yaml, operations)
               VALUES ($1, $2, $3::jsonb, $4, $5, $6, $7, $8, $9)
               ON CONFLICT (name) DO UPDATE SET title = excluded.title, spec = excluded.spec,
                   spec_source = excluded.spec_source, base_url = excluded.base_url, header_names = excluded.header_names,
                   headers_encrypted = excluded.headers_encrypted, rules_yaml = excluded.rules_yaml,
                   operations = excluded.operations
               RETURNING id""",
            args.name, title, spec, args.spec, base_url, sorted(headers), sealed, rules, count,
        )
        for org in orgs:
            await conn.execute(
                """INSERT INTO tool_pack_organizations (pack_id, organization_id, rules_yaml) VALUES ($1, $2, $3)
                   ON CONFLICT (pack_id, organization_id) DO UPDATE SET rules_yaml = excluded.rules_yaml""",
                pack_id, org["id"], org_rules,
            )
        await notify(conn, args.name)
    return str(pack_id), count


async def listing(conn: asyncpg.Connection) -> list[asyncpg.Record]:
    return await conn.fetch(
        """SELECT p.name, p.title, p.operations, p.base_url, p.header_names, p.rules_yaml IS NOT NULL AS has_rules,
                  coalesce(array_agg(o.slug ORDER BY o.slug) FILTER (WHERE o.slug IS NOT NULL), '{}') AS orgs
             FROM tool_packs p LEFT JOIN tool_pack_organizations po ON po.pack_id = p.id
             LEFT JOIN organizations o ON o.id = po.organization_id
            GROUP BY p.id ORDER BY p.name""")


async def remove(conn: asyncpg.Connection, name: str) -> None:
    async with conn.transaction():
        if await conn.execute("DELETE FROM tool_packs WHERE name = $1", name) == "DELETE 0":
            raise Refused(f"no pack named {name!r}")
        await notify(conn, name)


async def notify(conn: asyncpg.Connection, name: str) -> None:
    """Tell the running tool-runners (they listen on this channel) to reload: delivered at commit, so a
    change that rolls back is never announced. This is how a pack is reloaded without a restart."""
    await conn.execute("SELECT pg_notify($1, $2)", CHANGED_CHANNEL, name)


async def _run(args: argparse.Namespace) -> int:
    conn = await asyncpg.connect(SecretSettings().database_url)
    await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
    try:
        if args.packs_command == "add":
            pack_id, count = await add(conn, args)
            print(pack_id)
            print(f"{args.name}: {count} tools, enabled for {len(args.org or [])} organization(s)", file=sys.stderr)
        elif args.packs_command == "remove":
            await remove(conn, args.name)
        else:
            print(f"{'name':24}  {'tools':>5}  {'headers':20}  {'rules':5}  {'organizations':30}  base URL")
            for r in await listing(conn):
                print(f"{r['name']:24}  {r['operations']:>5}  {','.join(r['header_names']) or '-':20}  "
                      f"{'yes' if r['has_rules'] else 'no':5}  {','.join(r['orgs']) or '-':30}  {r['base_url']}")
    finally:
        await conn.close()
    return 0


def command(args: argparse.Namespace) -> int:
    return refusable(f"packs {args.packs_command}", _run(args))


def register(sub: argparse._SubParsersAction) -> None:
    packs = sub.add_parser("packs", help="tool packs from OpenAPI documents: add, list, remove")
    cmds = packs.add_subparsers(dest="packs_command", required=True)
    add_p = cmds.add_parser("add", help="register (or replace) a pack and enable it for organizations; prints its id")
    add_p.add_argument("name", metavar="NAME", help="the pack's name: its tools are NAME__operationId")
    add_p.add_argument("--spec", required=True, metavar="FILE_OR_URL", help="the OpenAPI 3 document (YAML or JSON)")
    add_p.add_argument("--base-url", required=True, metavar="URL", help="where the API is served")
    add_p.add_argument("--org", action="append", metavar="ORG", help="enable it for this organization (id or slug); repeatable")
    add_p.add_argument("--header", action="append", metavar='"Name: value"', help="sent with every call, stored encrypted; repeatable")
    add_p.add_argument("--rules", metavar="FILE", help="the pack's constraint rules (YAML, CEL conditions)")
    add_p.add_argument("--org-rules", metavar="FILE", help="rules of the --org organizations only")
    remove_p = cmds.add_parser("remove", help="remove a pack (and its tools) everywhere")
    remove_p.add_argument("name", metavar="NAME")
    cmds.add_parser("list", help="every pack with its tools, header names (never values), rules and organizations")
    packs.set_defaults(func=command)
