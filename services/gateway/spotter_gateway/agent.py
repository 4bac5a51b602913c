"""Seed 000's HTTP surface under /organizations/{orgId}/agent, plus replay and usage."""

from __future__ import annotations

import asyncio
import logging
import unicodedata
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel
from nats.errors import NoRespondersError
from redis.exceptions import RedisError

from spotter_shared import bus
from spotter_shared.contracts.billing import UsageQuery
from spotter_shared.contracts.commands import Actor, OrganizeConversation, PageContext, SendMessage, TurnCommand
from spotter_shared.contracts.events import Done, ErrorEvent, TurnUsage
from spotter_shared.contracts.rag import EmbedRequest
from spotter_shared.errors import ErrorCode, RemoteError, SpotterError
from spotter_shared.turnlock import TurnLock

from . import conversations, edges, search
from .deps import (
    MEMBER_COLUMNS, MEMBER_JOINS, Member, Pool, member_actor, org_member, org_uuid_of, parse_uuid, require_staff, verified_user_id,
)
from .edges import UNREACHABLE
from .ratelimit import Lease
from .errors import trace_id
from .sse import SseResponse, frame, ping
from .streams import EventFeed, LoggedEvent, StreamIdle

log = logging.getLogger(__name__)

router = APIRouter(prefix="/organizations/{orgId}/agent")


# Idempotency-Key → deterministic turn/conversation ids, so a retried POST re-attaches.
IDEMPOTENCY_NS = uuid.UUID("8d6f6c1e-5a0e-4c53-9d0c-7b1f3f2b8e11")


class SendBody(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, extra="forbid")

    conversation_id: uuid.UUID | None = Field(default=None)
    message: str = Field(min_length=1)
    page_context: PageContext | None = Field(default=None)

    @field_validator("message")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("message must not be blank")
        return value


def feed_response(feed: EventFeed, chunks: AsyncIterator[bytes]) -> SseResponse:
    """A stream over a feed: the client's disconnect ends the feed's wait, and the feed is closed
    however the response ends (even one that never started its body)."""
    return SseResponse(chunks, on_disconnect=feed.hang_up, on_close=feed.close)


def frames_of(batch: list[LoggedEvent]) -> bytes:
    return b"".join(event.frame for event in batch)


async def sse_chunks(batches: AsyncIterator[list[LoggedEvent]], on_idle: Callable[[], bytes] | None = None,
                     encode: Callable[[list[LoggedEvent]], bytes] = frames_of) -> AsyncIterator[bytes]:
    """Each batch of events as one chunk of frames, an empty batch (the feed's keep-alive) as a ping;
    a stream idle too long ends with `on_idle()`'s frames."""
    async with aclosing(batches):
        try:
            async for batch in batches:
                if not batch:
                    yield ping()
                elif chunk := encode(batch):
                    yield chunk
        except StreamIdle:
            if on_idle is not None:
                yield on_idle()


def transient_error(code: ErrorCode, message: str, trace: str, conversation_id: str | None) -> bytes:
    """An error that is not part of the conversation's log (nothing happened), so it has no id."""
    frames = [frame(ErrorEvent(code=code, message=message, trace_id=trace).model_dump_json(), event="error")]
    if conversation_id:
        # The same `done` the orchestrator sends, with nothing used.
        done = Done(conversation_id=conversation_id, usage=TurnUsage())
        frames.append(frame(done.model_dump_json(), event="done"))
    return b"".join(frames)


async def _once(chunk: bytes) -> AsyncIterator[bytes]:
    yield chunk


def transient_response(request: Request, code: ErrorCode, message: str, conversation_id: str) -> SseResponse:
    return SseResponse(_once(transient_error(code, message, trace_id(request), conversation_id)))


def busy_response(request: Request, conversation_id: str, trace: str) -> SseResponse:
    return transient_response(request, ErrorCode.CONVERSATION_BUSY,
                              "This conversation is still answering. Wait for it to finish or cancel it.", conversation_id)


# One statement for everything a send reads before it is admitted: the caller and their membership,
# the conversation the body names (when it is the caller's own) and the turn an Idempotency-Key already
# started, with the sequence number its stream starts after.
_SEND = f"""SELECT {MEMBER_COLUMNS}, c.id AS conversation_id, c.last_event_seq,
       t.conversation_id AS earlier_conversation_id,
       (SELECT min(e.seq) FROM ai_conversation_events e
         WHERE e.conversation_id = t.conversation_id AND e.turn_id = t.id) AS earlier_first_seq
  {MEMBER_JOINS}
  LEFT JOIN ai_conversations c ON c.id = $3 AND c.organization_id = $2 AND c.user_id = u.id
  LEFT JOIN ai_turns t ON t.id = $4
 WHERE u.id = $1"""


