"""The watchdog's look at many logs at once (`EventFeed.behind`, `SessionFeed.behind`) against real
Postgres: which followed logs have events past their stream's cursor, in one query."""

from __future__ import annotations

import json
import uuid

import asyncpg

from spotter_gateway.streams import EventFeed, LiveEvents, SessionFeed
from tests.factories import make_studio


async def test_behind_finds_the_conversations_whose_log_is_past_the_cursor(pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool)
    owner, live = studio.owner, LiveEvents()
    ids = [uuid.uuid4() for _ in range(4)]
    await pool.executemany(
        "INSERT INTO ai_conversations (id, organization_id, user_id, membership_id, model) VALUES ($1, $2, $3, $4, 'claude-sonnet-5-5')",
        [(cid, uuid.UUID(studio.org.id), uuid.UUID(owner.user_id), uuid.UUID(owner.membership_id)) for cid in ids])
    turn = uuid.uuid4()
    # Logs of 3, 3 and 1 events; the fourth conversation has none.
    await pool.executemany(
        "INSERT INTO ai_conversation_events (conversation_id, seq, turn_id, type, data) VALUES ($1, $2, $3, 'text_delta', $4)",
        [(cid, seq, turn, json.dumps({"type": "text_delta", "delta": "x"})) for cid, last in zip(ids, (3, 3, 1)) for seq in range(1, last + 1)])
    feeds = [EventFeed(pool, live, str(cid)) for cid in ids]
    for feed, cursor in zip(feeds, (3, 2, 0, 0)):
        feed.cursor = cursor
    twin = EventFeed(pool, live, str(ids[1]))  # a second stream of one conversation, up to date
    twin.cursor = 3
    assert await EventFeed.behind(pool, [*feeds, twin]) == [feeds[1], feeds[2]]


async def test_behind_finds_the_sessions_whose_log_is_past_the_cursor(pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool)
    live = LiveEvents()
    ids = [uuid.uuid4() for _ in range(3)]
    await pool.executemany(
        "INSERT INTO sessions (id, organization_id, user_id, session_type, source) VALUES ($1, $2, $3, 'agent', 'coach')",
        [(sid, uuid.UUID(studio.org.id), uuid.UUID(studio.member.user_id)) for sid in ids])
    await pool.executemany(
        "INSERT INTO session_events (session_id, sequence, event_type, role) VALUES ($1, $2, 'agent.message', 'agent')",
        [(sid, seq, ) for sid, last in zip(ids, (2, 2)) for seq in range(1, last + 1)])
    feeds = [SessionFeed(pool, live, str(sid)) for sid in ids]
    for feed, cursor in zip(feeds, (2, 1, 0)):
        feed.cursor = cursor
    assert await SessionFeed.behind(pool, feeds) == [feeds[1]]
