"""Orchestrator entrypoint: consumes durable turn commands and drives the agent loop."""

from __future__ import annotations

import asyncio
import contextlib

from faststream import FastStream
from faststream.middlewares import AckPolicy
from faststream.nats import NatsMessage, PullSub
from nats.js.api import ConsumerConfig

from spotter_shared.bus import COMMANDS_JSTREAM, create_broker, park, prune_consumers
from spotter_shared.contracts.commands import (
    CANCEL_SUSPENDED, CANCEL_TURN, COMMANDS_STREAM, CONFIRM_TOOL, ORCHESTRATOR_DURABLE, PICK_TOOL, SEND_MESSAGE, UNDO, CancelSuspended,
    CancelTurn, ConfirmTool, PickTool, SendMessage, UndoTool,
)
from spotter_shared.service import Holder, Infra, run_app, service_app
from spotter_shared.turnlock import TurnLock

from .model import ModelClient
from .peers import Peers
from .settings import OrchestratorSettings
from .store import Store
from .turns import Delivery, TurnRunner


def create_app(settings: OrchestratorSettings) -> FastStream:
    broker = create_broker(settings.nats_url, "orchestrator")
    core: Holder[TurnRunner] = Holder()
    model = ModelClient(settings)

    durables: set[str] = set()

    def command_subscriber(subject: str, description: str):
        # One durable pull consumer per command subject on the commands stream, shared by replicas.
        durable = f"{ORCHESTRATOR_DURABLE}-{subject.rsplit('.', 1)[-1]}"
        durables.add(durable)
        return broker.subscriber(
            subject,
            stream=COMMANDS_JSTREAM,
            durable=durable,
            pull_sub=PullSub(timeout=1.0),
            config=ConsumerConfig(ack_wait=settings.spotter_ack_wait_s, max_deliver=-1, max_ack_pending=1000),
            ack_policy=AckPolicy.MANUAL,
            max_workers=settings.spotter_turn_concurrency,
            description=description,
        )

    @command_subscriber(SEND_MESSAGE.subject, SEND_MESSAGE.description)
    async def on_send(body: SendMessage, msg: NatsMessage) -> None:
        await _handle(msg, lambda delivery: core.get().send(body, delivery))

    @command_subscriber(CONFIRM_TOOL.subject, CONFIRM_TOOL.description)
    async def on_confirm(body: ConfirmTool, msg: NatsMessage) -> None:
        await _handle(msg, lambda delivery: core.get().confirm(body, delivery))

    @command_subscriber(PICK_TOOL.subject, PICK_TOOL.description)
    async def on_pick(body: PickTool, msg: NatsMessage) -> None:
        await _handle(msg, lambda delivery: core.get().pick(body, delivery))

    @command_subscriber(UNDO.subject, UNDO.description)
    async def on_undo(body: UndoTool, msg: NatsMessage) -> None:
        await _handle(msg, lambda delivery: core.get().undo(body, delivery))

    @command_subscriber(CANCEL_SUSPENDED.subject, CANCEL_SUSPENDED.description)
    async def on_cancel_suspended(body: CancelSuspended, msg: NatsMessage) -> None:
        await _handle(msg, lambda delivery: core.get().cancel_suspended(body, delivery))

    @broker.subscriber(CANCEL_TURN.subject, description=CANCEL_TURN.description)
    async def on_cancel(body: CancelTurn) -> None:
        # No queue group: every replica hears it; only the one running the turn acts.
        core.get().cancel_running(body.turn_id)

    async def _handle(msg: NatsMessage, run) -> None:
        if msg.raw_message.metadata.num_delivered > settings.spotter_max_deliveries + 1:
            # The turn itself gives up (error `internal` + done) on the last try; a command that
            # fails even before that is parked with its reason instead of looping forever.
            await park(broker, msg.raw_message, f"gave up after {settings.spotter_max_deliveries + 1} deliveries")
            await msg.ack_sync()
            return
        async with _heartbeat(msg, settings.spotter_ack_wait_s / 3) as delivery:
            await run(delivery)
        # Double ack: the command is gone only once the server confirms it.
        await msg.ack_sync()

    async def on_ready(infra: Infra) -> None:
        await prune_consumers(broker, COMMANDS_STREAM, durables)
        store = Store(infra.pool)
        peers = Peers(broker, rag_budget_s=settings.spotter_rag_budget_ms / 1000, tool_timeout_s=settings.spotter_tool_timeout_s)
        lock = TurnLock(infra.redis, settings.spotter_turn_lock_ttl_s)
        core.set(TurnRunner(settings, store, peers, model, broker, lock))

    return service_app("orchestrator", settings, broker, on_ready, on_stop=model.close)


@contextlib.asynccontextmanager
async def _heartbeat(msg: NatsMessage, every_s: float):
    """Tell JetStream the command is still being worked on, so only a dead replica's work is redelivered."""
    raw = msg.raw_message

    async def keepalive() -> None:
        await raw.in_progress()

    async def beat() -> None:
        while True:
            await asyncio.sleep(every_s)
            with contextlib.suppress(Exception):
                await raw.in_progress()

    task = asyncio.create_task(beat())
    try:
        yield Delivery(attempt=raw.metadata.num_delivered, keepalive=keepalive)
    finally:
        task.cancel()


def run() -> None:
    run_app(create_app(OrchestratorSettings()))
