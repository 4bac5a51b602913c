"""Seed 003's member coach on the bus: the durable run command (gateway → orchestrator), the coach's
own tools (orchestrator → tool-runner, a registry the operator never sees), creating a session, and
the live fan-out of a session's stored events (orchestrator → gateway)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .base import Contract, command_endpoint, event_endpoint, request_endpoint
from .commands import COMMANDS_STREAM, ORCHESTRATOR_DURABLE, Actor
from .sessions import SessionView

TOOL_RUNNER_QUEUE = "tool-runner"
MAX_MESSAGE_CHARS = 8000


class CoachRun(Contract):
    """Run the coach on one member message: the session's loop until idle, a question, no tool call
    or the iteration limit. Redelivery or re-publication never starts a second run."""

    command_id: str = Field(description="Idempotency key; also the Nats-Msg-Id.")
    run_id: str = Field(description="Id of this run (the turn lease is held under it).")
    session_id: str = Field(description="The coach session (created by the orchestrator when is_new).")
    is_new: bool = Field(description="True when the gateway allocated the session id.")
    actor: Actor = Field(description="The member (or staff member) talking to their coach.")
    message: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS, description="What they said.")
    current_workout: dict[str, Any] | None = Field(default=None, description="The workout the app shows, if any.")
    model: str | None = Field(default=None, max_length=64, pattern=r"^[a-z0-9][a-z0-9.-]*$",
                              description="Model override; it must be priced in billing's rate card.")
    trace_id: str = Field(description="Trace id surfaced on errors.")


COACH_RUN = command_endpoint(
    "spotter.cmd.coach.run", CoachRun, stream=COMMANDS_STREAM, queue=ORCHESTRATOR_DURABLE,
    description="Run the member coach on a message (orchestrator, durable, deduplicated).",
)


class CoachToolSpec(Contract):
    name: str = Field(description="Tool name as the model sees it, e.g. generate_workout.")
    description: str = Field(description="What it does, for the model.")
    input_schema: dict[str, Any] = Field(description="JSON Schema of its input.")
    status_start: str | None = Field(default=None, description="Progress line while it runs (seed 003 §6.7).")
    status_done: str | None = Field(default=None, description="Progress line once it is done.")
    ends_run: bool = Field(default=False, description="The loop stops after it (idle, message_ask_user).")


class CoachCatalogRequest(Contract):
    pass


class CoachCatalog(Contract):
    tools: list[CoachToolSpec] = Field(description="The coach's tools, in a stable order.")


COACH_TOOL_CATALOG = request_endpoint(
    "spotter.coach.tools.catalog", CoachCatalogRequest, CoachCatalog, queue=TOOL_RUNNER_QUEUE,
    description="The member coach's tools (never the studio's).",
)


class CoachToolCall(Contract):
    """One tool call of the coach, keyed by (session_id, call_id): a repeat returns the stored result."""

    session_id: str = Field(description="The coach session.")
    call_id: str = Field(max_length=64, description="The model's tool_use id.")
    name: str = Field(max_length=64, description="Tool name.")
    input: dict[str, Any] = Field(description="Input the model gave; validated by the tool-runner.")
    actor: Actor = Field(description="The member.")
    trace_id: str = Field(description="Trace id.")


class CoachToolResult(Contract):
    name: str = Field(description="Tool name.")
    success: bool = Field(description="Whether it succeeded; a failure is for the model to fix, not fatal.")
    result: dict[str, Any] = Field(description="The result object (seed 003 §6), shown to the client.")
    formatted: str = Field(description="The result as the model reads it, wrapped in <tool_result>.")
    artifact: dict[str, Any] | None = Field(default=None, description="The workout artifact it created, changed or delivered.")
    duration_ms: int = Field(default=0, description="Handler time.")


COACH_TOOL_EXECUTE = request_endpoint(
    "spotter.coach.tools.execute", CoachToolCall, CoachToolResult, queue=TOOL_RUNNER_QUEUE,
    description="Run one of the member coach's tools (workout artifacts in Redis, the member's data in Postgres).",
)


class CreateCoachSession(Contract):
    actor: Actor = Field(description="The member.")
    trace_id: str = Field(description="Trace id.")


COACH_SESSION_CREATE = request_endpoint(
    "spotter.coach.sessions.create", CreateCoachSession, SessionView, queue=ORCHESTRATOR_DURABLE,
    description="Open a new coach session for the caller (the orchestrator owns sessions).",
)


class SessionEventOut(Contract):
    """A session event just stored, fanned out live; Postgres holds the log, so a subscriber that
    misses one re-reads it from there."""

    session_id: str = Field(description="The session.")
    sequence: int = Field(description="Its sequence (the SSE id).")
    event_type: str = Field(description="e.g. agent.tool_call, coach.knowledge.")
    role: str = Field(description="user, agent or system.")
    content: list[Any] = Field(default_factory=list, description="Content parts.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="The event's data.")


SESSION_EVENTS = event_endpoint(
    "spotter.events.session.*", SessionEventOut,
    description="Live fan-out of stored session events (the coach's runs); the token is the session id.",
)


def session_subject(session_id: str) -> str:
    return SESSION_EVENTS.subject.replace("*", session_id)
