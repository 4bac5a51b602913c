"""Seed 003's member coach over HTTP: `POST …/coach/stream` (SSE in seed 003 §8's shapes, each frame
with an `id:` — the session event's sequence — for resume), `POST …/coach/chat` (the same run, answered
as one JSON), and the caller's coach sessions. Members and staff alike, each with their own data; a
coach run holds the session's lease as a turn holds a conversation's, so a second message while one
runs is `conversation_busy`. The run itself is the orchestrator's (a durable command); this module
only turns the session's log into frames."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from typing import Annotated, Any

import asyncpg
from fastapi import APIRouter, Depends, Header, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from spotter_shared import bus
from spotter_shared.contracts.coach import MAX_MESSAGE_CHARS, CoachRun, CreateCoachSession
from spotter_shared.contracts.commands import Actor
from spotter_shared.errors import ErrorCode, SpotterError
from spotter_shared.sessions import ACTIVE_STATUSES, SessionReader, SessionRecord
from spotter_shared.turnlock import TurnLock

from . import edges
from .agent import feed_response, sse_chunks
from .deps import Member, Pool, parse_uuid
from .errors import trace_id
from .sse import SseResponse, frame
from .streams import LoggedEvent, SessionFeed, StreamIdle

log = logging.getLogger(__name__)

router = APIRouter(prefix="/organizations/{orgId}/coach")

SOURCE = "coach"
FATAL_CONTEXTS = ("model", "budget", "loop")
SessionId = Annotated[str, Path(alias="sessionId")]


async def within_limits(request: Request, actor: Member) -> Actor:
    """A member's messages are rate limited like staff's turns."""
    await request.app.state.rate_limits.check(actor)
    return actor


LimitedMember = Annotated[Actor, Depends(within_limits)]


class CoachBody(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, extra="forbid")

    message: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    session_id: str | None = None
    current_workout: dict[str, Any] | None = None
    model: str | None = Field(default=None, max_length=64, pattern=r"^[a-z0-9][a-z0-9.-]*$")


# Frames ---------------------------------------------------------------------------------------------------

def frames(event: LoggedEvent, session_id: str) -> list[dict[str, Any]]:
    """Seed 003 §8's frames for one stored session event; the last carries the event's sequence as its
    id (a resume from it repeats nothing, and misses nothing)."""
    meta = event.data.get("metadata", {})
    out: list[dict[str, Any]] = []
    match event.type:
        case "coach.knowledge" if meta.get("announce"):
            out.append({"type": "knowledge", "data": {"source": meta.get("source"), "displayName": meta.get("displayName"),
                                                       "status": "done"}})
        case "agent.tool_call":
            tool = meta.get("toolName")
            if meta.get("statusStart"):
                out.append({"type": "status", "data": {"message": meta["statusStart"], "tool": tool, "phase": "start"}})
            out.append({"type": tool, "data": {"status": "running", "args": meta.get("arguments", {})}})
        case "agent.tool_result":
            tool, ok = meta.get("toolName"), bool(meta.get("success"))
            frame: dict[str, Any] = {"type": tool, "data": meta.get("result", {}), "formatted": meta.get("formatted", ""),
                                     "status": "done" if ok else "failed"}
            artifact = meta.get("artifact") or (meta.get("result") or {}).get("artifact")
            if artifact:
                frame["artifact"], frame["artifact_id"] = artifact, artifact.get("artifact_id")
            out.append(frame)
            if meta.get("statusDone") or not ok:
                out.append({"type": "status", "data": {"message": meta.get("statusDone") if ok else "Something went wrong",
                                                        "tool": tool, "phase": "done" if ok else "error"}})
        case "session.error" if meta.get("context") in FATAL_CONTEXTS:
            out.append({"type": "error", "message": meta.get("message", ""), "code": meta.get("code", "internal"),
                        "traceId": meta.get("traceId")})
        case "coach.run_completed":
            out.append({"type": "done", "sessionId": session_id})
    items = [{"data": json.dumps(item, ensure_ascii=False)} for item in out]
    if items:
        items[-1]["id"] = str(event.seq)
    return items


# The run ------------------------------------------------------------------------------------------------------

class _Started:
    def __init__(self, session_id: str, run_id: str, after: int, feed: SessionFeed) -> None:
        self.session_id, self.run_id, self.after, self.feed = session_id, run_id, after, feed


async def _start(request: Request, body: CoachBody, actor: Actor, idempotency_key: str | None) -> _Started:
    db: asyncpg.Pool = request.app.state.pool
    reader = SessionReader(db, actor.organization_id, "agent")
    if body.session_id is not None:
        session = await _own(reader, actor, parse_uuid(body.session_id, "sessionId"))
    else:
        # Seed 003's getOrCreateSession: the caller's latest unfinished coach session, or a new one.
        session = next((s for s in await reader.list(user_id=actor.user_id, source=SOURCE, statuses=ACTIVE_STATUSES, limit=1)), None)
    session_id = session.id if session else str(uuid.uuid4())
    run_id = str(uuid.uuid4())
    lock: TurnLock = request.app.state.turn_lock
    if not await lock.claim(session_id, run_id):
        raise SpotterError(ErrorCode.CONVERSATION_BUSY, "Your coach is still answering; wait for it to finish.")
    command = CoachRun(command_id=idempotency_key or run_id, run_id=run_id, session_id=session_id, is_new=session is None,
                       actor=actor, message=body.message, current_workout=body.current_workout, model=body.model,
                       trace_id=trace_id(request))
    feed = await SessionFeed(db, request.app.state.live, session_id, request.app.state.redis).open()
    try:
        await bus.publish(edges.coach_run, command, headers=bus.publish_headers(msg_id=command.command_id, trace_id=command.trace_id))
    except Exception as exc:
        await feed.close()
        await lock.release(session_id, run_id)
        log.warning("could not publish a coach run: %s", exc)
        raise SpotterError(ErrorCode.INTERNAL, edges.UNREACHABLE, status=503) from exc
    return _Started(session_id, run_id, session.last_sequence if session else 0, feed)


def _run_batches(request: Request, started: _Started, ping_s: float | None = None) -> AsyncIterator[list[LoggedEvent]]:
    """The session's events from before the run until its `coach.run_completed`."""
    db = request.app.state.pool

    def stop(event: LoggedEvent) -> bool:
        return event.type == "coach.run_completed" and event.turn_id == started.run_id

    async def running() -> bool:
        # Until the run's last event is stored — waiting in JetStream counts (the gateway's claim on
        # the lease may lapse before a busy orchestrator takes the command).
        return not await db.fetchval(
            """SELECT 1 FROM session_events WHERE session_id = $1 AND event_type = 'coach.run_completed'
                AND metadata->>'runId' = $2""", uuid.UUID(started.session_id), started.run_id)

    return started.feed.batches(started.after, stop, request.app.state.settings.spotter_stream_idle_timeout_s, running, ping_s)


