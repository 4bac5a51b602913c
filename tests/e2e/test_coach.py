"""Seed 003's member coach over HTTP+SSE against the running platform, the simulator being the only
fake (issue 12): §12.9's smoke test (a chest workout generated, delivered as an artifact, logged in
the session with its model calls and cost; a leg workout streamed in §8's frames), the coach's rules
(one tool per iteration, every reply a tool call, forced tool use only where the model accepts it),
the tools of the coach and of the studio never mixed, bad input refused, and every request the
simulator received valid for the model it names."""

from __future__ import annotations

import json
import uuid
from typing import Any

import asyncpg
import httpx
import pytest

from tests.factories import Studio, make_studio

from .client import Sim, auth
from .helpers import assert_requests_valid

COACH_TOOLS = {"message_notify_user", "message_ask_user", "idle", "generate_workout", "swap_exercise", "adjust_exercise",
               "remove_exercise", "log_workout", "fetch_data", "set_current_location"}


def marker() -> str:
    """A word to find this test's requests among the simulator's: it starts with a letter no UUID has, so no
    other test's request (whose messages carry ids in their tool results) can contain it by chance."""
    return f"q{uuid.uuid4().hex[:12]}"


def base(org_id: str) -> str:
    return f"/organizations/{org_id}/coach"


