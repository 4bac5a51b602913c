"""Contract tests of the subjects the orchestrator consumes, over real NATS with the orchestrator's
real broker, routers, handlers and durable consumers; only the core behind them is a recorder (the
turn loop is tested on its own). Per durable turn command: a valid one, published through the
gateway's declared publisher, reaches the core as its typed contract on the first delivery and is
acknowledged; a malformed one is dead-lettered with its reason and the consumer keeps serving. The
cancel broadcast and the admission request are held to the same contract in their own shape.

The durable consumer names and the admission queue group are fixed by the contract, so the e2e
platform's orchestrators, alive on the session's server for the rest of the session, would compete
for these messages: the brokers here get a NATS server of their own."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import nats
import pytest
from faststream.nats import NatsBroker
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import DeliverPolicy

from spotter_gateway import edges as gateway
from spotter_gateway.settings import GatewaySettings
from spotter_gateway.streams import LiveEvents
from spotter_orchestrator import edges as orchestrator_edges
from spotter_orchestrator.handlers import build_router, command_pullers, durable_name, responders, router
from spotter_orchestrator.settings import OrchestratorSettings
from spotter_orchestrator.turns import Delivery
from spotter_shared import bus
from spotter_shared.bus import DLQ_STREAM, Publisher, ensure_streams, publish_headers
from spotter_shared.contracts.base import ERROR_HEADER, Contract, DeadLetter, Endpoint, ErrorReply, dead_letter_subject
from spotter_shared.contracts.commands import (
    ADMIT, CANCEL_SUSPENDED, CANCEL_TURN, COMMANDS_STREAM, CONFIRM_TOOL, PICK_TOOL, SEND_MESSAGE, UNDO, Actor, Admission,
    AdmitCommand, CancelSuspended, CancelTurn, ConfirmTool, PageContext, PickTool, SendMessage, TurnCommand, UndoTool,
)
from spotter_shared.errors import ErrorCode, RemoteError, SpotterError
from spotter_shared.service import CORE, service_broker

TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Call:
    method: str
    arg: Any
    attempt: int | None = None  # the JetStream delivery, for durable commands


class RecordingCore:
    """Stands in for TurnRunner behind the real handlers: records what reached it, typed."""

    def __init__(self, settings: OrchestratorSettings) -> None:
        self.settings = settings
        self.slots = asyncio.Semaphore(settings.spotter_turn_concurrency)
        self.calls: list[Call] = []
        self.arrived: asyncio.Queue[Call] = asyncio.Queue()
        self.admission = Admission(verdict="start", turn_id=str(uuid.uuid4()))
        self.refusal: SpotterError | None = None

    def _record(self, call: Call) -> None:
        self.calls.append(call)
        self.arrived.put_nowait(call)

    async def next_call(self) -> Call:
        return await asyncio.wait_for(self.arrived.get(), TIMEOUT_S)

    async def send(self, cmd: SendMessage, delivery: Delivery) -> None:
        self._record(Call("send", cmd, delivery.attempt))

    async def confirm(self, cmd: ConfirmTool, delivery: Delivery) -> None:
        self._record(Call("confirm", cmd, delivery.attempt))

    async def pick(self, cmd: PickTool, delivery: Delivery) -> None:
        self._record(Call("pick", cmd, delivery.attempt))

    async def undo(self, cmd: UndoTool, delivery: Delivery) -> None:
        self._record(Call("undo", cmd, delivery.attempt))

    async def cancel_suspended(self, cmd: CancelSuspended, delivery: Delivery) -> None:
        self._record(Call("cancel_suspended", cmd, delivery.attempt))

    def cancel_running(self, turn_id: str) -> bool:
        self._record(Call("cancel_running", turn_id))
        return True

    async def admit(self, cmd: AdmitCommand) -> Admission:
        self._record(Call("admit", cmd))
        if self.refusal is not None:
            raise self.refusal
        return self.admission


def actor() -> Actor:
    return Actor(user_id=str(uuid.uuid4()), organization_id=str(uuid.uuid4()), membership_id=str(uuid.uuid4()), role="coach")


def turn_fields() -> dict[str, Any]:
    return {"command_id": str(uuid.uuid4()), "turn_id": str(uuid.uuid4()), "conversation_id": str(uuid.uuid4()),
            "actor": actor(), "trace_id": uuid.uuid4().hex}


@dataclass(frozen=True)
class CommandEdge:
    """One durable command: its endpoint, the gateway's declared publisher for it, the core method its
    handler calls, an example, and a field the example cannot do without (camelCase, as on the wire)."""

    endpoint: Endpoint[Any, Any]
    publisher: Publisher
    method: str
    example: Callable[[], TurnCommand]
    required: str


COMMANDS = [
    CommandEdge(SEND_MESSAGE, gateway.send_message, "send", lambda: SendMessage(
        **turn_fields(), is_new=False, message="who coaches tonight?", page_context=PageContext(pathname="/schedule")), "message"),
    CommandEdge(CONFIRM_TOOL, gateway.confirm_tool, "confirm", lambda: ConfirmTool(
        **turn_fields(), tool_use_id=f"toolu_{uuid.uuid4().hex}", approved=True), "approved"),
    CommandEdge(PICK_TOOL, gateway.pick_tool, "pick", lambda: PickTool(
        **turn_fields(), tool_use_id=f"toolu_{uuid.uuid4().hex}", picked_id=str(uuid.uuid4())), "pickedId"),
    CommandEdge(UNDO, gateway.undo_tool, "undo", lambda: UndoTool(
        **turn_fields(), tool_use_id=f"toolu_{uuid.uuid4().hex}"), "toolUseId"),
    CommandEdge(CANCEL_SUSPENDED, gateway.cancel_suspended, "cancel_suspended", lambda: CancelSuspended(
        **turn_fields()), "turnId"),
]


def without(message: Contract, field: str) -> bytes:
    body = json.loads(message.to_bytes())
    del body[field]
    return json.dumps(body).encode()


def retyped(message: Contract, field: str, value: Any) -> bytes:
    return json.dumps({**json.loads(message.to_bytes()), field: value}).encode()


def malformed(example: Contract, required: str) -> dict[str, tuple[bytes, str]]:
    """Bad bodies for a message whose valid form is `example`, each with what its reason must name.
    Undecodable bytes come without a JSON content type, so they reach validation as a raw body."""
    return {
        "not JSON": (b"{this is not json", "body: "),
        "not UTF-8": (b"\xff\xfe\xfa", "body: "),
        "not an object": (b'["a", "list"]', "body: Input should be a valid dictionary"),
        "wrong type": (retyped(example, "traceId", 7), "traceId: Input should be a valid string"),
        "missing field": (without(example, required), f"{required}: Field required"),
    }


def unexplained(reasons: list[str], cases: dict[str, tuple[bytes, str]]) -> dict[str, str]:
    """The cases whose reason does not say invalid_request and name what is wrong."""
    return {case: reason for (case, (_, names)), reason in zip(cases.items(), reasons, strict=True)
            if not (reason.startswith(f"{ErrorCode.INVALID_REQUEST}: ") and names in reason)}


@pytest.fixture(scope="module")
def settings(private_nats: str) -> OrchestratorSettings:
    return OrchestratorSettings(nats_url=private_nats, spotter_env="test")


class CurrentCore:
    """The core the responders are given: the test's own fresh one (see `core`), looked up per call,
    since the responders are started once for the module."""

    def __init__(self, broker: NatsBroker) -> None:
        self._broker = broker

    def __getattr__(self, name: str) -> Any:
        return getattr(self._broker.context.get(CORE), name)


@pytest.fixture(scope="module")
async def orchestrator(settings: OrchestratorSettings) -> AsyncIterator[NatsBroker]:
    """The orchestrator's broker as main.create_app assembles it, started the way its lifespan does."""
    commands = command_pullers(settings)
    broker = service_broker("orchestrator", settings, commands.router, build_router(), router, orchestrator_edges.router)
    broker.context.set_global(CORE, RecordingCore(settings))
    await broker.connect()
    await ensure_streams(broker)
    serving = [await responders.start(broker, CurrentCore(broker)), await commands.start(broker, CurrentCore(broker), broker)]
    await broker.start()
    yield broker
    for group in serving:
        await group.stop()
    await broker.stop()


