"""Read side of conversations: lists and reconstructed detail, straight from Postgres."""

from __future__ import annotations

import re
import uuid
from typing import Any

import asyncpg

from spotter_shared.contracts.commands import Actor
from spotter_shared.contracts.tools import ToolName
from spotter_shared.errors import ErrorCode, SpotterError

# Lifetime usage is billing's table; a conversation billing has not charged yet has no row there.
_SUMMARY = """
SELECT c.id, c.title, c.pinned, c.archived_at, c.model, c.locale, c.last_message_at, c.created_at, c.last_event_seq,
       coalesce(u.total_input_tokens, 0) AS total_input_tokens,
       coalesce(u.total_output_tokens, 0) AS total_output_tokens,
       coalesce(u.total_cache_read_tokens, 0) AS total_cache_read_tokens,
       coalesce(u.total_cache_creation_tokens, 0) AS total_cache_creation_tokens,
       coalesce(u.cost_usd_micros, 0) AS cost_usd_micros
  FROM ai_conversations c LEFT JOIN ai_conversation_usage u ON u.conversation_id = c.id
"""


_LOGGED_CALLS = """
SELECT data->>'toolUseId' AS tool_use_id,
       bool_or(type = 'tool_completed' AND (data->>'inverseAvailable')::boolean) AS inverse_available,
       max(data->>'confirm') FILTER (WHERE type = 'confirmation_pending') AS confirm,
       max(data->>'reason') FILTER (WHERE type = 'confirmation_pending') AS reason
  FROM ai_conversation_events
 WHERE conversation_id = $1 AND type IN ('tool_completed', 'confirmation_pending')
 GROUP BY 1
"""

# An undo leaves an app-event note in the history naming the call it undid (the orchestrator's).
_UNDONE_CALLS = """
SELECT page_context->>'toolUseId' AS tool_use_id FROM ai_messages
 WHERE conversation_id = $1 AND page_context->>'appEvent' = 'undo'
"""


async def owned_conversation(db: asyncpg.Pool, actor: Actor, conversation_id: uuid.UUID) -> asyncpg.Record:
    """The caller's own conversation in this org, or not_found (never 403: no existence leaks)."""
    row = await db.fetchrow(
        _SUMMARY + "WHERE c.id = $1 AND c.organization_id = $2 AND c.user_id = $3",
        conversation_id, uuid.UUID(actor.organization_id), uuid.UUID(actor.user_id),
    )
    if row is None:
        raise SpotterError(ErrorCode.NOT_FOUND, "Conversation not found.")
    return row


def summary(row: asyncpg.Record) -> dict[str, Any]:
    return {
        "id": str(row["id"]),
        "title": row["title"],
        "pinned": row["pinned"],
        "archivedAt": iso(row["archived_at"]),
        "model": row["model"],
        "locale": row["locale"],
        "lastMessageAt": iso(row["last_message_at"]),
        "createdAt": iso(row["created_at"]),
        "lastEventSeq": row["last_event_seq"],
        "usage": {
            "inputTokens": row["total_input_tokens"],
            "outputTokens": row["total_output_tokens"],
            "cacheReadTokens": row["total_cache_read_tokens"],
            "cacheCreationTokens": row["total_cache_creation_tokens"],
            "costUsdMicros": row["cost_usd_micros"],
        },
    }


async def list_for(db: asyncpg.Pool, actor: Actor, limit: int, *, archived: bool = False) -> list[dict[str, Any]]:
    """The open (or the archived) conversations: pinned first, then newest."""
    rows = await db.fetch(
        _SUMMARY + """WHERE c.organization_id = $1 AND c.user_id = $2 AND (c.archived_at IS NOT NULL) = $4
                      ORDER BY c.pinned DESC, c.last_message_at DESC, c.id LIMIT $3""",
        uuid.UUID(actor.organization_id), uuid.UUID(actor.user_id), limit, archived,
    )
    return [summary(r) for r in rows]


async def summaries(db: asyncpg.Pool, actor: Actor, ids: list[uuid.UUID]) -> list[dict[str, Any]]:
    """The caller's conversations with these ids, in the order given."""
    rows = await db.fetch(
        _SUMMARY + "WHERE c.id = ANY($1::uuid[]) AND c.organization_id = $2 AND c.user_id = $3",
        ids, uuid.UUID(actor.organization_id), uuid.UUID(actor.user_id),
    )
    by_id = {r["id"]: r for r in rows}
    return [summary(by_id[i]) for i in ids if i in by_id]


