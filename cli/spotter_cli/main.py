"""`spotter`: migrate, seed-demo, org, packs, reindex, token, subjects, docs, asyncapi, chat, coach and up."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import asyncpg

from spotter_shared.auth import issue_dev_token
from spotter_shared.contracts import CATALOG
from spotter_shared.db import migrate
from spotter_shared.settings import AuthSettings, CommonSettings

from . import org, packs, reindex


def _migrate(_: argparse.Namespace) -> int:
    # CommonSettings, not AuthSettings: a migration job needs the database, not the JWT set-up.
    applied = asyncio.run(migrate(CommonSettings().database_url))
    print(f"applied {len(applied)} migration(s): {', '.join(applied) or 'none pending'}", file=sys.stderr)
    return 0


def _seed(_: argparse.Namespace) -> int:
    from .seed import seed_demo

    summary = asyncio.run(seed_demo(CommonSettings().database_url))
    print(f"seeded: {summary}", file=sys.stderr)
    return 0


async def _user_id(dsn: str, email: str) -> str | None:
    conn = await asyncpg.connect(dsn)
    try:
        value = await conn.fetchval("SELECT id FROM users WHERE lower(email) = lower($1)", email)
    finally:
        await conn.close()
    return str(value) if value else None


def _token(args: argparse.Namespace) -> int:
    settings = AuthSettings()
    user_id = asyncio.run(_user_id(settings.database_url, args.email))
    if user_id is None:
        print(f"no user with email {args.email} (run `spotter seed-demo`?)", file=sys.stderr)
        return 1
    print(issue_dev_token(settings, user_id))
    return 0


def _subjects(args: argparse.Namespace) -> int:
    if args.edges:
        from .docs import edges_markdown

        print(edges_markdown(), end="")
        return 0
    width = max(len(ep.subject) for ep in CATALOG)
    for ep in CATALOG:
        reply = f" -> {ep.reply.__name__}" if ep.reply else ""
        where = f" [stream {ep.stream}]" if ep.stream else (f" [queue {ep.queue}]" if ep.queue else "")
        print(f"{ep.subject:<{width}}  {ep.pattern:<7}  {ep.payload.__name__}{reply}{where}  {ep.description}")
    return 0


def _docs(args: argparse.Namespace) -> int:
    from .docs import README, render

    current = README.read_text()
    wanted = render(current)
    if args.check:
        if wanted != current:
            print(f"{README}'s generated tables are stale: run `spotter docs`", file=sys.stderr)
            return 1
        return 0
    README.write_text(wanted)
    print(f"wrote {README}")
    return 0


def _asyncapi(args: argparse.Namespace) -> int:
    from .asyncapi import DOC_PATH, render

    path = Path(args.path or DOC_PATH)
    doc = render()
    if args.check:
        if not path.exists() or path.read_text() != doc:
            print(f"{path} is stale: run `spotter asyncapi`", file=sys.stderr)
            return 1
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc)
    print(f"wrote {path}", file=sys.stderr)
    return 0


def _coach(args: argparse.Namespace) -> int:
    from .coach_chat import run_coach

    return run_coach(args.url, args.email, args.token, args.message)


def _chat(args: argparse.Namespace) -> int:
    from .chat import run_chat

    return run_chat(args.url, args.email, args.token, args.message)


def _up(args: argparse.Namespace) -> int:
    from .supervisor import up_command

    return up_command(args.rest)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="spotter", description="Spotter developer commands.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("migrate", help="apply database migrations").set_defaults(func=_migrate)
    sub.add_parser("seed-demo", help="create the demo studio (idempotent)").set_defaults(func=_seed)
    reindex.register(sub)
    org.register(sub)
    packs.register(sub)
    token = sub.add_parser("token", help="print a development JWT for a seeded user")
    token.add_argument("email")
    token.set_defaults(func=_token)
    subjects = sub.add_parser("subjects", help="print the NATS subject catalog")
    subjects.add_argument("--edges", action="store_true", help="who sends and who receives each subject (markdown)")
    subjects.set_defaults(func=_subjects)
    docs = sub.add_parser("docs", help="regenerate the README's owner and subject tables")
    docs.add_argument("--check", action="store_true", help="exit 1 when they are stale instead of writing")
    docs.set_defaults(func=_docs)
    api = sub.add_parser("asyncapi", help="write (or --check) the AsyncAPI document")
    api.add_argument("--check", action="store_true")
    api.add_argument("--path")
    api.set_defaults(func=_asyncapi)
    chat = sub.add_parser("chat", help="chat with the agent in the terminal")
    chat.add_argument("--url", default="http://127.0.0.1:8080")
    chat.add_argument("--email", default="owner@demo.gym")
    chat.add_argument("--token", default=None, help="bearer token (default: minted for --email)")
    chat.add_argument("-m", "--message", action="append", help="send this message and exit (repeatable)")
    chat.set_defaults(func=_chat)
    coach = sub.add_parser("coach", help="talk to the member coach in the terminal")
    coach.add_argument("--url", default="http://127.0.0.1:8080")
    coach.add_argument("--email", default="member@demo.gym")
    coach.add_argument("--token", default=None, help="bearer token (default: minted for --email)")
    coach.add_argument("-m", "--message", action="append", help="send this message and exit (repeatable)")
    coach.set_defaults(func=_coach)
    up = sub.add_parser("up", help="run the whole stack in the foreground")
    up.add_argument("rest", nargs=argparse.REMAINDER)
    up.set_defaults(func=_up)
    args = parser.parse_args(argv)
    sys.exit(args.func(args))
