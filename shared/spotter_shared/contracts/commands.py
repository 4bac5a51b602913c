"""Durable turn commands, carried by JetStream and deduplicated by command id (Nats-Msg-Id)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .base import Contract, command_endpoint, event_endpoint, request_endpoint

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


SEND_MESSAGE = command_endpoint(
    "spotter.cmd.turn.send", SendMessage, stream=COMMANDS_STREAM, queue=ORCHESTRATOR_DURABLE,
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


CONFIRM_TOOL = command_endpoint(
    "spotter.cmd.turn.confirm", ConfirmTool, stream=COMMANDS_STREAM, queue=ORCHESTRATOR_DURABLE,
    description="Approve or reject a pending tool and resume the loop.",
)
PICK_TOOL = command_endpoint(
    "spotter.cmd.turn.pick", PickTool, stream=COMMANDS_STREAM, queue=ORCHESTRATOR_DURABLE,
    description="Answer a pending picker and resume the loop.",
)
UNDO = command_endpoint(
    "spotter.cmd.turn.undo", UndoTool, stream=COMMANDS_STREAM, queue=ORCHESTRATOR_DURABLE,
    description="Run the declared inverse of a succeeded write.",
)


class CancelSuspended(TurnCommand):
    """Stop a conversation that waits for a human: its pending tools are resolved, never run."""


CANCEL_SUSPENDED = command_endpoint(
    "spotter.cmd.turn.cancel", CancelSuspended, stream=COMMANDS_STREAM, queue=ORCHESTRATOR_DURABLE,
    description="Cancel a suspended conversation (pending confirmations or picks).",
)


class CancelTurn(Contract):
    """Broadcast to every orchestrator replica; the one running the turn stops it. The request is
    also stored on the turn row, so a replica that picks the turn up later stops it too."""

    conversation_id: str = Field(description="Conversation whose running turn should stop.")
    turn_id: str = Field(description="The turn to stop.")
    trace_id: str = Field(description="Trace id.")


CANCEL_TURN = event_endpoint(
    "spotter.control.cancel", CancelTurn,
    description="Stop a running turn (fan-out to all orchestrator replicas, no queue group).",
)

COMMAND_SUBJECTS = ["spotter.cmd.>"]


class AdmitCommand(Contract):
    """May this confirm / pick / undo / cancel start? The orchestrator is the one judge; the gateway
    only turns its answer into HTTP."""

    command: Literal["confirm", "pick", "undo", "cancel"] = Field(description="The command asked about.")
    conversation_id: str = Field(description="The caller's conversation (ownership already checked).")
    tool_use_id: str | None = Field(default=None, max_length=64, description="The call it is about (not for cancel).")
    picked_id: str | None = Field(default=None, max_length=255, description="The candidate chosen (pick).")
    actor: Actor = Field(description="Caller.")
    trace_id: str = Field(description="Trace id.")


class Admission(Contract):
    """The verdict. Refusals are typed error replies with the stable codes `tool_execution_not_found`,
    `tool_already_resolved`, `invalid_pick`, `undo_unavailable`, `conversation_busy`, `invalid_request`."""

    verdict: Literal["start", "attach", "cancelling", "idle"] = Field(
        description="start: the lease is held for `turnId`, publish the command with that id; attach: that "
        "command's turn is already running, stream it; cancelling: the running turn `turnId` was asked to stop; "
        "idle: nothing to cancel."
    )
    turn_id: str | None = Field(default=None, description="The turn concerned.")


ADMIT = request_endpoint(
    "spotter.turns.admit", AdmitCommand, Admission, queue=ORCHESTRATOR_DURABLE,
    description="Admissibility of confirm / pick / undo / cancel, decided in one place (the orchestrator).",
)


class OrganizeConversation(Contract):
    """Pin or archive a conversation. The orchestrator owns ai_conversations, so the gateway asks it
    to change the flags instead of writing them."""

    conversation_id: str = Field(description="The caller's conversation (ownership already checked).")
    actor: Actor = Field(description="Caller; the conversation must be theirs in this organization.")
    pinned: bool | None = Field(default=None, description="Pin (true) or unpin (false); null leaves it.")
    archived: bool | None = Field(default=None, description="Archive (true) or restore (false); null leaves it.")
    trace_id: str = Field(description="Trace id.")


class ConversationFlags(Contract):
    """The conversation's flags after the change. Refusal: a typed `not_found` error reply."""

    conversation_id: str = Field(description="The conversation.")
    pinned: bool = Field(description="Whether it is pinned.")
    archived_at: str | None = Field(description="When it was archived (ISO 8601), null when it is not.")


ORGANIZE_CONVERSATION = request_endpoint(
    "spotter.conversations.organize", OrganizeConversation, ConversationFlags, queue=ORCHESTRATOR_DURABLE,
    description="Pin, unpin, archive or restore a conversation (the orchestrator writes ai_conversations).",
)
