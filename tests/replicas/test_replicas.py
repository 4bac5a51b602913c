"""Issue 14, many replicas: two gateways, orchestrators, tool-runners, billing and rag processes on
one NATS, Postgres and Redis (conftest.py's `cluster`).

1. Turns spread: both orchestrators run turns and both tool-runners run tools (their own log lines).
2. A stream started on one gateway resumes on the other with `Last-Event-ID`: every event once, in order.
3. SIGKILL of the orchestrator running a turn: the other finishes it, with exactly one `done` stored.
4. A rolling restart of every service, one replica at a time, under 50 writing turns: none lost,
   no tool run twice.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import httpx
import nats
from httpx_sse import aconnect_sse
from redis.asyncio import Redis

from spotter_orchestrator.handlers import durable_name
from spotter_shared.contracts.commands import COMMANDS_STREAM, SEND_MESSAGE
from tests.e2e.client import Sim, auth, sse
from tests.factories import make_studio

from .conftest import Cluster, Replica


def tool(name: str, **tool_input: Any) -> dict[str, Any]:
    return {"name": name, "input": tool_input}


_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def words(prefix: str, count: int) -> str:
    """`count` distinct words of 3 characters (with its space, each is one simulator token)."""
    assert count <= len(_DIGITS) ** 2
    return " ".join(f"{prefix}{_DIGITS[i // 36]}{_DIGITS[i % 36]}" for i in range(count))


@dataclass
class Transcript:
    """What one client saw of one turn, over as many connections as it took."""

    conversation_id: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    served_by: list[str] = field(default_factory=list)  # a gateway label per connection that delivered events
    drops: int = 0  # connections that ended (or broke) before `done`

    def take(self, sse_event: Any) -> bool:
        """Record one SSE event; True once it is `done`."""
        if not sse_event.data:  # keep-alive comment
            return False
        data = json.loads(sse_event.data)
        assert data["type"] == sse_event.event, "SSE event name and payload type must agree"
        self.events.append(data)
        self.ids.append(int(sse_event.id))
        if data["type"] == "conversation_started":
            self.conversation_id = data["conversationId"]
        return data["type"] == "done"

    @property
    def finished(self) -> bool:
        return bool(self.events) and self.events[-1]["type"] == "done"

    def types(self) -> list[str]:
        return [e["type"] for e in self.events]

    def text(self) -> str:
        return "".join(e["delta"] for e in self.events if e["type"] == "text_delta")


async def converse(client: httpx.AsyncClient, cluster: Cluster, org_id: str, user_id: str, message: str, first: int,
                   *, started: asyncio.Event | None = None, deadline_s: float = 150.0) -> Transcript:
    """Send `message` through gateway `first` and read the turn to its `done`, as the web app does:
    when a connection ends or breaks before `done`, reconnect to the next gateway with
    `Last-Event-ID` (the last id received)."""
    out = Transcript()
    gateways = cluster.gateways
    g = first
    deadline = time.monotonic() + deadline_s

    async def read(source: Any, label: str) -> None:
        response = source.response
        if response.status_code != 200 or not response.headers.get("content-type", "").startswith("text/event-stream"):
            await response.aread()
            raise AssertionError(f"{label}: HTTP {response.status_code} {response.text[:300]}")
        async for event in source.aiter_sse():
            if not out.served_by or out.served_by[-1] != label:
                out.served_by.append(label)
            finished = out.take(event)
            if started is not None and out.conversation_id is not None:
                started.set()
            if finished:
                return

    url = f"{gateways[g].url}/organizations/{org_id}/agent/messages"
    try:
        async with aconnect_sse(client, "POST", url, json={"conversationId": None, "message": message},
                                headers=auth(user_id)) as source:
            await read(source, gateways[g].label)
    except httpx.TransportError:
        pass
    while not out.finished:
        out.drops += 1
        assert out.conversation_id is not None, f"{message!r}: the stream ended before the conversation id: {out.events}"
        assert time.monotonic() < deadline, f"{message!r}: no `done` after {deadline_s} s: {out.types()}"
        g = (g + 1) % len(gateways)
        url = f"{gateways[g].url}/organizations/{org_id}/agent/conversations/{out.conversation_id}/events"
        headers = {**auth(user_id), "Last-Event-ID": str(out.ids[-1])}
        try:
            async with aconnect_sse(client, "GET", url, headers=headers) as source:
                if source.response.status_code >= 500:
                    await asyncio.sleep(0.2)  # a gateway stopping: the next one
                    continue
                await read(source, gateways[g].label)
        except httpx.TransportError:
            await asyncio.sleep(0.2)  # that gateway is down (restarting): the next one
    return out


def assert_whole(t: Transcript, text: str) -> None:
    """One turn, complete, each event once and in order, its text whole and once."""
    assert t.types().count("done") == 1 and t.types()[-1] == "done", t.types()
    assert not [e for e in t.events if e["type"] == "error"], [e for e in t.events if e["type"] == "error"]
    assert t.ids == list(range(1, len(t.ids) + 1)), t.ids
    assert t.types()[0] == "conversation_started"
    assert t.text() == text, (t.text(), text)


async def wait_for_events(replicas: list[Replica], name: str, count: int, timeout: float = 15.0, **match: Any) -> dict[str, list[dict[str, Any]]]:
    """Each replica's `name` events matching `match`, once they add up to `count` (log lines are
    written by the services a moment after what they report is visible over HTTP)."""
    deadline = time.monotonic() + timeout
    while True:
        found = {r.label: r.events(name, **match) for r in replicas}
        if sum(len(v) for v in found.values()) >= count or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.1)


async def gateway_posts(client: httpx.AsyncClient, gateway: Replica) -> float:
    """`POST`s this gateway answered 200 since it started (its Prometheus counter)."""
    text = (await client.get(f"{gateway.url}/metrics")).text
    for line in text.splitlines():
        if line.startswith("spotter_http_requests_total{") and 'method="POST"' in line and 'status="200"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def client(connections: int = 20) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=connections + 10, max_keepalive_connections=connections + 10)
    return httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(15, read=60, pool=None))


# 1 -------------------------------------------------------------------------------------------------


SPREAD_TURNS = 20


async def test_turns_spread_over_both_orchestrators_and_tool_runners(healthy: Cluster, pool: asyncpg.Pool, sim: Sim) -> None:
    cluster = healthy
    studio = await make_studio(pool)
    run = uuid.uuid4().hex[:6]
    for n in range(SPREAD_TURNS):
        await sim.script(f"spread {run} {n:02d}", {"text": "Creating.", "tool_uses": [tool("tasks__create", title=f"sp-{run}-{n:02d}")]},
                         {"text": f"Created sp-{n:02d}.", "tool_uses": []})
    # Long enough that the turns overlap, so both replicas' pull requests are waiting for commands.
    await sim.latency(ttft_ms=300, tokens_per_second=0)
    async with client(SPREAD_TURNS) as http:
        posts_before = [await gateway_posts(http, g) for g in cluster.gateways]
        transcripts = await asyncio.wait_for(asyncio.gather(*(
            converse(http, cluster, studio.org.id, studio.owner.user_id, f"spread {run} {n:02d}", first=n % 2)
            for n in range(SPREAD_TURNS))), timeout=90)
        posts_after = [await gateway_posts(http, g) for g in cluster.gateways]

    for n, t in enumerate(transcripts):
        assert_whole(t, f"Creating.Created sp-{n:02d}.")
        assert t.served_by == [cluster.gateways[n % 2].label] and t.drops == 0, (t.served_by, t.drops)
    # Each gateway answered its half of the sends (its own counter, not just our bookkeeping).
    assert [after - before for before, after in zip(posts_before, posts_after)] == [SPREAD_TURNS / 2] * 2

    org = studio.org.id
    started = await wait_for_events(cluster.of("orchestrator"), "agent.turn.started", SPREAD_TURNS, orgId=org)
    executed = await wait_for_events(cluster.of("tool-runner"), "agent.tool.executed", SPREAD_TURNS, orgId=org,
                                     router="tasks", action="create")
    print(f"\nturns per orchestrator: { {k: len(v) for k, v in started.items()} }; "
          f"tool calls per tool-runner: { {k: len(v) for k, v in executed.items()} }")
    # Every turn started exactly once (no kill here: no redelivery), and both replicas of each kind worked.
    traces = [e["traceId"] for v in started.values() for e in v]
    assert len(traces) == len(set(traces)) == SPREAD_TURNS, started
    assert all(e["attempt"] == 1 for v in started.values() for e in v)
    assert all(len(v) > 0 for v in started.values()), f"one orchestrator ran every turn: {started.keys()}"
    runs = [e for v in executed.values() for e in v]
    assert len(runs) == SPREAD_TURNS and all(e["outcome"] == "succeeded" and not e["replayed"] for e in runs), runs
    assert all(len(v) > 0 for v in executed.values()), f"one tool-runner ran every call: {executed.keys()}"
    titles = await pool.fetch("SELECT title, count(*) AS n FROM tasks WHERE organization_id = $1 GROUP BY title", uuid.UUID(org))
    assert {r["title"]: r["n"] for r in titles} == {f"sp-{run}-{n:02d}": 1 for n in range(SPREAD_TURNS)}


# 2 -------------------------------------------------------------------------------------------------


async def test_a_stream_started_on_one_gateway_resumes_on_the_other(healthy: Cluster, pool: asyncpg.Pool, sim: Sim) -> None:
    cluster = healthy
    studio = await make_studio(pool)
    marker = f"resume {uuid.uuid4().hex[:8]}"
    answer = words("w", 60)
    await sim.script(marker, {"text": answer, "tool_uses": []})
    await sim.latency(ttft_ms=100, tokens_per_second=25)  # ~2.5 s of text
    a, b = cluster.gateways
    headers = auth(studio.owner.user_id)
    async with client() as http:
        # Gateway A: the first few events, then the connection is dropped.
        first = await sse(http, "POST", f"{a.url}/organizations/{studio.org.id}/agent/messages",
                          json={"conversationId": None, "message": marker}, headers=headers, stop_after=4)
        assert first.status == 200 and first.types()[0] == "conversation_started" and "done" not in first.types()
        cid = first.events[0]["conversationId"]
        status = await pool.fetchval("SELECT status::text FROM ai_turns WHERE conversation_id = $1", uuid.UUID(cid))
        assert status == "running", "resumed while the turn still runs, so B continues live, not only from the log"
        # Gateway B: everything after the last id A delivered, through `done`.
        rest = await sse(http, "GET", f"{b.url}/organizations/{studio.org.id}/agent/conversations/{cid}/events",
                         headers={**headers, "Last-Event-ID": first.ids[-1]})
        assert rest.status == 200
        replay = await sse(http, "GET", f"{b.url}/organizations/{studio.org.id}/agent/conversations/{cid}/events",
                           headers=headers, until_done=False)

    ids = [int(i) for i in first.ids + rest.ids]
    assert ids == list(range(1, len(ids) + 1)), ids  # contiguous, none twice, none missing
    types = first.types() + rest.types()
    assert types.count("done") == 1 and types[-1] == "done" and "error" not in types, types
    assert rest.types()[0] != "conversation_started" and len(rest.events) > 1
    assert "".join(e["delta"] for e in first.events + rest.events if e["type"] == "text_delta") == answer
    # What the two connections delivered is the stored log, event for event.
    assert replay.events == first.events + rest.events
    stored = await pool.fetchval("SELECT count(*) FROM ai_conversation_events WHERE conversation_id = $1 AND type = 'done'",
                                 uuid.UUID(cid))
    assert stored == 1


# 3 -------------------------------------------------------------------------------------------------


async def test_sigkill_of_the_orchestrator_running_a_turn_the_other_finishes_it_once(
    healthy: Cluster, pool: asyncpg.Pool, sim: Sim,
) -> None:
    cluster = healthy
    studio = await make_studio(pool)
    org = studio.org.id
    marker = f"kill {uuid.uuid4().hex[:8]}"
    title = f"k-{marker[-8:]}"
    answer = words("part", 40)
    await sim.script(marker, {"text": "Looking.", "tool_uses": [tool("tasks__create", title=title)]},
                     {"text": answer, "tool_uses": []})
    await sim.latency(ttft_ms=100, tokens_per_second=25)
    async with client() as http:
        turn = asyncio.create_task(converse(http, cluster, org, studio.owner.user_id, f"{marker} please", first=0))
        try:
            # The tool has run and the answer is streaming: kill the replica that runs the turn.
            cid = await poll(pool, """SELECT e.conversation_id FROM ai_conversation_events e
                                      JOIN ai_conversations c ON c.id = e.conversation_id
                                      WHERE c.organization_id = $1 AND e.type = 'text_delta'
                                        AND e.seq > (SELECT min(seq) FROM ai_conversation_events
                                                     WHERE conversation_id = e.conversation_id AND type = 'tool_completed')
                                      LIMIT 1""", uuid.UUID(org))
            runner = await wait_for_events(cluster.of("orchestrator"), "agent.turn.started", 1, orgId=org)
            victims = [r for r in cluster.of("orchestrator") if runner[r.label]]
            assert len(victims) == 1, runner
            victim = victims[0]
            survivor = next(r for r in cluster.of("orchestrator") if r is not victim)
            assert await asyncio.to_thread(cluster.stop, victim, signal.SIGKILL) == -9
            transcript = await asyncio.wait_for(turn, timeout=60)
        finally:
            if not turn.done():
                turn.cancel()
    # The killed replica comes back for the next test (and must become ready again).
    cluster.start(victim)
    await asyncio.to_thread(cluster.wait_ready, victim)

    assert_whole(transcript, "Looking." + answer)
    assert transcript.types().count("tool_started") == 1 and transcript.types().count("tool_completed") == 1
    assert transcript.served_by == [cluster.gateways[0].label], "the gateway kept the stream open across the kill"
    cid = uuid.UUID(str(cid))
    assert await pool.fetchval("SELECT count(*) FROM ai_conversation_events WHERE conversation_id = $1 AND type = 'done'", cid) == 1
    turn_row = await pool.fetchrow("SELECT status::text AS status, attempts FROM ai_turns WHERE conversation_id = $1", cid)
    assert turn_row["status"] == "completed" and turn_row["attempts"] >= 2, dict(turn_row)
    executions = await pool.fetch("SELECT status::text AS status FROM ai_tool_executions WHERE conversation_id = $1", cid)
    assert [r["status"] for r in executions] == ["succeeded"]
    assert await pool.fetchval("SELECT count(*) FROM tasks WHERE organization_id = $1 AND title = $2", uuid.UUID(org), title) == 1
    # Who did what, from their own logs: the survivor took the turn over and completed it.
    taken = await wait_for_events([survivor], "agent.turn.completed", 1, orgId=org)
    assert len(taken[survivor.label]) == 1
    attempts = [e["attempt"] for e in survivor.events("agent.turn.started", orgId=org)]
    assert attempts and min(attempts) >= 2, attempts  # it only ever ran the redelivered command
    assert victim.events("agent.turn.completed", orgId=org) == []


async def poll(pool: asyncpg.Pool, sql: str, *args: object, timeout: float = 30.0) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = await pool.fetchval(sql, *args)
        if value is not None:
            return value
        await asyncio.sleep(0.02)
    raise AssertionError(f"condition never met: {sql}")


# 4 -------------------------------------------------------------------------------------------------


ROLLING_TURNS = 50
# One replica at a time, kind after kind: tool-runners, billing, rag, gateways (1-5 s each), then
# the orchestrators (~20 s each: a SIGTERMed orchestrator keeps running its turns for FastStream's
# graceful 15 s, then stops them, and their commands come back to the other replica after the ack
# wait). The whole restart takes 65-85 s here.
ROLLING_ORDER = ("tool-runner", "billing", "rag", "gateway", "orchestrator")
# Each turn is six model calls the simulator streams at ROLLING_TPS tokens a second (each word
# below is one token): conversation n says up to 8 s of text and creates its workout (the restart
# begins with the first write, so the writes spread over the tool-runners' restarts, and the next
# calls reserve and settle while billing restarts), then four times says 12 s of text and reads the
# studio's context, then answers in 12 s: over a minute of work (more where an orchestrator stopped
# a call and it was made again), so every turn is still running when each replica stops. Once the
# last replica is back, the simulator answers at full speed and the turns finish within a call.
ROLLING_TPS = 5.0
ROLLING_BEFORE_S = 8.0
ROLLING_CALL_S = 12.0
ROLLING_READS = 4


def rolling_script(n: int, run: str) -> tuple[list[dict[str, Any]], str]:
    """Conversation n's model calls, and the text its client must see: each call's text, once."""
    call = int(ROLLING_CALL_S * ROLLING_TPS)
    before = f"Creating rr-{n:03d}: {words('w', 1 + int(ROLLING_BEFORE_S * ROLLING_TPS * n / ROLLING_TURNS))}."
    calls = [{"text": before, "tool_uses": [tool("workouts__create", title=f"rr-{run}-{n:03d}", description="3 rounds")]}]
    calls += [{"text": f" Checking {k}: {words(chr(ord('b') + k), call)}.", "tool_uses": [tool("read__get_current_context")]}
              for k in range(ROLLING_READS)]
    calls += [{"text": f" {words('a', call)} Created rr-{n:03d}.", "tool_uses": []}]
    return calls, "".join(c["text"] for c in calls)


async def test_rolling_restart_of_every_service_under_50_writing_turns(healthy: Cluster, pool: asyncpg.Pool, sim: Sim) -> None:
    cluster = healthy
    studio = await make_studio(pool, tier="elite")
    org = uuid.UUID(studio.org.id)
    run = uuid.uuid4().hex[:6]
    scripts = [rolling_script(n, run) for n in range(ROLLING_TURNS)]
    for n, (calls, _) in enumerate(scripts):
        await sim.script(f"rolling {run} {n:03d}", *calls)
    await sim.latency(ttft_ms=100, tokens_per_second=ROLLING_TPS)

    async def running_turns() -> int:
        return await pool.fetchval("""SELECT count(*) FROM ai_turns t JOIN ai_conversations c ON c.id = t.conversation_id
                                      WHERE c.organization_id = $1 AND t.status = 'running'""", org)

    async def tool_runs() -> int:
        return await pool.fetchval("""SELECT count(*) FROM ai_tool_executions x JOIN ai_conversations c ON c.id = x.conversation_id
                                      WHERE c.organization_id = $1 AND x.status = 'succeeded' AND x.router = 'workouts'""", org)

    # (replica, turns running when it was stopped, its exit code, when it was stopped, how long it
    # took to be back, workouts created meanwhile)
    steps: list[tuple[str, int, int | None, float, float, int]] = []
    async with client(ROLLING_TURNS) as http:
        started = [asyncio.Event() for _ in range(ROLLING_TURNS)]
        turns = [asyncio.create_task(converse(http, cluster, studio.org.id, studio.owner.user_id, f"rolling {run} {n:03d}",
                                              first=n % 2, started=started[n], deadline_s=240))
                 for n in range(ROLLING_TURNS)]
        try:
            # Every conversation is mid-turn (its stream has begun), and the first workout is being
            # created, before the first replica stops: the other writes come in the next seconds.
            await asyncio.wait_for(asyncio.gather(*(e.wait() for e in started)), timeout=60)
            await poll(pool, """SELECT 1 FROM ai_tool_executions x JOIN ai_conversations c ON c.id = x.conversation_id
                                WHERE c.organization_id = $1 AND x.router = 'workouts'""", org, timeout=60)
            t0 = time.monotonic()
            # SIGTERM, wait for the exit, start again, wait until it is subscribed (a gateway: and
            # ready), then the other replica of that kind.
            for kind in ROLLING_ORDER:
                for replica in cluster.of(kind):
                    in_flight, tools_before = await running_turns(), await tool_runs()
                    began = time.monotonic()
                    rc = await cluster.restart(replica)
                    steps.append((replica.label, in_flight, rc, began - t0, time.monotonic() - began,
                                  await tool_runs() - tools_before))
            restart_s = time.monotonic() - t0
            await sim.latency(ttft_ms=0, tokens_per_second=0)
            transcripts = await asyncio.wait_for(asyncio.gather(*turns), timeout=240)
        finally:
            for task in turns:
                task.cancel()
    finished_s = time.monotonic() - t0
    redelivered = await pool.fetchval("""SELECT count(*) FROM ai_turns t JOIN ai_conversations c ON c.id = t.conversation_id
                                         WHERE c.organization_id = $1 AND t.attempts > 1""", org)
    print(f"\nrolling restart {restart_s:.1f} s, all {ROLLING_TURNS} turns done after {finished_s:.1f} s; "
          f"{redelivered} turns redelivered; {sum(t.drops for t in transcripts)} client reconnects")
    for label, in_flight, rc, at, took, tools in steps:
        print(f"  {label:<14} SIGTERM at {at:5.1f} s with {in_flight:2d} turns running; exit {rc!s:>4}; "
              f"back in {took:4.1f} s; {tools:2d} workouts created meanwhile")

    # None lost: every client got its whole turn once, through `done`, ids contiguous.
    for n, t in enumerate(transcripts):
        assert_whole(t, scripts[n][1])
    cids = [uuid.UUID(t.conversation_id) for t in transcripts]
    done = await pool.fetch("""SELECT conversation_id, count(*) AS n FROM ai_conversation_events
                               WHERE conversation_id = ANY($1) AND type = 'done' GROUP BY conversation_id""", cids)
    assert {r["conversation_id"]: r["n"] for r in done} == {c: 1 for c in cids}
    statuses = await pool.fetch("SELECT status::text AS status, count(*) AS n FROM ai_turns WHERE conversation_id = ANY($1) GROUP BY 1", cids)
    assert {r["status"]: r["n"] for r in statuses} == {"completed": ROLLING_TURNS}
    # The final text is stored too, whole, once.
    finals = await pool.fetch("""SELECT DISTINCT ON (conversation_id) conversation_id, content FROM ai_messages
                                 WHERE conversation_id = ANY($1) AND role = 'assistant' ORDER BY conversation_id, position DESC""", cids)
    final_text = {r["conversation_id"]: "".join(b.get("text", "") for b in _json(r["content"]) if b.get("type") == "text") for r in finals}
    assert final_text == {cids[n]: scripts[n][0][-1]["text"] for n in range(ROLLING_TURNS)}

    # No tool ran twice: one execution per tool_use the model sent (the write and the reads), one
    # workout and one audit row per conversation.
    uses = await pool.fetch("""SELECT conversation_id, content FROM ai_messages
                               WHERE conversation_id = ANY($1) AND role = 'assistant'""", cids)
    asked = sorted((r["conversation_id"], b["id"]) for r in uses for b in _json(r["content"]) if b.get("type") == "tool_use")
    executions = await pool.fetch("""SELECT conversation_id, tool_use_id, status::text AS status FROM ai_tool_executions
                                     WHERE conversation_id = ANY($1)""", cids)
    assert sorted((r["conversation_id"], r["tool_use_id"]) for r in executions) == asked
    assert len(asked) == ROLLING_TURNS * (1 + ROLLING_READS) and {r["status"] for r in executions} == {"succeeded"}
    workouts = await pool.fetch("SELECT title, count(*) AS n FROM workouts WHERE organization_id = $1 GROUP BY title", org)
    assert {r["title"]: r["n"] for r in workouts} == {f"rr-{run}-{n:03d}": 1 for n in range(ROLLING_TURNS)}
    audits = await pool.fetch("""SELECT metadata->>'conversationId' AS cid, count(*) AS n FROM audit_logs
                                 WHERE organization_id = $1 GROUP BY 1""", org)
    assert {r["cid"]: r["n"] for r in audits} == {str(c): 1 for c in cids}
    # And the tool-runners' own account: each call executed (not replayed) exactly once between them.
    ran = await wait_for_events(cluster.of("tool-runner"), "agent.tool.executed", ROLLING_TURNS, orgId=studio.org.id,
                                router="workouts", action="create", replayed=False)
    assert sum(len(v) for v in ran.values()) == ROLLING_TURNS, {k: len(v) for k, v in ran.items()}

    # Nothing left hanging: every send command is acknowledged (its handler returned, title and all)
    # and none waits. A handler stuck after its turn's `done` keeps its command unacknowledged.
    quiet = await commands_settled(cluster, timeout=20)
    assert quiet == (0, 0), (f"send commands (pending, unacknowledged) still {quiet}; see the orchestrators' logs in "
                             f"{cluster.log_dir}; Redis connections idle for 10 s or more:\n" + await idle_redis_clients(cluster))

    # It was a rolling restart under load: every replica was stopped while turns were running, the
    # orchestrators' stops landed inside turns (their commands came back to the other replica), and
    # each replica exited on its SIGTERM (a gateway's uvicorn re-raises it: -15), none needed SIGKILL.
    assert [label for label, in_flight, *_ in steps if in_flight == 0] == []
    assert redelivered >= 1
    # ... and workouts were created while a tool-runner was stopping, down or starting.
    assert sum(tools for label, *_, tools in steps if label.startswith("tool-runner")) > 0, steps
    assert [(label, rc) for label, _, rc, *_ in steps if rc not in (0, -signal.SIGTERM)] == []


async def commands_settled(cluster: Cluster, timeout: float) -> tuple[int, int]:
    """(pending, unacknowledged) send commands on the orchestrators' durable consumer, once both are
    0 twice in a row, or as they are at the deadline."""
    nc = await nats.connect(cluster.nats.url)
    try:
        js = nc.jetstream()
        deadline, quiet = time.monotonic() + timeout, 0
        while True:
            info = await js.consumer_info(COMMANDS_STREAM, durable_name(SEND_MESSAGE))
            state = (info.num_pending, info.num_ack_pending)
            quiet = quiet + 1 if state == (0, 0) else 0
            if quiet == 2 or time.monotonic() > deadline:
                return state
            await asyncio.sleep(0.25)
    finally:
        await nc.close()


async def idle_redis_clients(cluster: Cluster, idle_s: int = 10) -> str:
    """Redis's view of the connections idle for `idle_s` or more whose last command was EVALSHA (the
    turn lease's scripts) or that hold unread input or unsent output."""
    client = Redis.from_url(cluster.env["REDIS_URL"], decode_responses=True)
    try:
        listing = await client.execute_command("CLIENT", "LIST")
    finally:
        await client.aclose()
    lines = listing.splitlines() if isinstance(listing, str) else [" ".join(f"{k}={v}" for k, v in c.items()) for c in listing]
    def notable(line: str) -> bool:
        idle = re.search(r"\bidle=(\d+)", line)
        busy = re.search(r"\b(qbuf|obl|oll|omem)=[1-9]", line) or "cmd=evalsha" in line
        return bool(idle and int(idle.group(1)) >= idle_s and busy)

    return "\n".join(line for line in lines if notable(line)) or "(none with a pending buffer or an EVALSHA last)"


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value