async def detail(db: asyncpg.Pool, conversation: asyncpg.Record) -> dict[str, Any]:
    messages = await db.fetch(
        """SELECT id, role::text AS role, content, stop_reason, created_at, page_context,
                  input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, model
           FROM ai_messages WHERE conversation_id = $1 AND role <> 'system_note' ORDER BY position""",
        conversation["id"],
    )
    tools = await db.fetch(
        """SELECT tool_use_id, message_id, router, action, input, output, status::text AS status,
                  error_code, error_message, duration_ms, created_at
           FROM ai_tool_executions WHERE conversation_id = $1 ORDER BY created_at""",
        conversation["id"],
    )
    # What only the event log knows about a call: whether its undo was offered, and why it waited.
    logged = {r["tool_use_id"]: r for r in await db.fetch(_LOGGED_CALLS, conversation["id"])}
    undone = {r["tool_use_id"] for r in await db.fetch(_UNDONE_CALLS, conversation["id"])}
    calls: dict[str, dict[str, Any]] = {
        r["tool_use_id"]: {
            "toolUseId": r["tool_use_id"], "router": r["router"], "action": r["action"], "input": r["input"],
            "status": r["status"], "output": r["output"],
            "error": {"code": r["error_code"], "message": r["error_message"]} if r["error_code"] else None,
            "durationMs": r["duration_ms"],
            "inverseAvailable": r["tool_use_id"] not in undone and r["tool_use_id"] in logged
                                and bool(logged[r["tool_use_id"]]["inverse_available"]),
            "undone": r["tool_use_id"] in undone,
            "confirm": logged[r["tool_use_id"]]["confirm"] if r["tool_use_id"] in logged else None,
            "reason": logged[r["tool_use_id"]]["reason"] if r["tool_use_id"] in logged else None,
        }
        for r in tools
    }
    out = []
    for m in messages:
        content = own_words(m["content"]) if m["role"] == "user" else m["content"]
        item: dict[str, Any] = {
            "id": str(m["id"]), "role": m["role"], "createdAt": iso(m["created_at"]), "content": content,
            "text": "".join(b.get("text", "") for b in content if b.get("type") == "text"),
        }
        if m["role"] == "assistant":
            item["stopReason"] = m["stop_reason"]
            item["model"] = m["model"]
            item["usage"] = {
                "inputTokens": m["input_tokens"], "outputTokens": m["output_tokens"],
                "cacheReadTokens": m["cache_read_tokens"], "cacheCreationTokens": m["cache_creation_tokens"],
            }
            item["toolCalls"] = [
                calls.get(b["id"], {"toolUseId": b["id"], "router": ToolName.parse(b["name"]).router,
                                    "action": ToolName.parse(b["name"]).action, "input": b.get("input"), "status": "pending"})
                for b in m["content"] if b.get("type") == "tool_use"
            ]
        if page := client_page_context(m["page_context"]):
            item["pageContext"] = page
        out.append(item)
    return {**summary(conversation), "messages": out}


# The orchestrator puts a turn's context (time, page, ambient hits) into that turn's user message,
# as a text block ahead of the user's words, so that replaying the history reproduces each earlier
# prompt exactly (and the cache keeps it). Those blocks open with a tag; a message the user typed is
# one text block and is never cut.
_CONTEXT_BLOCK = re.compile(r"\s*<[A-Za-z_][\w-]*[\s/>]")

# What a message's page context shows: the page the client reported, an app event's marker, and a
# compaction anchor. Anything else stored there (per-turn context) is the prompt's, not the user's.
_PAGE_CONTEXT_KEYS = ("pathname", "selection", "appEvent", "toolUseId", "summarizedThroughMessageId")


def own_words(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A user message without the context blocks the orchestrator added ahead of the user's words."""
    texts = [i for i, block in enumerate(content) if block.get("type") == "text"]
    added = {i for i in texts[:-1] if _CONTEXT_BLOCK.match(content[i].get("text", ""))}
    return [block for i, block in enumerate(content) if i not in added]


def client_page_context(stored: Any) -> dict[str, Any] | None:
    if not isinstance(stored, dict):
        return None
    shown = {key: stored[key] for key in _PAGE_CONTEXT_KEYS if stored.get(key) is not None}
    return shown or None


def iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None