@pytest.fixture(scope="module")
async def gateway_broker(private_nats: str) -> AsyncIterator[NatsBroker]:
    """The gateway's broker; including its module-level router moves the declared edges onto it."""
    broker = gateway.create_broker(GatewaySettings(nats_url=private_nats, spotter_env="test"))
    broker.context.set_global(gateway.LIVE, LiveEvents())
    await broker.start()
    yield broker
    await broker.stop()


@pytest.fixture
def core(orchestrator: NatsBroker, settings: OrchestratorSettings) -> RecordingCore:
    """A fresh core per test: what one test sends never shows up in another's record."""
    fresh = RecordingCore(settings)
    orchestrator.context.set_global(CORE, fresh)
    return fresh


@pytest.fixture(scope="module")
async def nc(private_nats: str) -> AsyncIterator[Client]:
    client = await nats.connect(private_nats)
    yield client
    await client.close()


@pytest.fixture
def js(nc: Client) -> JetStreamContext:
    return nc.jetstream()


@contextlib.asynccontextmanager
async def confirmed_acks(nc: Client, durable: str) -> AsyncIterator[asyncio.Queue[str]]:
    """Yields each double ack on `durable` once the server has answered it, so the consumer's state
    can be read without polling. An ack request carries an inbox; the server replies on that inbox
    only after it has processed the ack. Both copies can arrive in either order."""
    acks: set[str] = set()
    replies: set[str] = set()
    confirmed: asyncio.Queue[str] = asyncio.Queue()

    def match(inbox: str) -> None:
        if inbox in acks and inbox in replies:
            confirmed.put_nowait(inbox)

    async def on_ack(msg: Msg) -> None:
        if msg.reply and msg.data in (b"", b"+ACK"):  # not +WPI (in progress), -NAK or +TERM
            acks.add(msg.reply)
            match(msg.reply)

    async def on_reply(msg: Msg) -> None:
        replies.add(msg.subject)
        match(msg.subject)

    subs = [await nc.subscribe(f"$JS.ACK.{COMMANDS_STREAM}.{durable}.>", cb=on_ack), await nc.subscribe("_INBOX.>", cb=on_reply)]
    await nc.flush()
    try:
        yield confirmed
    finally:
        for sub in subs:
            await sub.unsubscribe()


