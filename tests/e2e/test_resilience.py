"""Suspended conversations survive a full restart; side effects happen at most once under
SIGKILLs of the orchestrator and tool-runner at random points."""

from __future__ import annotations

import asyncio
import random
import uuid

import asyncpg
import httpx

from spotter_cli.supervisor import wait_http_ok
from tests.factories import make_studio

from .client import Sim, auth, send, sse
from .conftest import Platform
from .helpers import assert_requests_valid
from .test_hitl import base, make_workout, tool, workout_deleted

KILLS = 8


async def _restart_everything(platform: Platform) -> None:
    for proc in reversed(list(platform.procs.values())):
        proc.terminate()
    for proc in platform.procs.values():
        proc.start()
    await asyncio.to_thread(wait_http_ok, f"{platform.base_url}/readyz", timeout=60, watch=platform.procs.values())
    await asyncio.to_thread(wait_http_ok, f"{platform.sim_url}/_sim/health", timeout=60, watch=platform.procs.values())


async def test_confirm_works_after_a_full_restart(http: httpx.AsyncClient, pool: asyncpg.Pool, platform: Platform) -> None:
    studio = await make_studio(pool)
    wid = await make_workout(pool, studio.org.id, "Survivor")
    async with httpx.AsyncClient(base_url=platform.sim_url) as sim_client:
        await Sim(sim_client).script("delete across restart", {"text": None, "tool_uses": [tool("workouts__delete", id=wid)]},
                                     {"text": "Deleted after the restart.", "tool_uses": []})
    first = await send(http, studio.org.id, studio.owner.user_id, "delete across restart")
    tool_use_id = first.of("confirmation_pending")[0]["toolUseId"]

    await _restart_everything(platform)
    async with httpx.AsyncClient(base_url=platform.sim_url) as sim_client:
        # The simulator lost its scripts with the restart; give the resumed call its answer again.
        await Sim(sim_client).script("delete across restart", {"text": None, "tool_uses": [tool("workouts__delete", id=wid)]},
                                     {"text": "Deleted after the restart.", "tool_uses": []})
        async with httpx.AsyncClient(base_url=platform.base_url, timeout=httpx.Timeout(10, read=60)) as fresh:
            resumed = await sse(fresh, "POST", f"{base(studio, first.conversation_id)}/confirm/{tool_use_id}",
                                json={"approved": True}, headers=auth(studio.owner.user_id))
        assert resumed.of("tool_completed")[0]["ok"] is True
        assert resumed.types()[-1] == "done" and "after the restart" in resumed.text()
        assert await workout_deleted(pool, wid)
        assert_requests_valid(await Sim(sim_client).requests())


async def test_writes_happen_exactly_once_under_random_kills(http: httpx.AsyncClient, pool: asyncpg.Pool, platform: Platform, sim: Sim) -> None:
    """Many turns, each creating one uniquely named task; the orchestrator and the tool-runner are
    SIGKILLed at random moments and restarted. Afterwards every turn has exactly one `done`, and
    every task exists exactly once."""
    rng = random.Random(20261122)
    studio = await make_studio(pool)
    turns = 16
    for n in range(turns):
        await sim.script(f"fault task {n:02d}", {"text": "Creating.", "tool_uses": [tool("tasks__create", title=f"fi-{n:02d}")]},
                         {"text": f"Created fi-{n:02d}.", "tool_uses": []})
    await sim.latency(ttft_ms=60, tokens_per_second=60)

    async def one_turn(n: int) -> str:
        # Each turn in its own conversation; the client reconnects with Last-Event-ID if cut off.
        stream = await send(http, studio.org.id, studio.owner.user_id, f"fault task {n:02d}")
        return stream.conversation_id

    async def chaos() -> int:
        kills = 0
        for _ in range(KILLS):
            await asyncio.sleep(rng.uniform(0.3, 1.0))
            victim = platform.procs[rng.choice(["spotter-orchestrator", "spotter-tool-runner"])]
            victim.kill()
            kills += 1
            victim.start()
        return kills

    try:
        chaos_task = asyncio.create_task(chaos())
        conversations = await asyncio.wait_for(asyncio.gather(*(one_turn(n) for n in range(turns))), timeout=240)
        kills = await chaos_task
    finally:
        await sim.latency(ttft_ms=0, tokens_per_second=0)
        for name in ("spotter-orchestrator", "spotter-tool-runner"):
            if not platform.procs[name].is_running():
                platform.procs[name].start()
    assert kills == KILLS
    # The kills did land inside turns: some commands were redelivered and finished by a new replica.
    redelivered = await pool.fetchval(
        "SELECT count(*) FROM ai_turns t JOIN ai_conversations c ON c.id = t.conversation_id WHERE c.organization_id = $1 AND t.attempts > 1",
        uuid.UUID(studio.org.id))
    assert redelivered >= 1
    for cid in conversations:
        dones = await pool.fetchval("SELECT count(*) FROM ai_conversation_events WHERE conversation_id = $1 AND type = 'done'", uuid.UUID(cid))
        assert dones == 1, cid
    counts = await pool.fetch(
        "SELECT title, count(*) AS n FROM tasks WHERE organization_id = $1 GROUP BY title ORDER BY title", uuid.UUID(studio.org.id))
    assert {r["title"]: r["n"] for r in counts} == {f"fi-{n:02d}": 1 for n in range(turns)}
    executions = await pool.fetchval(
        """SELECT count(*) FROM ai_tool_executions e JOIN ai_conversations c ON c.id = e.conversation_id
           WHERE c.organization_id = $1 AND e.status = 'succeeded'""", uuid.UUID(studio.org.id))
    assert executions == turns
    audits = await pool.fetchval("SELECT count(*) FROM audit_logs WHERE organization_id = $1", uuid.UUID(studio.org.id))
    assert audits == turns
    assert_requests_valid(await sim.requests())
