"""Seed 004's human activity bridge: a staff member says what they are working on (a studio task), and
while that session runs the app reports where they go and what they note, so the operator agent
starts a conversation knowing it. One running human session per person per organization (the
database holds it: a partial unique index); starting another ends the previous one as completed.

Entity views are derived here from the paths the app reports, not trusted from the client's say-so,
and are kept once per entity and session (external id `entity:<type>:<id>`)."""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import asyncpg

from spotter_shared.background import BackgroundJob
from spotter_shared.contracts.commands import Actor
from spotter_shared.contracts.sessions import (
    EntityType, EntityView, HumanSessionChanged, Marker, Navigate, RecordedHumanEvents, RecordHumanEvents,
    StartHumanSession, StopHumanSession, TaskRef, TaskSwitch,
)
from spotter_shared.errors import ErrorCode, SpotterError
from spotter_shared.sessions import HUMAN_SOURCE, SessionRecord, running_human_session, task_ref

from .sessions import NewEvent, Sessions

log = logging.getLogger(__name__)

_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
# The web app's detail pages, and the ones a deep link may name; only strictly id-shaped segments
# count (`/members/dana` is a search, not an entity).
ENTITY_PATHS: tuple[tuple[re.Pattern[str], EntityType], ...] = tuple(
    (re.compile(f"^{pattern}/?$".replace("ID", f"(?P<id>{_UUID})")), kind)
    for pattern, kind in (
        ("/members/ID", "member"),
        ("/programs/ID", "program"),
        (f"/programs/{_UUID}/workouts/ID", "workout"),
        ("/workouts/ID", "workout"),
        ("/schedule/ID", "class_session"),
        ("/classes/ID", "class_session"),
        ("/tasks/ID", "task"),
    )
)
# A reported time may be a few seconds in the future (clock skew) and never before the session.
_SKEW = timedelta(seconds=5)


def entity_of(pathname: str) -> tuple[EntityType, str] | None:
    """The studio entity a path names by id, if any (query string and fragment ignored)."""
    path = pathname.split("?", 1)[0].split("#", 1)[0]
    for pattern, kind in ENTITY_PATHS:
        if match := pattern.match(path):
            return kind, str(uuid.UUID(match["id"]))
    return None


def entity_key(kind: str, entity_id: str) -> str:
    return f"entity:{kind}:{entity_id}"