@dataclass(frozen=True)
class SendAdmission:
    """What a send's admission found, for the handler to answer in the order a send always has:
    a message too long, a conversation that is not the caller's, the Idempotency-Key's earlier turn,
    a busy conversation — each after the rate limits."""

    actor: Actor
    body: SendBody
    idempotency_key: str | None
    command_id: str
    turn_id: str
    too_long: bool
    conversation_id: str | None  # None: the body names a conversation that is not the caller's
    is_new: bool
    after: int
    earlier: tuple[str, int] | None  # the earlier turn's conversation and the sequence its stream starts after
    claimed: bool | None  # the lease, claimed for this turn or held by another; None when not asked for


async def send_admission(
    request: Request,
    org_id: Annotated[str, Path(alias="orgId")],
    body: SendBody,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key", max_length=64)] = None,
) -> SendAdmission:
    """A send's checks in two round trips: one statement (the caller, their membership, the conversation,
    an earlier turn of the same Idempotency-Key), then one Redis script (the user's and the
    organization's rate limits, then — only for a turn that is to start — the conversation's lease).
    Unauthorized, not_found (organization), forbidden and rate_limited come out of here, in that order."""
    request.state.send_admitted = True
    user_id = verified_user_id(request)
    state = request.app.state
    org_uuid = await org_uuid_of(request, state.pool, user_id, org_id)
    command_id = idempotency_key or str(uuid.uuid4())
    turn_id = str(uuid.uuid5(IDEMPOTENCY_NS, f"{user_id}:{command_id}"))
    row = await state.pool.fetchrow(_SEND, user_id, org_uuid, body.conversation_id,
                                    uuid.UUID(turn_id) if idempotency_key else None)
    actor = require_staff(member_actor(request, row, org_uuid))
    assert row is not None
    too_long = len(body.message) > state.settings.spotter_max_message_chars
    conversation_id: str | None
    if body.conversation_id is not None:
        conversation_id = str(row["conversation_id"]) if row["conversation_id"] is not None else None
        is_new, after = False, row["last_event_seq"] or 0
    else:
        conversation_id = str(uuid.uuid5(IDEMPOTENCY_NS, f"conversation:{turn_id}")) if idempotency_key else str(uuid.uuid4())
        is_new, after = True, 0
    # A retried POST with the same Idempotency-Key: that turn is replayed instead of starting one. Without
    # a key the command id was just drawn, so there is no such turn (the statement did not look).
    earlier = None
    if row["earlier_conversation_id"] is not None:
        earlier = (str(row["earlier_conversation_id"]), (row["earlier_first_seq"] or 1) - 1)
    starts = conversation_id is not None and not too_long and earlier is None
    lease = Lease(conversation_id, turn_id, state.turn_lock.ttl_ms) if starts and conversation_id else None
    claimed = await state.rate_limits.admit(actor, lease)
    return SendAdmission(actor=actor, body=body, idempotency_key=idempotency_key, command_id=command_id, turn_id=turn_id,
                         too_long=too_long, conversation_id=conversation_id, is_new=is_new, after=after, earlier=earlier,
                         claimed=claimed)


async def refused_send(request: Request, org_id: Annotated[str, Path(alias="orgId")]) -> None:
    """Only for a send whose body or Idempotency-Key is invalid (FastAPI then skips `send_admission`):
    it is still authenticated and counted against the rate limits before its 400, as every send is."""
    if getattr(request.state, "send_admitted", False):
        return
    actor = require_staff(await org_member(request, org_id))
    await request.app.state.rate_limits.check(actor)


