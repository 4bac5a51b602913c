"""Tool-runner: the role-filtered tool catalog and idempotent tool execution."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .base import Contract, endpoint
from .commands import Actor, Role
from .events import ToolError

TOOL_RUNNER_QUEUE = "tool-runner"


class ToolSpec(Contract):
    name: str = Field(description="Wire name `{router}__{action}`.")
    router: str = Field(description="Router, e.g. read.")
    action: str = Field(description="Action, e.g. members_search.")
    summary: str = Field(description="Model-visible description.")
    input_schema: dict[str, Any] = Field(description="JSON schema of the input.")
    side_effects: Literal["read", "write"] = Field(description="read or write.")
    confirm: Literal["never", "destructive", "always"] = Field(description="Whether a human must approve.")
    kind: Literal["normal", "user_picker"] = Field(description="user_picker tools are never executed.")
    has_inverse: bool = Field(description="Whether undo is declared.")


class CatalogRequest(Contract):
    role: Role = Field(description="Caller role; only tools this role may use are returned.")


class ToolCatalog(Contract):
    tools: list[ToolSpec] = Field(description="Tools in a stable order.")


class ExecuteTool(Contract):
    """Run one tool_use. Keyed by (conversation_id, tool_use_id): a repeat returns the stored outcome."""

    conversation_id: str = Field(description="Conversation id.")
    message_id: str = Field(description="Assistant message that emitted the tool_use.")
    tool_use_id: str = Field(description="Anthropic tool_use id.")
    router: str = Field(description="Router.")
    action: str = Field(description="Action.")
    input: dict[str, Any] = Field(description="Raw input from the model; validated by the runner.")
    actor: Actor = Field(description="Caller, re-checked against the tool's roles.")
    trace_id: str = Field(description="Trace id.")
    hold: bool = Field(
        default=False,
        description="Validate and record the call as `pending` without running it (confirmation "
        "or user_picker). A later execute of the same key runs it once approved.",
    )


class ToolOutcome(Contract):
    tool_use_id: str = Field(description="Anthropic tool_use id.")
    status: Literal["succeeded", "failed", "pending"] = Field(description="Status recorded (pending only for hold).")
    output: Any = Field(default=None, description="Output when succeeded.")
    error: ToolError | None = Field(default=None, description="Typed error when failed.")
    duration_ms: int = Field(description="Handler wall-clock time.")
    inverse_available: bool = Field(description="Whether undo is possible.")
    replayed: bool = Field(default=False, description="True when the stored outcome of an earlier run was returned.")


TOOL_CATALOG = endpoint(
    subject="spotter.tools.catalog",
    payload=CatalogRequest,
    reply=ToolCatalog,
    pattern="request",
    queue=TOOL_RUNNER_QUEUE,
    description="Tools visible to a role (RBAC filter at registry-build time).",
)

EXECUTE_TOOL = endpoint(
    subject="spotter.tools.execute",
    payload=ExecuteTool,
    reply=ToolOutcome,
    pattern="request",
    queue=TOOL_RUNNER_QUEUE,
    description="Execute one tool_use at most once per (conversation_id, tool_use_id).",
)


class UndoRequest(Contract):
    """Run the declared inverse of a succeeded write, built from its stored output."""

    conversation_id: str = Field(description="Conversation of the original call.")
    tool_use_id: str = Field(description="tool_use id of the original call.")
    actor: Actor = Field(description="Caller.")
    trace_id: str = Field(description="Trace id.")


class UndoOutcome(Contract):
    router: str = Field(description="Router of the inverse tool.")
    action: str = Field(description="Action of the inverse tool.")
    tool_use_id: str = Field(description="Execution key of the inverse call (derived from the original).")
    input: dict[str, Any] = Field(description="Input built for the inverse.")
    outcome: ToolOutcome = Field(description="Result of the inverse call.")


UNDO_TOOL = endpoint(
    subject="spotter.tools.undo",
    payload=UndoRequest,
    reply=UndoOutcome,
    pattern="request",
    queue=TOOL_RUNNER_QUEUE,
    description="Undo a succeeded write through its declared inverse (bypasses confirmation); "
    "`undo_unavailable` unless the call succeeded and declares an inverse.",
)
