"""The turn's writes as single statements (issue 14): begin_turn creates the conversation, its first
event and the turn together; a message takes its position from the conversation's counter under the
row lock; `done` commits with the turn's terminal status. Against a real, migrated Postgres."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg

from spotter_orchestrator.store import Store
from spotter_shared.contracts.commands import SendMessage
from tests.factories import new_send


async def _send(pool: asyncpg.Pool, *, is_new: bool = True, conversation_id: str | None = None) -> SendMessage:
    return await new_send(pool, is_new=is_new, conversation_id=conversation_id)


async def test_begin_turn_stores_a_new_conversations_first_event_once(pool: asyncpg.Pool) -> None:
    cmd = await _send(pool)
    store = Store(pool)
    started = {"type": "conversation_started", "conversationId": cmd.conversation_id}
    first = await store.begin_turn(cmd, "claude-sonnet-5-5", started)
    assert (first.attempts, first.status, first.started_seq) == (1, "running", 1)
    # Redelivered: the same turn again, and no second event (the conversation already exists).
    again = await store.begin_turn(cmd, "claude-sonnet-5-5", started)
    assert (again.id, again.attempts, again.started_seq) == (first.id, 2, None)
    # The same statement read the org and the caller (a send needs them before its model call), as org_context does.
    assert first.org is not None and first.org == again.org
    assert first.org == await store.org_context(cmd.actor.organization_id, cmd.actor.user_id)
    assert (first.org.id, first.org.caller_session) == (cmd.actor.organization_id, None)
    assert first.replay is None and (await store.begin_turn(cmd, "claude-sonnet-5-5", replay=True)).replay == ()
    rows = await pool.fetch("SELECT seq, type, data FROM ai_conversation_events WHERE conversation_id = $1",
                            uuid.UUID(cmd.conversation_id))
    assert [(r["seq"], r["type"], r["data"]) for r in rows] == [(1, "conversation_started", started)]
    # The next event continues the numbering.
    seq = await store.append_event(cmd.conversation_id, cmd.turn_id, "text_delta", {"type": "text_delta", "delta": "hi"})
    assert seq == 2


async def test_begin_turn_without_a_first_event_starts_the_log_at_zero(pool: asyncpg.Pool) -> None:
    cmd = await _send(pool)
    store = Store(pool)
    turn = await store.begin_turn(cmd, "claude-sonnet-5-5")
    assert turn.started_seq is None
    assert await store.append_event(cmd.conversation_id, cmd.turn_id, "text_delta", {"type": "text_delta", "delta": "x"}) == 1


async def test_racing_appends_get_dense_ordered_positions(pool: asyncpg.Pool) -> None:
    cmd = await _send(pool)
    store = Store(pool)
    await store.begin_turn(cmd, "claude-sonnet-5-5")
    # A message written before the counter existed (or by a seed) is never overtaken.
    await pool.execute(
        "INSERT INTO ai_messages (id, conversation_id, role, content, position) VALUES ($1, $2, 'user', $3, 7)",
        uuid.uuid4(), uuid.UUID(cmd.conversation_id), [{"type": "text", "text": "seeded"}])
    ids = await asyncio.gather(*(store.append_message(cmd.conversation_id, cmd.turn_id, "assistant",
                                                      [{"type": "text", "text": f"m{i}"}]) for i in range(12)))
    rows = await pool.fetch("SELECT id::text, position FROM ai_messages WHERE conversation_id = $1 ORDER BY position",
                            uuid.UUID(cmd.conversation_id))
    assert [r["position"] for r in rows] == list(range(7, 20))
    assert sorted(r["id"] for r in rows[1:]) == sorted(ids)
    # The id the caller chose is the stored one.
    chosen = str(uuid.uuid4())
    assert await store.append_message(cmd.conversation_id, cmd.turn_id, "user", [{"type": "text", "text": "x"}],
                                      message_id=chosen) == chosen


async def test_appending_to_a_missing_conversation_writes_nothing(pool: asyncpg.Pool) -> None:
    store = Store(pool)
    missing = str(uuid.uuid4())
    try:
        await store.append_message(missing, str(uuid.uuid4()), "user", [{"type": "text", "text": "x"}])
    except LookupError:
        pass
    else:
        raise AssertionError("appended to a conversation that does not exist")
    assert await pool.fetchval("SELECT count(*) FROM ai_messages WHERE conversation_id = $1", uuid.UUID(missing)) == 0


async def test_done_commits_with_the_turns_terminal_status(pool: asyncpg.Pool) -> None:
    cmd = await _send(pool)
    store = Store(pool)
    await store.begin_turn(cmd, "claude-sonnet-5-5")
    seq = await store.append_event(cmd.conversation_id, cmd.turn_id, "done", {"type": "done"}, finish=("failed", "internal"))
    assert seq == 1
    row = await pool.fetchrow("SELECT status::text AS status, error_code, finished_at FROM ai_turns WHERE id = $1",
                              uuid.UUID(cmd.turn_id))
    assert (row["status"], row["error_code"]) == ("failed", "internal") and row["finished_at"] is not None


async def test_log_appends_that_arrive_together_are_one_batch_numbered_in_order(pool: asyncpg.Pool) -> None:
    store = Store(pool)
    cmds = [await _send(pool) for _ in range(3)]
    for cmd in cmds:
        await store.begin_turn(cmd, "claude-sonnet-5-5", {"type": "conversation_started"})
    calls = [(cmds[i % 3], i) for i in range(30)]
    seqs = await asyncio.gather(*(store.append_event(cmd.conversation_id, cmd.turn_id, "text_delta",
                                                     {"type": "text_delta", "delta": str(i)}) for cmd, i in calls))
    for k, cmd in enumerate(cmds):
        mine = [seq for (c, _), seq in zip(calls, seqs) if c is cmd]
        assert mine == list(range(2, 12)), f"conversation {k}: {mine}"
        rows = await pool.fetch("SELECT seq, data FROM ai_conversation_events WHERE conversation_id = $1 AND seq > 1 "
                                "ORDER BY seq", uuid.UUID(cmd.conversation_id))
        assert [r["data"]["delta"] for r in rows] == [str(i) for c, i in calls if c is cmd]
        assert await pool.fetchval("SELECT last_event_seq FROM ai_conversations WHERE id = $1",
                                   uuid.UUID(cmd.conversation_id)) == 11


async def test_a_log_append_for_a_missing_conversation_fails_alone(pool: asyncpg.Pool) -> None:
    store = Store(pool)
    cmd = await _send(pool)
    await store.begin_turn(cmd, "claude-sonnet-5-5")
    missing = str(uuid.uuid4())
    good, bad = await asyncio.gather(
        store.append_event(cmd.conversation_id, cmd.turn_id, "text_delta", {"type": "text_delta", "delta": "a"}),
        store.append_event(missing, cmd.turn_id, "text_delta", {"type": "text_delta", "delta": "b"}),
        return_exceptions=True)
    assert good == 1 and isinstance(bad, LookupError)
    assert await pool.fetchval("SELECT count(*) FROM ai_conversation_events WHERE conversation_id = $1",
                               uuid.UUID(missing)) == 0


async def test_a_batch_that_fails_is_written_again_one_by_one(pool: asyncpg.Pool) -> None:
    store = Store(pool)
    cmd = await _send(pool)
    await store.begin_turn(cmd, "claude-sonnet-5-5")
    results = await asyncio.gather(
        store.append_event(cmd.conversation_id, cmd.turn_id, "text_delta", {"type": "text_delta", "delta": "a"}),
        store.append_event(cmd.conversation_id, cmd.turn_id, "text_delta", {"type": "text_delta", "delta": object()}),
        store.append_event(cmd.conversation_id, cmd.turn_id, "text_delta", {"type": "text_delta", "delta": "c"}),
        return_exceptions=True)
    assert results[0] == 1 and isinstance(results[1], asyncpg.DataError) and results[2] == 2
    rows = await pool.fetch("SELECT seq, data FROM ai_conversation_events WHERE conversation_id = $1 ORDER BY seq",
                            uuid.UUID(cmd.conversation_id))
    assert [(r["seq"], r["data"]["delta"]) for r in rows] == [(1, "a"), (2, "c")]


async def test_a_reply_its_usage_and_its_message_done_commit_together(pool: asyncpg.Pool) -> None:
    from spotter_shared.contracts.events import TurnUsage

    store = Store(pool)
    cmd = await _send(pool)
    await store.begin_turn(cmd, "claude-sonnet-5-5", {"type": "conversation_started"})
    await store.append_message(cmd.conversation_id, cmd.turn_id, "user", [{"type": "text", "text": "hi"}])
    message_id = str(uuid.uuid4())
    usage = TurnUsage(input_tokens=10, output_tokens=5, cache_read_tokens=3, cache_creation_tokens=2, cost_usd_micros=77)
    done = {"type": "message_done", "messageId": message_id, "stopReason": "end_turn"}
    stored = await store.append_reply(cmd.conversation_id, cmd.turn_id, [{"type": "text", "text": "hello"}],
                                      stop_reason="end_turn", usage=usage, model="claude-sonnet-5-5",
                                      message_id=message_id, done=done)
    assert stored.seq == 2
    replay = await store.messages(cmd.conversation_id)
    assert [(m.id, m.role, m.stop_reason) for m in replay][-1] == (message_id, "assistant", "end_turn")
    turn = await store.turn(cmd.turn_id)
    assert (turn.model_calls, turn.usage, stored.turn_usage) == (1, usage, usage)
    assert await pool.fetchval("SELECT data FROM ai_conversation_events WHERE conversation_id = $1 AND seq = 2",
                               uuid.UUID(cmd.conversation_id)) == done
    # A second call's reply comes back with the turn's usage over both calls: what its `done` reports.
    second = await store.append_reply(cmd.conversation_id, cmd.turn_id, [{"type": "text", "text": "again"}],
                                      stop_reason="end_turn", usage=usage, model="claude-sonnet-5-5",
                                      message_id=str(uuid.uuid4()), done=done)
    twice = TurnUsage(input_tokens=20, output_tokens=10, cache_read_tokens=6, cache_creation_tokens=4, cost_usd_micros=154)
    assert (second.seq, second.turn_usage, (await store.turn(cmd.turn_id)).usage) == (3, twice, twice)
    # Nothing is half-written for a conversation that is not there.
    try:
        await store.append_reply(str(uuid.uuid4()), cmd.turn_id, [], stop_reason=None, usage=usage, model="m",
                                 message_id=str(uuid.uuid4()), done=done)
    except LookupError:
        pass
    else:
        raise AssertionError("a reply was appended to a missing conversation")
    assert (await store.turn(cmd.turn_id)).model_calls == 2


async def test_a_cancelled_append_is_stored_before_its_caller_stops(pool: asyncpg.Pool) -> None:
    store = Store(pool)
    cmd = await _send(pool)
    await store.begin_turn(cmd, "claude-sonnet-5-5")
    # The second append waits behind the first batch; its caller is cancelled meanwhile.
    first = asyncio.ensure_future(store.append_event(cmd.conversation_id, cmd.turn_id, "text_delta",
                                                     {"type": "text_delta", "delta": "a"}))
    await asyncio.sleep(0)
    second = asyncio.ensure_future(store.append_event(cmd.conversation_id, cmd.turn_id, "text_delta",
                                                      {"type": "text_delta", "delta": "b"}))
    await asyncio.sleep(0)
    second.cancel()
    try:
        await second
    except asyncio.CancelledError:
        pass
    # By the time the cancelled caller has stopped, its event is in the log.
    assert await pool.fetchval("SELECT count(*) FROM ai_conversation_events WHERE conversation_id = $1",
                               uuid.UUID(cmd.conversation_id)) == 2
    assert await first == 1


async def test_a_last_reply_takes_the_turns_done_and_status_when_its_calls_are_the_ones_known(pool: asyncpg.Pool) -> None:
    from spotter_shared.contracts.events import TurnUsage

    store = Store(pool)
    cmd = await _send(pool)
    await store.begin_turn(cmd, "claude-sonnet-5-5", {"type": "conversation_started"})
    usage = TurnUsage(input_tokens=10, output_tokens=5, cache_read_tokens=3, cache_creation_tokens=2, cost_usd_micros=77)
    message_done = {"type": "message_done", "messageId": "m", "stopReason": "end_turn"}
    turn_done = {"type": "done", "conversationId": cmd.conversation_id, "usage": {"inputTokens": 10}}

    async def events() -> list[tuple[int, str]]:
        rows = await pool.fetch("SELECT seq, type FROM ai_conversation_events WHERE conversation_id = $1 ORDER BY seq",
                                uuid.UUID(cmd.conversation_id))
        return [(r["seq"], r["type"]) for r in rows]

    # The turn's row counts one call already, not the none the caller knows of: the reply alone is stored.
    await pool.execute("UPDATE ai_turns SET model_calls = 1 WHERE id = $1", uuid.UUID(cmd.turn_id))
    alone = await store.append_reply(cmd.conversation_id, cmd.turn_id, [{"type": "text", "text": "a"}],
                                     stop_reason="end_turn", usage=usage, model="claude-sonnet-5-5",
                                     message_id=str(uuid.uuid4()), done=message_done, done_event=(0, turn_done))
    assert (alone.seq, alone.done_seq) == (2, None)
    assert await events() == [(1, "conversation_started"), (2, "message_done")]
    assert await store.turn_status(cmd.turn_id) == "running"

    # It counts the two the caller knows of: message_done, then done, and the turn completed, in one statement.
    last = await store.append_reply(cmd.conversation_id, cmd.turn_id, [{"type": "text", "text": "b"}],
                                    stop_reason="end_turn", usage=usage, model="claude-sonnet-5-5",
                                    message_id=str(uuid.uuid4()), done=message_done, done_event=(2, turn_done))
    assert (last.seq, last.done_seq) == (3, 4)
    assert await events() == [(1, "conversation_started"), (2, "message_done"), (3, "message_done"), (4, "done")]
    assert await pool.fetchval("SELECT data FROM ai_conversation_events WHERE conversation_id = $1 AND seq = 4",
                               uuid.UUID(cmd.conversation_id)) == turn_done
    row = await pool.fetchrow("SELECT status::text AS status, error_code, finished_at, model_calls FROM ai_turns WHERE id = $1",
                              uuid.UUID(cmd.turn_id))
    assert (row["status"], row["error_code"], row["finished_at"] is not None, row["model_calls"]) == ("completed", None, True, 3)
    # The next event continues after `done`.
    assert await store.append_event(cmd.conversation_id, cmd.turn_id, "x", {"type": "x"}) == 5


async def test_a_batchs_results_and_its_last_tool_completed_are_one_statement(pool: asyncpg.Pool) -> None:
    store = Store(pool)
    cmd = await _send(pool)
    await store.begin_turn(cmd, "claude-sonnet-5-5", {"type": "conversation_started"})
    await store.append_message(cmd.conversation_id, cmd.turn_id, "assistant", [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}])
    results = [{"type": "tool_result", "tool_use_id": "t1", "content": "{}"}]
    completed = {"type": "tool_completed", "toolUseId": "t1"}
    seq = await store.append_results(cmd.conversation_id, cmd.turn_id, results, event=("tool_completed", completed))
    assert seq == 2
    stored = await store.messages(cmd.conversation_id)
    assert [(m.role, m.content) for m in stored][-1] == ("tool_result", results)
    row = await pool.fetchrow("""SELECT e.data, e.xmin::text AS event_tx, m.xmin::text AS message_tx, m.position
                                   FROM ai_conversation_events e JOIN ai_messages m ON m.conversation_id = e.conversation_id
                                  WHERE e.conversation_id = $1 AND e.seq = 2 AND m.role = 'tool_result'""", uuid.UUID(cmd.conversation_id))
    assert (row["data"], row["event_tx"] == row["message_tx"], row["position"]) == (completed, True, 2)
    # The numbering goes on from both counters.
    assert await store.append_event(cmd.conversation_id, cmd.turn_id, "x", {"type": "x"}) == 3
    try:
        await store.append_results(str(uuid.uuid4()), cmd.turn_id, results, event=("tool_completed", completed))
    except LookupError:
        pass
    else:
        raise AssertionError("results were appended to a missing conversation")


async def test_a_reply_whose_first_call_runs_next_is_stored_with_its_tool_started(pool: asyncpg.Pool) -> None:
    from spotter_shared.contracts.events import TurnUsage

    store = Store(pool)
    cmd = await _send(pool)
    await store.begin_turn(cmd, "claude-sonnet-5-5", {"type": "conversation_started"})
    usage = TurnUsage(input_tokens=10, output_tokens=5, cost_usd_micros=77)
    content = [{"type": "tool_use", "id": "t1", "name": "read__get_current_context", "input": {}}]
    message_done = {"type": "message_done", "messageId": "m", "stopReason": "tool_use"}
    started = {"type": "tool_started", "toolUseId": "t1", "router": "read", "action": "get_current_context", "input": {}}

    stored = await store.append_reply(cmd.conversation_id, cmd.turn_id, content, stop_reason="tool_use", usage=usage,
                                      model="claude-sonnet-5-5", message_id=str(uuid.uuid4()), done=message_done,
                                      started_event=started)

    assert (stored.seq, stored.started_seq, stored.done_seq) == (2, 3, None)
    rows = await pool.fetch("""SELECT e.seq, e.type, e.data, e.xmin::text = m.xmin::text AS with_message
                                 FROM ai_conversation_events e JOIN ai_messages m ON m.conversation_id = e.conversation_id
                                WHERE e.conversation_id = $1 AND m.role = 'assistant' ORDER BY e.seq""", uuid.UUID(cmd.conversation_id))
    assert [(r["seq"], r["type"], r["with_message"]) for r in rows] == [
        (1, "conversation_started", False), (2, "message_done", True), (3, "tool_started", True)]
    assert rows[2]["data"] == started
    assert await store.turn_status(cmd.turn_id) == "running"
    # The numbering goes on after it.
    assert await store.append_event(cmd.conversation_id, cmd.turn_id, "x", {"type": "x"}) == 4


async def test_a_last_reply_is_stored_with_its_last_text_before_its_message_done_and_done(pool: asyncpg.Pool) -> None:
    from spotter_shared.contracts.events import TurnUsage

    store = Store(pool)
    cmd = await _send(pool)
    await store.begin_turn(cmd, "claude-sonnet-5-5", {"type": "conversation_started"})
    usage = TurnUsage(input_tokens=10, output_tokens=5, cost_usd_micros=77)
    text = {"type": "text_delta", "delta": " coach."}
    turn_done = {"type": "done", "conversationId": cmd.conversation_id, "usage": {"inputTokens": 10}}

    stored = await store.append_reply(cmd.conversation_id, cmd.turn_id, [{"type": "text", "text": "Hi coach."}],
                                      stop_reason="end_turn", usage=usage, model="claude-sonnet-5-5",
                                      message_id=str(uuid.uuid4()), done={"type": "message_done"},
                                      done_event=(0, turn_done), text_event=text)

    assert (stored.text_seq, stored.seq, stored.done_seq, stored.started_seq) == (2, 3, 4, None)
    rows = await pool.fetch("""SELECT e.seq, e.type, e.data, e.xmin::text = m.xmin::text AS with_reply
                                 FROM ai_conversation_events e JOIN ai_messages m ON m.conversation_id = e.conversation_id
                                WHERE e.conversation_id = $1 AND m.role = 'assistant' AND e.seq > 1 ORDER BY e.seq""",
                            uuid.UUID(cmd.conversation_id))
    assert [(r["seq"], r["type"], r["with_reply"]) for r in rows] == [
        (2, "text_delta", True), (3, "message_done", True), (4, "done", True)]
    assert rows[0]["data"] == text
    assert await store.turn_status(cmd.turn_id) == "completed"
    assert await store.append_event(cmd.conversation_id, cmd.turn_id, "x", {"type": "x"}) == 5