async def expect_acks(confirmed: asyncio.Queue[str], count: int, what: str) -> None:
    try:
        for _ in range(count):
            await asyncio.wait_for(confirmed.get(), TIMEOUT_S)
    except TimeoutError:
        pytest.fail(f"{what} not acknowledged within {TIMEOUT_S:.0f} s: JetStream will deliver it again")


async def assert_drained(js: JetStreamContext, durable: str) -> None:
    info = await js.consumer_info(COMMANDS_STREAM, durable)
    assert (info.num_pending, info.num_ack_pending) == (0, 0)


async def dead_letters(nc: Client, js: JetStreamContext, ep: Endpoint[Any, Any], payloads: list[bytes]) -> list[DeadLetter]:
    """Publish each payload as `ep`'s messages travel (JetStream for commands, core NATS for events),
    each with its own Nats-Msg-Id, and return the letter parked in SPOTTER_DLQ for each, in order."""
    parked = await js.subscribe(dead_letter_subject(ep.subject), stream=DLQ_STREAM, ordered_consumer=True,
                                deliver_policy=DeliverPolicy.NEW)
    try:
        msg_ids = [f"bad-{uuid.uuid4()}" for _ in payloads]
        for msg_id, payload in zip(msg_ids, payloads, strict=True):
            if ep.stream:
                await js.publish(ep.subject, payload, stream=ep.stream, headers=publish_headers(msg_id=msg_id))
            else:
                await nc.publish(ep.subject, payload, headers=publish_headers(msg_id=msg_id))
        letters: dict[str, DeadLetter] = {}
        while len(letters) < len(msg_ids):
            msg = await parked.next_msg(timeout=TIMEOUT_S)
            assert msg.metadata.stream == DLQ_STREAM
            letter = DeadLetter.model_validate_json(msg.data)
            if letter.msg_id in msg_ids:
                letters[letter.msg_id] = letter
    finally:
        await parked.unsubscribe()
    return [letters[msg_id] for msg_id in msg_ids]


@pytest.mark.parametrize("edge", COMMANDS, ids=lambda e: e.endpoint.subject)
async def test_command_reaches_the_core_typed_once_and_is_acknowledged(
    gateway_broker: NatsBroker, core: RecordingCore, nc: Client, js: JetStreamContext, edge: CommandEdge,
) -> None:
    command = edge.example()
    durable = durable_name(edge.endpoint)
    async with confirmed_acks(nc, durable) as confirmed:
        await bus.publish_command(edge.publisher, command)
        call = await core.next_call()
        await expect_acks(confirmed, 1, "the handled command was")

    assert call == Call(edge.method, command, attempt=1)
    assert type(call.arg) is edge.endpoint.payload
    await assert_drained(js, durable)
    assert core.calls == [call]


