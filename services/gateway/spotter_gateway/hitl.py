"""Human in the loop: confirm, pick, undo and cancel (seed 000 flows), and the audit log."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from spotter_shared import bus
from spotter_shared.contracts.commands import (
    Actor, Admission, AdmitCommand, CancelSuspended, ConfirmTool, PickTool, TurnCommand, UndoTool,
)
from spotter_shared.errors import ErrorCode, RemoteError, SpotterError

from . import conversations, edges
from .agent import UNREACHABLE, busy_response, existing_turn_stream, start_turn
from .deps import Member, Pool, Staff, parse_uuid
from .ratelimit import LimitedStaff
from .errors import trace_id
from .sse import SseResponse

router = APIRouter(prefix="/organizations/{orgId}/agent/conversations/{conversationId}")
audit_router = APIRouter()

ADMIT_TIMEOUT_S = 5.0
ADMIT_ATTEMPTS = 8  # about 10 s of backing off while no orchestrator answers

ConversationId = Annotated[str, Path(alias="conversationId")]
ToolUseId = Annotated[str, Path(alias="toolUseId", max_length=64)]


class ConfirmBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    approved: bool = Field(description="Approve (run) or reject.")


class PickBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=255, description="The picked candidate's id.")


class Busy(Exception):
    """The conversation's lease is held by another turn."""


async def admit(request: Request, question: AdmitCommand) -> Admission:
    """Ask the orchestrator, the one judge; a refusal becomes the HTTP error of its stable code."""
    try:
        # Asked again while no orchestrator is connected (a restart), as the command itself would
        # have waited in JetStream: admission is idempotent for the same command.
        return await edges.admit.patiently(question, timeout=ADMIT_TIMEOUT_S, attempts=ADMIT_ATTEMPTS,
                                           trace_id=question.trace_id)
    except (RemoteError, TimeoutError) as exc:
        raise refusal(exc) from exc


def refusal(exc: RemoteError | TimeoutError) -> Busy | SpotterError:
    """The HTTP translation of an admission that did not say yes. `conversation_busy` is not an HTTP
    error for confirm / pick / undo (seed 000 answers it as an SSE error), so it stays distinct."""
    if isinstance(exc, TimeoutError):
        return SpotterError(ErrorCode.INTERNAL, UNREACHABLE, status=503)
    if exc.code == ErrorCode.CONVERSATION_BUSY:
        return Busy()
    return exc.as_spotter()


async def _resolve(request: Request, actor: Actor, conversation_id: uuid.UUID, tool_use_id: str,
                   command: Literal["confirm", "pick", "undo"], publisher: bus.Publisher,
                   make: Callable[..., TurnCommand], picked_id: str | None = None) -> SseResponse:
    cid, trace = str(conversation_id), trace_id(request)
    question = AdmitCommand(command=command, conversation_id=cid, tool_use_id=tool_use_id, picked_id=picked_id,
                            actor=actor, trace_id=trace)
    try:
        admission = await admit(request, question)
    except Busy:
        return busy_response(request, cid, trace)
    assert admission.turn_id is not None
    if admission.verdict == "attach":
        # A double click while the first is still running: the same turn's stream.
        replay = await existing_turn_stream(request, admission.turn_id)
        if replay is not None:
            return replay
    after = await request.app.state.pool.fetchval("SELECT last_event_seq FROM ai_conversations WHERE id = $1", conversation_id)
    command_msg = make(command_id=admission.turn_id, turn_id=admission.turn_id, conversation_id=cid, actor=actor, trace_id=trace)
    return await start_turn(request, publisher, command_msg, after)


@router.post("/confirm/{toolUseId}")
async def confirm(request: Request, body: ConfirmBody, actor: LimitedStaff, db: Pool, conversation_id: ConversationId, tool_use_id: ToolUseId) -> SseResponse:
    conversation = await conversations.owned_conversation(db, actor, parse_uuid(conversation_id, "conversationId"))
    return await _resolve(request, actor, conversation["id"], tool_use_id, "confirm", edges.confirm_tool,
                          lambda **kw: ConfirmTool(**kw, tool_use_id=tool_use_id, approved=body.approved))


@router.post("/pick/{toolUseId}")
async def pick(request: Request, body: PickBody, actor: LimitedStaff, db: Pool, conversation_id: ConversationId, tool_use_id: ToolUseId) -> SseResponse:
    conversation = await conversations.owned_conversation(db, actor, parse_uuid(conversation_id, "conversationId"))
    return await _resolve(request, actor, conversation["id"], tool_use_id, "pick", edges.pick_tool,
                          lambda **kw: PickTool(**kw, tool_use_id=tool_use_id, picked_id=body.id), picked_id=body.id)


@router.post("/undo/{toolUseId}")
async def undo(request: Request, actor: LimitedStaff, db: Pool, conversation_id: ConversationId, tool_use_id: ToolUseId) -> SseResponse:
    conversation = await conversations.owned_conversation(db, actor, parse_uuid(conversation_id, "conversationId"))
    return await _resolve(request, actor, conversation["id"], tool_use_id, "undo", edges.undo_tool,
                          lambda **kw: UndoTool(**kw, tool_use_id=tool_use_id))


@router.post("/cancel", status_code=202)
async def cancel(request: Request, actor: Staff, db: Pool, conversation_id: ConversationId) -> dict[str, Any]:
    conversation = await conversations.owned_conversation(db, actor, parse_uuid(conversation_id, "conversationId"))
    cid, trace = str(conversation["id"]), trace_id(request)
    try:
        admission = await admit(request, AdmitCommand(command="cancel", conversation_id=cid, actor=actor, trace_id=trace))
    except Busy:
        raise SpotterError(ErrorCode.CONVERSATION_BUSY, "This conversation is busy; try again.") from None
    if admission.verdict == "start":
        assert admission.turn_id is not None
        command = CancelSuspended(command_id=admission.turn_id, turn_id=admission.turn_id, conversation_id=cid,
                                  actor=actor, trace_id=trace)
        await bus.publish_command(edges.cancel_suspended, command)
    status = "idle" if admission.verdict == "idle" else "cancelling"
    return {"status": status, "turnId": admission.turn_id}


@audit_router.get("/organizations/{orgId}/audit-logs")
async def audit_logs(
    actor: Member,
    db: Pool,
    agent: Annotated[bool | None, Query(description="true: only the agent's rows; false: only humans'")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    before: Annotated[datetime | None, Query()] = None,
) -> dict[str, Any]:
    if actor.role not in ("owner", "admin"):
        raise SpotterError(ErrorCode.FORBIDDEN, "Only owners and admins can read the audit log.")
    rows = await db.fetch(
        """SELECT id, actor_clerk_id, action, resource, resource_id, metadata, created_at FROM audit_logs
           WHERE organization_id = $1
             AND ($2::boolean IS NULL OR coalesce((metadata->>'agent')::boolean, false) = $2)
             AND ($3::timestamptz IS NULL OR created_at < $3)
           ORDER BY created_at DESC LIMIT $4""",
        uuid.UUID(actor.organization_id), agent, before, limit,
    )
    return {"auditLogs": [
        {"id": str(r["id"]), "actorId": r["actor_clerk_id"], "action": r["action"], "resource": r["resource"],
         "resourceId": r["resource_id"], "metadata": r["metadata"], "createdAt": r["created_at"].isoformat()}
        for r in rows
    ]}
