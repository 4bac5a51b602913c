"""Postgres access for the orchestrator: conversations, turns, messages and the event log."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import uuid
from dataclasses import dataclass, field, replace
from typing import Any

import asyncpg

from spotter_shared.batches import Batches
from spotter_shared.contracts.commands import SendMessage
from spotter_shared.contracts.events import TurnUsage
from spotter_shared.sessions import RUNNING_COLUMNS, RUNNING_HUMAN, RunningSession, running_session

from .calls import Content

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class TurnRecord:
    id: str
    status: str
    attempts: int
    usage: TurnUsage
    model_calls: int
    # The seq of the conversation_started event begin_turn stored with a new conversation (to publish).
    started_seq: int | None = None
    # The org and the caller as begin_turn's statement read them (a send reads them anyway); None elsewhere.
    org: OrgContext | None = None
    # The conversation's replay, when begin_turn was asked to read it; None when it was not.
    replay: tuple[StoredMessage, ...] | None = None


@dataclass(frozen=True)
class StoredReply:
    seq: int  # its message_done's
    turn_usage: TurnUsage | None  # the turn's, this call's included (its row as the statement left it); None without a row
    done_seq: int | None = None  # the turn's `done`, when the reply was stored with it (`append_reply`'s `done_event`)
    started_seq: int | None = None  # its first call's `tool_started`, when stored with it (`started_event`)
    text_seq: int | None = None  # its last `text_delta`, when stored with it (`text_event`)


@dataclass(frozen=True)
class OrgContext:
    id: str
    name: str
    tier: str
    locale: str
    timezone: str
    agent_enabled: bool
    caller_name: str
    caller_email: str
    # The caller's running human session in this studio (seed 004), read with the org: its
    # <recent-activity> block is rendered from it.
    caller_session: RunningSession | None = None


@dataclass(frozen=True)
class StoredMessage:
    id: str
    role: str
    content: Content
    turn_id: str | None
    stop_reason: str | None
    # A user message's page, its rendered turn context (prompt.TURN_CONTEXT_KEY), an app event's
    # facts, or a system_note's summarizedThroughMessageId.
    page_context: dict[str, Any] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class ConversationInfo:
    title: str | None
    locale: str


def preview_of(content: Content) -> str | None:
    texts = [b.get("text", "") for b in content if b.get("type") == "text"]
    joined = " ".join(t for t in texts if t).strip()
    return joined[:200] or None


@dataclass(frozen=True)
class _LogAppend:
    conversation_id: uuid.UUID
    turn_id: uuid.UUID
    type: str
    data: dict[str, Any]
    seq: asyncio.Future[int]


class Store:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        # Every conversation's log appends (text deltas above all) that arrive while a batch is being
        # written go together in the next: one statement and one commit for all of them.
        self._log = Batches(self._write_log)

    async def begin_command_turn(self, turn_id: str, conversation_id: str, command_id: str, kind: str, tool_use_id: str | None) -> TurnRecord:
        row = await self.pool.fetchrow(
            """INSERT INTO ai_turns (id, conversation_id, command_id, kind, tool_use_id) VALUES ($1, $2, $3, $4, $5)
               ON CONFLICT (command_id) DO UPDATE SET attempts = ai_turns.attempts + 1
               RETURNING id, status, attempts, input_tokens, output_tokens, cache_read_tokens,
                         cache_creation_tokens, cost_usd_micros, model_calls""",
            uuid.UUID(turn_id), uuid.UUID(conversation_id), command_id, kind, tool_use_id,
        )
        return _turn(row)

    async def begin_turn(self, cmd: SendMessage, model: str, started: dict[str, Any] | None = None, *,
                         replay: bool = False) -> TurnRecord:
        """Create the conversation (first send, in the caller's language) and the turn row, in one
        statement. A redelivered command finds its turn again (attempts + 1) instead of starting
        another. `started` (the data of a new conversation's `conversation_started`) is stored as the
        conversation's first event by the same statement that creates the conversation, so a new
        conversation never exists without it; its number comes back as `started_seq`, to publish.
        The same statement reads the org and the caller and, with `replay`, the conversation's replay
        (what `messages` reads), as a send needs them before its model call."""
        rows = await self.pool.fetch(
            _BEGIN_TURN,
            uuid.UUID(cmd.conversation_id), uuid.UUID(cmd.actor.organization_id), uuid.UUID(cmd.actor.user_id),
            uuid.UUID(cmd.actor.membership_id), model, fallback_title(cmd.message), primary_language(cmd.actor.locale),
            uuid.UUID(cmd.turn_id), cmd.command_id, started, replay,
        )
        turn = _turn(rows[0])
        if replay:
            turn = replace(turn, replay=tuple(_message(r, "m_") for r in rows if r["m_id"] is not None))
        return turn

    async def turn(self, turn_id: str) -> TurnRecord:
        row = await self.pool.fetchrow(
            """SELECT id, status, attempts, input_tokens, output_tokens, cache_read_tokens,
                      cache_creation_tokens, cost_usd_micros, model_calls FROM ai_turns WHERE id = $1""",
            uuid.UUID(turn_id),
        )
        return _turn(row)

    async def append_reply(self, conversation_id: str, turn_id: str, content: Content, *, stop_reason: str | None,
                           usage: TurnUsage, model: str, message_id: str, done: dict[str, Any],
                           done_event: tuple[int, dict[str, Any]] | None = None,
                           started_event: dict[str, Any] | None = None,
                           text_event: dict[str, Any] | None = None) -> StoredReply:
        """A model call's reply in one statement: the assistant message, the call's usage added to the
        turn (model_calls + 1), and its `message_done` event (`done`). A crash leaves all three or none,
        so a redelivered turn never sees the message without its usage. Back come the event's number
        and the turn's usage as the statement left it (its `done` needs no read of the turn after).

        `done_event`, for a reply that ends the turn: (the turn's model calls before this one, its `done`).
        The `done` (whose usage the caller summed from what it knows) and the turn's `completed` status
        are stored in the same statement, right after `message_done`, when the turn's row still counts
        those calls: nobody else added a call whose usage the caller would not know. Otherwise neither is
        stored (`done_seq` None) and the turn is finished as any other, with the usage read back.

        `started_event`, for a reply whose first tool call runs next: that call's `tool_started`, stored
        right after `message_done` (`started_seq`), as the loop would have stored it next on its own.

        `text_event`: the reply's last `text_delta` (the text the emitter held for its window when the
        stream ended), stored right before `message_done` (`text_seq`)."""
        assert done_event is None or started_event is None, "a reply that ends the turn starts no tool"
        calls_before, done_data = done_event if done_event is not None else (None, None)
        row = await self.pool.fetchrow(
            _APPEND_REPLY,
            uuid.UUID(message_id), uuid.UUID(conversation_id), content, preview_of(content), stop_reason,
            usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_creation_tokens, model,
            uuid.UUID(turn_id), usage.cost_usd_micros, done, calls_before, done_data, started_event, text_event,
        )
        if row is None:
            raise LookupError(f"conversation {conversation_id} does not exist")
        last, finished = row["last_event_seq"], row["finished"]
        seq = last - (finished or started_event is not None)  # message_done's: before an event stored after it
        return StoredReply(seq=seq, turn_usage=_usage(row) if row["input_tokens"] is not None else None,
                           done_seq=last if finished else None, started_seq=last if started_event is not None else None,
                           text_seq=seq - 1 if text_event is not None else None)

    async def conversation_cost(self, conversation_id: str) -> int:
        """What the conversation's turns have cost so far, in USD micros (a pack's rules weigh it)."""
        return await self.pool.fetchval(
            "SELECT coalesce(sum(cost_usd_micros), 0)::bigint FROM ai_turns WHERE conversation_id = $1",
            uuid.UUID(conversation_id),
        )

    async def finish_turn(self, turn_id: str, status: str, error_code: str | None = None) -> None:
        await self.pool.execute(
            "UPDATE ai_turns SET status = $2, error_code = $3, finished_at = now() WHERE id = $1",
            uuid.UUID(turn_id), status, error_code,
        )

    async def org_context(self, org_id: str, user_id: str) -> OrgContext:
        """The org and the caller, with the caller's running human session (one statement)."""
        return _org(await self.pool.fetchrow(_ORG_CONTEXT, uuid.UUID(org_id), uuid.UUID(user_id)))

    async def messages(self, conversation_id: str) -> list[StoredMessage]:
        """Messages for replay (seed 000 compaction): the latest system_note, then every message
        after the one it summarized through (pageContext.summarizedThroughMessageId; a note
        without one anchors at itself). Without a note, the whole conversation."""
        rows = await self.pool.fetch(_REPLAYED, uuid.UUID(conversation_id))
        return [_message(r) for r in rows]

    async def all_messages(self, conversation_id: str) -> list[StoredMessage]:
        """Every message, summarized ones included (an old write can still be undone)."""
        rows = await self.pool.fetch(
            f"SELECT {_COLUMNS} FROM ai_messages WHERE conversation_id = $1 ORDER BY position",
            uuid.UUID(conversation_id),
        )
        return [_message(r) for r in rows]

    async def conversation(self, conversation_id: str) -> ConversationInfo:
        row = await self.pool.fetchrow("SELECT title, locale FROM ai_conversations WHERE id = $1", uuid.UUID(conversation_id))
        return ConversationInfo(title=row["title"], locale=row["locale"])

    async def add_summary(self, conversation_id: str, turn_id: str, content: Content, *, summary: str,
                          through_message_id: str) -> str:
        """The compaction's system_note and the conversation's searchable summary, together; the
        previous summary's embedding no longer describes it and is cleared."""
        async with self.pool.acquire() as conn, conn.transaction():
            message_id = await self._append(conn, conversation_id, turn_id, "system_note", content,
                                            page_context={"summarizedThroughMessageId": through_message_id})
            await conn.execute(
                """UPDATE ai_conversations SET summary = $2, summary_embedding = NULL, summary_embedding_model = NULL,
                       updated_at = now() WHERE id = $1""",
                uuid.UUID(conversation_id), summary,
            )
        return message_id

    async def set_summary_embedding(self, conversation_id: str, summary: str, vector: list[float], model: str) -> bool:
        """Store the summary's embedding, unless a newer summary replaced it meanwhile."""
        status = await self.pool.execute(
            """UPDATE ai_conversations SET summary_embedding = $3::real[]::vector, summary_embedding_model = $4
               WHERE id = $1 AND summary = $2""",
            uuid.UUID(conversation_id), summary, vector, model,
        )
        return status.endswith(" 1")

    async def organize(self, conversation_id: str, organization_id: str, user_id: str,
                       pinned: bool | None, archived: bool | None) -> asyncpg.Record | None:
        """Set pinned and archived_at (now, or NULL when restored) on the user's own conversation;
        a flag given as None is left as it is. Archiving an archived one keeps its first date."""
        return await self.pool.fetchrow(
            """UPDATE ai_conversations
                  SET pinned = coalesce($4, pinned),
                      archived_at = CASE WHEN $5::boolean IS NULL THEN archived_at
                                         WHEN $5 THEN coalesce(archived_at, now()) END,
                      updated_at = now()
                WHERE id = $1 AND organization_id = $2 AND user_id = $3
            RETURNING id, pinned, archived_at""",
            uuid.UUID(conversation_id), uuid.UUID(organization_id), uuid.UUID(user_id), pinned, archived,
        )

    async def set_title(self, conversation_id: str, title: str, *, replacing: str | None) -> bool:
        """The model's title, unless the title is no longer the one it replaces (renamed meanwhile)."""
        status = await self.pool.execute(
            "UPDATE ai_conversations SET title = $2 WHERE id = $1 AND title IS NOT DISTINCT FROM $3",
            uuid.UUID(conversation_id), title, replacing,
        )
        return status.endswith(" 1")

    async def append_message(
        self,
        conversation_id: str,
        turn_id: str,
        role: str,
        content: Content,
        *,
        page_context: dict | None = None,
        stop_reason: str | None = None,
        usage: TurnUsage | None = None,
        model: str | None = None,
        message_id: str | None = None,
    ) -> str:
        return await self._append(self.pool, conversation_id, turn_id, role, content, page_context=page_context,
                                  stop_reason=stop_reason, usage=usage, model=model, message_id=message_id)

    @staticmethod
    async def _append(db: asyncpg.Pool | asyncpg.Connection, conversation_id: str, turn_id: str, role: str,
                      content: Content, *, page_context: dict | None = None, stop_reason: str | None = None,
                      usage: TurnUsage | None = None, model: str | None = None, message_id: str | None = None) -> str:
        # One statement: the conversation's row lock hands out the next position (dense and ordered even
        # with racing writers, as the second waits for the first's commit and then sees its counter).
        stored = await db.fetchval(
            _APPEND_MESSAGE,
            uuid.UUID(message_id) if message_id else uuid.uuid4(), uuid.UUID(conversation_id), role, content,
            preview_of(content), page_context, stop_reason,
            usage.input_tokens if usage else None, usage.output_tokens if usage else None,
            usage.cache_read_tokens if usage else None, usage.cache_creation_tokens if usage else None,
            model, uuid.UUID(turn_id),
        )
        if stored is None:
            raise LookupError(f"conversation {conversation_id} does not exist")
        return str(stored)

    async def append_results(self, conversation_id: str, turn_id: str, content: Content, *,
                             event: tuple[str, dict[str, Any]]) -> int:
        """A tool batch's tool_result message and the event that comes with it (its last call's
        tool_completed) in one statement: one bump of the conversation's counters gives the message its
        position and the event its number. Back comes the event's number."""
        seq = await self.pool.fetchval(_APPEND_RESULTS, uuid.uuid4(), uuid.UUID(conversation_id), content,
                                       preview_of(content), uuid.UUID(turn_id), event[0], event[1])
        if seq is None:
            raise LookupError(f"conversation {conversation_id} does not exist")
        return seq

    async def append_event(self, conversation_id: str, turn_id: str, type_: str, data: dict[str, Any],
                           *, finish: tuple[str, str | None] | None = None) -> int:
        """Append to the log. With `finish`, the turn's terminal status commits together with its
        `done`: a crash can leave neither or both, never a `done` on a turn that still runs (which
        redelivery would finish twice) nor a finished turn without its `done`."""
        if finish is None:
            pending = _LogAppend(uuid.UUID(conversation_id), uuid.UUID(turn_id), type_, data,
                                 asyncio.get_running_loop().create_future())
            self._log.add("log", pending)
            try:
                return await asyncio.shield(pending.seq)
            except asyncio.CancelledError:
                # A stopped turn lets go of its lease next: its queued write lands (or fails) first,
                # so nothing of it reaches the log after the next attempt has read what is there.
                with contextlib.suppress(Exception):
                    await pending.seq
                raise
        return await self.pool.fetchval(
            """WITH s AS (UPDATE ai_conversations SET last_event_seq = last_event_seq + 1
                          WHERE id = $1 RETURNING last_event_seq),
                    t AS (UPDATE ai_turns SET status = $5, error_code = $6, finished_at = now() WHERE id = $2)
               INSERT INTO ai_conversation_events (conversation_id, seq, turn_id, type, data)
               SELECT $1, last_event_seq, $2, $3, $4 FROM s RETURNING seq""",
            uuid.UUID(conversation_id), uuid.UUID(turn_id), type_, data, finish[0], finish[1],
        )

    async def _write_log(self, batch: list[_LogAppend]) -> None:
        """One batch of appends: each conversation's counter moves by its number of events (rows
        locked in id order), and its events take the numbers in the order they were asked for."""
        try:
            rows = await self.pool.fetch(_APPEND_EVENTS, [a.conversation_id for a in batch], [a.turn_id for a in batch],
                                         [a.type for a in batch], [a.data for a in batch])
        except Exception as exc:  # noqa: BLE001 — answered to the callers, never raised here
            if len(batch) == 1:
                _answer(batch[0].seq, exc)
                return
            # Isolate what failed: each append on its own, so one bad append fails only its caller.
            log.warning("event log batch of %d failed (%s); writing them one by one", len(batch), type(exc).__name__)
            for pending in batch:
                await self._write_log([pending])
            return
        last = {r["id"]: r["last"] - r["n"] for r in rows}
        for pending in batch:
            before = last.get(pending.conversation_id)
            if before is None:
                _answer(pending.seq, LookupError(f"conversation {pending.conversation_id} does not exist"))
                continue
            last[pending.conversation_id] = before + 1
            _answer(pending.seq, before + 1)

    async def turn_events(self, conversation_id: str, turn_id: str) -> list[dict[str, Any]]:
        rows = await self.pool.fetch(
            "SELECT data FROM ai_conversation_events WHERE conversation_id = $1 AND turn_id = $2 ORDER BY seq",
            uuid.UUID(conversation_id), uuid.UUID(turn_id),
        )
        return [r["data"] for r in rows]

    async def turn_status(self, turn_id: str) -> str | None:
        return await self.pool.fetchval("SELECT status::text FROM ai_turns WHERE id = $1", uuid.UUID(turn_id))

    async def running_turn(self, conversation_id: str) -> str | None:
        return await self.pool.fetchval(
            "SELECT id::text FROM ai_turns WHERE conversation_id = $1 AND status = 'running' LIMIT 1",
            uuid.UUID(conversation_id),
        )


_COLUMNS = "id, role::text AS role, content, turn_id, stop_reason, page_context, position"

# The org, the caller and their running human session (`_org`): the columns, and the session's join
# (after `o` and `u`).
_ORG_COLUMNS = f"""o.id AS org_id, o.name AS org_name, o.tier::text AS org_tier, o.locale AS org_locale,
       o.timezone AS org_timezone, o.agent_enabled, u.full_name AS caller_name, u.email AS caller_email, {RUNNING_COLUMNS}"""
_SESSION_JOIN = f"LEFT JOIN sessions s ON s.organization_id = o.id AND s.user_id = u.id AND {RUNNING_HUMAN}"

_ORG_CONTEXT = f"""
SELECT {_ORG_COLUMNS}
  FROM organizations o CROSS JOIN users u
  {_SESSION_JOIN}
 WHERE o.id = $1 AND u.id = $2"""

# Store._write_log: a batch of log appends. Each conversation's row is locked in id order (two
# replicas' batches never wait on each other in a cycle) and its counter bumped by its count; its
# events are numbered after the old counter in the order of the batch.
_APPEND_EVENTS = """
WITH batch AS (
    SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::jsonb[]) WITH ORDINALITY
                AS b(conversation_id, turn_id, type, data, ord)),
counts AS (SELECT conversation_id, count(*) AS n FROM batch GROUP BY conversation_id),
locked AS (SELECT c.id FROM ai_conversations c JOIN counts ON counts.conversation_id = c.id ORDER BY c.id FOR UPDATE OF c),
bumped AS (
    UPDATE ai_conversations c SET last_event_seq = c.last_event_seq + counts.n
      FROM counts JOIN locked ON locked.id = counts.conversation_id
     WHERE c.id = counts.conversation_id
 RETURNING c.id, c.last_event_seq AS last, counts.n),
stored AS (
    INSERT INTO ai_conversation_events (conversation_id, seq, turn_id, type, data)
    SELECT b.conversation_id,
           bumped.last - bumped.n + row_number() OVER (PARTITION BY b.conversation_id ORDER BY b.ord),
           b.turn_id, b.type, b.data
      FROM batch b JOIN bumped ON bumped.id = b.conversation_id)
SELECT id, last, n FROM bumped
"""

_TURN_COLUMNS = """id, status, attempts, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens,
                   cost_usd_micros, model_calls"""

def _replay_ctes(read: str = "true") -> str:
    """The replay (Store.messages) as CTEs, `replay` the last, of conversation $1; none when `read` is false."""
    return f"""note AS (
    SELECT {_COLUMNS} FROM ai_messages WHERE conversation_id = $1 AND role = 'system_note' AND {read}
    ORDER BY position DESC LIMIT 1),
through AS (SELECT page_context->>'summarizedThroughMessageId' AS id FROM note),
anchor AS (
    SELECT coalesce(
        (SELECT m.position FROM ai_messages m, through
          WHERE m.conversation_id = $1
            AND m.id = CASE WHEN pg_input_is_valid(through.id, 'uuid') THEN through.id::uuid END),
        (SELECT position FROM note),
        0) AS after),
replay AS (
    SELECT 0 AS part, * FROM note
    UNION ALL
    SELECT 1 AS part, m.id, m.role::text AS role, m.content, m.turn_id, m.stop_reason, m.page_context, m.position
      FROM ai_messages m, anchor
     WHERE m.conversation_id = $1 AND m.position > anchor.after AND m.role <> 'system_note' AND {read})"""


_REPLAYED = f"""
WITH {_replay_ctes()}
SELECT * FROM replay ORDER BY part, position
"""


# Store.begin_turn: the conversation (when new), its first event (when asked for and the conversation is
# new), and the turn row, in one statement; the foreign keys are checked at its end.
_BEGIN_TURN = f"""
WITH conversation AS (
    INSERT INTO ai_conversations (id, organization_id, user_id, membership_id, model, title, locale, last_event_seq)
    VALUES ($1, $2, $3, $4, $5, $6, $7, CASE WHEN $10::jsonb IS NULL THEN 0 ELSE 1 END)
    ON CONFLICT (id) DO NOTHING RETURNING id),
turn AS (
    INSERT INTO ai_turns (id, conversation_id, command_id) VALUES ($8, $1, $9)
    ON CONFLICT (command_id) DO UPDATE SET attempts = ai_turns.attempts + 1
    RETURNING {_TURN_COLUMNS}),
started AS (
    INSERT INTO ai_conversation_events (conversation_id, seq, turn_id, type, data)
    SELECT id, 1, $8, 'conversation_started', $10 FROM conversation WHERE $10::jsonb IS NOT NULL
    RETURNING seq),
{_replay_ctes("$11::boolean")}
SELECT turn.*, (SELECT seq FROM started) AS started_seq, {_ORG_COLUMNS},
       r.id AS m_id, r.role AS m_role, r.content AS m_content, r.turn_id AS m_turn_id, r.stop_reason AS m_stop_reason,
       r.page_context AS m_page_context
  FROM turn
  LEFT JOIN organizations o ON o.id = $2
  LEFT JOIN users u ON u.id = $3
  {_SESSION_JOIN}
  LEFT JOIN replay r ON true
 ORDER BY r.part, r.position
"""

# The position a message appended to conversation $2 takes: never below the stored messages' (rows
# written before the counter, or by a seed).
_NEXT_POSITION = """greatest(last_message_position,
               (SELECT coalesce(max(position), 0) FROM ai_messages WHERE conversation_id = $2)) + 1"""

# Store.append_reply: one counter bump for both the message's position and its events' seqs. `fin`: the
# turn ends with this reply ($15, its `done`) and its row still counts $14 calls (read before this
# statement's own update, which every part of it reads past): then `done` follows `message_done`. Or the
# reply's first tool call starts ($16, its `tool_started`), which follows `message_done`. The reply's last
# text ($17, a `text_delta`) comes before `message_done`.
_APPEND_REPLY = f"""
WITH fin AS (
    SELECT $15::jsonb IS NOT NULL AND coalesce((SELECT model_calls = $14::int FROM ai_turns WHERE id = $11), false) AS ok),
more AS (SELECT (SELECT ok FROM fin) OR $16::jsonb IS NOT NULL AS one),
c AS (
    UPDATE ai_conversations
       SET last_message_at = now(), updated_at = now(),
           last_event_seq = last_event_seq + 1 + CASE WHEN (SELECT one FROM more) THEN 1 ELSE 0 END
                                               + CASE WHEN $17::jsonb IS NOT NULL THEN 1 ELSE 0 END,
           last_message_position = {_NEXT_POSITION}
     WHERE id = $2
 RETURNING last_message_position, last_event_seq),
message AS (
    INSERT INTO ai_messages (id, conversation_id, role, content, preview, stop_reason, input_tokens, output_tokens,
                             cache_read_tokens, cache_creation_tokens, model, turn_id, position)
    SELECT $1, $2, 'assistant', $3, $4, $5, $6, $7, $8, $9, $10, $11, c.last_message_position FROM c),
turn AS (
    UPDATE ai_turns SET input_tokens = input_tokens + $6, output_tokens = output_tokens + $7,
                        cache_read_tokens = cache_read_tokens + $8, cache_creation_tokens = cache_creation_tokens + $9,
                        cost_usd_micros = cost_usd_micros + $12, model_calls = model_calls + 1,
                        status = CASE WHEN (SELECT ok FROM fin) THEN 'completed' ELSE status END,
                        error_code = CASE WHEN (SELECT ok FROM fin) THEN NULL ELSE error_code END,
                        finished_at = CASE WHEN (SELECT ok FROM fin) THEN now() ELSE finished_at END
     WHERE id = $11 AND EXISTS (SELECT 1 FROM c)
 RETURNING input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, cost_usd_micros),
event AS (
    INSERT INTO ai_conversation_events (conversation_id, seq, turn_id, type, data)
    SELECT $2, c.last_event_seq - CASE WHEN more.one THEN 2 ELSE 1 END, $11, 'text_delta', $17 FROM c, more
     WHERE $17::jsonb IS NOT NULL
    UNION ALL
    SELECT $2, c.last_event_seq - CASE WHEN more.one THEN 1 ELSE 0 END, $11, 'message_done', $13 FROM c, more
    UNION ALL
    SELECT $2, c.last_event_seq, $11, 'done', $15 FROM c, fin WHERE fin.ok
    UNION ALL
    SELECT $2, c.last_event_seq, $11, 'tool_started', $16 FROM c WHERE $16::jsonb IS NOT NULL)
SELECT c.last_event_seq, (SELECT ok::int FROM fin) AS finished, turn.* FROM c LEFT JOIN turn ON true
"""

# Store.append_results: a tool_result message and one event, from one bump of the conversation's counters.
_APPEND_RESULTS = f"""
WITH c AS (
    UPDATE ai_conversations
       SET last_message_at = now(), updated_at = now(), last_event_seq = last_event_seq + 1,
           last_message_position = {_NEXT_POSITION}
     WHERE id = $2
 RETURNING last_message_position, last_event_seq),
message AS (
    INSERT INTO ai_messages (id, conversation_id, role, content, preview, turn_id, position)
    SELECT $1, $2, 'tool_result', $3, $4, $5, c.last_message_position FROM c)
INSERT INTO ai_conversation_events (conversation_id, seq, turn_id, type, data)
SELECT $2, c.last_event_seq, $5, $6, $7 FROM c
RETURNING seq
"""

# Store._append: the next position under the conversation's row lock, and the message with it.
_APPEND_MESSAGE = f"""
WITH c AS (
    UPDATE ai_conversations
       SET last_message_at = now(), updated_at = now(),
           last_message_position = {_NEXT_POSITION}
     WHERE id = $2
 RETURNING last_message_position)
INSERT INTO ai_messages (id, conversation_id, role, content, preview, page_context, stop_reason,
                         input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, model, turn_id, position)
SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, c.last_message_position FROM c
RETURNING id
"""

# Store.messages in one statement: the latest system_note, then the messages after its anchor (the
# message it summarized through when that id names one of this conversation's, else the note itself).

_PRIMARY_LANGUAGE = re.compile(r"^[a-z]{2,3}$")
# Deprecated ISO 639 codes some clients still send.
_LEGACY_LANGUAGES = {"iw": "he", "in": "id", "ji": "yi", "jw": "jv"}


def primary_language(tag: str | None) -> str:
    """A conversation's language: the primary subtag of the caller's BCP-47 locale ('he-IL' → 'he',
    'ru' → 'ru'); anything that is not one is English."""
    primary = (tag or "").strip().replace("_", "-").split("-")[0].lower()
    primary = _LEGACY_LANGUAGES.get(primary, primary)
    return primary if _PRIMARY_LANGUAGE.match(primary) else "en"


def fallback_title(message: str) -> str:
    # The first line, trimmed: the title until the summary model writes one (best effort, titles.py).
    first = message.strip().splitlines()[0] if message.strip() else "New conversation"
    return first[:80]


def _answer(future: asyncio.Future[int], result: int | BaseException) -> None:
    if future.done():
        return  # never expected (callers shield their future), but a batch writer must not raise
    if isinstance(result, BaseException):
        future.set_exception(result)
    else:
        future.set_result(result)


def _message(r: asyncpg.Record, prefix: str = "") -> StoredMessage:
    turn_id = r[f"{prefix}turn_id"]
    return StoredMessage(id=str(r[f"{prefix}id"]), role=r[f"{prefix}role"], content=r[f"{prefix}content"],
                         turn_id=str(turn_id) if turn_id else None, stop_reason=r[f"{prefix}stop_reason"],
                         page_context=r[f"{prefix}page_context"])


def _turn(row: asyncpg.Record) -> TurnRecord:
    return TurnRecord(
        id=str(row["id"]),
        status=row["status"],
        attempts=row["attempts"],
        model_calls=row["model_calls"],
        started_seq=row.get("started_seq"),
        usage=_usage(row),
        org=_org(row) if row.get("org_id") is not None and row.get("caller_name") is not None else None,
    )


def _org(row: asyncpg.Record | None) -> OrgContext:
    if row is None:
        raise LookupError("no such organization or user")
    return OrgContext(
        id=str(row["org_id"]), name=row["org_name"], tier=row["org_tier"], locale=row["org_locale"],
        timezone=row["org_timezone"], agent_enabled=row["agent_enabled"], caller_name=row["caller_name"],
        caller_email=row["caller_email"], caller_session=running_session(row),
    )


def _usage(row: asyncpg.Record) -> TurnUsage:
    return TurnUsage(
        input_tokens=row["input_tokens"], output_tokens=row["output_tokens"],
        cache_read_tokens=row["cache_read_tokens"], cache_creation_tokens=row["cache_creation_tokens"],
        cost_usd_micros=row["cost_usd_micros"],
    )
