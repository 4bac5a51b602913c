"""Contract tests of the tool-runner's subjects (catalog, execute, undo, calls, resolve, close) over a
real NATS server, answered by the tool-runner's responders on its broker, assembled as `create_app` does."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from faststream.nats import NatsBroker
from redis.asyncio import Redis

from spotter_shared.bus import request
from spotter_shared.contracts.base import ERROR_HEADER, ErrorReply
from spotter_shared.contracts.tools import (
    EXECUTE_TOOL,
    TOOL_CALLS,
    TOOL_CATALOG,
    TOOL_CLOSE,
    TOOL_RESOLVE,
    UNDO_TOOL,
    CallsQuery,
    CallStates,
    CatalogRequest,
    ClosedCalls,
    CloseCalls,
    ResolveCall,
    ToolCatalog,
    ToolOutcome,
    UndoOutcome,
    UndoRequest,
)
from spotter_shared.errors import RemoteError
from spotter_shared.service import service_broker
from spotter_tool_runner import edges
from spotter_tool_runner.coach.tools import CoachTools
from spotter_tool_runner.handlers import build_responders
from spotter_tool_runner.main import SERVICE, ToolRunnerSettings
from spotter_tool_runner.runner import ToolRunner
from spotter_tool_runner.tools import REGISTRY

from tests.factories import Studio

from .helpers import new_conversation, succeeded


@pytest.fixture
async def broker(stack, pool: asyncpg.Pool, redis: Redis) -> AsyncIterator[NatsBroker]:
    responders = build_responders(max_workers=4)
    broker = service_broker(SERVICE, ToolRunnerSettings(nats_url=stack.nats_url), responders.router, edges.router)
    async with broker:
        # What the app's lifespan would do once its pool is open; here the tests' pool is the one.
        serving = await responders.start(broker, ToolRunner(pool, REGISTRY), CoachTools(pool, redis))
        await broker.start()
        yield broker
        for group in serving:
            await group.stop()


async def raw_request(broker: NatsBroker, subject: str, payload: bytes):
    return await broker.request(payload, subject, timeout=5)


async def test_catalog_round_trip(broker: NatsBroker) -> None:
    reply = await request(broker, TOOL_CATALOG, CatalogRequest(role="admin"), timeout=5)
    assert isinstance(reply, ToolCatalog)
    assert [t.name for t in reply.tools] == REGISTRY.names()
    assert reply.tools[2].input_schema["properties"]["paymentStatus"]
    members = await request(broker, TOOL_CATALOG, CatalogRequest(role="member"), timeout=5)
    assert members.tools == []


async def test_catalog_wire_format_is_camel_case(broker: NatsBroker) -> None:
    msg = await raw_request(broker, TOOL_CATALOG.subject, b'{"role": "coach"}')
    body = json.loads(msg.body)
    assert {"name", "inputSchema", "sideEffects", "hasInverse"} <= set(body["tools"][0])


@pytest.mark.parametrize(
    ("subject", "payload"),
    [
        (TOOL_CATALOG.subject, b"this is not json"),
        (TOOL_CATALOG.subject, b'{"role": 5}'),
        (TOOL_CATALOG.subject, b'{"role": "janitor"}'),
        (TOOL_CATALOG.subject, b"{}"),
        (EXECUTE_TOOL.subject, b"[1, 2"),
        (EXECUTE_TOOL.subject, b'{"conversationId": "c1", "toolUseId": "t1"}'),
        (
            EXECUTE_TOOL.subject,
            b'{"conversationId": 1, "messageId": [], "toolUseId": "t", "router": "read", "action": "x",'
            b' "input": "not an object", "actor": {}, "traceId": "t"}',
        ),
        (UNDO_TOOL.subject, b"\xff\xfe"),
        (UNDO_TOOL.subject, b'{"conversationId": "c1"}'),
        (UNDO_TOOL.subject, b'{"conversationId": "c1", "toolUseId": "t1", "actor": {"role": "coach"}, "traceId": "t"}'),
        (TOOL_CALLS.subject, b"{}"),
        (TOOL_CALLS.subject, b'{"conversationId": "c1", "toolUseIds": "t1", "actor": {}}'),
        (TOOL_RESOLVE.subject, b"null"),
        (TOOL_RESOLVE.subject, b'{"conversationId": "c1", "toolUseId": "t1", "decision": "approve"}'),
        (TOOL_CLOSE.subject, b'{"conversationId": "c1", "code": "aborted"}'),
    ],
)
async def test_malformed_payloads_get_a_typed_error_and_the_consumer_keeps_serving(
    broker: NatsBroker, subject: str, payload: bytes
) -> None:
    msg = await raw_request(broker, subject, payload)
    assert (msg.headers or {}).get(ERROR_HEADER) == "invalid_request"
    error = ErrorReply.model_validate_json(msg.body)
    assert error.code == "invalid_request" and error.message

    still = await request(broker, TOOL_CATALOG, CatalogRequest(role="owner"), timeout=5)
    assert len(still.tools) == len(REGISTRY)


async def test_execute_round_trip_and_replay(broker: NatsBroker, pool: asyncpg.Pool, studio: Studio) -> None:
    conv = await new_conversation(pool, studio, studio.admin)
    cmd = conv.command("read", "members_search", {"query": "saar"})

    first = await request(broker, EXECUTE_TOOL, cmd, timeout=5)
    second = await request(broker, EXECUTE_TOOL, cmd, timeout=5)

    assert isinstance(first, ToolOutcome) and first.status == "succeeded"
    assert [m["name"] for m in first.output["members"]] == ["Saar Cohen", "Saar Levi"]
    assert (first.replayed, second.replayed, second.output) == (False, True, first.output)


async def test_execute_failures_are_data_on_the_wire(broker: NatsBroker, pool: asyncpg.Pool, studio: Studio) -> None:
    conv = await new_conversation(pool, studio, studio.coach)
    outcome = await request(
        broker, EXECUTE_TOOL, conv.command("read", "members_get", {"membershipId": "nope"}), timeout=5
    )
    assert outcome.status == "failed" and outcome.error.code == "invalid_input"


async def test_execute_request_errors_get_a_typed_error_reply(
    broker: NatsBroker, pool: asyncpg.Pool, studio: Studio, other_studio: Studio
) -> None:
    conv = await new_conversation(pool, studio)
    stranger = await new_conversation(pool, other_studio)
    cmd = conv.command("read", "programs_list", actor=stranger.actor)  # someone else's conversation
    with pytest.raises(RemoteError) as info:
        await request(broker, EXECUTE_TOOL, cmd, timeout=5)
    assert info.value.code == "not_found"


async def test_execute_hold_on_the_wire(broker: NatsBroker, pool: asyncpg.Pool, studio: Studio) -> None:
    conv = await new_conversation(pool, studio, studio.admin)
    cmd = conv.command("tasks", "delete", {"id": "00000000-0000-0000-0000-000000000000"}, hold=True)
    msg = await raw_request(broker, EXECUTE_TOOL.subject, cmd.to_bytes())
    body = json.loads(msg.body)
    assert (body["status"], body["output"], body["error"]) == ("pending", None, None)


async def test_undo_round_trip_and_typed_errors(broker: NatsBroker, pool: asyncpg.Pool, studio: Studio) -> None:
    conv = await new_conversation(pool, studio, studio.coach)
    create = conv.command("workouts", "create", {"title": "Helen", "description": "3 rounds"})
    workout = succeeded(await request(broker, EXECUTE_TOOL, create, timeout=5))
    undo = UndoRequest(conversation_id=conv.id, tool_use_id=create.tool_use_id, actor=conv.actor, trace_id="t")

    # A malformed request first: the consumer answers it and keeps serving.
    bad = await raw_request(broker, UNDO_TOOL.subject, b"[]")
    assert (bad.headers or {}).get(ERROR_HEADER) == "invalid_request"

    first = await request(broker, UNDO_TOOL, undo, timeout=5)
    second = await request(broker, UNDO_TOOL, undo, timeout=5)

    assert isinstance(first, UndoOutcome)
    assert (first.router, first.action, first.input) == ("workouts", "delete", {"id": workout["id"]})
    assert succeeded(first.outcome)["deleted"] is True
    assert (first.outcome.replayed, second.outcome.replayed) == (False, True)
    raw = await raw_request(broker, UNDO_TOOL.subject, undo.to_bytes())
    assert {"router", "action", "toolUseId", "input", "outcome"} <= set(json.loads(raw.body))

    read = conv.command("read", "programs_list")
    await request(broker, EXECUTE_TOOL, read, timeout=5)
    for tool_use_id, code in [(read.tool_use_id, "undo_unavailable"), ("toolu_nope", "tool_execution_not_found")]:
        with pytest.raises(RemoteError) as info:
            await request(broker, UNDO_TOOL, undo.model_copy(update={"tool_use_id": tool_use_id}), timeout=5)
        assert info.value.code == code


def resolve_call(conv, tool_use_id: str, decision: str, picked_id: str | None = None) -> ResolveCall:
    return ResolveCall(
        conversation_id=conv.id,
        tool_use_id=tool_use_id,
        actor=conv.actor,
        trace_id=uuid.uuid4().hex,
        decision=decision,
        picked_id=picked_id,
    )


async def remote_code(broker: NatsBroker, endpoint, payload) -> str:
    with pytest.raises(RemoteError) as info:
        await request(broker, endpoint, payload, timeout=5)
    return info.value.code


async def test_resolve_calls_and_close_on_the_wire(broker: NatsBroker, pool: asyncpg.Pool, studio: Studio) -> None:
    conv = await new_conversation(pool, studio, studio.admin)
    offered = [{"id": "m1", "label": "Saar Cohen"}, {"id": "m2", "label": "Saar Levi"}]
    pick = conv.command("read", "ask_user_to_pick", {"kind": "member", "prompt": "Which?", "candidates": offered}, hold=True)
    gate = conv.command("tasks", "create", {"title": "Call Saar"}, hold=True)
    left = conv.command("tasks", "create", {"title": "Call Dani"}, hold=True)
    for cmd in (pick, gate, left):
        assert (await request(broker, EXECUTE_TOOL, cmd, timeout=5)).status == "pending"

    picked = await request(broker, TOOL_RESOLVE, resolve_call(conv, pick.tool_use_id, "pick", "m2"), timeout=5)
    rejected = await request(broker, TOOL_RESOLVE, resolve_call(conv, gate.tool_use_id, "reject"), timeout=5)
    assert isinstance(picked, ToolOutcome) and picked.output == {"pickedId": "m2", "pickedLabel": "Saar Levi", "kind": "member"}
    assert (rejected.status, rejected.error.code, rejected.error.hint) == (
        "failed",
        "rejected_by_user",
        "Do not retry it unless the user asks again.",
    )

    for tool_use_id, decision, picked_id, code in [
        (pick.tool_use_id, "pick", "m1", "tool_already_resolved"),
        (gate.tool_use_id, "reject", None, "tool_already_resolved"),
        (left.tool_use_id, "pick", "m1", "invalid_request"),
        ("toolu_never", "reject", None, "tool_execution_not_found"),
    ]:
        assert await remote_code(broker, TOOL_RESOLVE, resolve_call(conv, tool_use_id, decision, picked_id)) == code
    fresh = conv.command("read", "ask_user_to_pick", {"kind": "member", "prompt": "Which?", "candidates": offered}, hold=True)
    await request(broker, EXECUTE_TOOL, fresh, timeout=5)
    assert await remote_code(broker, TOOL_RESOLVE, resolve_call(conv, fresh.tool_use_id, "pick", "m3")) == "invalid_pick"

    close = CloseCalls(conversation_id=conv.id, actor=conv.actor, trace_id="t", code="aborted", message="The user stopped the turn.")
    closed = await request(broker, TOOL_CLOSE, close, timeout=5)
    assert isinstance(closed, ClosedCalls) and closed.tool_use_ids == [left.tool_use_id, fresh.tool_use_id]

    asked = [left.tool_use_id, pick.tool_use_id, "toolu_never", gate.tool_use_id]
    query = CallsQuery(conversation_id=conv.id, tool_use_ids=asked, actor=conv.actor)
    states = await request(broker, TOOL_CALLS, query, timeout=5)
    assert isinstance(states, CallStates)
    assert [(s.tool_use_id, s.status) for s in states.calls] == [
        (left.tool_use_id, "rejected_by_user"),
        (pick.tool_use_id, "succeeded"),
        (gate.tool_use_id, "rejected_by_user"),
    ]
    assert [s.outcome.result() for s in states.calls] == [
        {"code": "aborted", "message": "The user stopped the turn.", "hint": "Do not retry it unless the user asks again."},
        picked.output,
        rejected.error.model_dump(mode="json"),
    ]

    raw = json.loads((await raw_request(broker, TOOL_CALLS.subject, query.to_bytes())).body)
    assert {"toolUseId", "router", "action", "status", "input", "outcome", "inverseAvailable"} <= set(raw["calls"][0])
    raw_closed = json.loads((await raw_request(broker, TOOL_CLOSE.subject, close.to_bytes())).body)
    assert raw_closed == {"toolUseIds": []}


async def test_concurrent_resolves_on_the_wire_one_wins(broker: NatsBroker, pool: asyncpg.Pool, studio: Studio) -> None:
    conv = await new_conversation(pool, studio, studio.coach)
    gate = conv.command("tasks", "create", {"title": "Call Saar"}, hold=True)
    await request(broker, EXECUTE_TOOL, gate, timeout=5)

    results = await asyncio.gather(
        *(request(broker, TOOL_RESOLVE, resolve_call(conv, gate.tool_use_id, "reject"), timeout=5) for _ in range(4)),
        return_exceptions=True,
    )

    assert sorted(r.status if isinstance(r, ToolOutcome) else r.code for r in results) == [
        "failed",
        "tool_already_resolved",
        "tool_already_resolved",
        "tool_already_resolved",
    ]
