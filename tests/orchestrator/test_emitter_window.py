"""The text_delta window (the emitter): the first delta goes out at once, then one batch per window at
most; text held for the window is stored and published when the window ends even if the stream stalls;
every stream's window ends at the same moments; nothing held is written once the turn's body is closed.
Against a real Postgres and NATS."""

from __future__ import annotations

import asyncio
import json
import math
import time
import uuid

import asyncpg
import nats
import pytest

from spotter_cli.devstack import StackUrls
from spotter_orchestrator.emitter import Emitter
from spotter_orchestrator.store import Store
from spotter_shared.contracts.events import conversation_subject
from tests.factories import new_send


class _Publisher:
    def __init__(self, nc: nats.NATS) -> None:
        self._nc = nc

    async def publish(self, subject: str, payload: bytes) -> None:
        await self._nc.publish(subject, payload)


class _Turn:
    """A begun turn's emitter, what its log holds, and what listeners heard."""

    def __init__(self, pool: asyncpg.Pool, emitter: Emitter, heard: list[str]) -> None:
        self.pool = pool
        self.emitter = emitter
        self.heard = heard

    async def logged(self) -> list[str]:
        rows = await self.pool.fetch("SELECT data FROM ai_conversation_events WHERE conversation_id = $1 ORDER BY seq",
                                     uuid.UUID(self.emitter.conversation_id))
        return [r["data"].get("delta", r["data"]["type"]) for r in rows]


async def _turn(pool: asyncpg.Pool, nc: nats.NATS, flush_s: float, store: Store | None = None) -> _Turn:
    """`store`: one shared with another turn (a process has one)."""
    cmd = await new_send(pool)
    store = store or Store(pool)
    await store.begin_turn(cmd, "claude-sonnet-5-5")
    heard: list[str] = []

    async def on_event(msg) -> None:  # noqa: ANN001 — a nats-py Msg
        event = json.loads(msg.data)["event"]
        heard.append(event.get("delta", event["type"]))

    await nc.subscribe(conversation_subject(cmd.conversation_id), cb=on_event)
    await nc.flush()
    return _Turn(pool, Emitter(store, _Publisher(nc), cmd.conversation_id, cmd.turn_id, flush_s), heard)


