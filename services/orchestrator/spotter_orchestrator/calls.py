"""Typed model data: the conversation history in the SDK's param types, and a tool call built once
from the model's content blocks together with its spec.

A call's outcome (the tool-runner's `ToolOutcome`) is the one source of both what the model reads
(`tool_result` block) and what the client sees (`tool_completed` event): both go through
`ToolOutcome.result()`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from anthropic.types import ContentBlockParam, MessageParam, ToolResultBlockParam, ToolUseBlockParam

from spotter_shared.contracts.events import ToolCompleted, ToolStarted
from spotter_shared.contracts.tools import CallState, ToolName, ToolOutcome, ToolSpec

History = list[MessageParam]
Content = list[ContentBlockParam]

SUPERSEDED = (
    '{"code":"superseded_by_user","message":"The user replied with a new message instead of answering this '
    'request; it was not executed.","hint":"Read the user\'s latest message and re-ask if still needed."}'
)


@dataclass(frozen=True)
class ToolCall:
    """One tool_use of an assistant message. `spec` is None for a tool the caller's role can't see
    (or that does not exist): the tool-runner answers such a call with a typed error."""

    id: str
    name: ToolName
    input: dict[str, Any]
    spec: ToolSpec | None

    @classmethod
    def from_block(cls, block: ToolUseBlockParam, specs: Mapping[str, ToolSpec]) -> ToolCall:
        raw = block.get("input")
        return cls(
            id=block["id"],
            name=ToolName.parse(block["name"]),
            input=raw if isinstance(raw, dict) else {},
            spec=specs.get(block["name"]),
        )

    @property
    def needs_human(self) -> bool:
        return self.spec is not None and self.spec.needs_human

    @property
    def is_picker(self) -> bool:
        return self.spec is not None and self.spec.is_picker

    def waits_for_person(self, state: CallState | None) -> bool:
        """Whether this call waits for a person: declared so (`needs_human`), or a pack's rule asked
        for a confirmation of this particular call (recorded on its state)."""
        return self.needs_human or (state is not None and state.gate is not None)

    def started(self) -> ToolStarted:
        return ToolStarted(tool_use_id=self.id, router=self.name.router, action=self.name.action, input=self.input)

    def completed(self, outcome: ToolOutcome) -> ToolCompleted:
        return ToolCompleted(
            tool_use_id=self.id, router=self.name.router, action=self.name.action, ok=outcome.ok,
            output=outcome.result(), inverse_available=outcome.inverse_available,
        )

    def result_block(self, outcome: ToolOutcome | None) -> ToolResultBlockParam:
        """What the model reads back. No outcome: the call was never resolved (it was superseded)."""
        return result_block(self.id, outcome)


def result_block(tool_use_id: str, outcome: ToolOutcome | None) -> ToolResultBlockParam:
    # Tool output is data, JSON in a tool_result block, never read as instructions (SPEC decision 11).
    if outcome is None:
        return {"type": "tool_result", "tool_use_id": tool_use_id, "is_error": True, "content": SUPERSEDED}
    block: ToolResultBlockParam = {"type": "tool_result", "tool_use_id": tool_use_id, "content": outcome.result_text()}
    if not outcome.ok:
        block["is_error"] = True
    return block


def tool_calls(content: Sequence[ContentBlockParam] | Sequence[dict[str, Any]], specs: Mapping[str, ToolSpec]) -> tuple[ToolCall, ...]:
    """The typed calls of an assistant message, in order."""
    return tuple(
        ToolCall.from_block(cast(ToolUseBlockParam, block), specs) for block in content if block.get("type") == "tool_use"
    )


def text_of(content: Sequence[ContentBlockParam] | Sequence[dict[str, Any]]) -> str:
    return "".join(str(block.get("text", "")) for block in content if block.get("type") == "text")
