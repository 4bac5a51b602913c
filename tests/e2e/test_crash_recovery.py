"""SIGKILL the orchestrator mid-turn: JetStream redelivers the command, a fresh replica finishes
the turn, completed tools are not run again, and the stream ends in exactly one `done`."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import httpx

from tests.factories import make_studio

from .client import Sim, auth, send, sse
from .conftest import Platform
from .helpers import assert_requests_valid, message_roles, rows


async def test_kill_orchestrator_mid_turn_finishes_once(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim, platform: Platform) -> None:
    studio = await make_studio(pool, extra_members=[{"full_name": "Saar Cohen", "plan": "Unlimited"}])
    answer = " ".join(f"part{i}" for i in range(40))
    await sim.script(
        "crash course",
        {"text": "Looking.", "tool_uses": [{"name": "read__members_search", "input": {"query": "Saar"}}]},
        {"text": answer, "tool_uses": []},
    )
    await sim.latency(ttft_ms=100, tokens_per_second=25)
    orchestrator = platform.procs["spotter-orchestrator"]
    try:
        turn = asyncio.create_task(send(http, studio.org.id, studio.owner.user_id, "crash course please"))
        # Wait until the tool has run and the second model call is streaming, then kill.
        cid = await _wait_for(pool, """SELECT e.conversation_id FROM ai_conversation_events e
                                        JOIN ai_conversations c ON c.id = e.conversation_id
                                        WHERE c.organization_id = $1 AND e.type = 'text_delta'
                                          AND e.seq > (SELECT min(seq) FROM ai_conversation_events
                                                       WHERE conversation_id = e.conversation_id AND type = 'tool_completed')
                                        LIMIT 1""", uuid.UUID(studio.org.id))
        orchestrator.kill()
        await sim.latency(ttft_ms=0, tokens_per_second=0)
        orchestrator.start()
        stream = await asyncio.wait_for(turn, timeout=60)
    finally:
        await sim.latency(ttft_ms=0, tokens_per_second=0)
        if not orchestrator.is_running():
            orchestrator.start()

    assert stream.types().count("done") == 1 and stream.types()[-1] == "done"
    assert not stream.of("error")
    assert stream.types().count("tool_started") == 1 and stream.types().count("tool_completed") == 1
    # The text reached the client once, whole, although the model call was repeated.
    assert stream.text() == "Looking." + answer
    assert stream.ids == [str(i) for i in range(1, len(stream.ids) + 1)]
    executions = await rows(pool, "SELECT status::text AS status FROM ai_tool_executions WHERE conversation_id = $1", cid)
    assert executions == [{"status": "succeeded"}]
    assert await message_roles(pool, str(cid)) == ["user", "assistant", "tool_result", "assistant"]
    turn_row = (await rows(pool, "SELECT status::text AS status, attempts FROM ai_turns WHERE conversation_id = $1", cid))[0]
    assert turn_row["status"] == "completed" and turn_row["attempts"] >= 2
    assert_requests_valid(await sim.requests())
    # The replayed log is identical to what the live client saw.
    replay = await sse(http, "GET", f"/organizations/{studio.org.id}/agent/conversations/{cid}/events",
                       headers=auth(studio.owner.user_id), until_done=False)
    assert replay.events == stream.events


async def _wait_for(pool: asyncpg.Pool, sql: str, *args: object) -> object:
    for _ in range(1000):
        value = await pool.fetchval(sql, *args)
        if value is not None:
            return value
        await asyncio.sleep(0.01)
    raise AssertionError("condition never met")
