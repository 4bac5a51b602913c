"""The conversation detail shows what the user and the assistant said — not the per-turn context
the orchestrator stores with each user message for the prompt (a leading tagged text block, or
extra keys in page_context), and not compaction's system_note anchors. Rows are written as the
orchestrator writes them; the gateway is read over HTTP."""

from __future__ import annotations

import json
import uuid
from typing import Any

import asyncpg
import httpx
import pytest

from spotter_gateway.conversations import client_page_context, own_words
from tests.e2e.client import auth
from tests.factories import Studio, make_studio

CONTEXT = ('<turn_context>\n<now>2026-11-20T09:00 (Friday)</now>\n<page_context trust="untrusted">pathname: /members'
           '</page_context>\n<ambient_context untrusted="true">- member Saar Cohen (id 1)</ambient_context>\n</turn_context>')


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


@pytest.fixture
async def studio(pool: asyncpg.Pool) -> Studio:
    return await make_studio(pool)


async def write(pool: asyncpg.Pool, studio: Studio, messages: list[tuple[str, list[dict[str, Any]], dict | None]]) -> str:
    conversation_id = uuid.uuid4()
    await pool.execute(
        """INSERT INTO ai_conversations (id, organization_id, user_id, membership_id, model, title)
           VALUES ($1, $2, $3, $4, 'claude-sonnet-5-5', 'find Saar')""",
        conversation_id, uuid.UUID(studio.org.id), uuid.UUID(studio.owner.user_id), uuid.UUID(studio.owner.membership_id),
    )
    for position, (role, content, page) in enumerate(messages, start=1):
        await pool.execute(
            """INSERT INTO ai_messages (id, conversation_id, role, content, page_context, position)
               VALUES ($1, $2, $3, $4, $5, $6)""",
            uuid.uuid4(), conversation_id, role, content, page, position,
        )
    return str(conversation_id)


async def detail(http: httpx.AsyncClient, studio: Studio, conversation_id: str) -> dict[str, Any]:
    response = await http.get(f"/organizations/{studio.org.id}/agent/conversations/{conversation_id}",
                              headers=auth(studio.owner.user_id))
    assert response.status_code == 200, response.text
    return response.json()


async def test_user_messages_show_only_the_users_words(http: httpx.AsyncClient, pool: asyncpg.Pool, studio: Studio) -> None:
    page = {"pathname": "/members", "selection": None, "turnContext": CONTEXT, "ambient": [{"id": "1"}]}
    conversation_id = await write(pool, studio, [
        ("user", [text(CONTEXT), text("find Saar Cohen")], page),
        ("assistant", [text("Saar Cohen is an active member.")], None),
        ("user", [text("<b>bold</b> is what I typed")], {"pathname": "/", "selection": {"ids": ["1"]}}),
        ("assistant", [text("Noted.")], None),
    ])
    body = await detail(http, studio, conversation_id)
    first, _, typed, _ = body["messages"]
    assert first["content"] == [text("find Saar Cohen")]
    assert first["text"] == "find Saar Cohen"
    assert first["pageContext"] == {"pathname": "/members"}
    # A message the user typed is one text block, kept whole even when it opens with a tag.
    assert typed["text"] == "<b>bold</b> is what I typed"
    assert typed["pageContext"] == {"pathname": "/", "selection": {"ids": ["1"]}}
    assert body["locale"] == "en"


async def test_compaction_anchors_are_not_messages(http: httpx.AsyncClient, pool: asyncpg.Pool, studio: Studio) -> None:
    conversation_id = await write(pool, studio, [
        ("user", [text("first question")], None),
        ("assistant", [text("first answer")], None),
        ("system_note", [text("Summary: the user asked a first question.")], {"summarizedThroughMessageId": str(uuid.uuid4())}),
        ("user", [text("second question")], None),
        ("assistant", [text("second answer")], None),
    ])
    body = await detail(http, studio, conversation_id)
    assert [(m["role"], m["text"]) for m in body["messages"]] == [
        ("user", "first question"), ("assistant", "first answer"), ("user", "second question"), ("assistant", "second answer"),
    ]


async def test_an_app_event_keeps_its_marker(http: httpx.AsyncClient, pool: asyncpg.Pool, studio: Studio) -> None:
    note = '<app_event kind="undo">The user pressed Undo on toolu_1.</app_event>'
    conversation_id = await write(pool, studio, [("user", [text(note)], {"appEvent": "undo", "toolUseId": "toolu_1"})])
    (message,) = (await detail(http, studio, conversation_id))["messages"]
    assert message["text"] == note
    assert message["pageContext"] == {"appEvent": "undo", "toolUseId": "toolu_1"}


def test_own_words_cuts_only_added_tagged_blocks() -> None:
    words = text("what about <now>?")
    assert own_words([text(CONTEXT), words]) == [words]
    assert own_words([text("  <context>x</context>"), text("<page_context/>"), words]) == [words]
    # Untagged text ahead of the last block is not the orchestrator's: kept.
    assert own_words([text("plain"), words]) == [text("plain"), words]
    assert own_words([words]) == [words]
    assert own_words([text(CONTEXT)]) == [text(CONTEXT)]
    image = {"type": "image", "source": {"type": "url", "url": "https://example.test/a.png"}}
    assert own_words([text(CONTEXT), image, words]) == [image, words]


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        (None, None),
        ("a string", None),
        ({"pathname": None, "selection": None}, None),
        ({"pathname": "/p", "selection": 0, "now": "x", "ambient": []}, {"pathname": "/p", "selection": 0}),
        ({"summarizedThroughMessageId": "m"}, {"summarizedThroughMessageId": "m"}),
    ],
)
def test_client_page_context(stored: Any, shown: dict | None) -> None:
    assert client_page_context(json.loads(json.dumps(stored))) == shown