async def frames(http: httpx.AsyncClient, url: str, headers: dict[str, str], body: dict[str, Any]) -> list[tuple[str | None, dict]]:
    """The SSE frames of a coach stream: (id, data)."""
    out: list[tuple[str | None, dict]] = []
    async with http.stream("POST", url, json=body, headers=headers) as r:
        assert r.status_code == 200, await r.aread()
        assert r.headers["content-type"].startswith("text/event-stream")
        frame_id, data = None, []
        async for line in r.aiter_lines():
            if line.startswith("id:"):
                frame_id = line[3:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
            elif line == "" and data:
                out.append((frame_id, json.loads("\n".join(data))))
                frame_id, data = None, []
    return out


async def member_data(pool: asyncpg.Pool, studio: Studio) -> None:
    member, org = uuid.UUID(studio.member.membership_id), uuid.UUID(studio.org.id)
    await pool.execute("INSERT INTO member_profiles (membership_id, organization_id, sex, height_cm, weight_kg) VALUES ($1, $2, 'female', 168, 63)",
                       member, org)
    await pool.execute(
        """INSERT INTO member_locations (membership_id, organization_id, name, is_current, equipment) VALUES
           ($1, $2, 'Home', true, '[{"name": "Dumbbells", "category": "free_weights", "weights": [4, 8, 12]}]')""", member, org)
    await pool.execute("INSERT INTO member_goals (membership_id, organization_id, kind, name, priority) VALUES ($1, $2, 'category', 'strength', 5)",
                       member, org)


async def session_events(pool: asyncpg.Pool, session_id: str) -> list[dict[str, Any]]:
    rows = await pool.fetch("SELECT sequence, event_type, metadata FROM session_events WHERE session_id = $1 ORDER BY sequence",
                            uuid.UUID(session_id))
    return [{"sequence": r["sequence"], "type": r["event_type"], "meta": r["metadata"]} for r in rows]


async def coach_requests(sim: Sim, session_marker: str) -> list[dict[str, Any]]:
    return [r["body"] for r in await sim.requests() if r.get("body") and session_marker in json.dumps(r["body"]["messages"])]


async def test_the_smoke_test_of_seed_003(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim) -> None:
    studio = await make_studio(pool)
    await member_data(pool, studio)
    member = auth(studio.member.user_id)

    # 1. A session.
    r = await http.post(f"{base(studio.org.id)}/sessions", headers=member)
    assert r.status_code == 201, r.text
    session = r.json()["session"]
    assert (session["sessionType"], session["source"], session["status"]) == ("agent", "coach", "draft")

    # 2. A workout request, answered whole.
    tag = marker()
    r = await http.post(f"{base(studio.org.id)}/chat", headers=member,
                        json={"message": f"Give me a quick chest workout ({tag})", "sessionId": session["id"]})
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["sessionId"] == session["id"] and 2 <= answer["iterations"] <= 10
    assert answer["response"]["messages"] and answer["response"]["exercises"], answer
    assert answer["response"]["question"] is None and "error" not in answer

    # 3.–5. The tool sequence and the session's log.
    events = await session_events(pool, session["id"])
    calls = [e["meta"] for e in events if e["type"] == "agent.tool_call"]
    results = {e["meta"]["callId"]: e["meta"] for e in events if e["type"] == "agent.tool_result"}
    tools = [c["toolName"] for c in calls]
    assert "generate_workout" in tools and "message_notify_user" in tools
    assert tools.index("message_notify_user") > tools.index("generate_workout") and tools[-1] == "idle"
    generated = results[calls[tools.index("generate_workout")]["callId"]]
    notified = results[calls[tools.index("message_notify_user")]["callId"]]
    assert generated["success"] and generated["result"]["artifact_id"].startswith("art_")
    assert notified["result"]["artifact_id"] == generated["result"]["artifact_id"] and notified["result"]["artifact"]
    kinds = {e["type"] for e in events}
    assert {"user.message", "agent.tool_call", "agent.tool_result", "coach.artifact", "coach.llm_request",
            "coach.llm_response", "coach.run_completed"} <= kinds
    # One model call and one tool per iteration.
    responses = [e["meta"] for e in events if e["type"] == "coach.llm_response" and e["meta"]["call"] != "init"]
    assert len(responses) == len(calls) and all(m["toolCall"] for m in responses)

    # 6. Completion, tokens and cost.
    r = await http.get(f"{base(studio.org.id)}/sessions/{session['id']}", headers=member)
    assert r.status_code == 200
    detail = r.json()
    assert detail["session"]["status"] == "idle"
    assert detail["session"]["costUsdMicros"] > 0 and sum(detail["session"]["usage"].values()) > 0
    done = [e["meta"] for e in events if e["type"] == "coach.run_completed"]
    assert done[-1]["status"] == "completed" and done[-1]["iterations"] == len(calls)
    # Cache: the second iteration re-reads what the first wrote.
    assert responses[1]["tokens"]["cached"] > 0

    # 7. The artifact's exercises.
    artifact = detail["workout"]
    assert artifact["artifact_id"] == generated["result"]["artifact_id"] and artifact["type"] == "exercise_list"
    first = artifact["payload"]["exercises"][0]
    assert first["exercise_name"] and first["exercise_type"] in ("reps", "hold", "duration", "intervals")
    assert first["muscles_utilized"] and first["goals_addressed"]
    assert [t["role"] for t in detail["transcript"]][:2] == ["user", "coach"] and detail["transcript"][1].get("artifact")

    # 8. A streamed leg workout: §8's frames, each data frame of a stored event with its id.
    got = await frames(http, f"{base(studio.org.id)}/stream", member,
                       {"message": f"Show me a leg workout ({tag})", "sessionId": session["id"]})
    types = [f["type"] for _, f in got]
    assert "generate_workout" in types and types[-1] == "done" and got[-1][1]["sessionId"] == session["id"]
    starts = [f for _, f in got if f["type"] == "generate_workout" and f.get("data", {}).get("status") == "running"]
    finished = [f for _, f in got if f["type"] == "generate_workout" and f.get("status") == "done"]
    assert starts and starts[0]["data"]["args"]["workout"]["exercises"] and finished and finished[0]["formatted"]
    delivered = [f for _, f in got if f["type"] == "message_notify_user" and f.get("status") == "done"]
    assert delivered and delivered[0]["artifact"]["artifact_id"] == delivered[0]["artifact_id"]
    statuses = [f["data"] for _, f in got if f["type"] == "status"]
    assert {"message": "Creating your workout...", "tool": "generate_workout", "phase": "start"} in statuses
    assert {"message": "Workout ready", "tool": "generate_workout", "phase": "done"} in statuses
    ids = [int(i) for i, _ in got if i is not None]
    assert ids == sorted(ids) and len(set(ids)) == len(ids) and got[-1][0] is not None

    # Every request the simulator saw was valid for its model; the coach's carry only coach tools,
    # 5.x models are never forced, and the initializer asked for structured output.
    bodies = await coach_requests(sim, tag)
    assert_requests_valid([{"body": b} for b in bodies])
    agent = [b for b in bodies if b.get("tools")]
    assert agent and all({t["name"] for t in b["tools"]} == COACH_TOOLS for b in agent)
    assert all(b["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True} for b in agent)
    assert sum(1 for b in agent for block in b["system"] if "cache_control" in block) == 2 * len(agent)
    assert all("<user_data>" in b["system"][1]["text"] and "Home" in b["system"][1]["text"] for b in agent)
    r = await sim.client.get("/_sim/requests", params={"kind": "initializer"})
    init = [e["body"] for e in r.json()["requests"] if tag in json.dumps(e.get("body"))]
    assert len(init) == 2 and all(b["output_config"]["format"]["type"] == "json_schema" for b in init)
    assert_requests_valid([{"body": b} for b in init])


async def test_forced_tool_use_where_the_model_accepts_it(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim) -> None:
    studio = await make_studio(pool)
    tag = marker()
    r = await http.post(f"{base(studio.org.id)}/chat", headers=auth(studio.member.user_id),
                        json={"message": f"hello coach ({tag})", "model": "claude-haiku-4-5"})
    assert r.status_code == 200, r.text
    agent = [b for b in await coach_requests(sim, tag) if b.get("tools")]
    assert agent and all(b["tool_choice"]["type"] == "any" and b["model"] == "claude-haiku-4-5" for b in agent)


async def test_a_reply_without_a_tool_call_gets_one_correction_and_the_member_never_sees_its_text(
        http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim) -> None:
    studio = await make_studio(pool)
    tag = marker()
    await sim.script(f"chatty {tag}", {"text": "SECRET untracked text", "tool_uses": []},
                     {"text": None, "tool_uses": [{"name": "message_notify_user", "input": {"message": "Hi there!"}}]},
                     {"text": None, "tool_uses": [{"name": "idle", "input": {"reason": "done"}}]})
    got = await frames(http, f"{base(studio.org.id)}/stream", auth(studio.member.user_id), {"message": f"chatty {tag}"})
    assert "SECRET" not in json.dumps(got)
    # (The script's turns go by the assistant messages after the member's words, and the retried
    # reply counts as one there, so this script's notify comes twice; a model's would not.)
    notified = [f for _, f in got if f["type"] == "message_notify_user" and f.get("status") == "done"]
    assert notified and {f["data"]["message"] for f in notified} == {"Hi there!"} and got[-1][1]["type"] == "done"
    retry = [b for b in await coach_requests(sim, tag) if "<coach_correction>" in json.dumps(b["messages"])]
    assert len(retry) == 1


async def test_bad_input_is_refused_and_sessions_are_private(http: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool)
    member = auth(studio.member.user_id)
    for body in ({}, {"message": ""}, {"message": "hi", "model": "Robert'); DROP"}, {"message": "hi", "sessionId": "nope"},
                 {"message": "hi", "extra": 1}):
        r = await http.post(f"{base(studio.org.id)}/chat", json=body, headers=member)
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request", (body, r.text)
        r = await http.post(f"{base(studio.org.id)}/stream", json=body, headers=member)
        assert r.status_code == 400, (body, r.text)
    assert (await http.post(f"{base(studio.org.id)}/chat", json={"message": "hi"})).status_code == 401
    mine = (await http.post(f"{base(studio.org.id)}/sessions", headers=member)).json()["session"]["id"]
    for stranger in (studio.coach, studio.owner):
        assert (await http.get(f"{base(studio.org.id)}/sessions/{mine}", headers=auth(stranger.user_id))).status_code == 404
        r = await http.post(f"{base(studio.org.id)}/chat", json={"message": "hi", "sessionId": mine}, headers=auth(stranger.user_id))
        assert r.status_code == 404
    listed = (await http.get(f"{base(studio.org.id)}/sessions", params={"limit": 5}, headers=member)).json()["sessions"]
    assert [s["id"] for s in listed] == [mine]


async def test_the_operator_never_sees_coach_tools(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim) -> None:
    from .client import send

    studio = await make_studio(pool)
    tag = marker()
    stream = await send(http, studio.org.id, studio.owner.user_id, f"who am I? ({tag})")
    assert stream.types()[-1] == "done"
    operator = [r["body"] for r in await sim.requests() if r.get("body") and tag in json.dumps(r["body"]["messages"])]
    assert operator and all(not ({t["name"] for t in b.get("tools", [])} & COACH_TOOLS) for b in operator)


async def test_a_failing_initializer_or_tool_never_ends_the_run(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim) -> None:
    studio = await make_studio(pool)
    tag = marker()
    await sim.fault(status=529, kind="initializer", match=tag, count=5)
    await sim.script(f"broken {tag}",
                     {"text": None, "tool_uses": [{"name": "generate_workout", "input": {"workout": {"title": "x", "exercises": []}}}]},
                     {"text": None, "tool_uses": [{"name": "message_notify_user", "input": {"message": "Sorry, let me retry later."}}]},
                     {"text": None, "tool_uses": [{"name": "idle", "input": {"reason": "done"}}]})
    got = await frames(http, f"{base(studio.org.id)}/stream", auth(studio.member.user_id), {"message": f"broken {tag}"})
    failed = [f for _, f in got if f["type"] == "generate_workout" and f.get("status") == "failed"]
    assert failed and "exercises" in failed[0]["formatted"] and 'status="error"' in failed[0]["formatted"]
    assert {"message": "Something went wrong", "tool": "generate_workout", "phase": "error"} in [f["data"] for _, f in got if f["type"] == "status"]
    assert not [f for _, f in got if f["type"] in ("knowledge", "error")]
    assert [f["type"] for _, f in got][-1] == "done"
    events = await session_events(pool, got[-1][1]["sessionId"])
    assert any(e["type"] == "session.error" and e["meta"]["context"] == "context_init" for e in events)
    assert [e["meta"]["status"] for e in events if e["type"] == "coach.run_completed"] == ["completed"]
    assert [e["meta"]["toolName"] for e in events if e["type"] == "agent.tool_call"] == ["generate_workout", "message_notify_user", "idle"]


async def test_an_organization_over_its_budget_gets_a_typed_error(http: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool, tier="lite")
    await pool.execute("""INSERT INTO ai_usage_daily (organization_id, user_id, day, cost_usd_micros)
                          VALUES ($1, $2, (now() AT TIME ZONE 'utc')::date, 1000000)""",
                       uuid.UUID(studio.org.id), uuid.UUID(studio.admin.user_id))
    got = await frames(http, f"{base(studio.org.id)}/stream", auth(studio.member.user_id), {"message": "a workout please"})
    errors = [f for _, f in got if f["type"] == "error"]
    assert errors and errors[0]["code"] == "agent_budget_exceeded" and [f["type"] for _, f in got][-1] == "done"
    detail = (await http.get(f"{base(studio.org.id)}/sessions/{got[-1][1]['sessionId']}", headers=auth(studio.member.user_id))).json()
    assert detail["session"]["status"] == "idle" and detail["lastRun"]["status"] == "error"
    assert detail["session"]["costUsdMicros"] == 0


async def test_a_replica_killed_mid_run_finishes_the_run_once(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim,
                                                             platform) -> None:
    import asyncio

    studio = await make_studio(pool)
    tag = marker()
    orchestrator = platform.procs["spotter-orchestrator"]
    await sim.latency(ttft_ms=300, tokens_per_second=40)
    try:
        run = asyncio.create_task(frames(http, f"{base(studio.org.id)}/stream", auth(studio.member.user_id),
                                         {"message": f"Give me a quick chest workout ({tag})"}))
        for _ in range(600):  # until the workout exists and the next model call is under way
            if await pool.fetchval("""SELECT 1 FROM session_events e JOIN sessions s ON s.id = e.session_id
                                       WHERE s.organization_id = $1 AND e.event_type = 'coach.artifact'""", uuid.UUID(studio.org.id)):
                break
            await asyncio.sleep(0.02)
        orchestrator.kill()
        await sim.latency(ttft_ms=0, tokens_per_second=0)
        orchestrator.start()
        got = await asyncio.wait_for(run, timeout=90)
    finally:
        await sim.latency(ttft_ms=0, tokens_per_second=0)
        if not orchestrator.is_running():
            orchestrator.start()
    types = [f["type"] for _, f in got]
    assert types.count("done") == 1 and types[-1] == "done" and "error" not in types
    events = await session_events(pool, got[-1][1]["sessionId"])
    calls = [e["meta"]["toolName"] for e in events if e["type"] == "agent.tool_call"]
    assert calls.count("generate_workout") == 1 and calls[-1] == "idle"
    assert len([e for e in events if e["type"] == "coach.run_completed"]) == 1
    results = [e["meta"]["callId"] for e in events if e["type"] == "agent.tool_result"]
    assert len(results) == len(set(results)) == len(calls)


async def test_spotter_coach_in_a_terminal(pool: asyncpg.Pool, platform, capsys) -> None:
    from spotter_cli.coach_chat import _coach

    from .client import token_for

    studio = await make_studio(pool)
    assert await _coach(platform.base_url, "", token_for(studio.member.user_id),
                        ["Give me a quick leg workout", "swap 1", "I finished it, log it"]) == 0
    out = capsys.readouterr().out
    assert "looked at your" in out and "Creating your workout..." in out
    assert out.count("coach\x1b[0m") >= 3 and "    1. " in out and "logged " in out
    logs = await pool.fetchval("SELECT count(*) FROM member_workout_logs WHERE membership_id = $1", uuid.UUID(studio.member.membership_id))
    assert logs == 1


@pytest.mark.parametrize("model", ["claude-haiku-5-5", "claude-sonnet-5-5", "claude-opus-5-5", "claude-haiku-4-5"])
async def test_the_parity_matrix(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim, model: str) -> None:
    """Seed 003 §12.8 per model: a simple message (notify → idle), a workout delivered as an artifact,
    a swap, the cache read from the second iteration on, frames in order, every request valid."""
    studio = await make_studio(pool)
    member = auth(studio.member.user_id)
    tag = marker()
    hello = await frames(http, f"{base(studio.org.id)}/stream", member, {"message": f"hello coach ({tag})", "model": model})
    assert [f["type"] for _, f in hello if f["type"] in ("message_notify_user", "idle", "done") and f.get("status") != "done"] \
        == ["message_notify_user", "idle", "done"]
    sid = hello[-1][1]["sessionId"]
    made = await frames(http, f"{base(studio.org.id)}/stream", member,
                        {"message": f"build me a leg workout ({tag})", "sessionId": sid, "model": model})
    delivered = [f for _, f in made if f["type"] == "message_notify_user" and f.get("artifact")]
    assert delivered and made[-1][1] == {"type": "done", "sessionId": sid}
    swapped = await frames(http, f"{base(studio.org.id)}/stream", member,
                           {"message": f"swap 1 ({tag})", "sessionId": sid, "model": model,
                            "currentWorkout": delivered[0]["artifact"]["payload"]})
    assert [f for _, f in swapped if f["type"] == "swap_exercise" and f.get("status") == "done"]
    events = await session_events(pool, sid)
    responses = [e["meta"] for e in events if e["type"] == "coach.llm_response" and e["meta"]["call"] != "init"]
    assert all(r["model"] == model for r in responses)
    second = responses[1]["tokens"]
    assert second["cached"] / (second["cached"] + second["prompt"] + second["cacheWrite"]) > 0.5, second
    ids = [int(i) for got in (hello, made, swapped) for i, _ in got if i is not None]
    assert ids == sorted(ids) and len(ids) == len(set(ids))
    bodies = [b for b in await coach_requests(sim, tag) if b.get("tools")]
    assert_requests_valid([{"body": b} for b in bodies])
    forced = model == "claude-haiku-4-5"
    assert all((b["tool_choice"]["type"] == "any") == forced for b in bodies)


async def test_a_run_that_waits_longer_than_the_lease_in_jetstream_still_streams_to_its_end(
        http: httpx.AsyncClient, pool: asyncpg.Pool, platform) -> None:
    """The gateway's claim on the session lapses (6 s here) while no orchestrator is there to take the
    command; the stream waits for the run's last event, not for the lease."""
    import asyncio

    studio = await make_studio(pool)
    member = auth(studio.member.user_id)
    first = await frames(http, f"{base(studio.org.id)}/stream", member, {"message": "hello coach"})
    sid = first[-1][1]["sessionId"]
    orchestrator = platform.procs["spotter-orchestrator"]
    orchestrator.kill()
    try:
        run = asyncio.create_task(frames(http, f"{base(studio.org.id)}/stream", member, {"message": "hello again", "sessionId": sid}))
        await asyncio.sleep(8)
        assert not run.done()
    finally:
        orchestrator.start()
    got = await asyncio.wait_for(run, timeout=60)
    assert [f["type"] for _, f in got][-1] == "done" and "message_notify_user" in [f["type"] for _, f in got]