@router.post("/messages")
async def send_message(
    request: Request,
    admission: Annotated[SendAdmission, Depends(send_admission)],
    _refused: Annotated[None, Depends(refused_send)],
) -> SseResponse:
    settings = request.app.state.settings
    trace = trace_id(request)
    if admission.too_long:
        raise SpotterError(ErrorCode.INVALID_REQUEST, f"message is longer than {settings.spotter_max_message_chars} characters.")
    if admission.conversation_id is None:
        raise SpotterError(ErrorCode.NOT_FOUND, "Conversation not found.")
    if admission.earlier is not None:
        conversation_id, after = admission.earlier
        return await turn_stream(request, conversation_id, admission.turn_id, after)
    if not admission.claimed:
        return busy_response(request, admission.conversation_id, trace)

    body = admission.body
    command = SendMessage(
        command_id=admission.command_id, turn_id=admission.turn_id, conversation_id=admission.conversation_id,
        is_new=admission.is_new, actor=admission.actor, message=body.message, page_context=body.page_context, trace_id=trace,
    )
    return await start_turn(request, edges.send_message, command, admission.after)


async def start_turn(request: Request, publisher: bus.Publisher, command: TurnCommand, after: int) -> SseResponse:
    """Publish a turn command (its lease is held) and stream its events until its `done`. The feed is
    attached before publishing, so no event of the turn can be missed. The log after `after` (read
    once the lease was held) is not read first: the turn before let go of the lease only once its
    `done` was stored, so nothing is expected there, and an event that landed between that read and
    the attach shows as a gap before the turn's first live event, which reads the log (as the
    watchdog does for a feed that hears nothing). The turn, just published, is known to run (its
    stream does not ask)."""
    feed = await open_feed(request, command.conversation_id)
    try:
        await bus.publish_command(publisher, command)
    except Exception as exc:
        await feed.close()
        await request.app.state.turn_lock.release(command.conversation_id, command.turn_id)
        log.warning("could not publish %s: %s", type(command).__name__, exc)
        raise SpotterError(ErrorCode.INTERNAL, UNREACHABLE, status=503) from exc
    return feed_response(feed, _turn_events(request, feed, command.turn_id, after, known=[], running=True))


async def open_feed(request: Request, conversation_id: str) -> EventFeed:
    state = request.app.state
    return await EventFeed(state.pool, state.live, conversation_id, state.redis).open()


async def existing_turn_stream(request: Request, turn_id: str) -> SseResponse | None:
    """A turn already started by the same command (same deterministic turn id): stream it from its
    first event instead of starting another."""
    db = request.app.state.pool
    existing = await db.fetchrow("SELECT conversation_id FROM ai_turns WHERE id = $1", uuid.UUID(turn_id))
    if existing is None:
        return None
    first = await db.fetchval(
        "SELECT min(seq) FROM ai_conversation_events WHERE conversation_id = $1 AND turn_id = $2",
        existing["conversation_id"], uuid.UUID(turn_id),
    )
    return await turn_stream(request, str(existing["conversation_id"]), turn_id, (first or 1) - 1)


async def turn_stream(request: Request, conversation_id: str, turn_id: str, after: int) -> SseResponse:
    """An earlier turn's events, from `after` until its `done`."""
    feed = await open_feed(request, conversation_id)
    return feed_response(feed, _turn_events(request, feed, turn_id, after))


def _turn_events(request: Request, feed: EventFeed, turn_id: str, after: int, *, known: list[LoggedEvent] | None = None,
                 running: bool = False) -> AsyncIterator[bytes]:
    """Events of the conversation from `after` until this turn's `done`."""
    settings = request.app.state.settings
    db = request.app.state.pool

    def stop(event: LoggedEvent) -> bool:
        return event.type == "done" and event.turn_id == turn_id

    async def still_running() -> bool:
        status = await db.fetchval("SELECT status::text FROM ai_turns WHERE id = $1", uuid.UUID(turn_id))
        # Not yet picked up (the command waits in JetStream) counts as running.
        return status is None or status == "running"

    def idle() -> bytes:
        return transient_error(ErrorCode.INTERNAL, "No progress from the assistant; the turn may still finish — reopen the conversation.",
                               trace_id(request), None)

    return sse_chunks(feed.batches(after, stop, settings.spotter_stream_idle_timeout_s, still_running, settings.spotter_sse_ping_s,
                                   known=known, running=running), idle)


