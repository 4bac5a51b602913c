"""A turn whose last reply was stored with its `done` (Store.append_reply's `done_event`) has ended: a stop
that arrives before the turn's body returns finds it ended and writes no second `done`, and its `done` is
published once, after the lease is let go. Against a real Postgres and NATS."""

from __future__ import annotations

import asyncio
import json
import uuid

import asyncpg
import nats

from spotter_cli.devstack import StackUrls
from spotter_orchestrator.emitter import Emitter
from spotter_orchestrator.loop import Finished
from spotter_orchestrator.settings import OrchestratorSettings
from spotter_orchestrator.store import Store
from spotter_orchestrator.turns import Delivery, TurnMeta, TurnRunner
from spotter_shared.contracts.events import TurnUsage, conversation_subject
from tests.factories import new_send

from .test_emitter_window import _Publisher


async def test_a_stop_after_the_last_reply_and_its_done_were_stored_finds_the_turn_ended(pool: asyncpg.Pool, stack: StackUrls) -> None:
    cmd = await new_send(pool)
    store = Store(pool)
    turn = await store.begin_turn(cmd, "claude-sonnet-5-5")
    nc = await nats.connect(stack.nats_url)
    heard: list[dict] = []

    async def on_event(msg) -> None:  # noqa: ANN001 — a nats-py Msg
        heard.append(json.loads(msg.data))

    sub = await nc.subscribe(conversation_subject(cmd.conversation_id), cb=on_event)
    await nc.flush()
    try:
        emitter = Emitter(store, _Publisher(nc), cmd.conversation_id, cmd.turn_id)
        runner = TurnRunner(OrchestratorSettings(), store, None, None, None, events=None, cancels=None)  # type: ignore[arg-type]
        usage = TurnUsage(input_tokens=3, output_tokens=2, cost_usd_micros=9)
        done = {"type": "done", "conversationId": cmd.conversation_id, "usage": usage.model_dump(mode="json", by_alias=True)}
        stored_done = asyncio.Event()

        async def body(emitter: Emitter, turn) -> Finished:  # noqa: ANN001
            last = await store.append_reply(cmd.conversation_id, cmd.turn_id, [{"type": "text", "text": "hi"}],
                                            stop_reason="end_turn", usage=usage, model="claude-sonnet-5-5",
                                            message_id=str(uuid.uuid4()),
                                            done={"type": "message_done"}, done_event=(0, done))
            assert last.done_seq is not None
            emitter.ended(last.done_seq, done)
            stored_done.set()
            await asyncio.Event().wait()  # the stop comes here, before the body returns
            raise AssertionError("not reached")

        meta = TurnMeta(conversation_id=cmd.conversation_id, turn_id=cmd.turn_id, trace_id="t" * 32,
                        organization_id=cmd.actor.organization_id, endpoint="messages")

        async def keepalive() -> None:
            return None

        outcome = asyncio.create_task(runner._outcome(meta, turn, Delivery(attempt=1, keepalive=keepalive), emitter, body,
                                                      stop_asked=False))
        await asyncio.wait_for(stored_done.wait(), 5)
        runner._running[cmd.turn_id].cancel()  # the user's stop
        result = await asyncio.wait_for(outcome, 5)
        assert isinstance(result, Finished)

        let_go = []

        async def released() -> None:
            let_go.append(len(heard))

        await runner._finish(meta, emitter, result, released)
        await emitter.publish_done()  # as _turn's finally does: nothing left to publish
        await nc.flush()
        await asyncio.sleep(0.2)
    finally:
        await sub.unsubscribe()
        await nc.close()
    rows = await pool.fetch("SELECT type FROM ai_conversation_events WHERE conversation_id = $1 ORDER BY seq",
                            uuid.UUID(cmd.conversation_id))
    assert [r["type"] for r in rows] == ["message_done", "done"]  # no `error`, no second `done`
    assert await store.turn_status(cmd.turn_id) == "completed"
    assert let_go == [0]  # the lease let go before `done` was published
    assert [e["event"]["type"] for e in heard] == ["done"]
