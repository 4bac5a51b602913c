"""Contract tests for the subjects the orchestrator consumes and the gateway listens to, against
the running services on the real nats-server: malformed commands are dead-lettered with their
reason, duplicates are dropped, and the consumers keep serving."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import httpx
import nats
import pytest

from spotter_shared.bus import DLQ_STREAM, publish_headers
from spotter_shared.contracts.base import DeadLetter, dead_letter_subject
from spotter_shared.contracts.base import Endpoint
from spotter_shared.contracts.commands import (
    CANCEL_SUSPENDED, CANCEL_TURN, COMMANDS_STREAM, CONFIRM_TOOL, PICK_TOOL, SEND_MESSAGE, UNDO, Actor, SendMessage,
)
from spotter_shared.contracts.events import conversation_subject
from tests.factories import make_studio

from .client import send
from .conftest import Platform


@pytest.mark.parametrize("endpoint", [SEND_MESSAGE, CONFIRM_TOOL, PICK_TOOL, UNDO, CANCEL_SUSPENDED, CANCEL_TURN], ids=lambda e: e.subject)
async def test_malformed_commands_are_dead_lettered_and_consumer_keeps_serving(
    platform: Platform, http: httpx.AsyncClient, pool: asyncpg.Pool, endpoint: Endpoint,
) -> None:
    nc = await nats.connect(platform.env["NATS_URL"])
    js = nc.jetstream()
    try:
        letters: asyncio.Queue = asyncio.Queue()
        sub = await nc.subscribe(dead_letter_subject(endpoint.subject), cb=letters.put)
        bad = {
            "not-json": b"this is not json",
            "wrong-types": b'{"commandId": 1, "turnId": [], "conversationId": {}, "isNew": "maybe", "actor": 3, "message": 5, "traceId": null}',
            "missing-fields": b'{"message": "hi"}',
        }
        for key, payload in bad.items():
            if endpoint.stream:
                ack = await js.publish(endpoint.subject, payload, stream=endpoint.stream, headers=publish_headers(msg_id=f"bad-{key}-{uuid.uuid4()}"))
                assert ack.seq > 0
            else:
                await nc.publish(endpoint.subject, payload)
        got = [DeadLetter.model_validate_json((await asyncio.wait_for(letters.get(), 10)).data) for _ in bad]
        assert sorted(g.payload for g in got) == sorted(p.decode() for p in bad.values())
        assert all(g.reason.startswith("invalid_request") and g.subject == endpoint.subject for g in got)
        # Parked durably, not just published.
        assert (await js.stream_info(DLQ_STREAM)).state.messages >= len(bad)
        await sub.unsubscribe()
    finally:
        await nc.close()
    studio = await make_studio(pool)
    ok = await send(http, studio.org.id, studio.owner.user_id, "who am I?")
    assert ok.types()[-1] == "done" and not ok.of("error")


async def test_republished_command_starts_one_turn(platform: Platform, pool: asyncpg.Pool, http: httpx.AsyncClient) -> None:
    studio = await make_studio(pool)
    first = await send(http, studio.org.id, studio.owner.user_id, "who am I?")
    cid = first.conversation_id
    command = SendMessage(
        command_id=f"dup-{uuid.uuid4()}", turn_id=str(uuid.uuid4()), conversation_id=cid, is_new=False,
        actor=Actor(user_id=studio.owner.user_id, organization_id=studio.org.id, membership_id=studio.owner.membership_id, role="owner"),
        message="what programs do we run?", trace_id=str(uuid.uuid4()),
    )
    nc = await nats.connect(platform.env["NATS_URL"])
    try:
        js = nc.jetstream()
        acks = [await js.publish(SEND_MESSAGE.subject, command.to_bytes(), stream=COMMANDS_STREAM,
                                 headers=publish_headers(msg_id=command.command_id)) for _ in range(3)]
        assert [a.duplicate for a in acks] == [None, True, True]
        assert len({a.seq for a in acks}) == 1
        # A re-publication after the dedupe window reaches the orchestrator, which finds the turn.
        for _ in range(500):
            status = await pool.fetchval("SELECT status::text FROM ai_turns WHERE id = $1", uuid.UUID(command.turn_id))
            if status == "completed":
                break
            await asyncio.sleep(0.02)
        await js.publish(SEND_MESSAGE.subject, command.to_bytes(), stream=COMMANDS_STREAM,
                         headers=publish_headers(msg_id=f"{command.command_id}-late"))
        for _ in range(500):
            if await pool.fetchval("SELECT attempts FROM ai_turns WHERE id = $1", uuid.UUID(command.turn_id)) >= 2:
                break
            await asyncio.sleep(0.02)
    finally:
        await nc.close()
    users = await pool.fetchval("SELECT count(*) FROM ai_messages WHERE conversation_id = $1 AND role = 'user'", uuid.UUID(cid))
    assert users == 2  # the first turn and the command's one — never a third
    dones = await pool.fetchval("SELECT count(*) FROM ai_conversation_events WHERE turn_id = $1 AND type = 'done'", uuid.UUID(command.turn_id))
    assert dones == 1


async def test_garbage_on_event_subject_does_not_break_streams(platform: Platform, pool: asyncpg.Pool, http: httpx.AsyncClient) -> None:
    studio = await make_studio(pool)
    first = await send(http, studio.org.id, studio.owner.user_id, "who am I?")
    nc = await nats.connect(platform.env["NATS_URL"])
    try:
        # Live events are only wake-ups for the gateway; the log in Postgres is what it sends.
        for payload in (b"garbage", b'{"seq": "x"}', b""):
            await nc.publish(conversation_subject(first.conversation_id), payload)
        await nc.flush()
    finally:
        await nc.close()
    again = await send(http, studio.org.id, studio.owner.user_id, "what programs do we run?", first.conversation_id)
    assert again.types()[-1] == "done"
    assert again.ids == [str(i) for i in range(int(first.ids[-1]) + 1, int(first.ids[-1]) + 1 + len(again.ids))]
