"""Pin and archive over HTTP, through the gateway and the orchestrator (which owns the conversation
rows): the PATCH answers with the summary, the lists reflect it, and the row holds it."""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg
import httpx

from tests.factories import make_studio

from .client import auth, send


async def test_pin_archive_and_restore_round_trip(http: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool)
    owner = studio.owner
    older = await send(http, studio.org.id, owner.user_id, "hello, first chat")
    newer = await send(http, studio.org.id, owner.user_id, "hello, second chat")
    assert older.status == newer.status == 200
    base = f"/organizations/{studio.org.id}/agent/conversations"
    headers = auth(owner.user_id)

    async def listed(**params: str) -> list[str]:
        response = await http.get(base, params=params, headers=headers)
        assert response.status_code == 200
        return [c["id"] for c in response.json()["conversations"]]

    assert await listed() == [newer.conversation_id, older.conversation_id]

    pinned = await http.patch(f"{base}/{older.conversation_id}", json={"pinned": True}, headers=headers)
    assert pinned.status_code == 200
    summary = pinned.json()
    assert summary["id"] == older.conversation_id and summary["pinned"] is True and summary["archivedAt"] is None
    listed_items = (await http.get(base, headers=headers)).json()["conversations"]
    assert set(summary) == set(listed_items[0])  # the same shape as a list item
    assert await listed() == [older.conversation_id, newer.conversation_id]  # pinned first

    archived = (await http.patch(f"{base}/{newer.conversation_id}", json={"archived": True}, headers=headers)).json()
    assert archived["archivedAt"] is not None and archived["pinned"] is False
    assert await listed() == [older.conversation_id]
    assert await listed(archived="true") == [newer.conversation_id]
    row = await pool.fetchrow("SELECT pinned, archived_at FROM ai_conversations WHERE id = $1", uuid.UUID(newer.conversation_id))
    assert row["archived_at"] == datetime.fromisoformat(archived["archivedAt"])

    # Archiving again keeps the first date; restoring and unpinning in one request.
    again = (await http.patch(f"{base}/{newer.conversation_id}", json={"archived": True}, headers=headers)).json()
    assert again["archivedAt"] == archived["archivedAt"]
    restored = (await http.patch(f"{base}/{newer.conversation_id}", json={"archived": False, "pinned": True},
                                 headers=headers)).json()
    assert restored["archivedAt"] is None and restored["pinned"] is True
    unpinned = (await http.patch(f"{base}/{older.conversation_id}", json={"pinned": False}, headers=headers)).json()
    assert unpinned["pinned"] is False
    assert await listed() == [newer.conversation_id, older.conversation_id]
    assert await listed(archived="true") == []


async def test_pin_is_the_owners_only(http: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    studio, other = await make_studio(pool), await make_studio(pool)
    chat = await send(http, studio.org.id, studio.owner.user_id, "hello there")
    url = f"/organizations/{studio.org.id}/agent/conversations/{chat.conversation_id}"
    for user in (studio.admin, other.owner):
        response = await http.patch(url, json={"pinned": True}, headers=auth(user.user_id))
        assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert await pool.fetchval("SELECT pinned FROM ai_conversations WHERE id = $1", uuid.UUID(chat.conversation_id)) is False
