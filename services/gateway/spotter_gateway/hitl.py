"""Human in the loop: confirm, pick, undo and cancel (seed 000 flows), and the audit log."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

import asyncpg
from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette import EventSourceResponse

from spotter_shared import bus
from spotter_shared.contracts.commands import (
    CANCEL_SUSPENDED, CANCEL_TURN, CONFIRM_TOOL, PICK_TOOL, UNDO, Actor, CancelSuspended, CancelTurn, ConfirmTool, PickTool,
    UndoTool,
)
from spotter_shared.contracts.tools import TOOL_CATALOG, CatalogRequest, ToolCatalog, ToolSpec
from spotter_shared.errors import ErrorCode, SpotterError
from spotter_shared.turnlock import TurnLock

from . import conversations
from .agent import busy_response, existing_turn_stream, start_turn
from .deps import Member, Pool, Staff, parse_uuid
from .errors import trace_id

router = APIRouter(prefix="/organizations/{orgId}/agent/conversations/{conversationId}")
audit_router = APIRouter()

# Deterministic turn ids: a double click publishes the same command twice, which JetStream drops,
# and both clicks stream the one turn.
_NS = uuid.UUID("0f7c4c1d-4a7e-4f51-b3f3-0e6a7a0c2b9d")

ConversationId = Annotated[str, Path(alias="conversationId")]
ToolUseId = Annotated[str, Path(alias="toolUseId", max_length=64)]


class ConfirmBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    approved: bool = Field(description="Approve (run) or reject.")


class PickBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=255, description="The picked candidate's id.")


async def _execution(db: asyncpg.Pool, conversation_id: uuid.UUID, tool_use_id: str) -> asyncpg.Record:
    row = await db.fetchrow(
        """SELECT tool_use_id, router, action, input, status::text AS status FROM ai_tool_executions
           WHERE conversation_id = $1 AND tool_use_id = $2""",
        conversation_id, tool_use_id,
    )
    if row is None:
        raise SpotterError(ErrorCode.TOOL_EXECUTION_NOT_FOUND, "No such tool call in this conversation.")
    return row


async def _spec(request: Request, actor: Actor, router_name: str, action: str) -> ToolSpec | None:
    catalog = await bus.request(request.app.state.broker, TOOL_CATALOG, CatalogRequest(role=actor.role),
                                timeout=5.0, trace_id=trace_id(request))
    assert isinstance(catalog, ToolCatalog)
    return next((t for t in catalog.tools if t.router == router_name and t.action == action), None)


async def _begin(request: Request, actor: Actor, conversation_id: str, kind: str, tool_use_id: str, execution_status: str | None,
                 make: Any, subject: str) -> EventSourceResponse:
    turn_id = str(uuid.uuid5(_NS, f"{kind}:{conversation_id}:{tool_use_id}"))
    previous = await request.app.state.pool.fetchval("SELECT status::text FROM ai_turns WHERE id = $1", uuid.UUID(turn_id))
    if previous is not None and previous != "running":
        raise SpotterError(ErrorCode.TOOL_ALREADY_RESOLVED, "This action was already resolved.")
    replay = await existing_turn_stream(request, turn_id)
    if replay is not None:
        return replay  # a double click while the first is still running: the same turn's stream
    if execution_status is not None and execution_status != "pending":
        raise SpotterError(ErrorCode.TOOL_ALREADY_RESOLVED, "This action was already resolved.")
    lock: TurnLock = request.app.state.turn_lock
    if not await lock.claim(conversation_id, turn_id):
        return busy_response(request, conversation_id, trace_id(request))
    after = await request.app.state.pool.fetchval("SELECT last_event_seq FROM ai_conversations WHERE id = $1", uuid.UUID(conversation_id))
    command = make(command_id=turn_id, turn_id=turn_id, conversation_id=conversation_id,
                   actor=actor, trace_id=trace_id(request))
    return await start_turn(request, subject, command, after)


@router.post("/confirm/{toolUseId}")
async def confirm(request: Request, body: ConfirmBody, actor: Staff, db: Pool, conversation_id: ConversationId, tool_use_id: ToolUseId) -> EventSourceResponse:
    conversation = await conversations.owned_conversation(db, actor, parse_uuid(conversation_id, "conversationId"))
    execution = await _execution(db, conversation["id"], tool_use_id)
    spec = await _spec(request, actor, execution["router"], execution["action"])
    if spec is None or spec.kind == "user_picker" or spec.confirm == "never":
        raise SpotterError(ErrorCode.INVALID_REQUEST, "This tool call does not take a confirmation.")
    return await _begin(
        request, actor, str(conversation["id"]), "confirm", tool_use_id, execution["status"],
        lambda **kw: ConfirmTool(**kw, tool_use_id=tool_use_id, approved=body.approved), CONFIRM_TOOL.subject,
    )


@router.post("/pick/{toolUseId}")
async def pick(request: Request, body: PickBody, actor: Staff, db: Pool, conversation_id: ConversationId, tool_use_id: ToolUseId) -> EventSourceResponse:
    conversation = await conversations.owned_conversation(db, actor, parse_uuid(conversation_id, "conversationId"))
    execution = await _execution(db, conversation["id"], tool_use_id)
    spec = await _spec(request, actor, execution["router"], execution["action"])
    if spec is None or spec.kind != "user_picker":
        raise SpotterError(ErrorCode.INVALID_REQUEST, "This tool call does not take a pick.")
    if execution["status"] == "pending":
        candidates = {str(c.get("id")) for c in (execution["input"] or {}).get("candidates", [])}
        if body.id not in candidates:
            raise SpotterError(ErrorCode.INVALID_PICK, "That choice is not one of the offered candidates.")
    return await _begin(
        request, actor, str(conversation["id"]), "pick", tool_use_id, execution["status"],
        lambda **kw: PickTool(**kw, tool_use_id=tool_use_id, picked_id=body.id), PICK_TOOL.subject,
    )


@router.post("/undo/{toolUseId}")
async def undo(request: Request, actor: Staff, db: Pool, conversation_id: ConversationId, tool_use_id: ToolUseId) -> EventSourceResponse:
    conversation = await conversations.owned_conversation(db, actor, parse_uuid(conversation_id, "conversationId"))
    execution = await _execution(db, conversation["id"], tool_use_id)
    spec = await _spec(request, actor, execution["router"], execution["action"])
    if execution["status"] != "succeeded" or spec is None or not spec.has_inverse:
        raise SpotterError(ErrorCode.UNDO_UNAVAILABLE, "Only a completed action that declares an undo can be undone.")
    return await _begin(
        request, actor, str(conversation["id"]), "undo", tool_use_id, None,
        lambda **kw: UndoTool(**kw, tool_use_id=tool_use_id), UNDO.subject,
    )


@router.post("/cancel", status_code=202)
async def cancel(request: Request, actor: Staff, db: Pool, conversation_id: ConversationId) -> dict[str, Any]:
    conversation = await conversations.owned_conversation(db, actor, parse_uuid(conversation_id, "conversationId"))
    cid = str(conversation["id"])
    lock: TurnLock = request.app.state.turn_lock
    running = await lock.holder(cid) or await db.fetchval(
        "SELECT id::text FROM ai_turns WHERE conversation_id = $1 AND status = 'running' LIMIT 1", conversation["id"])
    if running:
        # Stored first (a replica that picks the turn up later stops it too), then broadcast.
        await lock.request_cancel(running)
        message = CancelTurn(conversation_id=cid, turn_id=running, trace_id=trace_id(request))
        await request.app.state.broker.publish(message.to_bytes(), CANCEL_TURN.subject)
        return {"status": "cancelling", "turnId": running}
    pending = await db.fetchval(
        "SELECT tool_use_id FROM ai_tool_executions WHERE conversation_id = $1 AND status = 'pending' ORDER BY created_at LIMIT 1",
        conversation["id"])
    if pending is None:
        return {"status": "idle", "turnId": None}
    turn_id = str(uuid.uuid5(_NS, f"cancel:{cid}:{pending}"))
    if not await lock.claim(cid, turn_id):
        raise SpotterError(ErrorCode.CONVERSATION_BUSY, "This conversation is busy; try again.")
    command = CancelSuspended(command_id=turn_id, turn_id=turn_id, conversation_id=cid, actor=actor,
                              trace_id=trace_id(request))
    await request.app.state.broker.publish(
        command.to_bytes(), CANCEL_SUSPENDED.subject, stream=CANCEL_SUSPENDED.stream,
        headers=bus.publish_headers(msg_id=command.command_id, trace_id=command.trace_id),
    )
    return {"status": "cancelling", "turnId": turn_id}


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
