"""Durable turn commands, carried by JetStream and deduplicated by command id (Nats-Msg-Id)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .base import Contract, endpoint

COMMANDS_STREAM = "SPOTTER_COMMANDS"
ORCHESTRATOR_DURABLE = "orchestrator"

Role = Literal["owner", "admin", "coach", "member"]


class Actor(Contract):
    """Who is acting, resolved by the gateway from the database (never from the token alone)."""

    user_id: str = Field(description="users.id of the caller.")
    organization_id: str = Field(description="Organization the request is scoped to.")
    membership_id: str = Field(description="memberships.id of the caller in that organization.")
    role: Role = Field(description="Caller's role in the organization.")
    locale: str = Field(default="en", description="Preferred reply locale.")


class PageContext(Contract):
    pathname: str | None = Field(default=None, description="Page the user is on.")
    selection: Any = Field(default=None, description="What is selected on that page, if anything.")


class TurnCommand(Contract):
    """Fields every turn command shares (send, confirm, pick, undo, cancel)."""

    command_id: str = Field(description="Idempotency key; also the Nats-Msg-Id.")
    turn_id: str = Field(description="Id of the turn this command starts.")
    conversation_id: str = Field(description="Existing conversation.")
    actor: Actor = Field(description="Caller.")
    trace_id: str = Field(description="Trace id surfaced on errors.")


class SendMessage(TurnCommand):
    """Start a user turn. Redelivery or re-publication of the same command never starts a second turn."""

    conversation_id: str = Field(description="Conversation id (new ones are created by the orchestrator).")
    is_new: bool = Field(description="True when the gateway allocated the conversation id.")
    message: str = Field(min_length=1, max_length=16000, description="User text.")
    page_context: PageContext | None = Field(default=None, description="Where the user is in the app.")


SEND_MESSAGE = endpoint(
    subject="spotter.cmd.turn.send",
    payload=SendMessage,
    pattern="command",
    stream=COMMANDS_STREAM,
    queue=ORCHESTRATOR_DURABLE,
    description="Send a user turn to a conversation (orchestrator, durable, deduplicated).",
)



class ConfirmTool(TurnCommand):
    tool_use_id: str = Field(max_length=64, description="Pending confirm-gated tool_use.")
    approved: bool = Field(description="Approve (run it) or reject (synthetic rejected_by_user result).")


class PickTool(TurnCommand):
    tool_use_id: str = Field(max_length=64, description="Pending user_picker tool_use.")
    picked_id: str = Field(max_length=255, description="Id of one of the offered candidates.")


class UndoTool(TurnCommand):
    tool_use_id: str = Field(max_length=64, description="A succeeded write whose tool declares an inverse.")


CONFIRM_TOOL = endpoint(
    subject="spotter.cmd.turn.confirm", payload=ConfirmTool, pattern="command", stream=COMMANDS_STREAM,
    queue=ORCHESTRATOR_DURABLE, description="Approve or reject a pending tool and resume the loop.",
)
PICK_TOOL = endpoint(
    subject="spotter.cmd.turn.pick", payload=PickTool, pattern="command", stream=COMMANDS_STREAM,
    queue=ORCHESTRATOR_DURABLE, description="Answer a pending picker and resume the loop.",
)
UNDO = endpoint(
    subject="spotter.cmd.turn.undo", payload=UndoTool, pattern="command", stream=COMMANDS_STREAM,
    queue=ORCHESTRATOR_DURABLE, description="Run the declared inverse of a succeeded write.",
)


class CancelSuspended(TurnCommand):
    """Stop a conversation that waits for a human: its pending tools are resolved, never run."""


CANCEL_SUSPENDED = endpoint(
    subject="spotter.cmd.turn.cancel", payload=CancelSuspended, pattern="command", stream=COMMANDS_STREAM,
    queue=ORCHESTRATOR_DURABLE, description="Cancel a suspended conversation (pending confirmations or picks).",
)


class CancelTurn(Contract):
    """Broadcast to every orchestrator replica; the one running the turn stops it. The request is
    also stored on the turn row, so a replica that picks the turn up later stops it too."""

    conversation_id: str = Field(description="Conversation whose running turn should stop.")
    turn_id: str = Field(description="The turn to stop.")
    trace_id: str = Field(description="Trace id.")


CANCEL_TURN = endpoint(
    subject="spotter.control.cancel", payload=CancelTurn, pattern="event",
    description="Stop a running turn (fan-out to all orchestrator replicas, no queue group).",
)

COMMAND_SUBJECTS = ["spotter.cmd.>"]