async def _until(check, timeout_s: float = 5.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_held_text_is_written_when_the_window_ends_though_no_more_comes(pool: asyncpg.Pool, stack: StackUrls) -> None:
    nc = await nats.connect(stack.nats_url)
    try:
        turn = await _turn(pool, nc, flush_s=0.3)
        await turn.emitter.text("Hel")  # the first delta: at once
        assert await turn.logged() == ["Hel"]
        await turn.emitter.text("lo")  # inside the window: held ...
        assert await turn.logged() == ["Hel"]
        # ... and the stream stalls: the window's end writes it anyway, stored then published.
        await _until(lambda: _equals(turn.logged, ["Hel", "lo"]))
        await _until(lambda: _same(turn.heard, ["Hel", "lo"]))
        # A later delta starts a new window of its own.
        await turn.emitter.text(" there")
        await _until(lambda: _equals(turn.logged, ["Hel", "lo", " there"]))
        await turn.emitter.close()
    finally:
        await nc.close()


async def test_a_steady_stream_is_batched_one_per_window_at_most(pool: asyncpg.Pool, stack: StackUrls) -> None:
    nc = await nats.connect(stack.nats_url)
    try:
        window = 0.1
        turn = await _turn(pool, nc, flush_s=window)
        started = time.monotonic()
        sent = [f"w{i} " for i in range(60)]
        for word in sent:
            await turn.emitter.text(word)
            await asyncio.sleep(0.01)
        await turn.emitter.flush()
        elapsed = time.monotonic() - started
        await turn.emitter.close()
        batches = await turn.logged()
        assert "".join(batches) == "".join(sent)
        # The first at once, then at most one per window, then what the final flush wrote.
        assert len(batches) <= 2 + math.ceil(elapsed / window), (len(batches), elapsed)
        assert len(batches) >= 2
    finally:
        await nc.close()


async def test_every_streams_held_text_is_written_together_at_the_windows_end(pool: asyncpg.Pool, stack: StackUrls) -> None:
    """Windows end at the same moments for every turn of the process, so the text two streams hold is
    stored in one statement (one transaction: the rows share their xmin), though they began apart."""
    nc = await nats.connect(stack.nats_url)
    try:
        window = 0.1
        store = Store(pool)
        first, second = await _turn(pool, nc, window, store), await _turn(pool, nc, window, store)
        await first.emitter.text("a0 ")
        await asyncio.sleep(0.037)
        await second.emitter.text("b0 ")
        for i in range(1, 36):
            await asyncio.gather(first.emitter.text(f"a{i} "), second.emitter.text(f"b{i} "))
            await asyncio.sleep(0.01)
        for turn in (first, second):
            await turn.emitter.flush()
            await turn.emitter.close()
        held = [await _held_writes(turn) for turn in (first, second)]
        assert all(len(writes) >= 2 for writes in held), held
        assert len(set(held[0]) & set(held[1])) >= 2, held  # at least two windows' writes shared a transaction
    finally:
        await nc.close()


async def _held_writes(turn: _Turn) -> list[int]:
    """The transaction of each text write between the first (at once) and the last (the final flush)."""
    rows = await turn.pool.fetch("SELECT xmin::text::bigint AS tx FROM ai_conversation_events WHERE conversation_id = $1 "
                                 "AND type = 'text_delta' ORDER BY seq", uuid.UUID(turn.emitter.conversation_id))
    return [r["tx"] for r in rows][1:-1]


async def test_nothing_held_is_written_once_the_body_is_closed(pool: asyncpg.Pool, stack: StackUrls) -> None:
    nc = await nats.connect(stack.nats_url)
    try:
        turn = await _turn(pool, nc, flush_s=0.2)
        await turn.emitter.text("kept")
        await turn.emitter.text(" dropped")
        # The process is stopping this turn (its command goes back to JetStream): a redelivered attempt
        # may read the log at once, so the held text must not land behind its back.
        await turn.emitter.close()
        await asyncio.sleep(0.5)
        assert await turn.logged() == ["kept"]
    finally:
        await nc.close()


async def _equals(read, expected: list[str]) -> bool:  # noqa: ANN001
    return await read() == expected


async def _same(got: list[str], expected: list[str]) -> bool:
    return got == expected


async def test_nothing_is_stored_or_published_before_the_write_it_comes_after(pool: asyncpg.Pool, stack: StackUrls) -> None:
    """The model is called while the user's message is still being written: its first delta waits for
    that write (here a future finished by hand), then is stored and published as usual."""
    nc = await nats.connect(stack.nats_url)
    try:
        turn = await _turn(pool, nc, flush_s=0.3)
        write: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        turn.emitter.after(write)
        first = asyncio.ensure_future(turn.emitter.text("Hel"))
        await asyncio.sleep(0.2)
        assert not first.done() and await turn.logged() == [] and turn.heard == []
        write.set_result(None)
        await first
        assert await turn.logged() == ["Hel"]
        await _until(lambda: _same(turn.heard, ["Hel"]))
        await turn.emitter.close()
    finally:
        await nc.close()


async def test_a_failed_write_fails_the_events_that_come_after_it(pool: asyncpg.Pool, stack: StackUrls) -> None:
    nc = await nats.connect(stack.nats_url)
    try:
        turn = await _turn(pool, nc, flush_s=0.3)
        write: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        write.set_exception(asyncpg.PostgresConnectionError("the database went away"))
        turn.emitter.after(write)
        with pytest.raises(asyncpg.PostgresConnectionError):
            await turn.emitter.text("Hel")
        assert await turn.logged() == [] and turn.heard == []
    finally:
        await nc.close()


async def test_a_model_calls_last_text_is_stored_with_its_reply_and_published_before_its_message_done(
        pool: asyncpg.Pool, stack: StackUrls) -> None:
    from spotter_orchestrator.loop import LoopContext, ModelLoop
    from spotter_orchestrator.model import ModelReply
    from spotter_shared.contracts.billing import ModelUsage
    from spotter_shared.contracts.commands import Actor

    from .test_reserve_ahead import GRANTED, HISTORY, Billing

    class Model:
        async def stream(self, params, on_text):  # noqa: ANN001, ANN202
            await on_text("Hello")  # the first text goes out at once
            await on_text(" there")  # the rest is held for the window, which has not ended when the stream does
            await on_text(", coach")
            return ModelReply(content=[{"type": "text", "text": "Hello there, coach"}], stop_reason="end_turn",
                              usage=ModelUsage(input_tokens=5, output_tokens=3))

    nc = await nats.connect(stack.nats_url)
    try:
        turn = await _turn(pool, nc, flush_s=5.0)
        store = turn.emitter._store
        actor = Actor(user_id=str(uuid.uuid4()), organization_id=str(uuid.uuid4()), membership_id=str(uuid.uuid4()), role="owner")
        ctx = LoopContext(conversation_id=turn.emitter.conversation_id, turn_id=turn.emitter.turn_id, trace_id=uuid.uuid4().hex,
                          actor=actor, model="claude-sonnet-5-5", max_tokens=1024, max_rounds=8,
                          system=[{"type": "text", "text": "You are Spotter."}], tools=[], specs={}, emitter=turn.emitter)
        await ModelLoop(store=store, peers=Billing(GRANTED), model=Model()).call_model(ctx, list(HISTORY))  # type: ignore[arg-type]

        rows = await pool.fetch("""SELECT e.type, e.data, e.xmin::text = m.xmin::text AS with_reply
                                     FROM ai_conversation_events e JOIN ai_messages m ON m.conversation_id = e.conversation_id
                                    WHERE e.conversation_id = $1 AND m.role = 'assistant' ORDER BY e.seq""",
                                uuid.UUID(ctx.conversation_id))
        assert [(r["type"], r["data"].get("delta"), r["with_reply"]) for r in rows] == [
            ("text_delta", "Hello", False), ("text_delta", " there, coach", True), ("message_done", None, True)]
        await _until(lambda: _async(len(turn.heard) == 3))
        assert turn.heard == ["Hello", " there, coach", "message_done"]
    finally:
        await nc.close()


async def _async(value: bool) -> bool:
    return value