@pytest.mark.parametrize("edge", COMMANDS, ids=lambda e: e.endpoint.subject)
async def test_malformed_command_is_dead_lettered_and_consumer_keeps_serving(
    gateway_broker: NatsBroker, core: RecordingCore, nc: Client, js: JetStreamContext, edge: CommandEdge,
) -> None:
    cases = malformed(edge.example(), edge.required)
    payloads = [payload for payload, _ in cases.values()]
    durable = durable_name(edge.endpoint)
    async with confirmed_acks(nc, durable) as confirmed:
        letters = await dead_letters(nc, js, edge.endpoint, payloads)

        assert [(letter.subject, letter.payload) for letter in letters] == [
            (edge.endpoint.subject, payload.decode("utf-8", errors="replace")) for payload in payloads]
        assert unexplained([letter.reason for letter in letters], cases) == {}
        assert core.calls == []
        # Parked, then acknowledged: otherwise it would come back after ack_wait to be parked again.
        await expect_acks(confirmed, len(payloads), "a dead-lettered command was")
    await assert_drained(js, durable)

    command = edge.example()
    await bus.publish_command(edge.publisher, command)
    assert await core.next_call() == Call(edge.method, command, attempt=1)
    assert len(core.calls) == 1


def cancel_turn() -> CancelTurn:
    return CancelTurn(conversation_id=str(uuid.uuid4()), turn_id=str(uuid.uuid4()), trace_id=uuid.uuid4().hex)


async def test_cancel_broadcast_reaches_the_core(orchestrator: NatsBroker, core: RecordingCore) -> None:
    cancel = cancel_turn()
    await bus.publish(orchestrator_edges.cancel_broadcast, cancel)
    assert await core.next_call() == Call("cancel_running", cancel.turn_id)
    assert len(core.calls) == 1


async def test_malformed_cancel_is_dead_lettered_and_subscriber_keeps_serving(
    orchestrator: NatsBroker, core: RecordingCore, nc: Client, js: JetStreamContext,
) -> None:
    cases = malformed(cancel_turn(), "turnId")
    payloads = [payload for payload, _ in cases.values()]
    letters = await dead_letters(nc, js, CANCEL_TURN, payloads)

    assert [(letter.subject, letter.payload) for letter in letters] == [
        (CANCEL_TURN.subject, payload.decode("utf-8", errors="replace")) for payload in payloads]
    assert unexplained([letter.reason for letter in letters], cases) == {}
    assert core.calls == []

    cancel = cancel_turn()
    await bus.publish(orchestrator_edges.cancel_broadcast, cancel)
    assert await core.next_call() == Call("cancel_running", cancel.turn_id)


def admit_question() -> AdmitCommand:
    return AdmitCommand(command="confirm", conversation_id=str(uuid.uuid4()), tool_use_id=f"toolu_{uuid.uuid4().hex}",
                        actor=actor(), trace_id=uuid.uuid4().hex)


async def test_admission_is_answered_with_the_cores_typed_verdict(
    gateway_broker: NatsBroker, orchestrator: NatsBroker, core: RecordingCore,
) -> None:
    question = admit_question()
    answer = await gateway.admit(question, timeout=TIMEOUT_S)
    assert type(answer) is Admission and answer == core.admission
    assert core.calls == [Call("admit", question)]


async def test_admission_refusal_is_a_typed_error_reply(
    gateway_broker: NatsBroker, orchestrator: NatsBroker, core: RecordingCore,
) -> None:
    core.refusal = SpotterError(ErrorCode.CONVERSATION_BUSY, "Another turn is running.")
    with pytest.raises(RemoteError) as refused:
        await gateway.admit(admit_question(), timeout=TIMEOUT_S)
    assert (refused.value.code, refused.value.message) == (ErrorCode.CONVERSATION_BUSY, "Another turn is running.")


async def test_malformed_admission_gets_a_typed_error_reply_and_responder_keeps_serving(
    gateway_broker: NatsBroker, orchestrator: NatsBroker, core: RecordingCore, nc: Client,
) -> None:
    question = admit_question()
    cases = malformed(question, "actor")
    replies = [await nc.request(ADMIT.subject, payload, timeout=TIMEOUT_S) for payload, _ in cases.values()]

    assert [(reply.headers or {}).get(ERROR_HEADER) for reply in replies] == [ErrorCode.INVALID_REQUEST] * len(cases)
    errors = [ErrorReply.model_validate_json(reply.data) for reply in replies]
    assert unexplained([f"{error.code}: {error.message}" for error in errors], cases) == {}
    assert core.calls == []

    assert await gateway.admit(question, timeout=TIMEOUT_S) == core.admission
