"""The shape of one scripted or generated assistant turn."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

StopReason = Literal["end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal"]


class ToolUseSpec(BaseModel):
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


class Turn(BaseModel):
    """One assistant response. Content order: thinking, text, tool_uses."""

    text: str | None = None
    tool_uses: list[ToolUseSpec] = Field(default_factory=list)
    stop_reason: StopReason | None = None  # default: tool_use if tool_uses else end_turn
    # Explicit thinking text; 5.x models get a short one automatically before tool calls.
    thinking: str | None = None

    def effective_stop_reason(self) -> str:
        return self.stop_reason or ("tool_use" if self.tool_uses else "end_turn")


DONE = Turn(text="Done.")
