"""Seed 004's sessions, the read side every service shares: the status machine (legal moves only,
judged by `check_transition` and nowhere else), the records, and reads scoped by (organization,
session type) so no caller can forget either. The orchestrator owns the tables and writes them
(spotter_orchestrator.sessions); anyone may read them through `SessionReader`."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any, Final, Literal, get_args

import asyncpg

from spotter_shared.contracts.sessions import SessionView, TaskRef
from spotter_shared.errors import ErrorCode, SpotterError
from spotter_shared.db import decoded

SessionType = Literal["agent", "response", "tool", "mixed"]
SessionStatus = Literal["draft", "pending", "running", "completed", "failed", "waiting_human", "awaiting_tool", "idle",
                        "expired", "abandoned"]
Role = Literal["user", "agent", "system"]

SESSION_TYPES: Final[tuple[SessionType, ...]] = get_args(SessionType)
SESSION_STATUSES: Final[tuple[SessionStatus, ...]] = get_args(SessionStatus)

# The status machine: draft → pending → running → completed, with running's pauses (waiting for a
# person, for a tool result, an external agent resting) that go back to running, and the four ends.
TRANSITIONS: Final[Mapping[SessionStatus, frozenset[SessionStatus]]] = MappingProxyType({
    "draft": frozenset({"pending", "running", "expired", "abandoned"}),
    "pending": frozenset({"running", "failed", "expired", "abandoned"}),
    "running": frozenset({"completed", "failed", "waiting_human", "awaiting_tool", "idle", "expired", "abandoned"}),
    "waiting_human": frozenset({"running", "completed", "failed", "expired", "abandoned"}),
    "awaiting_tool": frozenset({"running", "failed", "expired", "abandoned"}),
    "idle": frozenset({"running", "completed", "expired", "abandoned"}),
    "completed": frozenset(),
    "failed": frozenset(),
    "expired": frozenset(),
    "abandoned": frozenset(),
})
# Status groups, as data: not finished (polled), hot (a live run), ended in failure.
ACTIVE_STATUSES: Final[frozenset[SessionStatus]] = frozenset(s for s, nxt in TRANSITIONS.items() if nxt)
LIVE_STATUSES: Final[frozenset[SessionStatus]] = frozenset({"running", "waiting_human", "awaiting_tool"})
FAILING_STATUSES: Final[frozenset[SessionStatus]] = frozenset({"failed", "expired"})
TERMINAL_STATUSES: Final[frozenset[SessionStatus]] = frozenset(SESSION_STATUSES) - ACTIVE_STATUSES


# The human activity bridge's sessions: type mixed, this source; one running per person per studio.
HUMAN_SOURCE: Final = "human"


def is_valid_status(value: str) -> bool:
    return value in TRANSITIONS


class IllegalTransition(SpotterError):
    def __init__(self, old: str, new: str) -> None:
        super().__init__(ErrorCode.INVALID_REQUEST, f"a {old} session cannot become {new}")
        self.old, self.new = old, new


def check_transition(old: str, new: str) -> None:
    """The one place a status move is judged; an unknown status is as illegal as a forbidden move."""
    if not is_valid_status(new) or not is_valid_status(old) or new not in TRANSITIONS[old]:  # type: ignore[index]
        raise IllegalTransition(old, new)


@dataclass(frozen=True)
class NewEvent:
    event_type: str
    role: Role
    content: Sequence[Mapping[str, Any]] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    thread_id: str | None = None
    external_event_id: str | None = None


@dataclass(frozen=True)
class SessionEvent:
    session_id: str
    sequence: int
    event_type: str
    role: Role
    content: list[dict[str, Any]]
    metadata: dict[str, Any]
    thread_id: str | None
    external_event_id: str | None
    created_at: datetime

    def to_wire(self) -> dict[str, Any]:
        return {
            "sequence": self.sequence, "eventType": self.event_type, "role": self.role, "content": self.content,
            "metadata": self.metadata, "threadId": self.thread_id, "externalEventId": self.external_event_id,
            "createdAt": _iso(self.created_at),
        }


@dataclass(frozen=True)
class SessionRecord:
    id: str
    organization_id: str
    user_id: str | None
    session_type: SessionType
    status: SessionStatus
    source: str
    task_id: str | None
    title: str | None
    started_at: datetime | None
    completed_at: datetime | None
    error_message: str | None
    metadata: dict[str, Any]
    usage: dict[str, Any]
    cost_usd_micros: int
    last_sequence: int
    created_at: datetime
    updated_at: datetime

    def view(self) -> SessionView:
        """The session as the API shows it."""
        return SessionView(
            id=self.id, session_type=self.session_type, status=self.status, source=self.source, user_id=self.user_id,
            task_id=self.task_id, title=self.title, started_at=self.started_at, completed_at=self.completed_at,
            last_sequence=self.last_sequence, created_at=self.created_at, updated_at=self.updated_at,
        )


SESSION_COLUMNS = """id, organization_id, user_id, session_type::text AS session_type, status::text AS status, source,
    task_id, title, started_at, completed_at, error_message, metadata, usage, cost_usd_micros, last_sequence, created_at,
    updated_at"""
EVENT_COLUMNS = "session_id, sequence, event_type, role, content, metadata, thread_id, external_event_id, created_at"


def session_record(row: asyncpg.Record) -> SessionRecord:
    return SessionRecord(
        id=str(row["id"]), organization_id=str(row["organization_id"]),
        user_id=str(row["user_id"]) if row["user_id"] else None, session_type=row["session_type"], status=row["status"],
        source=row["source"], task_id=str(row["task_id"]) if row["task_id"] else None, title=row["title"],
        started_at=row["started_at"], completed_at=row["completed_at"], error_message=row["error_message"],
        metadata=decoded(row["metadata"]), usage=decoded(row["usage"]), cost_usd_micros=row["cost_usd_micros"],
        last_sequence=row["last_sequence"], created_at=row["created_at"], updated_at=row["updated_at"],
    )


def session_event(row: asyncpg.Record) -> SessionEvent:
    return SessionEvent(
        session_id=str(row["session_id"]), sequence=row["sequence"], event_type=row["event_type"], role=row["role"],
        content=decoded(row["content"]), metadata=decoded(row["metadata"]), thread_id=row["thread_id"],
        external_event_id=row["external_event_id"], created_at=row["created_at"],
    )


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None



class SessionReader:
    """The sessions of one organization and one type. Every query carries both, so a caller holding
    one cannot read another studio's session, or a session of another kind."""

    def __init__(self, pool: asyncpg.Pool, organization_id: str, session_type: SessionType) -> None:
        if session_type not in SESSION_TYPES:
            raise ValueError(f"unknown session type {session_type!r}")
        self._pool = pool
        self.organization_id = str(uuid.UUID(organization_id))
        self.session_type = session_type

    async def get(self, session_id: str, *, conn: asyncpg.Connection | None = None) -> SessionRecord | None:
        async with self._connection(conn) as c:
            row = await c.fetchrow(
                f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = $1 AND organization_id = $2 AND session_type = $3::session_type",
                as_uuid(session_id), uuid.UUID(self.organization_id), self.session_type,
            )
        return session_record(row) if row else None

    async def list(self, *, user_id: str | None = None, source: str | None = None,
                   statuses: frozenset[SessionStatus] | None = None, limit: int = 50) -> list[SessionRecord]:
        rows = await self._pool.fetch(
            f"""SELECT {SESSION_COLUMNS} FROM sessions
                 WHERE organization_id = $1 AND session_type = $2::session_type
                   AND ($3::uuid IS NULL OR user_id = $3) AND ($4::text IS NULL OR source = $4)
                   AND ($5::text[] IS NULL OR status::text = ANY($5))
                 ORDER BY created_at DESC LIMIT $6""",
            uuid.UUID(self.organization_id), self.session_type, as_uuid(user_id), source,
            sorted(statuses) if statuses is not None else None, limit,
        )
        return [session_record(r) for r in rows]

    async def events(self, session_id: str, *, after_sequence: int = 0, event_types: Sequence[str] | None = None,
                     limit: int = 100) -> list[SessionEvent]:
        rows = await self._pool.fetch(
            """SELECT e.session_id, e.sequence, e.event_type, e.role, e.content, e.metadata, e.thread_id,
                      e.external_event_id, e.created_at
                 FROM session_events e JOIN sessions s ON s.id = e.session_id
                WHERE s.id = $1 AND s.organization_id = $2 AND s.session_type = $3::session_type
                  AND e.sequence > $4 AND ($5::text[] IS NULL OR e.event_type = ANY($5))
                ORDER BY e.sequence LIMIT $6""",
            as_uuid(session_id), uuid.UUID(self.organization_id), self.session_type, after_sequence,
            list(event_types) if event_types else None, limit,
        )
        return [session_event(r) for r in rows]

    def _connection(self, conn: asyncpg.Connection | None) -> Any:
        return _Borrowed(conn) if conn is not None else self._pool.acquire()


