"""Migration 0004 moves a conversation's lifetime usage from ai_conversations (the orchestrator's)
to ai_conversation_usage (billing's) without losing what was already counted."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from spotter_cli.devstack import StackUrls, create_database, drop_database
from spotter_shared import db

VERSION = "0004_conversation_usage"
MOVED = ["total_input_tokens", "total_output_tokens", "total_cache_read_tokens", "total_cache_creation_tokens", "cost_usd_micros"]


@pytest.fixture
async def before_0004(stack: StackUrls, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    """A fresh database migrated up to, not including, 0004."""
    name = f"spotter_test_{uuid.uuid4().hex[:10]}"
    url = await create_database(stack.database_url, name)
    every = db._migrations()
    assert VERSION in [version for version, _ in every]
    monkeypatch.setattr(db, "_migrations", lambda: [m for m in every if m[0] < VERSION])
    await db.migrate(url)
    monkeypatch.undo()
    yield url
    await drop_database(stack.database_url, name)


async def test_existing_totals_move_to_billings_table(before_0004: str, monkeypatch: pytest.MonkeyPatch) -> None:
    every = db._migrations()
    monkeypatch.setattr(db, "_migrations", lambda: [m for m in every if m[0] <= VERSION])  # later ones are not this test's
    conn = await asyncpg.connect(before_0004)
    try:
        org = await conn.fetchval("INSERT INTO organizations (name, slug) VALUES ('Gym', 'gym') RETURNING id")
        user = await conn.fetchval("INSERT INTO users (email, full_name) VALUES ('a@gym.test', 'A') RETURNING id")
        used, unused = uuid.uuid4(), uuid.uuid4()
        await conn.execute(
            """INSERT INTO ai_conversations (id, organization_id, user_id, model, total_input_tokens, total_output_tokens,
                                             total_cache_read_tokens, total_cache_creation_tokens, cost_usd_micros)
               VALUES ($1, $3, $4, 'm', 10, 20, 30, 40, 50), ($2, $3, $4, 'm', 0, 0, 0, 0, 0)""",
            used, unused, org, user,
        )

        assert await db.migrate(before_0004) == [VERSION]

        rows = await conn.fetch(f"SELECT conversation_id, organization_id, {', '.join(MOVED)} FROM ai_conversation_usage")
        assert [dict(r) for r in rows] == [{
            "conversation_id": used, "organization_id": org, "total_input_tokens": 10, "total_output_tokens": 20,
            "total_cache_read_tokens": 30, "total_cache_creation_tokens": 40, "cost_usd_micros": 50,
        }]  # a conversation that used nothing needs no row: readers count a missing one as 0
        left = await conn.fetch(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'ai_conversations' AND column_name = ANY($1)", MOVED,
        )
        assert left == []
        # The usage row goes with its conversation.
        await conn.execute("DELETE FROM ai_conversations WHERE id = $1", used)
        assert await conn.fetchval("SELECT count(*) FROM ai_conversation_usage") == 0
    finally:
        await conn.close()
