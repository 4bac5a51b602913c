"""Seed 004 over HTTP: a session's transcript (any session type, and operator conversations through
the same API), and the human activity bridge (what am I working on, where did I go, my notes).

Reads come straight from Postgres through the shared, (organization, type)-scoped reader; changes
are asked of the orchestrator, which owns the session tables. A session is visible to its owner and
to the organization's owner and admins; to anyone else it does not exist (404)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Annotated, Any

import asyncpg
from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from spotter_shared.contracts.commands import Actor
from spotter_shared.contracts.sessions import (
    MAX_EVENTS_PER_BATCH, ActiveHumanSession, HumanEvent, RecordHumanEvents, SessionView, StartHumanSession,
    StopHumanSession,
)
from spotter_shared.errors import ErrorCode, SpotterError
from spotter_shared.sessions import SESSION_TYPES, SessionReader, running_human_session, task_ref
from spotter_shared.db import decoded

from . import edges
from .conversations import own_words
from .deps import Member, Pool, Staff, parse_uuid
from .errors import trace_id

router = APIRouter(prefix="/organizations/{orgId}/sessions")

DEFAULT_LIMIT = 100
MAX_LIMIT = 500
SessionId = Annotated[str, Path(alias="sessionId")]


class _Body(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, extra="forbid")


class StartBody(_Body):
    task_id: str = Field(description="One of the studio's tasks.")


class StopBody(_Body):
    session_id: str


class EventsBody(_Body):
    events: list[HumanEvent] = Field(min_length=1, max_length=MAX_EVENTS_PER_BATCH)


# The human activity bridge ------------------------------------------------------------------------

@router.get("/human/active")
async def active(actor: Staff, db: Pool) -> dict[str, Any]:
    """`{session, task}` for the caller's running human session here, or `{session: null, task: null}`."""
    session = await running_human_session(SessionReader(db, actor.organization_id, "mixed"), actor.user_id)
    task = await task_ref(db, actor.organization_id, session.task_id) if session and session.task_id else None
    return ActiveHumanSession(session=session.view() if session else None, task=task).model_dump(mode="json")


@router.post("/human/start")
async def start(request: Request, body: StartBody, actor: Staff) -> dict[str, Any]:
    ask = StartHumanSession(actor=actor, task_id=str(parse_uuid(body.task_id, "taskId")), trace_id=trace_id(request))
    return (await edges.ask(edges.start_human_session, ask, trace_id=ask.trace_id)).model_dump(mode="json")


@router.post("/human/stop")
async def stop(request: Request, body: StopBody, actor: Staff) -> dict[str, Any]:
    ask = StopHumanSession(actor=actor, session_id=str(parse_uuid(body.session_id, "sessionId")), trace_id=trace_id(request))
    return (await edges.ask(edges.stop_human_session, ask, trace_id=ask.trace_id)).model_dump(mode="json")


@router.post("/{sessionId}/events")
async def record(request: Request, body: EventsBody, actor: Staff, session_id: SessionId) -> dict[str, Any]:
    """Only the four human.* types (anything else is a 400 and nothing is stored), only into the
    caller's own human session, only while it runs (409 `session_not_running` after)."""
    ask = RecordHumanEvents(actor=actor, session_id=str(parse_uuid(session_id, "sessionId")), events=body.events,
                            trace_id=trace_id(request))
    return (await edges.ask(edges.record_human_events, ask, trace_id=ask.trace_id)).model_dump(mode="json")


# Transcripts ------------------------------------------------------------------------------------------

@router.get("/{sessionId}")
async def session(actor: Member, db: Pool, session_id: SessionId) -> dict[str, Any]:
    found = await _visible(db, actor, parse_uuid(session_id, "sessionId"))
    return found.view.model_dump(mode="json")


