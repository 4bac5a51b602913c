"""Tool-runner: the role-filtered tool catalog and idempotent tool execution."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from .base import Contract, event_endpoint, request_endpoint
from .commands import Actor, Role
from .events import ToolError

TOOL_RUNNER_QUEUE = "tool-runner"


@dataclass(frozen=True)
class ToolName:
    """A tool's router and action, and the one place that knows its wire form `{router}__{action}`
    (Anthropic tool names allow no dots, SPEC decision 9)."""

    router: str
    action: str

    SEPARATOR = "__"

    @property
    def wire(self) -> str:
        return f"{self.router}{self.SEPARATOR}{self.action}"

    @classmethod
    def parse(cls, wire: str) -> ToolName:
        router, sep, action = wire.partition(cls.SEPARATOR)
        return cls(router, action) if sep else cls("", wire)

    def __str__(self) -> str:
        return self.wire


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
    pack: str | None = Field(
        default=None, description="The tool pack (seed 002: an organization's other system) it comes from; "
        "None for Spotter's own tools.")

    @property
    def tool_name(self) -> ToolName:
        return ToolName(self.router, self.action)

    @property
    def is_picker(self) -> bool:
        return self.kind == "user_picker"

    @property
    def needs_human(self) -> bool:
        """Whether a call waits for a person before it resolves: a confirmation gate or a picker."""
        return self.is_picker or self.confirm != "never"


class CatalogRequest(Contract):
    role: Role = Field(description="Caller role; only tools this role may use are returned.")
    organization_id: str | None = Field(
        default=None, description="The caller's organization: its enabled tool packs are added after Spotter's "
        "own tools. None: Spotter's own tools only.")


class ToolGate(Contract):
    """A constraint rule (seed 002) asked for a person's confirmation of this particular call."""

    rule: str = Field(description="The rule's name.")
    message: str = Field(description="The rule's message, shown with the confirmation.")


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
    approved: bool = Field(
        default=False,
        description="A person approved this exact call (confirm): a rule's `require_confirmation` is satisfied.",
    )
    conversation_cost_usd_micros: int | None = Field(
        default=None, ge=0, description="What the conversation has cost so far (a pack's rules read it as "
        "`context.conversationCostUsd`); None when the caller does not know.")


class ToolOutcome(Contract):
    tool_use_id: str = Field(description="Anthropic tool_use id.")
    status: Literal["succeeded", "failed", "pending"] = Field(
        description="Status recorded: pending for a hold, or when a rule asks a person to confirm the call (`gate`).")
    output: Any = Field(default=None, description="Output when succeeded.")
    error: ToolError | None = Field(default=None, description="Typed error when failed.")
    duration_ms: int = Field(description="Handler wall-clock time.")
    inverse_available: bool = Field(description="Whether undo is possible.")
    replayed: bool = Field(default=False, description="True when the stored outcome of an earlier run was returned.")
    gate: ToolGate | None = Field(default=None, description="Pending because this rule asks for a confirmation.")

    @property
    def ok(self) -> bool:
        return self.status == "succeeded"

    def result(self) -> Any:
        """What the call produced, as the model and the client both see it: the output when it
        succeeded, the typed error object when it did not."""
        if self.ok:
            return self.output
        return self.error.model_dump(mode="json") if self.error else None

    def result_text(self) -> str:
        return json.dumps(self.result(), ensure_ascii=False, default=str)


TOOL_CATALOG = request_endpoint(
    "spotter.tools.catalog", CatalogRequest, ToolCatalog, queue=TOOL_RUNNER_QUEUE,
    description="Tools visible to a role in an organization: Spotter's own (RBAC filter at registry-build time), "
    "then the tool packs the organization enabled.",
)


class ToolsChanged(Contract):
    """The tool packs changed (`spotter packs add|remove`): every cached catalog is stale."""

    packs: list[str] = Field(description="Names of the packs known after the change.")


TOOLS_CHANGED = event_endpoint(
    "spotter.tools.changed", ToolsChanged,
    description="Tool packs were added, replaced or removed (fan-out to every orchestrator replica, no queue group).",
)