@dataclass(frozen=True)
class HumanBridge:
    pool: asyncpg.Pool

    def _sessions(self, actor: Actor) -> Sessions:
        return Sessions(self.pool, actor.organization_id, "mixed")

    async def start(self, cmd: StartHumanSession) -> HumanSessionChanged:
        sessions = self._sessions(cmd.actor)
        async with self.pool.acquire() as c, c.transaction():
            # Starts by one person in one studio queue here; the unique index is the backstop.
            await c.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                            f"human-session:{cmd.actor.organization_id}:{cmd.actor.user_id}")
            task = await task_ref(c, cmd.actor.organization_id, cmd.task_id)
            if task is None:
                raise SpotterError(ErrorCode.NOT_FOUND, "Task not found.")
            current = await running_human_session(sessions, cmd.actor.user_id, conn=c)
            if current is not None and current.task_id == task.id:
                return HumanSessionChanged(session=current.view(), task=task)
            if current is not None:
                await sessions.transition(current.id, "completed", conn=c)
            created = await sessions.create(source=HUMAN_SOURCE, user_id=cmd.actor.user_id, status="running",
                                            task_id=task.id, title=task.title, conn=c)
        return HumanSessionChanged(session=created.view(), task=task)

    async def stop(self, cmd: StopHumanSession) -> HumanSessionChanged:
        sessions = self._sessions(cmd.actor)
        async with self.pool.acquire() as c, c.transaction():
            session = await self._owned(sessions, cmd.actor, cmd.session_id, c)
            if session.status == "running":
                session = await sessions.transition(session.id, "completed", conn=c)
            # Stopping an ended session again is a no-op: a second tab's stop button, a retry.
            task = await task_ref(c, cmd.actor.organization_id, session.task_id) if session.task_id else None
        return HumanSessionChanged(session=session.view(), task=task)

    async def record(self, cmd: RecordHumanEvents) -> RecordedHumanEvents:
        sessions = self._sessions(cmd.actor)
        now = datetime.now(UTC)
        async with self.pool.acquire() as c, c.transaction():
            session = await self._owned(sessions, cmd.actor, cmd.session_id, c, lock=True)
            if session.status != "running":
                raise SpotterError(ErrorCode.SESSION_NOT_RUNNING, f"This session is {session.status}; start a new one.")
            events: list[NewEvent] = []
            for event in cmd.events:
                at = _clamp(event.metadata.at, session, now)
                client_key = f"client:{event.id}" if event.id else None
                match event:
                    case Navigate():
                        events.append(NewEvent("human.navigate", "user", metadata={"pathname": event.metadata.pathname, "at": at},
                                               external_event_id=client_key))
                        if seen := entity_of(event.metadata.pathname):
                            events.append(_entity_view(*seen, event.metadata.pathname, at))
                    case EntityView():
                        events.append(_entity_view(event.metadata.entity_type, event.metadata.entity_id,
                                                   event.metadata.pathname, at))
                    case Marker():
                        events.append(NewEvent("human.marker", "user", content=[{"type": "text", "text": event.text}],
                                               metadata={"at": at}, external_event_id=client_key))
                    case TaskSwitch():
                        task = await task_ref(c, cmd.actor.organization_id, event.metadata.task_id)
                        if task is None:
                            raise SpotterError(ErrorCode.NOT_FOUND, "Task not found.")
                        if task.id != session.task_id:
                            events.append(NewEvent("human.task_switch", "user", external_event_id=client_key,
                                                   metadata={"taskId": task.id, "fromTaskId": session.task_id, "at": at}))
                            session = await sessions.set_task(session.id, task.id, task.title, conn=c)
            stored = await sessions.append(session.id, events, conn=c)
            last = stored[-1].sequence if stored else session.last_sequence
        return RecordedHumanEvents(stored=len(stored), last_sequence=last)

    async def _owned(self, sessions: Sessions, actor: Actor, session_id: str, c: asyncpg.Connection,
                     *, lock: bool = False) -> SessionRecord:
        """The caller's own human session; anyone else's (or none) is not found, so ids leak nothing."""
        if lock:
            await c.execute("SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE", uuid.UUID(session_id))
        session = await sessions.get(session_id, conn=c)
        if session is None or session.source != HUMAN_SOURCE or session.user_id != actor.user_id:
            raise SpotterError(ErrorCode.NOT_FOUND, "Session not found.")
        return session


async def abandon_idle_sessions(pool: asyncpg.Pool, idle_for: timedelta) -> int:
    """Running human sessions with nothing recorded for `idle_for` become `abandoned` (the tab was
    closed, the person went home). Safe on every replica at once: rows are claimed with SKIP LOCKED
    and each move goes through the status machine."""
    async with pool.acquire() as c, c.transaction():
        rows = await c.fetch(
            """SELECT id, organization_id FROM sessions
                WHERE source = $1 AND status = 'running' AND updated_at < now() - $2::interval
                ORDER BY updated_at LIMIT 500 FOR UPDATE SKIP LOCKED""",
            HUMAN_SOURCE, idle_for,
        )
        for row in rows:
            await Sessions(pool, str(row["organization_id"]), "mixed").transition(str(row["id"]), "abandoned", conn=c)
    if rows:
        log.info("abandoned %d idle human session(s)", len(rows))
    return len(rows)


class IdleSweep(BackgroundJob):
    """Every `every_s`, abandons the human sessions idle for `idle_for` (see abandon_idle_sessions)."""

    name = "human-session-sweep"

    def __init__(self, pool: asyncpg.Pool, *, idle_for: timedelta, every_s: float) -> None:
        super().__init__()
        self._pool, self._idle_for, self._every_s = pool, idle_for, every_s

    async def _run(self) -> None:
        while True:
            try:
                await abandon_idle_sessions(self._pool, self._idle_for)
            except Exception:  # noqa: BLE001 — logged; the next round tries again
                log.exception("sweeping idle human sessions failed")
            await asyncio.sleep(self._every_s)


def _entity_view(kind: str, entity_id: str, pathname: str | None, at: str) -> NewEvent:
    metadata = {"entityType": kind, "entityId": entity_id, "at": at}
    if pathname:
        metadata["pathname"] = pathname
    return NewEvent("human.entity_view", "user", metadata=metadata, external_event_id=entity_key(kind, entity_id))


def _clamp(at: datetime | None, session: SessionRecord, now: datetime) -> str:
    """The browser's time for an event, kept between the session's start and now (plus skew)."""
    if at is None:
        return now.isoformat()
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    earliest = session.started_at or session.created_at
    return max(earliest, min(at, now + _SKEW)).astimezone(UTC).isoformat()


