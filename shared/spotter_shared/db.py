"""asyncpg pool with jsonb codecs, and versioned SQL migrations applied under an advisory lock."""

from __future__ import annotations

import hashlib
import json
import logging
from importlib import resources
from typing import Any

import asyncpg

log = logging.getLogger(__name__)

_MIGRATION_LOCK = 0x5B077E5  # any constant; serialises concurrent `spotter migrate` runs


def decoded(value: Any) -> Any:
    """A json/jsonb value as Python: pools from create_pool decode it already; a connection without
    the codecs hands back text."""
    return json.loads(value) if isinstance(value, str) else value


async def _init_connection(conn: asyncpg.Connection) -> None:
    for typ in ("json", "jsonb"):
        await conn.set_type_codec(typ, encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Released connections skip asyncpg's default reset round trip (UNLISTEN/RESET ALL/…):
    no Spotter code keeps session state — locks are transaction-scoped, settings SET LOCAL."""


async def create_pool(dsn: str, *, max_size: int = 10, server_settings: dict[str, str] | None = None) -> asyncpg.Pool:
    """`server_settings`: settings every connection of the pool starts with (a pool for one kind of work)."""
    return await asyncpg.create_pool(dsn, min_size=1, max_size=max_size, init=_init_connection, reset=_keep_session,
                                     server_settings=server_settings)


def _migrations() -> list[tuple[str, str]]:
    files = resources.files("spotter_shared.migrations")
    found = sorted(f.name for f in files.iterdir() if f.name.endswith(".sql"))
    return [(name.removesuffix(".sql"), files.joinpath(name).read_text()) for name in found]


async def migrate(dsn: str) -> list[str]:
    """Apply pending migrations in order, each in its own transaction. Returns the applied versions."""
    conn = await asyncpg.connect(dsn)
    applied: list[str] = []
    try:
        await conn.execute("SELECT pg_advisory_lock($1)", _MIGRATION_LOCK)
        await conn.execute(
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                   version varchar(255) PRIMARY KEY,
                   checksum varchar(64) NOT NULL,
                   applied_at timestamptz NOT NULL DEFAULT now())"""
        )
        done = {r["version"]: r["checksum"] for r in await conn.fetch("SELECT version, checksum FROM schema_migrations")}
        for version, sql in _migrations():
            checksum = hashlib.sha256(sql.encode()).hexdigest()
            if version in done:
                if done[version] != checksum:
                    raise RuntimeError(f"migration {version} changed after it was applied")
                continue
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute("INSERT INTO schema_migrations (version, checksum) VALUES ($1, $2)", version, checksum)
            log.info("applied migration %s", version)
            applied.append(version)
        ctype = await conn.fetchval("SELECT datctype FROM pg_database WHERE datname = current_database()")
        if ctype in ("C", "POSIX"):
            # pg_trgm classifies letters by LC_CTYPE: under C it sees no trigrams in Hebrew or
            # Russian, and the lexical half of the hybrid search goes blind in those languages.
            log.warning("database LC_CTYPE is %s: create it with LC_CTYPE 'C.UTF-8' (TEMPLATE template0) "
                        "or Hebrew and Russian lexical search finds nothing", ctype)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _MIGRATION_LOCK)
        await conn.close()
    return applied