async def _events(batches: AsyncIterator[list[LoggedEvent]]) -> AsyncIterator[LoggedEvent]:
    async with aclosing(batches):
        async for batch in batches:
            for event in batch:
                yield event


def encoder(session_id: str) -> Callable[[list[LoggedEvent]], bytes]:
    """A batch of session events as their seed 003 §8 frames, encoded."""
    def encode(batch: list[LoggedEvent]) -> bytes:
        return b"".join(frame(item["data"], id=item.get("id")) for event in batch for item in frames(event, session_id))
    return encode


@router.post("/stream")
async def stream(request: Request, body: CoachBody, actor: LimitedMember,
                 idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key", max_length=64)] = None) -> SseResponse:
    started = await _start(request, body, actor, idempotency_key)

    def idle() -> bytes:
        return frame(json.dumps({"type": "error", "message": "No progress from your coach; try again.", "code": "internal"}))

    batches = _run_batches(request, started, request.app.state.settings.spotter_sse_ping_s)
    return feed_response(started.feed, sse_chunks(batches, idle, encoder(started.session_id)))


@router.post("/chat")
async def chat(request: Request, body: CoachBody, actor: LimitedMember,
               idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key", max_length=64)] = None) -> dict[str, Any]:
    """The same run, answered once it is over: `{sessionId, response: {messages, exercises, question}, iterations}`."""
    started = await _start(request, body, actor, idempotency_key)
    messages: list[str] = []
    exercises: list[dict[str, Any]] | None = None
    question: dict[str, Any] | None = None
    iterations = 0
    error: dict[str, Any] | None = None
    try:
        async for event in _events(_run_batches(request, started)):
            meta = event.data.get("metadata", {})
            if event.type == "agent.tool_result" and meta.get("success"):
                result = meta.get("result") or {}
                if meta.get("toolName") == "message_notify_user":
                    messages.append(result.get("message", ""))
                    if result.get("artifact"):
                        exercises = result["artifact"]["payload"]["exercises"]
                elif meta.get("toolName") == "message_ask_user":
                    question = {"question": result.get("question"), "options": result.get("options", [])}
            elif event.type == "session.error" and meta.get("context") in FATAL_CONTEXTS:
                error = {"code": meta.get("code", "internal"), "message": meta.get("message", "")}
            elif event.type == "coach.run_completed":
                iterations = int(meta.get("iterations", 0))
    except StreamIdle:
        raise SpotterError(ErrorCode.INTERNAL, "No progress from your coach; try again.", status=504) from None
    answer: dict[str, Any] = {"sessionId": started.session_id, "response": {"messages": messages, "exercises": exercises,
                                                                             "question": question}, "iterations": iterations}
    if error:
        answer["error"] = error
    return answer


# Sessions ---------------------------------------------------------------------------------------------------------

async def _own(reader: SessionReader, actor: Actor, session_id: uuid.UUID) -> SessionRecord:
    session = await reader.get(str(session_id))
    if session is None or session.source != SOURCE or session.user_id != actor.user_id:
        raise SpotterError(ErrorCode.NOT_FOUND, "Coach session not found.")
    return session


@router.get("/sessions")
async def sessions(actor: Member, db: Pool, limit: Annotated[int, Query(ge=1, le=100)] = 10) -> dict[str, Any]:
    found = await SessionReader(db, actor.organization_id, "agent").list(user_id=actor.user_id, source=SOURCE, limit=limit)
    return {"sessions": [s.view().model_dump(mode="json") | {"costUsdMicros": s.cost_usd_micros, "usage": s.usage} for s in found]}


@router.post("/sessions", status_code=201)
async def create(request: Request, actor: Member) -> dict[str, Any]:
    ask = CreateCoachSession(actor=actor, trace_id=trace_id(request))
    return {"session": (await edges.ask(edges.create_coach_session, ask, trace_id=ask.trace_id)).model_dump(mode="json")}


@router.get("/sessions/{sessionId}")
async def session(actor: Member, db: Pool, session_id: SessionId) -> dict[str, Any]:
    """The session, how its last run ended (seed 003's completed / error), its recent tool calls, the
    conversation as the app shows it, and the workout in progress."""
    reader = SessionReader(db, actor.organization_id, "agent")
    record = await _own(reader, actor, parse_uuid(session_id, "sessionId"))
    events = await reader.events(record.id, limit=10_000)
    transcript: list[dict[str, Any]] = []
    actions: list[dict[str, Any]] = []
    workout: dict[str, Any] | None = None
    last_run: dict[str, Any] | None = None
    for event in events:
        meta = event.metadata
        if event.event_type == "coach.run_completed":
            last_run = {"runId": meta.get("runId"), "status": meta.get("status"), "reason": meta.get("reason"),
                        "iterations": meta.get("iterations")}
        elif event.event_type == "user.message":
            transcript.append({"role": "user", "text": "".join(p.get("text", "") for p in event.content if isinstance(p, dict)),
                               "createdAt": event.created_at.isoformat()})
        elif event.event_type == "coach.artifact":
            workout = meta.get("artifact")
        elif event.event_type == "agent.tool_result":
            result = meta.get("result") or {}
            actions.append({"tool": meta.get("toolName"), "success": meta.get("success"), "result": result,
                            "sequence": event.sequence, "createdAt": event.created_at.isoformat()})
            if not meta.get("success"):
                continue
            if meta.get("toolName") == "message_notify_user":
                item = {"role": "coach", "text": result.get("message", ""), "createdAt": event.created_at.isoformat()}
                if result.get("artifact"):
                    item["artifact"] = result["artifact"]
                transcript.append(item)
            elif meta.get("toolName") == "message_ask_user":
                transcript.append({"role": "coach", "text": result.get("question", ""), "createdAt": event.created_at.isoformat(),
                                   "question": {"question": result.get("question"), "options": result.get("options", [])}})
            elif meta.get("toolName") == "log_workout":
                workout = None
    view = record.view().model_dump(mode="json") | {"costUsdMicros": record.cost_usd_micros, "usage": record.usage}
    return {"session": view, "lastRun": last_run, "recentActions": actions[-20:], "transcript": transcript, "workout": workout}


@router.get("/sessions/{sessionId}/events")
async def replay(request: Request, actor: Member, db: Pool, session_id: SessionId,
                 after: Annotated[int | None, Query(ge=0)] = None,
                 last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None) -> SseResponse:
    """The session's frames after `Last-Event-ID` (or `?after=`), then live while a run goes on."""
    record = await _own(SessionReader(db, actor.organization_id, "agent"), actor, parse_uuid(session_id, "sessionId"))
    cursor = after if after is not None else (int(last_event_id) if last_event_id and last_event_id.isdigit() else 0)
    lock: TurnLock = request.app.state.turn_lock
    feed = await SessionFeed(db, request.app.state.live, record.id, request.app.state.redis).open()

    async def running() -> bool:
        return bool(await lock.holder(record.id))

    settings = request.app.state.settings
    batches = feed.batches(cursor, lambda _: False, settings.spotter_stream_idle_timeout_s, running, settings.spotter_sse_ping_s)
    return feed_response(feed, sse_chunks(batches, encode=encoder(record.id)))
