"""SSE events (seed 000 "SSE protocol", shapes exact) and their sequenced envelope on NATS."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field, computed_field

from .base import Contract, event_endpoint


class ConversationStarted(Contract):
    type: Literal["conversation_started"] = "conversation_started"
    conversation_id: str = Field(description="Id of the conversation the turn created.")


class TextDelta(Contract):
    type: Literal["text_delta"] = "text_delta"
    delta: str = Field(description="Next piece of assistant text visible to the user.")


class ToolStarted(Contract):
    type: Literal["tool_started"] = "tool_started"
    tool_use_id: str = Field(description="Anthropic tool_use id.")
    router: str = Field(description="Tool router, e.g. read.")
    action: str = Field(description="Tool action, e.g. members_search.")
    input: dict[str, Any] = Field(description="Input the model gave the tool.")


class ToolError(Contract):
    code: str = Field(description="Stable tool error code, e.g. invalid_input, forbidden, tool_failed.")
    message: str = Field(description="What went wrong, for the model and the user.")
    hint: str | None = Field(default=None, description="How the model may recover.")


class ToolCompleted(Contract):
    type: Literal["tool_completed"] = "tool_completed"
    tool_use_id: str = Field(description="Anthropic tool_use id.")
    router: str = Field(description="Tool router.")
    action: str = Field(description="Tool action.")
    ok: bool = Field(description="Whether the tool succeeded.")
    output: Any = Field(default=None, description="Tool output when ok; the error object when not.")
    inverse_available: bool = Field(default=False, description="Whether undo is possible for this call.")


class ConfirmationPending(Contract):
    type: Literal["confirmation_pending"] = "confirmation_pending"
    tool_use_id: str = Field(description="Tool awaiting approval.")
    router: str = Field(description="Tool router.")
    action: str = Field(description="Tool action.")
    input: dict[str, Any] = Field(description="Input to approve.")
    confirm: Literal["destructive", "always"] = Field(description="Why confirmation is needed.")
    reason: str | None = Field(default=None, description="A constraint rule's message, when a rule asked for it.")


class PickCandidate(Contract):
    id: str = Field(description="Candidate id sent back by pick.")
    label: str = Field(description="Button label.")
    sublabel: str | None = Field(default=None, description="Secondary line.")
    detail: str | None = Field(default=None, description="Extra detail.")


class DisambiguationPending(Contract):
    type: Literal["disambiguation_pending"] = "disambiguation_pending"
    tool_use_id: str = Field(description="Picker tool awaiting a pick.")
    kind: str = Field(description="Entity kind, e.g. member.")
    prompt: str = Field(description="Question shown to the user, e.g. Which Saar?")
    candidates: list[PickCandidate] = Field(description="2 to 8 candidates.")


class MessageDone(Contract):
    type: Literal["message_done"] = "message_done"
    message_id: str = Field(description="Persisted assistant message id.")
    stop_reason: str | None = Field(description="Model stop reason, e.g. end_turn or tool_use.")


class TurnUsage(Contract):
    input_tokens: int = Field(default=0, description="Uncached input tokens over the turn.")
    output_tokens: int = Field(default=0, description="Output tokens over the turn.")
    cache_read_tokens: int = Field(default=0, description="Prompt-cache read tokens.")
    cache_creation_tokens: int = Field(default=0, description="Prompt-cache write tokens (5m + 1h).")
    cost_usd_micros: int = Field(default=0, description="Cost of the turn in micro-dollars.")

    @computed_field(description="Honest prompt-cache efficiency, cacheRead / (cacheRead + cacheWrite + uncached "
                    "input); seed 000's cacheRead / (cacheRead + input) ignores writes and reads 1.0 while every "
                    "call re-writes the conversation.")
    @property
    def cache_read_ratio(self) -> float:
        total = self.cache_read_tokens + self.cache_creation_tokens + self.input_tokens
        return round(self.cache_read_tokens / total, 4) if total else 0.0

    @property
    def cache_hit_ratio(self) -> float:
        """Seed 000's ratio, kept for comparison in `agent.turn.completed`."""
        total = self.cache_read_tokens + self.input_tokens
        return round(self.cache_read_tokens / total, 4) if total else 0.0


class Done(Contract):
    type: Literal["done"] = "done"
    conversation_id: str = Field(description="Conversation id.")
    usage: TurnUsage = Field(description="Usage and cost of this turn (zero when suspended or refused).")


class ErrorEvent(Contract):
    type: Literal["error"] = "error"
    code: str = Field(description="Stable error code from seed 000's list (plus conversation_busy …).")
    message: str = Field(description="Message for the user.")
    trace_id: str = Field(description="Server trace id to quote in bug reports.")


SseEvent = Annotated[
    Union[
        ConversationStarted,
        TextDelta,
        ToolStarted,
        ToolCompleted,
        ConfirmationPending,
        DisambiguationPending,
        MessageDone,
        Done,
        ErrorEvent,
    ],
    Field(discriminator="type"),
]


class ConversationEvent(Contract):
    """One entry of a conversation's append-only event log, fanned out live after it is stored."""

    conversation_id: str = Field(description="Conversation the event belongs to.")
    seq: int = Field(description="Per-conversation sequence number; the SSE id.")
    turn_id: str = Field(description="Turn that produced the event.")
    event: SseEvent = Field(description="The SSE event itself.")


CONVERSATION_EVENTS = event_endpoint(
    "spotter.events.conversation.*", ConversationEvent,
    description="Live fan-out of stored conversation events; the token is the conversation id. "
    "Postgres holds the log, so a subscriber that misses one re-reads it from there.",
)


def conversation_subject(conversation_id: str) -> str:
    return CONVERSATION_EVENTS.subject.replace("*", conversation_id)
