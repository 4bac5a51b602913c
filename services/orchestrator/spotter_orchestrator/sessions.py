"""Seed 004's sessions, the write side: the orchestrator owns `sessions` and `session_events`. It
records; what a session does is its runner's business (the operator turn loop, the member coach,
the human activity bridge). Moves are judged by the shared `check_transition`, appends are numbered
here, and every query stays scoped by (organization, session type) as the reader's are."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from collections.abc import Mapping
from typing import Any

import asyncpg

from spotter_shared.errors import ErrorCode, SpotterError
from spotter_shared.sessions import (
    EVENT_COLUMNS, SESSION_COLUMNS, TERMINAL_STATUSES, IllegalTransition, NewEvent, SessionEvent, SessionReader,
    SessionRecord, SessionStatus, session_event, session_record, as_uuid, check_transition,
)


class Sessions(SessionReader):
    """A `SessionReader` that may also create, move and append."""

    async def create(self, *, source: str, user_id: str | None = None, status: SessionStatus = "draft",
                     task_id: str | None = None, title: str | None = None, session_id: str | None = None,
                     metadata: Mapping[str, Any] | None = None, conn: asyncpg.Connection | None = None) -> SessionRecord:
        """A new session in its first status (draft, pending or running) with its `session.created` event;
        `session_id` when the caller allocated it (the gateway, for a coach session it answers at once)."""
        if status not in ("draft", "pending", "running"):
            raise IllegalTransition("new", status)
        async with self._connection(conn) as c, c.transaction():
            row = await c.fetchrow(
                f"""INSERT INTO sessions (id, organization_id, user_id, session_type, status, source, task_id, title,
                                          metadata, started_at)
                    VALUES (coalesce($9, gen_random_uuid()), $1, $2, $3::session_type, $4::session_status, $5, $6, $7,
                            $8::jsonb, CASE WHEN $4 = 'running' THEN now() END)
                    RETURNING {SESSION_COLUMNS}""",
                uuid.UUID(self.organization_id), as_uuid(user_id), self.session_type, status, source, as_uuid(task_id), title,
                dict(metadata or {}), as_uuid(session_id),
            )
            created = session_record(row)
            await self._append(c, created.id, [NewEvent("session.created", "system", metadata={"status": status, "source": source})])
        return await self.get(created.id, conn=conn) or created

    async def transition(self, session_id: str, to: SessionStatus, *, error_message: str | None = None,
                         conn: asyncpg.Connection | None = None) -> SessionRecord:
        """Move a session along the status machine, with its `session.status_change` event, atomically."""
        async with self._connection(conn) as c, c.transaction():
            old = await c.fetchval(
                """SELECT status::text FROM sessions
                    WHERE id = $1 AND organization_id = $2 AND session_type = $3::session_type FOR UPDATE""",
                as_uuid(session_id), uuid.UUID(self.organization_id), self.session_type,
            )
            if old is None:
                raise SpotterError(ErrorCode.NOT_FOUND, "session not found")
            check_transition(old, to)
            await c.execute(
                """UPDATE sessions SET status = $2::session_status, error_message = coalesce($3, error_message),
                          started_at = CASE WHEN $2 = 'running' THEN coalesce(started_at, now()) ELSE started_at END,
                          completed_at = CASE WHEN $4 THEN now() ELSE completed_at END
                    WHERE id = $1""",
                as_uuid(session_id), to, error_message, to in TERMINAL_STATUSES,
            )
            await self._append(c, session_id, [NewEvent("session.status_change", "system", metadata={"from": old, "to": to})])
            record = await self.get(session_id, conn=c)
        assert record is not None
        return record

    async def add_usage(self, session_id: str, usage: Mapping[str, int], cost_usd_micros: int, *,
                        conn: asyncpg.Connection | None = None) -> None:
        """Add one model call's tokens (by kind) and cost to the session's totals."""
        async with self._connection(conn) as c:
            await c.execute(
                """UPDATE sessions SET cost_usd_micros = cost_usd_micros + $4,
                          usage = (SELECT coalesce(jsonb_object_agg(k, coalesce((usage->>k)::bigint, 0) + v), '{}'::jsonb)
                                     FROM jsonb_each_text($5::jsonb) AS t(k, v0), LATERAL (SELECT v0::bigint AS v) x)
                                  || jsonb_build_object('calls', coalesce((usage->>'calls')::bigint, 0) + 1)
                    WHERE id = $1 AND organization_id = $2 AND session_type = $3::session_type""",
                as_uuid(session_id), uuid.UUID(self.organization_id), self.session_type, cost_usd_micros,
                {k: int(v) for k, v in usage.items()},
            )

    async def set_task(self, session_id: str, task_id: str | None, title: str | None, *,
                       conn: asyncpg.Connection | None = None) -> SessionRecord:
        """Point the session at another task (a human session's task switch)."""
        async with self._connection(conn) as c:
            row = await c.fetchrow(
                f"""UPDATE sessions SET task_id = $4, title = $5
                     WHERE id = $1 AND organization_id = $2 AND session_type = $3::session_type
                 RETURNING {SESSION_COLUMNS}""",
                as_uuid(session_id), uuid.UUID(self.organization_id), self.session_type, as_uuid(task_id), title,
            )
        if row is None:
            raise SpotterError(ErrorCode.NOT_FOUND, "session not found")
        return session_record(row)

    async def append(self, session_id: str, events: Sequence[NewEvent], *,
                     conn: asyncpg.Connection | None = None) -> list[SessionEvent]:
        """Append a batch with consecutive sequence numbers, atomically; an event whose
        external_event_id the session already has is not stored again. Returns what was stored."""
        async with self._connection(conn) as c, c.transaction():
            found = await c.fetchval(
                "SELECT 1 FROM sessions WHERE id = $1 AND organization_id = $2 AND session_type = $3::session_type",
                as_uuid(session_id), uuid.UUID(self.organization_id), self.session_type,
            )
            if found is None:
                raise SpotterError(ErrorCode.NOT_FOUND, "session not found")
            return await self._append(c, session_id, events)

    # ---------------------------------------------------------------------------------------------

    @staticmethod
    async def _append(c: asyncpg.Connection, session_id: str, events: Sequence[NewEvent]) -> list[SessionEvent]:
        """Inside a transaction: the session row's lock orders concurrent appenders, so each batch
        takes the next numbers whole; duplicates (by external id, in the log or twice in the batch)
        are dropped before numbering, so they leave no gap."""
        last = await c.fetchval("SELECT last_sequence FROM sessions WHERE id = $1 FOR UPDATE", as_uuid(session_id))
        wanted = [e.external_event_id for e in events if e.external_event_id]
        seen = set(await c.fetchval(
            "SELECT coalesce(array_agg(external_event_id), '{}') FROM session_events WHERE session_id = $1 AND external_event_id = ANY($2)",
            as_uuid(session_id), wanted,
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
                RETURNING {EVENT_COLUMNS}""",
            as_uuid(session_id), last,
            [e.event_type for e in fresh], [e.role for e in fresh], [json.dumps(list(e.content)) for e in fresh],
            [json.dumps(dict(e.metadata)) for e in fresh], [e.thread_id for e in fresh], [e.external_event_id for e in fresh],
        )
        await c.execute("UPDATE sessions SET last_sequence = $2 WHERE id = $1", as_uuid(session_id), last + len(fresh))
        return sorted((session_event(r) for r in rows), key=lambda e: e.sequence)

