"""SIGKILL the orchestrator mid-turn: JetStream redelivers the command, a fresh replica finishes
the turn, completed tools are not run again, and the stream ends in exactly one `done`. The kill
costs the customer nothing: the redelivered call takes over its dead attempt's hold, so spend is
exactly the provider-reported cost and no hold lingers."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx

from spotter_billing.pricing import RateCard
from tests.factories import make_studio

from .client import Sim, auth, send, sse
from .conftest import Platform
from .helpers import assert_requests_valid, mentions, message_roles, provider_usage, rows


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


async def test_kill_mid_call_charges_exactly_the_provider_reported_cost(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim, platform: Platform) -> None:
    studio = await make_studio(pool, tier="pro", extra_members=[{"full_name": "Saar Cohen", "plan": "Unlimited"}])
    marker = f"crash bill {uuid.uuid4().hex[:8]}"
    answer = " ".join(f"word{i}" for i in range(40))
    await sim.script(
        marker,
        {"text": "Looking.", "tool_uses": [{"name": "read__members_search", "input": {"query": "Saar"}}]},
        {"text": answer, "tool_uses": []},
    )
    await sim.latency(ttft_ms=100, tokens_per_second=25)
    orchestrator = platform.procs["spotter-orchestrator"]
    try:
        turn = asyncio.create_task(send(http, studio.org.id, studio.owner.user_id, f"{marker} please"))
        cid = await _wait_for(pool, """SELECT e.conversation_id FROM ai_conversation_events e
                                        JOIN ai_conversations c ON c.id = e.conversation_id
                                        WHERE c.organization_id = $1 AND e.type = 'text_delta'
                                          AND e.seq > (SELECT min(seq) FROM ai_conversation_events
                                                       WHERE conversation_id = e.conversation_id AND type = 'tool_completed')
                                        LIMIT 1""", uuid.UUID(studio.org.id))
        # The second model call is streaming: it holds budget and its usage never reaches us.
        in_flight = [r for r in await sim.requests() if mentions(r, marker) and r["kind"] == "agent"][-1]
        orchestrator.kill()
        await sim.latency(ttft_ms=0, tokens_per_second=0)
        orchestrator.start()
        stream = await asyncio.wait_for(turn, timeout=60)
    finally:
        await sim.latency(ttft_ms=0, tokens_per_second=0)
        if not orchestrator.is_running():
            orchestrator.start()
    assert stream.types()[-1] == "done" and not stream.of("error")
    assert cid is not None

    rates, today = RateCard.load(), datetime.now(UTC).date()

    async def every_request() -> list[dict[str, Any]]:
        """Title and summary requests too (the sim lists only the agent's by default)."""
        return (await sim.client.get("/_sim/requests", params={"kind": "all"})).json()["requests"]

    async def served() -> dict[str, tuple[str, int]]:
        """Every call the model served for this test: request id → (kind, cost of its usage)."""
        return {r["request_id"]: (r["kind"], rates.price(r["body"]["model"], provider_usage(r["response"]["usage"]), today))
                for r in await every_request() if mentions(r, marker) and r["response"] is not None}

    def reported(calls: dict[str, tuple[str, int]], kind: str | None = None) -> int:
        """The cost of the calls whose usage reached Spotter: all but the killed one."""
        return sum(cost for rid, (k, cost) in calls.items() if rid != in_flight["request_id"] and kind in (None, k))

    async def settled() -> int:
        return await pool.fetchval("SELECT coalesce(sum(cost_usd_micros), 0)::bigint FROM ai_usage_daily WHERE organization_id = $1",
                                   uuid.UUID(studio.org.id))

    async def usage() -> dict[str, Any]:
        return (await http.get(f"/organizations/{studio.org.id}/agent/usage", headers=auth(studio.owner.user_id))).json()

    # A title call, if any, runs after `done`: wait until every served call is settled and no hold
    # is left. Before the fix the dead attempt's hold stayed for its 10-minute TTL and this timed out.
    for _ in range(500):
        calls = await served()
        if await settled() == reported(calls) and (await usage())["reservedUsdMicros"] == 0:
            break
        await asyncio.sleep(0.02)
    calls = await served()
    kinds = sorted(kind for kind, _ in calls.values())
    assert kinds in (["agent"] * 3, ["agent"] * 3 + ["title"]), kinds  # tool call, killed call, its repeat
    spent = reported(calls)
    assert await settled() == spent > 0
    assert spent < sum(cost for _, cost in calls.values())  # the killed call's usage never reached us: not billed
    snapshot = await usage()
    # Nothing lingers: the dead attempt's hold was the redelivered call's own, settled once.
    assert snapshot["reservedUsdMicros"] == 0
    assert snapshot["spentUsdMicros"] == spent
    assert snapshot["remainingUsdMicros"] == 5_000_000 - spent and snapshot["showUpgradeHint"] is False
    # The turn's own record: its two reported model calls, each once.
    assert await pool.fetchval("SELECT cost_usd_micros FROM ai_turns WHERE conversation_id = $1", cid) == reported(calls, "agent")


async def _wait_for(pool: asyncpg.Pool, sql: str, *args: object) -> object:
    for _ in range(1000):
        value = await pool.fetchval(sql, *args)
        if value is not None:
            return value
        await asyncio.sleep(0.01)
    raise AssertionError("condition never met")
