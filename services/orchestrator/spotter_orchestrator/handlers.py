"""What the orchestrator consumes, at module level: the five durable turn commands, the cancel
broadcast, the admission request, pin/archive, the human activity bridge and the member coach (what it sends is declared in edges.py). Each handler
validates (its parameter is the contract), calls the core and acknowledges; the core knows
nothing of NATS.

The admission request (asked before every turn) and pin/archive answer on the bare NATS connection
(`bus.Responders`: no FastStream middleware per message, many at once), and the durable turn commands
are pulled on it (`bus.Pullers`: stored to handler in about half the time); their routers declare them
for the AsyncAPI document and are never subscribed by FastStream."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any


from faststream.nats import NatsBroker, NatsRouter
from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig

from spotter_shared import bus
from spotter_shared.bus import COMMANDS_JSTREAM, park
from spotter_shared.contracts.base import Endpoint
from spotter_shared.contracts.commands import (
    ADMIT, CANCEL_SUSPENDED, CANCEL_TURN, CONFIRM_TOOL, ORCHESTRATOR_DURABLE, ORGANIZE_CONVERSATION, PICK_TOOL,
    SEND_MESSAGE, UNDO, Admission, AdmitCommand, CancelSuspended, CancelTurn, ConfirmTool, ConversationFlags,
    OrganizeConversation, PickTool, SendMessage, UndoTool,
)
from spotter_shared.contracts.tools import TOOLS_CHANGED, ToolsChanged
from spotter_shared.contracts.coach import COACH_RUN, COACH_SESSION_CREATE, CoachRun, CreateCoachSession
from spotter_shared.contracts.sessions import (
    RECORD_HUMAN_EVENTS, START_HUMAN_SESSION, STOP_HUMAN_SESSION, HumanSessionChanged, RecordedHumanEvents,
    RecordHumanEvents, StartHumanSession, StopHumanSession,
)
from spotter_shared.contracts.sessions import SessionView
from spotter_shared.errors import SpotterError
from spotter_shared.service import CORE, FromContext

from .coach.runner import CoachRunner
from .human import HumanBridge
from .settings import OrchestratorSettings
from .turns import Delivery, TurnRunner

log = logging.getLogger(__name__)

Core = Annotated[TurnRunner, FromContext(CORE)]
Broker = Annotated[NatsBroker, FromContext("broker")]
HUMAN = "human_bridge"
Bridge = Annotated[HumanBridge, FromContext(HUMAN)]
COACH = "coach"
Coach = Annotated[CoachRunner, FromContext(COACH)]
# The JetStream message itself (its metadata, acks and in-progress signs); bus.Pullers passes it.
Raw = Annotated[Msg, FromContext("message.raw_message")]

COMMAND_ENDPOINTS: tuple[Endpoint[Any, Any], ...] = (SEND_MESSAGE, CONFIRM_TOOL, PICK_TOOL, UNDO, CANCEL_SUSPENDED, COACH_RUN)

# The request endpoints answered by `bus.Responders` (see above); build_router has the rest.
router = NatsRouter()
responders = bus.Responders(router)


def durable_name(ep: Endpoint[Any, Any]) -> str:
    # One durable pull consumer per command subject on the commands stream, shared by replicas.
    return f"{ORCHESTRATOR_DURABLE}-{ep.subject.rsplit('.', 1)[-1]}"


async def on_send(body: SendMessage, msg: Raw, core: Core, broker: Broker) -> None:
    await _handle(msg, core, broker, lambda delivery: core.send(body, delivery))


async def on_confirm(body: ConfirmTool, msg: Raw, core: Core, broker: Broker) -> None:
    await _handle(msg, core, broker, lambda delivery: core.confirm(body, delivery))


async def on_pick(body: PickTool, msg: Raw, core: Core, broker: Broker) -> None:
    await _handle(msg, core, broker, lambda delivery: core.pick(body, delivery))


async def on_undo(body: UndoTool, msg: Raw, core: Core, broker: Broker) -> None:
    await _handle(msg, core, broker, lambda delivery: core.undo(body, delivery))


async def on_cancel_suspended(body: CancelSuspended, msg: Raw, core: Core, broker: Broker) -> None:
    await _handle(msg, core, broker, lambda delivery: core.cancel_suspended(body, delivery))


async def on_coach_run(body: CoachRun, msg: Raw, core: Core, broker: Broker) -> None:
    coach: CoachRunner = broker.context.get(COACH)

    async def run(_: Delivery) -> None:
        try:
            await coach.run(body)
        except SpotterError as exc:  # a command that can never run (the session is not the caller's)
            log.warning("coach run %s refused: %s", body.run_id, exc.message)

    await _handle(msg, core, broker, run)


async def on_coach_session(body: CreateCoachSession, coach: Coach) -> SessionView:
    return await coach.create_session(body)


async def on_tools_changed(body: ToolsChanged, core: Core) -> None:
    # No queue group: every replica drops its cached catalogs.
    core.tools_changed()


async def on_cancel(body: CancelTurn, core: Core) -> None:
    # No queue group: every replica hears it; only the one running the turn acts.
    core.cancel_running(body.turn_id)


@responders(ADMIT)
async def on_admit(body: AdmitCommand, core: Core) -> Admission:
    return await core.admit(body)


@responders(ORGANIZE_CONVERSATION)
async def on_organize(body: OrganizeConversation, core: Core) -> ConversationFlags:
    return await core.organize(body)


async def on_human_start(body: StartHumanSession, bridge: Bridge) -> HumanSessionChanged:
    return await bridge.start(body)


async def on_human_stop(body: StopHumanSession, bridge: Bridge) -> HumanSessionChanged:
    return await bridge.stop(body)


async def on_human_record(body: RecordHumanEvents, bridge: Bridge) -> RecordedHumanEvents:
    return await bridge.record(body)


HANDLERS: dict[str, Callable[..., Awaitable[None]]] = {
    SEND_MESSAGE.subject: on_send, CONFIRM_TOOL.subject: on_confirm, PICK_TOOL.subject: on_pick,
    UNDO.subject: on_undo, CANCEL_SUSPENDED.subject: on_cancel_suspended, COACH_RUN.subject: on_coach_run,
}


def command_pullers(settings: OrchestratorSettings) -> bus.Pullers:
    """The durable turn commands, whose consumer settings come from configuration, around the
    module-level handlers; started with `(core, broker)` as their context."""
    pullers = bus.Pullers(NatsRouter())
    for ep in COMMAND_ENDPOINTS:
        pullers(
            ep, stream=COMMANDS_JSTREAM, durable=durable_name(ep), poll_s=1.0,
            config=ConsumerConfig(ack_wait=settings.spotter_ack_wait_s, max_deliver=-1, max_ack_pending=1000),
            # A few deliveries beyond the turn slots wait in the handler, heartbeat going (see _handle).
            max_workers=settings.spotter_turn_concurrency + settings.spotter_turn_prefetch,
        )(HANDLERS[ep.subject])
    return pullers


def build_router() -> NatsRouter:
    """The broadcasts and requests FastStream subscribes."""
    router = NatsRouter()
    bus.subscriber(router, CANCEL_TURN)(on_cancel)
    bus.subscriber(router, TOOLS_CHANGED)(on_tools_changed)
    bus.subscriber(router, START_HUMAN_SESSION)(on_human_start)
    bus.subscriber(router, STOP_HUMAN_SESSION)(on_human_stop)
    bus.subscriber(router, RECORD_HUMAN_EVENTS)(on_human_record)
    bus.subscriber(router, COACH_SESSION_CREATE)(on_coach_session)
    return router


async def _handle(msg: Msg, core: TurnRunner, broker: NatsBroker, run: Callable[[Delivery], Awaitable[None]]) -> None:
    limit = core.settings.spotter_max_deliveries + 1
    if msg.metadata.num_delivered > limit:
        # The turn itself gives up (error `internal` + done) on the last try; a command that
        # fails even before that is parked with its reason instead of looping forever.
        await park(broker, msg, f"gave up after {limit} deliveries")
        await msg.ack_sync()
        return
    # The heartbeat starts before the wait for a turn slot: a command waiting here is not
    # redelivered to another replica.
    async with _heartbeat(msg, core.settings.spotter_ack_wait_s / 3) as delivery, core.slots:
        await run(delivery)
    # Double ack: the command is gone only once the server confirms it.
    await msg.ack_sync()


@contextlib.asynccontextmanager
async def _heartbeat(raw: Msg, every_s: float) -> AsyncIterator[Delivery]:
    """Tell JetStream the command is still being worked on, so only a dead replica's work is redelivered."""
    last = time.monotonic()  # the last sign of progress JetStream had (the delivery itself, at first)

    async def progress() -> None:
        nonlocal last
        last = time.monotonic()
        await raw.in_progress()

    async def keepalive() -> None:
        # After a slow step; a sign sent less than half a beat ago still stands (one message fewer per turn).
        if time.monotonic() - last >= every_s / 2:
            await progress()

    async def beat() -> None:
        while True:
            await asyncio.sleep(every_s)
            with contextlib.suppress(Exception):
                await progress()

    task = asyncio.create_task(beat())
    try:
        yield Delivery(attempt=raw.metadata.num_delivered, keepalive=keepalive)
    finally:
        task.cancel()