# A person's running human session, for a statement that reads it beside other things: `s` is the
# sessions row, joined on its organization and user (the index allows one such row); RUNNING_COLUMNS
# are what `running_session` reads of it.
RUNNING_HUMAN = f"s.session_type = 'mixed' AND s.source = '{HUMAN_SOURCE}' AND s.status = 'running'"
RUNNING_COLUMNS = """s.id AS session_id, s.task_id AS session_task_id, s.title AS session_title,
    s.last_sequence AS session_last_sequence, s.started_at AS session_started_at, s.created_at AS session_created_at"""


@dataclass(frozen=True)
class RunningSession:
    """What a turn reads of the caller's running human session (seed 004's <recent-activity>)."""

    id: str
    task_id: str | None
    title: str | None
    last_sequence: int
    started_at: datetime | None
    created_at: datetime


def running_session(row: asyncpg.Record) -> RunningSession | None:
    """The RUNNING_COLUMNS of a row; None when the person has no running session."""
    if row["session_id"] is None:
        return None
    task = row["session_task_id"]
    return RunningSession(id=str(row["session_id"]), task_id=str(task) if task else None, title=row["session_title"],
                          last_sequence=row["session_last_sequence"], started_at=row["session_started_at"],
                          created_at=row["session_created_at"])


async def running_human_session(reader: SessionReader, user_id: str, *,
                                conn: asyncpg.Connection | None = None) -> SessionRecord | None:
    """The person's running human session in the reader's organization (the index allows one)."""
    if reader.session_type != "mixed":
        raise ValueError("human sessions are mixed sessions")
    async with reader._connection(conn) as c:
        row = await c.fetchrow(
            f"""SELECT {SESSION_COLUMNS} FROM sessions s
                 WHERE organization_id = $1 AND user_id = $2 AND {RUNNING_HUMAN}""",
            uuid.UUID(reader.organization_id), as_uuid(user_id),
        )
    return session_record(row) if row else None


async def task_ref(db: asyncpg.Pool | asyncpg.Connection, organization_id: str, task_id: str) -> TaskRef | None:
    """One of the organization's tasks (not deleted), as sessions name it."""
    row = await db.fetchrow(
        """SELECT id, title, status::text AS status, due_date FROM tasks
            WHERE id = $1 AND organization_id = $2 AND deleted_at IS NULL""",
        as_uuid(task_id), as_uuid(organization_id),
    )
    if row is None:
        return None
    return TaskRef(id=str(row["id"]), title=row["title"], status=row["status"],
                   due_date=row["due_date"].isoformat() if row["due_date"] else None)


class _Borrowed:
    """A connection the caller already holds (inside its transaction), used as `pool.acquire()` is."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn

    async def __aenter__(self) -> asyncpg.Connection:
        return self._conn

    async def __aexit__(self, *exc: object) -> None:
        return None


def as_uuid(value: str | None) -> uuid.UUID | None:
    if value is None:
        return None
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise SpotterError(ErrorCode.INVALID_REQUEST, f"not an id: {value!r}") from None