@router.get("/{sessionId}/events")
async def events(
    actor: Member, db: Pool, session_id: SessionId,
    after_sequence: Annotated[int, Query(alias="afterSequence", ge=0)] = 0,
    event_types: Annotated[str | None, Query(alias="eventTypes", max_length=1000)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
) -> dict[str, Any]:
    """The session's events in order, after `afterSequence`, optionally of some types only
    (comma-separated), at most `limit` (default 100, at most 500)."""
    found = await _visible(db, actor, parse_uuid(session_id, "sessionId"))
    types = [t.strip() for t in event_types.split(",") if t.strip()] if event_types else None
    if found.reader is not None:
        rows = await found.reader.events(found.view.id, after_sequence=after_sequence, event_types=types, limit=limit + 1)
        items = [e.to_wire() for e in rows]
    else:
        items = await operator_events(db, uuid.UUID(found.view.id), after_sequence, types, limit + 1)
    page = items[:limit]
    return {
        "session": found.view.model_dump(mode="json"),
        "events": page,
        "hasMore": len(items) > limit,
        "nextAfterSequence": page[-1]["sequence"] if page else after_sequence,
    }


class _Found:
    def __init__(self, view: SessionView, reader: SessionReader | None) -> None:
        self.view, self.reader = view, reader


async def _visible(db: asyncpg.Pool, actor: Actor, session_id: uuid.UUID) -> _Found:
    """A session of this organization the caller may read: their own, or any for owners and admins.
    Operator conversations are sessions too (type agent, source operator)."""
    org = uuid.UUID(actor.organization_id)
    kind = await db.fetchval("SELECT session_type::text FROM sessions WHERE id = $1 AND organization_id = $2", session_id, org)
    if kind in SESSION_TYPES:
        reader = SessionReader(db, actor.organization_id, kind)
        record = await reader.get(str(session_id))
        if record is not None and _may_read(actor, record.user_id):
            return _Found(record.view(), reader)
        raise SpotterError(ErrorCode.NOT_FOUND, "Session not found.")
    conversation = await db.fetchrow(_OPERATOR_SESSION, session_id, org)
    if conversation is None or not _may_read(actor, str(conversation["user_id"])):
        raise SpotterError(ErrorCode.NOT_FOUND, "Session not found.")
    return _Found(operator_view(conversation), None)


def _may_read(actor: Actor, owner: str | None) -> bool:
    return owner == actor.user_id or actor.role in ("owner", "admin")


# Operator conversations as sessions -------------------------------------------------------------------
#
# Seed 001's tables are left as they are: a conversation is read as an `agent` session whose status
# comes from its newest turn (running; suspended → waiting_human; otherwise idle, ready for more), and
# whose log is its SSE event log. Sequence numbers are the SSE ids doubled, so they stay in step with
# the log: event n is 2n, and a turn's input (the user's words, an approval, a pick, an undo) is
# 2n − 1, just before the turn's first event n. Text deltas are folded into one agent.message per
# assistant message, at its message_done.

_OPERATOR_SESSION = """
SELECT c.id, c.user_id, c.title, c.created_at, c.last_message_at, c.last_event_seq,
       (SELECT t.status::text FROM ai_turns t WHERE t.conversation_id = c.id ORDER BY t.started_at DESC LIMIT 1) AS turn_status,
       (SELECT min(t.started_at) FROM ai_turns t WHERE t.conversation_id = c.id) AS started_at
  FROM ai_conversations c WHERE c.id = $1 AND c.organization_id = $2
"""

_TURN_STATUS = {"running": "running", "suspended": "waiting_human"}
_RAW_PAGE = 500

_INPUT_TYPES = {"send": "user.message", "confirm": "user.tool_confirmation", "pick": "user.tool_result",
                "undo": "user.undo", "cancel": "user.cancel"}


def operator_view(row: asyncpg.Record) -> SessionView:
    return SessionView(
        id=str(row["id"]), session_type="agent", status=_TURN_STATUS.get(row["turn_status"], "idle"), source="operator",
        user_id=str(row["user_id"]), title=row["title"], started_at=row["started_at"],
        last_sequence=2 * row["last_event_seq"], created_at=row["created_at"], updated_at=row["last_message_at"],
    )


async def operator_events(db: asyncpg.Pool, conversation_id: uuid.UUID, after: int, types: Sequence[str] | None,
                          limit: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    cursor = after // 2
    while len(out) < limit:
        rows = await db.fetch(
            """SELECT seq, turn_id, type, data::jsonb AS data, created_at FROM ai_conversation_events
                WHERE conversation_id = $1 AND seq > $2 ORDER BY seq LIMIT $3""",
            conversation_id, cursor, _RAW_PAGE,
        )
        if not rows:
            break
        cursor = rows[-1]["seq"]
        for item in await _fold(db, conversation_id, rows):
            if item["sequence"] > after and (types is None or item["eventType"] in types):
                out.append(item)
    return out[:limit]


async def _fold(db: asyncpg.Pool, conversation_id: uuid.UUID, rows: list[asyncpg.Record]) -> list[dict[str, Any]]:
    turn_ids = list({r["turn_id"] for r in rows})
    turns = {r["id"]: r for r in await db.fetch(
        """SELECT t.id, t.kind, t.tool_use_id, (SELECT min(e.seq) FROM ai_conversation_events e
                                                  WHERE e.conversation_id = t.conversation_id AND e.turn_id = t.id) AS first_seq
             FROM ai_turns t WHERE t.conversation_id = $1 AND t.id = ANY($2::uuid[])""",
        conversation_id, turn_ids,
    )}
    messages = await db.fetch(
        """SELECT id, turn_id, role::text AS role, content FROM ai_messages
            WHERE conversation_id = $1 AND turn_id = ANY($2::uuid[]) AND role IN ('user', 'assistant')
            ORDER BY position""",
        conversation_id, turn_ids,
    )
    said = {m["turn_id"]: m for m in reversed(messages) if m["role"] == "user"}  # the turn's first user message
    replies = {str(m["id"]): m for m in messages if m["role"] == "assistant"}
    items: list[dict[str, Any]] = []
    for row in rows:
        turn = turns.get(row["turn_id"])
        if turn is not None and turn["first_seq"] == row["seq"]:
            items.append(_input(turn, said.get(row["turn_id"]), row))
        if (item := _mapped(row, replies)) is not None:
            items.append(item)
    return items


def _item(sequence: int, event_type: str, role: str, row: asyncpg.Record, *, content: list[Any] | None = None,
          metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"sequence": sequence, "eventType": event_type, "role": role, "content": content or [],
            "metadata": {"turnId": str(row["turn_id"]), **(metadata or {})}, "threadId": None,
            "externalEventId": None, "createdAt": row["created_at"].isoformat()}


def _input(turn: asyncpg.Record, said: asyncpg.Record | None, first: asyncpg.Record) -> dict[str, Any]:
    kind = turn["kind"]
    content = [b for b in own_words(decoded(said["content"])) if b.get("type") == "text"] if said and kind == "send" else []
    metadata = {"toolUseId": turn["tool_use_id"]} if turn["tool_use_id"] else {}
    return _item(2 * first["seq"] - 1, _INPUT_TYPES.get(kind, f"user.{kind}"), "user", first, content=content, metadata=metadata)


def _mapped(row: asyncpg.Record, replies: dict[str, asyncpg.Record]) -> dict[str, Any] | None:
    data, seq = decoded(row["data"]), 2 * row["seq"]
    match row["type"]:
        case "conversation_started":
            return _item(seq, "session.created", "system", row, metadata={"source": "operator"})
        case "message_done":
            reply = replies.get(data.get("messageId"))
            text = [b for b in decoded(reply["content"]) if b.get("type") == "text"] if reply else []
            if not text:
                return None
            return _item(seq, "agent.message", "agent", row, content=text,
                         metadata={"messageId": data.get("messageId"), "stopReason": data.get("stopReason")})
        case "tool_started":
            call = {"type": "tool-call", "toolCallId": data.get("toolUseId"), "toolName": f"{data.get('router')}.{data.get('action')}",
                    "input": data.get("input")}
            return _item(seq, "agent.tool_call", "agent", row, content=[call])
        case "tool_completed":
            result = {"type": "tool-result", "toolCallId": data.get("toolUseId"),
                      "toolName": f"{data.get('router')}.{data.get('action')}", "output": data.get("output"),
                      "isError": not data.get("ok")}
            return _item(seq, "agent.tool_result", "agent", row, content=[result],
                         metadata={"inverseAvailable": bool(data.get("inverseAvailable"))})
        case "confirmation_pending":
            return _item(seq, "session.status_change", "system", row, metadata={
                "to": "waiting_human", "reason": "confirmation", "toolUseId": data.get("toolUseId"),
                "confirm": data.get("confirm")})
        case "disambiguation_pending":
            return _item(seq, "session.status_change", "system", row, metadata={
                "to": "waiting_human", "reason": "pick", "toolUseId": data.get("toolUseId"), "prompt": data.get("prompt"),
                "candidates": data.get("candidates")})
        case "error":
            return _item(seq, "session.error", "system", row,
                         metadata={"code": data.get("code"), "message": data.get("message"), "traceId": data.get("traceId")})
        case "done":
            return _item(seq, "agent.turn_completed", "system", row, metadata={"usage": data.get("usage")})
    return None  # text_delta: folded into the message

