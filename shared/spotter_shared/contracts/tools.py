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


class ToolOutcome(Contract):
    tool_use_id: str = Field(description="Anthropic tool_use id.")
    status: Literal["succeeded", "failed"] = Field(description="Terminal status recorded.")
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
