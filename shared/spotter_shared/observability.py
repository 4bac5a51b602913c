"""Seed 000's observability events, typed: one frozen model per event, so a call site cannot
misspell a field or forget the trace, the organization, the code or the endpoint. Each is written
as one JSON log line through `telemetry.scrub()` (no user text at any depth) and added to the
current span."""

from __future__ import annotations

import logging
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from . import telemetry

Endpoint = Literal["messages", "confirm", "pick", "undo", "cancel"]


class AgentEvent(BaseModel):
    model_config = ConfigDict(frozen=True, alias_generator=to_camel, validate_by_name=True, extra="forbid")
    name: ClassVar[str]

    trace_id: str
    org_id: str
    code: str | None = None
    endpoint: Endpoint | None = None

    def log(self, logger: logging.Logger) -> None:
        telemetry.event(logger, self.name, **self.model_dump(by_alias=True, mode="json"))


class TurnStarted(AgentEvent):
    name: ClassVar[str] = "agent.turn.started"
    attempt: int
    prompt_length: int | None = None


class TurnCompleted(AgentEvent):
    name: ClassVar[str] = "agent.turn.completed"
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_creation_tokens: int
    cost_usd_micros: int
    # Seed 000's read / (read + input), and the honest read / (read + writes + input).
    cache_hit_ratio: float
    cache_read_ratio: float


class TurnFailed(AgentEvent):
    name: ClassVar[str] = "agent.turn.failed"
    code: str


class ToolExecuted(AgentEvent):
    name: ClassVar[str] = "agent.tool.executed"
    router: str
    action: str
    duration_ms: int | None
    outcome: str
    error_code: str | None = None
    replayed: bool = False


class ConfirmationPending(AgentEvent):
    name: ClassVar[str] = "agent.tool.confirmation_pending"
    router: str
    action: str


class DisambiguationPending(AgentEvent):
    name: ClassVar[str] = "agent.tool.disambiguation_pending"
    router: str
    action: str


class ReplayViolation(AgentEvent):
    name: ClassVar[str] = "agent.replay.violation"
    violations: int
    reasons: list[str]
    repaired: bool
    # Block types only (seed 000: a PII-scrubbed snapshot of roles and block types).
    blocks: list[Any]


class StorageSnapshot(AgentEvent):
    """Seed 000's daily `agent.storage.snapshot`: rows and bytes per agent table (org `*`: the cluster)."""

    name: ClassVar[str] = "agent.storage.snapshot"
    day: str
    tables: dict[str, dict[str, int]]


EVENTS: tuple[type[AgentEvent], ...] = (
    TurnStarted, TurnCompleted, TurnFailed, ToolExecuted, ConfirmationPending, DisambiguationPending, ReplayViolation,
    StorageSnapshot,
)
