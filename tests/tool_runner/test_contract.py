"""Contract tests of spotter.tools.catalog, spotter.tools.execute and spotter.tools.undo over a real
NATS server, served by the same subscribers `create_app` builds."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import asyncpg
import pytest
from faststream.nats import NatsBroker

from spotter_shared.bus import request
from spotter_shared.contracts.base import ERROR_HEADER, ErrorReply
from spotter_shared.contracts.tools import (
    EXECUTE_TOOL,
    TOOL_CATALOG,
    UNDO_TOOL,
    CatalogRequest,
    ToolCatalog,
    ToolOutcome,
    UndoOutcome,
    UndoRequest,
)
from spotter_shared.errors import RemoteError
from spotter_shared.service import Holder
from spotter_tool_runner.main import build_broker
from spotter_tool_runner.runner import ToolRunner
from spotter_tool_runner.tools import REGISTRY

from tests.factories import Studio

from .helpers import new_conversation, succeeded


@pytest.fixture
async def broker(stack, pool: asyncpg.Pool) -> AsyncIterator[NatsBroker]:
    core: Holder[ToolRunner] = Holder()
    core.set(ToolRunner(pool, REGISTRY))
    broker = build_broker(stack.nats_url, core, REGISTRY, max_workers=4)
    async with broker:
        await broker.start()
        yield broker


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
