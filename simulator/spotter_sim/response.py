"""Turn a decided `Turn` into the concrete assistant message (ids, blocks, usage)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from .cache import CacheUsage
from .conversation import is_gen5
from .signing import sign_thinking
from .tokens import approx_tokens, canonical_json
from .turns import Turn


@dataclass(frozen=True)
class PlannedMessage:
    id: str
    model: str
    content: list[dict[str, Any]]
    stop_reason: str
    output_tokens: int
    usage: CacheUsage

    def usage_json(self, output_tokens: int | None = None) -> dict[str, Any]:
        return self.usage.as_usage(self.output_tokens if output_tokens is None else output_tokens)

    def message_json(self) -> dict[str, Any]:
        """The complete non-streaming Message."""
        return {**self._envelope(), "content": self.content, "stop_reason": self.stop_reason,
                "usage": self.usage_json()}

    def start_json(self) -> dict[str, Any]:
        """The Message inside `message_start`: no content or stop reason yet."""
        return {**self._envelope(), "content": [], "stop_reason": None, "usage": self.usage_json(1)}

    def _envelope(self) -> dict[str, Any]:
        return {"id": self.id, "type": "message", "role": "assistant", "model": self.model,
                "stop_sequence": None}


def output_block_tokens(block: dict[str, Any]) -> int:
    if block["type"] == "text":
        return approx_tokens(block["text"])
    if block["type"] == "thinking":
        return approx_tokens(block["thinking"])
    return approx_tokens(block["name"] + canonical_json(block["input"]))


def plan_message(body: dict[str, Any], turn: Turn, usage: CacheUsage, thinking_secret: str) -> PlannedMessage:
    model = body["model"]
    blocks: list[dict[str, Any]] = []

    thinking = turn.thinking
    if thinking is None and turn.tool_uses and is_gen5(model):
        # 5.x models think briefly before calling tools; the block must come back signed.
        thinking = f"The user needs {', '.join(t.name for t in turn.tool_uses)}; calling it now."
    if thinking:
        blocks.append({"type": "thinking", "thinking": thinking, "signature": sign_thinking(thinking_secret, thinking)})
    if turn.text:
        blocks.append({"type": "text", "text": turn.text})
    for use in turn.tool_uses:
        blocks.append({"type": "tool_use", "id": f"toolu_sim_{secrets.token_hex(12)}",
                       "name": use.name, "input": use.input})

    content, truncated = _fit(blocks, body["max_tokens"])
    return PlannedMessage(
        id=f"msg_sim_{secrets.token_hex(12)}",
        model=model,
        content=content,
        stop_reason="max_tokens" if truncated else turn.effective_stop_reason(),
        output_tokens=sum(output_block_tokens(b) for b in content),
        usage=usage,
    )


def _fit(blocks: list[dict[str, Any]], max_tokens: int) -> tuple[list[dict[str, Any]], bool]:
    """Cut the content at `max_tokens`; only text can be cut mid-block."""
    budget = max_tokens
    kept: list[dict[str, Any]] = []
    for block in blocks:
        cost = output_block_tokens(block)
        if cost <= budget:
            kept.append(block)
            budget -= cost
            continue
        if block["type"] == "text" and budget > 0:
            kept.append({"type": "text", "text": block["text"][: budget * 4]})
        return kept, True
    return kept, False
