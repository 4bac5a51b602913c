"""Seed 004's sessions, the persistence kernel: the status machine (legal moves only, checked here
and nowhere else), the append-only event log numbered per session, and typed access scoped by
(organization, session type) so no caller can forget either. It records; what a session does is
its runner's business (the operator turn loop, the member coach, the human activity bridge)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any, Final, Literal, get_args

import asyncpg

from spotter_shared.errors import ErrorCode, SpotterError

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
    last_sequence: int
    created_at: datetime


_SESSION_COLUMNS = """id, organization_id, user_id, session_type::text AS session_type, status::text AS status, source,
    task_id, title, started_at, completed_at, error_message, metadata, last_sequence, created_at"""
_EVENT_COLUMNS = "session_id, sequence, event_type, role, content, metadata, thread_id, external_event_id, created_at"


def _session(row: asyncpg.Record) -> SessionRecord:
    return SessionRecord(
        id=str(row["id"]), organization_id=str(row["organization_id"]),
        user_id=str(row["user_id"]) if row["user_id"] else None, session_type=row["session_type"], status=row["status"],
        source=row["source"], task_id=str(row["task_id"]) if row["task_id"] else None, title=row["title"],
        started_at=row["started_at"], completed_at=row["completed_at"], error_message=row["error_message"],
        metadata=_json(row["metadata"]), last_sequence=row["last_sequence"], created_at=row["created_at"],
    )


def _event(row: asyncpg.Record) -> SessionEvent:
    return SessionEvent(
        session_id=str(row["session_id"]), sequence=row["sequence"], event_type=row["event_type"], role=row["role"],
        content=_json(row["content"]), metadata=_json(row["metadata"]), thread_id=row["thread_id"],
        external_event_id=row["external_event_id"], created_at=row["created_at"],
    )


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


class Sessions:
    """The sessions of one organization and one type. Every query carries both, so a caller holding
    a `Sessions` cannot read or move another studio's session, or a session of another kind."""

    def __init__(self, pool: asyncpg.Pool, organization_id: str, session_type: SessionType) -> None:
        if session_type not in SESSION_TYPES:
            raise ValueError(f"unknown session type {session_type!r}")
        self._pool = pool
        self.organization_id = str(uuid.UUID(organization_id))
        self.session_type = session_type

    async def create(self, *, source: str, user_id: str | None = None, status: SessionStatus = "draft",
                     task_id: str | None = None, title: str | None = None,
                     metadata: Mapping[str, Any] | None = None, conn: asyncpg.Connection | None = None) -> SessionRecord:
        """A new session in its first status (draft, pending or running) with its `session.created` event."""
        if status not in ("draft", "pending", "running"):
            raise IllegalTransition("new", status)
        async with self._connection(conn) as c, c.transaction():
            row = await c.fetchrow(
                f"""INSERT INTO sessions (organization_id, user_id, session_type, status, source, task_id, title,
                                          metadata, started_at)
                    VALUES ($1, $2, $3::session_type, $4::session_status, $5, $6, $7, $8::jsonb,
                            CASE WHEN $4 = 'running' THEN now() END)
                    RETURNING {_SESSION_COLUMNS}""",
                uuid.UUID(self.organization_id), _uuid(user_id), self.session_type, status, source, _uuid(task_id), title,
                json.dumps(dict(metadata or {})),
            )
            created = _session(row)
            await self._append(c, created.id, [NewEvent("session.created", "system", metadata={"status": status, "source": source})])
        return await self.get(created.id, conn=conn) or created

    async def get(self, session_id: str, *, conn: asyncpg.Connection | None = None) -> SessionRecord | None:
        async with self._connection(conn) as c:
            row = await c.fetchrow(
                f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = $1 AND organization_id = $2 AND session_type = $3::session_type",
                _uuid(session_id), uuid.UUID(self.organization_id), self.session_type,
            )
        return _session(row) if row else None

    async def list(self, *, user_id: str | None = None, source: str | None = None,
                   statuses: frozenset[SessionStatus] | None = None, limit: int = 50) -> list[SessionRecord]:
        rows = await self._pool.fetch(
            f"""SELECT {_SESSION_COLUMNS} FROM sessions
                 WHERE organization_id = $1 AND session_type = $2::session_type
                   AND ($3::uuid IS NULL OR user_id = $3) AND ($4::text IS NULL OR source = $4)
                   AND ($5::text[] IS NULL OR status::text = ANY($5))
                 ORDER BY created_at DESC LIMIT $6""",
            uuid.UUID(self.organization_id), self.session_type, _uuid(user_id), source,
            sorted(statuses) if statuses is not None else None, limit,
        )
        return [_session(r) for r in rows]

    async def transition(self, session_id: str, to: SessionStatus, *, error_message: str | None = None,
                         conn: asyncpg.Connection | None = None) -> SessionRecord:
        """Move a session along the status machine, with its `session.status_change` event, atomically."""
        async with self._connection(conn) as c, c.transaction():
            old = await c.fetchval(
                """SELECT status::text FROM sessions
                    WHERE id = $1 AND organization_id = $2 AND session_type = $3::session_type FOR UPDATE""",
                _uuid(session_id), uuid.UUID(self.organization_id), self.session_type,
            )
            if old is None:
                raise SpotterError(ErrorCode.NOT_FOUND, "session not found")
            check_transition(old, to)
            await c.execute(
                """UPDATE sessions SET status = $2::session_status, error_message = coalesce($3, error_message),
                          started_at = CASE WHEN $2 = 'running' THEN coalesce(started_at, now()) ELSE started_at END,
                          completed_at = CASE WHEN $4 THEN now() ELSE completed_at END
                    WHERE id = $1""",
                _uuid(session_id), to, error_message, to in TERMINAL_STATUSES,
            )
            await self._append(c, session_id, [NewEvent("session.status_change", "system", metadata={"from": old, "to": to})])
            record = await self.get(session_id, conn=c)
        assert record is not None
        return record

    async def append(self, session_id: str, events: Sequence[NewEvent], *,
                     conn: asyncpg.Connection | None = None) -> list[SessionEvent]:
        """Append a batch with consecutive sequence numbers, atomically; an event whose
        external_event_id the session already has is not stored again. Returns what was stored."""
        async with self._connection(conn) as c, c.transaction():
            found = await c.fetchval(
                "SELECT 1 FROM sessions WHERE id = $1 AND organization_id = $2 AND session_type = $3::session_type",
                _uuid(session_id), uuid.UUID(self.organization_id), self.session_type,
            )
            if found is None:
                raise SpotterError(ErrorCode.NOT_FOUND, "session not found")
            return await self._append(c, session_id, events)

    async def events(self, session_id: str, *, after_sequence: int = 0, event_types: Sequence[str] | None = None,
                     limit: int = 100) -> list[SessionEvent]:
        rows = await self._pool.fetch(
            """SELECT e.session_id, e.sequence, e.event_type, e.role, e.content, e.metadata, e.thread_id,
                      e.external_event_id, e.created_at
                 FROM session_events e JOIN sessions s ON s.id = e.session_id
                WHERE s.id = $1 AND s.organization_id = $2 AND s.session_type = $3::session_type
                  AND e.sequence > $4 AND ($5::text[] IS NULL OR e.event_type = ANY($5))
                ORDER BY e.sequence LIMIT $6""",
            _uuid(session_id), uuid.UUID(self.organization_id), self.session_type, after_sequence,
            list(event_types) if event_types else None, limit,
        )
        return [_event(r) for r in rows]

    # ---------------------------------------------------------------------------------------------

    @staticmethod
    async def _append(c: asyncpg.Connection, session_id: str, events: Sequence[NewEvent]) -> list[SessionEvent]:
        """Inside a transaction: the session row's lock orders concurrent appenders, so each batch
        takes the next numbers whole; duplicates (by external id, in the log or twice in the batch)
        are dropped before numbering, so they leave no gap."""
        last = await c.fetchval("SELECT last_sequence FROM sessions WHERE id = $1 FOR UPDATE", _uuid(session_id))
        wanted = [e.external_event_id for e in events if e.external_event_id]
        seen = set(await c.fetchval(
            "SELECT coalesce(array_agg(external_event_id), '{}') FROM session_events WHERE session_id = $1 AND external_event_id = ANY($2)",
            _uuid(session_id), wanted,
        )) if wanted else set()
        fresh = []
        for event in events:
            if event.external_event_id:
                if event.external_event_id in seen:
                    continue
                seen.add(event.external_event_id)
            fresh.append(event)
        if not fresh:
            return []
        rows = await c.fetch(
            f"""INSERT INTO session_events (session_id, sequence, event_type, role, content, metadata, thread_id, external_event_id)
                SELECT $1, $2 + n, t, r, c::jsonb, m::jsonb, th, x
                  FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[])
                       WITH ORDINALITY AS u(t, r, c, m, th, x, n)
                RETURNING {_EVENT_COLUMNS}""",
            _uuid(session_id), last,
            [e.event_type for e in fresh], [e.role for e in fresh], [json.dumps(list(e.content)) for e in fresh],
            [json.dumps(dict(e.metadata)) for e in fresh], [e.thread_id for e in fresh], [e.external_event_id for e in fresh],
        )
        await c.execute("UPDATE sessions SET last_sequence = $2 WHERE id = $1", _uuid(session_id), last + len(fresh))
        return sorted((_event(r) for r in rows), key=lambda e: e.sequence)

    def _connection(self, conn: asyncpg.Connection | None) -> Any:
        return _Borrowed(conn) if conn is not None else self._pool.acquire()


class _Borrowed:
    """A connection the caller already holds (inside its transaction), used as `pool.acquire()` is."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn

    async def __aenter__(self) -> asyncpg.Connection:
        return self._conn

    async def __aexit__(self, *exc: object) -> None:
        return None


def _uuid(value: str | None) -> uuid.UUID | None:
    if value is None:
        return None
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise SpotterError(ErrorCode.INVALID_REQUEST, f"not an id: {value!r}") from None
