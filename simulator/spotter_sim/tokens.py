"""Deterministic token approximation and the prompt in cache order.

A token is approximated as 4 characters of a block's JSON (or text). The
prompt is walked tools -> system -> messages, the order the real API uses
for prefix caching and for cache_control rules.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from .conversation import content_blocks

NON_CACHEABLE_TYPES = {"thinking", "redacted_thinking"}


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def approx_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def without_cache_control(block: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k != "cache_control"}


def tool_tokens(tool: dict[str, Any]) -> int:
    counted = {k: tool.get(k) for k in ("name", "description", "input_schema") if k in tool}
    return approx_tokens(canonical_json(counted))


def block_tokens(block: dict[str, Any]) -> int:
    if block.get("type") == "text" and isinstance(block.get("text"), str):
        return approx_tokens(block["text"])
    if block.get("type") == "thinking" and isinstance(block.get("thinking"), str):
        return approx_tokens(block["thinking"])
    return approx_tokens(canonical_json(without_cache_control(block)))


@dataclass(frozen=True)
class PromptBlock:
    path: str  # e.g. "tools.0", "system.1", "messages.2.content.0"
    block_type: str
    payload: Any  # what the cache hashes: content without cache_control
    tokens: int
    cache_control: dict[str, Any] | None
    cache_control_path: str  # where an error about this breakpoint points


def flatten_prompt(body: dict[str, Any]) -> list[PromptBlock]:
    """Every prompt block in cache order; assumes the body passed structural validation."""
    blocks: list[PromptBlock] = []

    for i, tool in enumerate(body.get("tools") or []):
        blocks.append(
            PromptBlock(
                path=f"tools.{i}",
                block_type="tool",
                payload={"tool": without_cache_control(tool)},
                tokens=tool_tokens(tool),
                cache_control=tool.get("cache_control"),
                cache_control_path=f"tools.{i}.cache_control",
            )
        )

    system = body.get("system")
    if isinstance(system, str):
        system_blocks = [{"type": "text", "text": system}] if system else []
    else:
        system_blocks = system or []
    for i, block in enumerate(system_blocks):
        blocks.append(
            PromptBlock(
                path=f"system.{i}",
                block_type="text",
                payload={"system": without_cache_control(block)},
                tokens=block_tokens(block),
                cache_control=block.get("cache_control"),
                cache_control_path=f"system.{i}.cache_control",
            )
        )

    for m, message in enumerate(body.get("messages") or []):
        for c, block in enumerate(content_blocks(message)):
            blocks.append(
                PromptBlock(
                    path=f"messages.{m}.content.{c}",
                    block_type=str(block.get("type")),
                    payload={"role": message.get("role"), "block": without_cache_control(block)},
                    tokens=block_tokens(block),
                    cache_control=block.get("cache_control"),
                    cache_control_path=f"messages.{m}.content.{c}.cache_control",
                )
            )

    # Top-level cache_control marks the last cacheable block (automatic caching).
    auto = body.get("cache_control")
    if auto:
        for i in range(len(blocks) - 1, -1, -1):
            if blocks[i].block_type not in NON_CACHEABLE_TYPES:
                if blocks[i].cache_control is None:
                    b = blocks[i]
                    blocks[i] = PromptBlock(
                        b.path, b.block_type, b.payload, b.tokens, auto, "cache_control"
                    )
                break
    return blocks