EXECUTE_TOOL = request_endpoint(
    "spotter.tools.execute", ExecuteTool, ToolOutcome, queue=TOOL_RUNNER_QUEUE,
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


UNDO_TOOL = request_endpoint(
    "spotter.tools.undo", UndoRequest, UndoOutcome, queue=TOOL_RUNNER_QUEUE,
    description="Undo a succeeded write through its declared inverse (bypasses confirmation); "
    "`undo_unavailable` unless the call succeeded and declares an inverse.",
)


ToolCallStatus = Literal["pending", "running", "succeeded", "failed", "rejected_by_user"]


class CallsQuery(Contract):
    """The recorded state of some tool calls of a conversation."""

    conversation_id: str = Field(description="Conversation id.")
    tool_use_ids: list[str] = Field(max_length=64, description="tool_use ids asked about.")
    actor: Actor = Field(description="Caller; the conversation must belong to its organization.")


class CallState(Contract):
    tool_use_id: str = Field(description="Anthropic tool_use id.")
    router: str = Field(description="Router.")
    action: str = Field(description="Action.")
    status: ToolCallStatus = Field(description="Recorded status.")
    input: dict[str, Any] = Field(description="Input the call was recorded with, as the model sent it.")
    outcome: ToolOutcome | None = Field(default=None, description="The outcome once the call is resolved.")
    inverse_available: bool = Field(description="Whether the caller's role could undo it now (succeeded, with an inverse it may use).")
    gate: ToolGate | None = Field(default=None, description="A rule asked for a person's confirmation of this call.")

    @property
    def resolved(self) -> bool:
        return self.outcome is not None


class CallStates(Contract):
    calls: list[CallState] = Field(description="Calls that are recorded, in the order asked; unknown ids are left out.")


TOOL_CALLS = request_endpoint(
    "spotter.tools.calls", CallsQuery, CallStates, queue=TOOL_RUNNER_QUEUE,
    description="Recorded state and outcome of tool calls (the tool-runner owns ai_tool_executions).",
)


class ResolveCall(Contract):
    """A person answered a call that waited for them: a rejection, or a pick among the candidates."""

    conversation_id: str = Field(description="Conversation id.")
    tool_use_id: str = Field(max_length=64, description="The pending call.")
    actor: Actor = Field(description="Caller.")
    trace_id: str = Field(description="Trace id.")
    decision: Literal["reject", "pick"] = Field(description="reject a gated call, or pick for a user_picker.")
    picked_id: str | None = Field(default=None, max_length=255, description="The chosen candidate's id (pick).")


TOOL_RESOLVE = request_endpoint(
    "spotter.tools.resolve", ResolveCall, ToolOutcome, queue=TOOL_RUNNER_QUEUE,
    description="pending → rejected_by_user or picked, exactly once (`tool_already_resolved`, `invalid_pick`, "
    "`tool_execution_not_found` otherwise).",
)


class CloseCalls(Contract):
    """Every call of the conversation still waiting for a person is closed and will never run."""

    conversation_id: str = Field(description="Conversation id.")
    actor: Actor = Field(description="Caller.")
    trace_id: str = Field(description="Trace id.")
    code: str = Field(max_length=64, description="Error code the closed calls carry, e.g. superseded_by_user or aborted.")
    message: str = Field(max_length=500, description="Why they were closed.")


class ClosedCalls(Contract):
    tool_use_ids: list[str] = Field(description="Calls that were pending and are now closed.")


TOOL_CLOSE = request_endpoint(
    "spotter.tools.close", CloseCalls, ClosedCalls, queue=TOOL_RUNNER_QUEUE,
    description="Close the calls still pending in a conversation (the user typed instead, or cancelled).",
)


class AppAction(Contract):
    """A person's own action from the app (a button, not the agent), run by the same typed tool with
    the same validation, roles and audit row (marked `agent: false`). Only the actions the
    tool-runner lists as app actions may be run this way; there is no confirmation step, so none of
    them is destructive."""

    router: str = Field(max_length=64, description="Router, e.g. tasks.")
    action: str = Field(max_length=64, description="Action, e.g. create.")
    input: dict[str, Any] = Field(description="The tool's input, validated by the runner.")
    actor: Actor = Field(description="Caller, checked against the tool's roles.")
    trace_id: str = Field(description="Trace id.")


class AppActionResult(Contract):
    output: Any = Field(description="The tool's output (the same shape the agent sees).")


APP_ACTION = request_endpoint(
    "spotter.tools.app_action", AppAction, AppActionResult, queue=TOOL_RUNNER_QUEUE,
    description="Run one of the app's own actions (e.g. create a task) through its typed tool; refusals are "
    "typed error replies (`invalid_request`, `forbidden`, `not_found`).",
)