@router.get("/conversations/{conversationId}/events")
async def replay_events(
    request: Request,
    actor: Member,
    db: Pool,
    conversation_id: Annotated[str, Path(alias="conversationId")],
    after: Annotated[int | None, Query(ge=0)] = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> SseResponse:
    conversation = await conversations.owned_conversation(db, actor, parse_uuid(conversation_id, "conversationId"))
    cursor = after if after is not None else _parse_last_event_id(last_event_id)
    lock: TurnLock = request.app.state.turn_lock
    cid = str(conversation["id"])

    async def running() -> bool:
        try:
            if await lock.holder(cid):
                return True
        except RedisError as exc:  # Redis busy or away for a moment: the log and the turn row decide
            log.warning("could not read the lease of %s: %r", cid, exc)
        return bool(await db.fetchval(
            "SELECT 1 FROM ai_turns WHERE conversation_id = $1 AND status = 'running' LIMIT 1", conversation["id"]))

    settings = request.app.state.settings
    feed = await open_feed(request, cid)
    return feed_response(feed, sse_chunks(feed.batches(cursor, lambda e: False, settings.spotter_stream_idle_timeout_s, running,
                                                       settings.spotter_sse_ping_s)))


def _parse_last_event_id(value: str | None) -> int:
    if value is None or value.strip() == "":
        return 0
    try:
        parsed = int(value.strip())
    except ValueError:
        raise SpotterError(ErrorCode.INVALID_REQUEST, "Last-Event-ID must be an event sequence number.") from None
    if parsed < 0:
        raise SpotterError(ErrorCode.INVALID_REQUEST, "Last-Event-ID must not be negative.")
    return parsed


@router.get("/conversations")
async def list_conversations(
    request: Request,
    actor: Member,
    db: Pool,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    q: Annotated[str | None, Query(max_length=search.MAX_QUERY_CHARS)] = None,
    archived: bool = False,
) -> dict[str, Any]:
    """The caller's open conversations (`archived=true`: the archived ones), pinned first, then
    newest; with `q`, those matching it, best first."""
    text = " ".join((q or "").split())
    if not text:
        return {"conversations": await conversations.list_for(db, actor, limit, archived=archived)}
    if any(unicodedata.category(ch) == "Cc" for ch in text):
        raise SpotterError(ErrorCode.INVALID_REQUEST, "q must not contain control characters.")
    found = await search.search(db, actor, text, limit, lambda: query_embedding(request, text))
    return {"conversations": await conversations.summaries(db, actor, found.ids),
            "search": {"q": text, "semantic": found.semantic}}


async def query_embedding(request: Request, text: str) -> search.QueryVector | None:
    """The search query's embedding from rag, or None (lexical only) when rag does not answer in time."""
    budget = request.app.state.settings.spotter_search_embed_timeout_s
    try:
        async with asyncio.timeout(budget):
            result = await edges.embed(EmbedRequest(texts=[text], kind="query"), timeout=budget,
                                       trace_id=trace_id(request))
    except Exception as exc:  # noqa: BLE001 — the semantic half is optional: search goes on lexically
        log.info("conversation search without embedding: %s", type(exc).__name__)
        return None
    vector = search.query_vector(result)
    if vector is None:
        log.warning("conversation search: no summary index for embedding model %s (%d dims)", result.model, result.dimensions)
    return vector


@router.get("/conversations/{conversationId}")
async def get_conversation(actor: Member, db: Pool, conversation_id: Annotated[str, Path(alias="conversationId")]) -> dict[str, Any]:
    row = await conversations.owned_conversation(db, actor, parse_uuid(conversation_id, "conversationId"))
    return await conversations.detail(db, row)


class OrganizeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pinned: bool | None = Field(default=None)
    archived: bool | None = Field(default=None)

    @model_validator(mode="after")
    def _something(self) -> "OrganizeBody":
        if self.pinned is None and self.archived is None:
            raise ValueError("give pinned or archived")
        return self


@router.patch("/conversations/{conversationId}")
async def organize_conversation(request: Request, body: OrganizeBody, actor: Member, db: Pool,
                                conversation_id: Annotated[str, Path(alias="conversationId")]) -> dict[str, Any]:
    """Pin or archive: the orchestrator owns the conversation row, so it is asked to change it."""
    row = await conversations.owned_conversation(db, actor, parse_uuid(conversation_id, "conversationId"))
    ask = OrganizeConversation(conversation_id=str(row["id"]), actor=actor, pinned=body.pinned,
                               archived=body.archived, trace_id=trace_id(request))
    await edges.ask(edges.organize, ask, trace_id=ask.trace_id)
    return conversations.summary(await conversations.owned_conversation(db, actor, row["id"]))


@router.get("/usage")
async def usage(request: Request, actor: Member) -> dict[str, Any]:
    snapshot = await edges.ask(edges.usage, UsageQuery(organization_id=actor.organization_id), trace_id=trace_id(request))
    return snapshot.model_dump(mode="json")
