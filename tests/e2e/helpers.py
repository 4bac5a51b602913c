"""Database assertions shared by the end-to-end tests."""

from __future__ import annotations

import json
import uuid
from typing import Any

import asyncpg

from spotter_shared.contracts.billing import ModelUsage


async def rows(pool: asyncpg.Pool, sql: str, *args: Any) -> list[dict[str, Any]]:
    return [dict(r) for r in await pool.fetch(sql, *args)]


async def message_roles(pool: asyncpg.Pool, conversation_id: str) -> list[str]:
    return [r["role"] for r in await rows(
        pool, "SELECT role::text AS role FROM ai_messages WHERE conversation_id = $1 ORDER BY position", uuid.UUID(conversation_id))]


def assert_requests_valid(requests: list[dict[str, Any]]) -> None:
    """Every request that reached the model answered each tool_use in the next message, used at
    most 4 breakpoints, and never put a 1-hour breakpoint after a 5-minute one."""
    for entry in requests:
        body = entry.get("body", entry)
        if body is None:
            # Logged on arrival, body not read yet: a request still in flight (another test's
            # title or summary call, say), judged when its body is in.
            continue
        messages = body.get("messages", [])
        for i, message in enumerate(messages):
            if message["role"] != "assistant" or isinstance(message["content"], str):
                continue
            asked = {b["id"] for b in message["content"] if b.get("type") == "tool_use"}
            if asked:
                nxt = messages[i + 1]
                answered = {b.get("tool_use_id") for b in nxt["content"] if isinstance(b, dict) and b.get("type") == "tool_result"}
                assert asked <= answered, f"tool_use {asked - answered} unanswered"
        ttls = []
        for tool in body.get("tools", []):
            if "cache_control" in tool:
                ttls.append(tool["cache_control"].get("ttl", "5m"))
        for block in body.get("system", []) if isinstance(body.get("system"), list) else []:
            if "cache_control" in block:
                ttls.append(block["cache_control"].get("ttl", "5m"))
        for message in messages:
            for block in message["content"] if isinstance(message["content"], list) else []:
                if "cache_control" in block:
                    ttls.append(block["cache_control"].get("ttl", "5m"))
        assert len(ttls) <= 4, ttls
        assert "1h" not in ttls[ttls.index("5m"):] if "5m" in ttls else True, ttls
        if entry.get("fault") is None and isinstance(entry.get("verdict"), dict):
            assert entry["verdict"]["ok"], entry["verdict"]


def mentions(request: dict[str, Any], marker: str) -> bool:
    return request["body"] is not None and marker in json.dumps(request["body"])


def provider_usage(usage: dict[str, Any]) -> ModelUsage:
    """The provider's usage object, bucket by bucket, as Anthropic bills it."""
    split = usage.get("cache_creation") or {}
    return ModelUsage(
        input_tokens=usage["input_tokens"], output_tokens=usage["output_tokens"],
        cache_read_tokens=usage.get("cache_read_input_tokens") or 0,
        cache_write_5m_tokens=split.get("ephemeral_5m_input_tokens") or 0,
        cache_write_1h_tokens=split.get("ephemeral_1h_input_tokens") or 0,
    )
