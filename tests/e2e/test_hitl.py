"""Human in the loop over HTTP+SSE: confirmation, disambiguation, undo, replay guard, cancel."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
import httpx
from redis.asyncio import Redis

from spotter_gateway.agent import IDEMPOTENCY_NS
from spotter_shared.turnlock import TurnLock

from tests.factories import make_studio

from .client import Sim, Stream, auth, send, sse
from .helpers import assert_requests_valid, message_roles, rows

ZERO = {"inputTokens": 0, "outputTokens": 0, "cacheReadTokens": 0, "cacheCreationTokens": 0, "costUsdMicros": 0,
        "cacheReadRatio": 0.0}


def base(studio, cid: str) -> str:
    return f"/organizations/{studio.org.id}/agent/conversations/{cid}"


async def confirm(http: httpx.AsyncClient, studio, cid: str, tool_use_id: str, approved: bool, user=None) -> Stream:
    user = user or studio.owner
    return await sse(http, "POST", f"{base(studio, cid)}/confirm/{tool_use_id}", json={"approved": approved}, headers=auth(user.user_id))


async def pick(http: httpx.AsyncClient, studio, cid: str, tool_use_id: str, picked: str) -> Stream:
    return await sse(http, "POST", f"{base(studio, cid)}/pick/{tool_use_id}", json={"id": picked}, headers=auth(studio.owner.user_id))


async def make_workout(pool: asyncpg.Pool, org_id: str, title: str) -> str:
    return str(await pool.fetchval(
        "INSERT INTO workouts (organization_id, title, kind) VALUES ($1, $2, 'freeform') RETURNING id", uuid.UUID(org_id), title))


async def workout_deleted(pool: asyncpg.Pool, workout_id: str) -> bool:
    return await pool.fetchval("SELECT deleted_at IS NOT NULL FROM workouts WHERE id = $1", uuid.UUID(workout_id))


async def status_of(pool: asyncpg.Pool, cid: str, tool_use_id: str) -> str:
    return await pool.fetchval("SELECT status::text FROM ai_tool_executions WHERE conversation_id = $1 AND tool_use_id = $2",
                               uuid.UUID(cid), tool_use_id)


async def detail_call(http: httpx.AsyncClient, studio, cid: str, tool_use_id: str) -> dict[str, Any]:
    """The call as the conversation's detail shows it to a client that reopens the conversation."""
    detail = (await http.get(base(studio, cid), headers=auth(studio.owner.user_id))).json()
    return next(c for m in detail["messages"] for c in m.get("toolCalls", []) if c["toolUseId"] == tool_use_id)


def tool(name: str, **tool_input: Any) -> dict[str, Any]:
    return {"name": name, "input": tool_input}


async def test_approve_runs_the_destructive_tool_and_resumes(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim) -> None:
    studio = await make_studio(pool)
    wid = await make_workout(pool, studio.org.id, "Monday WOD")
    await sim.script("delete monday wod approve", {"text": "Deleting it.", "tool_uses": [tool("workouts__delete", id=wid)]},
                     {"text": "Deleted Monday WOD.", "tool_uses": []})
    first = await send(http, studio.org.id, studio.owner.user_id, "delete monday wod approve")
    assert [t for t in first.types() if t != "text_delta"] == ["conversation_started", "message_done", "confirmation_pending", "done"]
    pending = first.of("confirmation_pending")[0]
    assert (pending["router"], pending["action"], pending["confirm"], pending["input"]) == ("workouts", "delete", "destructive", {"id": wid})
    assert first.of("done")[0]["usage"] == ZERO
    cid = first.conversation_id
    assert await status_of(pool, cid, pending["toolUseId"]) == "pending"
    assert not await workout_deleted(pool, wid)
    # A reopened conversation shows the same question: pending, and why it waits.
    assert (await detail_call(http, studio, cid, pending["toolUseId"])).items() >= {"status": "pending", "confirm": "destructive"}.items()

    resumed = await confirm(http, studio, cid, pending["toolUseId"], True)
    assert [t for t in resumed.types() if t != "text_delta"] == ["tool_started", "tool_completed", "message_done", "done"]
    assert resumed.of("tool_completed")[0]["ok"] is True
    assert int(resumed.ids[0]) == int(first.ids[-1]) + 1
    assert "Deleted" in resumed.text()
    assert await workout_deleted(pool, wid)
    assert await status_of(pool, cid, pending["toolUseId"]) == "succeeded"
    audit = await rows(pool, "SELECT action, resource, resource_id, metadata FROM audit_logs WHERE organization_id = $1", uuid.UUID(studio.org.id))
    assert len(audit) == 1 and audit[0]["resource_id"] == wid and audit[0]["metadata"]["agent"] is True
    assert await message_roles(pool, cid) == ["user", "assistant", "tool_result", "assistant"]
    assert_requests_valid(await sim.requests())


async def test_reject_gives_the_model_a_rejection_and_changes_nothing(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim) -> None:
    studio = await make_studio(pool)
    wid = await make_workout(pool, studio.org.id, "Tuesday WOD")
    await sim.script("delete tuesday wod reject", {"text": None, "tool_uses": [tool("workouts__delete", id=wid)]},
                     {"text": "Okay, I kept it.", "tool_uses": []})
    first = await send(http, studio.org.id, studio.owner.user_id, "delete tuesday wod reject")
    tool_use_id = first.of("confirmation_pending")[0]["toolUseId"]
    resumed = await confirm(http, studio, first.conversation_id, tool_use_id, False)
    completed = resumed.of("tool_completed")[0]
    assert completed["ok"] is False and completed["output"]["code"] == "rejected_by_user"
    assert resumed.types()[-1] == "done" and "kept" in resumed.text()
    assert not await workout_deleted(pool, wid)
    assert await status_of(pool, first.conversation_id, tool_use_id) == "rejected_by_user"
    last_request = (await sim.requests())[-1]["body"]
    result = last_request["messages"][-1]["content"][0]
    assert result["tool_use_id"] == tool_use_id and result["is_error"] is True
    assert_requests_valid(await sim.requests())


async def test_batch_of_three_with_the_second_destructive(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim) -> None:
    studio = await make_studio(pool)
    wid = await make_workout(pool, studio.org.id, "Old WOD")
    await sim.script(
        "batch of three please",
        {"text": "On it.", "tool_uses": [tool("tasks__create", title="Before"), tool("workouts__delete", id=wid), tool("tasks__create", title="After")]},
        {"text": "All three done.", "tool_uses": []},
    )
    first = await send(http, studio.org.id, studio.owner.user_id, "batch of three please")
    started = first.of("tool_started")
    assert [s["action"] for s in started] == ["create"] and started[0]["input"] == {"title": "Before"}
    assert first.of("tool_completed")[0]["ok"] is True
    pending = first.of("confirmation_pending")
    assert len(pending) == 1 and pending[0]["action"] == "delete"
    cid = first.conversation_id
    titles = lambda: pool.fetch("SELECT title FROM tasks WHERE organization_id = $1 AND deleted_at IS NULL ORDER BY title", uuid.UUID(studio.org.id))  # noqa: E731
    assert [r["title"] for r in await titles()] == ["Before"]  # the third waits for the second

    resumed = await confirm(http, studio, cid, pending[0]["toolUseId"], True)
    assert [(e["action"], e["ok"]) for e in resumed.of("tool_completed")] == [("delete", True), ("create", True)]
    assert resumed.types()[-1] == "done" and "All three" in resumed.text()
    assert [r["title"] for r in await titles()] == ["After", "Before"]
    # One merged tool_result message, in the order of the tool_use blocks.
    request = (await sim.requests())[-1]["body"]
    asked = [b["id"] for b in request["messages"][-2]["content"] if b["type"] == "tool_use"]
    answered = [b["tool_use_id"] for b in request["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert answered == asked and len(asked) == 3
    assert await message_roles(pool, cid) == ["user", "assistant", "tool_result", "assistant"]
    assert_requests_valid(await sim.requests())


async def test_two_destructive_tools_are_confirmed_one_after_the_other(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim) -> None:
    studio = await make_studio(pool)
    w1, w2 = await make_workout(pool, studio.org.id, "A"), await make_workout(pool, studio.org.id, "B")
    await sim.script("delete both workouts", {"text": None, "tool_uses": [tool("workouts__delete", id=w1), tool("workouts__delete", id=w2)]},
                     {"text": "Both handled.", "tool_uses": []})
    first = await send(http, studio.org.id, studio.owner.user_id, "delete both workouts")
    cid = first.conversation_id
    one = first.of("confirmation_pending")[0]
    early = await confirm(http, studio, cid, one["toolUseId"], True)
    # Another confirmation is still needed: the stream ends early, no model call.
    assert [t for t in early.types()] == ["tool_started", "tool_completed", "confirmation_pending", "done"]
    two = early.of("confirmation_pending")[0]
    assert two["input"] == {"id": w2}
    final = await confirm(http, studio, cid, two["toolUseId"], False)
    assert final.of("tool_completed")[0]["output"]["code"] == "rejected_by_user"
    assert final.types()[-1] == "done" and "Both handled" in final.text()
    assert await workout_deleted(pool, w1) and not await workout_deleted(pool, w2)
    assert_requests_valid(await sim.requests())


async def test_pick_and_invalid_pick(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim) -> None:
    studio = await make_studio(pool)
    candidates = [{"id": "m-1", "label": "Saar Cohen", "sublabel": "Unlimited"}, {"id": "m-2", "label": "Saar Levi"}]
    await sim.script("which saar pick", {"text": None, "tool_uses": [tool("read__ask_user_to_pick", kind="member", prompt="Which Saar?", candidates=candidates)]},
                     {"text": "Got it, Saar Levi.", "tool_uses": []})
    first = await send(http, studio.org.id, studio.owner.user_id, "which saar pick")
    waiting = first.of("disambiguation_pending")[0]
    assert (waiting["kind"], waiting["prompt"]) == ("member", "Which Saar?")
    assert [c["id"] for c in waiting["candidates"]] == ["m-1", "m-2"]
    assert first.of("done")[0]["usage"] == ZERO and not first.of("tool_started")
    cid = first.conversation_id

    bad = await http.post(f"{base(studio, cid)}/pick/{waiting['toolUseId']}", json={"id": "m-9"}, headers=auth(studio.owner.user_id))
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_pick"
    assert await status_of(pool, cid, waiting["toolUseId"]) == "pending"

    picked = await pick(http, studio, cid, waiting["toolUseId"], "m-2")
    done = picked.of("tool_completed")[0]
    assert done["ok"] is True and done["output"] == {"pickedId": "m-2", "pickedLabel": "Saar Levi", "kind": "member"}
    assert picked.types()[-1] == "done" and "Saar Levi" in picked.text()
    again = await http.post(f"{base(studio, cid)}/pick/{waiting['toolUseId']}", json={"id": "m-1"}, headers=auth(studio.owner.user_id))
    assert again.status_code == 409 and again.json()["error"]["code"] == "tool_already_resolved"
    assert_requests_valid(await sim.requests())


async def test_double_and_concurrent_confirms_execute_once(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim) -> None:
    studio = await make_studio(pool)
    wid = await make_workout(pool, studio.org.id, "Twice")
    await sim.script("delete twice clicked", {"text": None, "tool_uses": [tool("workouts__delete", id=wid)]}, {"text": "Done.", "tool_uses": []})
    first = await send(http, studio.org.id, studio.owner.user_id, "delete twice clicked")
    cid, tool_use_id = first.conversation_id, first.of("confirmation_pending")[0]["toolUseId"]
    a, b = await asyncio.gather(confirm(http, studio, cid, tool_use_id, True), confirm(http, studio, cid, tool_use_id, True))
    for s in (a, b):
        # Either the same turn's stream, or a clean refusal: never a second execution.
        assert (s.status == 200 and s.types()[-1] == "done") or (s.status == 409 and s.body["error"]["code"] == "tool_already_resolved")
    later = await http.post(f"{base(studio, cid)}/confirm/{tool_use_id}", json={"approved": True}, headers=auth(studio.owner.user_id))
    assert later.status_code == 409 and later.json()["error"]["code"] == "tool_already_resolved"
    audits = await pool.fetchval("SELECT count(*) FROM audit_logs WHERE organization_id = $1", uuid.UUID(studio.org.id))
    assert audits == 1
    missing = await http.post(f"{base(studio, cid)}/confirm/toolu_nope", json={"approved": True}, headers=auth(studio.owner.user_id))
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "tool_execution_not_found"
    member = await http.post(f"{base(studio, cid)}/confirm/{tool_use_id}", json={"approved": True}, headers=auth(studio.member.user_id))
    assert member.status_code == 403


async def test_undo_runs_the_inverse_and_links_audit_rows(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim) -> None:
    studio = await make_studio(pool)
    await sim.script("build a workout to undo", {"text": None, "tool_uses": [tool("workouts__create", title="Undo me", description="3 rounds")]},
                     {"text": "Created.", "tool_uses": []})
    first = await send(http, studio.org.id, studio.owner.user_id, "build a workout to undo")
    created = first.of("tool_completed")[0]
    assert created["ok"] and created["inverseAvailable"] is True
    wid, cid = created["output"]["id"], first.conversation_id
    # A reopened conversation offers the same undo the stream did.
    assert (await detail_call(http, studio, cid, created["toolUseId"])).items() >= {"inverseAvailable": True, "undone": False}.items()
    undone = await sse(http, "POST", f"{base(studio, cid)}/undo/{created['toolUseId']}", headers=auth(studio.owner.user_id))
    assert [t for t in undone.types()] == ["tool_started", "tool_completed", "done"]
    assert (undone.of("tool_started")[0]["router"], undone.of("tool_started")[0]["action"]) == ("workouts", "delete")
    assert undone.of("tool_completed")[0]["ok"] is True
    assert await workout_deleted(pool, wid)
    assert (await detail_call(http, studio, cid, created["toolUseId"])).items() >= {"inverseAvailable": False, "undone": True}.items()
    audit = await rows(pool, "SELECT id, action, resource_id, metadata FROM audit_logs WHERE organization_id = $1 ORDER BY created_at", uuid.UUID(studio.org.id))
    assert len(audit) == 2 and {a["resource_id"] for a in audit} == {wid}
    assert audit[1]["metadata"].get("undoOf") == str(audit[0]["id"])
    # The model learns of the undo on the next turn.
    await send(http, studio.org.id, studio.owner.user_id, "who am I?", cid)
    history = (await sim.requests())[-2]["body"]["messages"]
    notes = [b["text"] for m in history if m["role"] == "user" for b in m["content"] if b.get("type") == "text" and "app_event" in b.get("text", "")]
    assert len(notes) == 1 and "workouts__delete" in notes[0] and created["toolUseId"] in notes[0]
    listing = (await http.get(f"/organizations/{studio.org.id}/audit-logs?agent=true", headers=auth(studio.owner.user_id))).json()
    assert len(listing["auditLogs"]) == 2
    assert (await http.get(f"/organizations/{studio.org.id}/audit-logs", headers=auth(studio.coach.user_id))).status_code == 403
    assert (await http.get(f"/organizations/{studio.org.id}/audit-logs?agent=false", headers=auth(studio.admin.user_id))).json()["auditLogs"] == []


async def test_undo_refused(http: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool)
    first = await send(http, studio.org.id, studio.owner.user_id, "who am I?")
    read_call = first.of("tool_completed")[0]
    assert read_call["inverseAvailable"] is False
    r = await http.post(f"{base(studio, first.conversation_id)}/undo/{read_call['toolUseId']}", headers=auth(studio.owner.user_id))
    assert r.status_code == 422 and r.json()["error"]["code"] == "undo_unavailable"
    r = await http.post(f"{base(studio, first.conversation_id)}/undo/toolu_missing", headers=auth(studio.owner.user_id))
    assert r.status_code == 404 and r.json()["error"]["code"] == "tool_execution_not_found"


async def test_free_text_while_a_picker_is_pending_is_repaired(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim) -> None:
    studio = await make_studio(pool)
    candidates = [{"id": "a", "label": "Alpha"}, {"id": "b", "label": "Beta"}]
    await sim.script("ambiguous thing", {"text": None, "tool_uses": [tool("read__ask_user_to_pick", kind="program", prompt="Which one?", candidates=candidates)]})
    first = await send(http, studio.org.id, studio.owner.user_id, "ambiguous thing")
    picker = first.of("disambiguation_pending")[0]["toolUseId"]
    typed = await send(http, studio.org.id, studio.owner.user_id, "never mind, who am I?", first.conversation_id)
    assert typed.types()[-1] == "done" and not typed.of("error")
    assert await status_of(pool, first.conversation_id, picker) == "rejected_by_user"
    roles = await message_roles(pool, first.conversation_id)
    assert roles[:4] == ["user", "assistant", "tool_result", "user"]
    requests = await sim.requests()
    assert_requests_valid(requests)
    repaired = next(r["body"] for r in requests if any(
        b.get("tool_use_id") == picker for m in r["body"]["messages"] if isinstance(m["content"], list) for b in m["content"]))
    result = next(b for m in repaired["messages"] if isinstance(m["content"], list) for b in m["content"] if b.get("tool_use_id") == picker)
    assert result["is_error"] is True
    late = await http.post(f"{base(studio, first.conversation_id)}/pick/{picker}", json={"id": "a"}, headers=auth(studio.owner.user_id))
    assert late.status_code == 409


async def test_cancel_a_running_turn_keeps_the_partial_message(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim) -> None:
    studio = await make_studio(pool)
    await sim.script("long story to stop", {"text": " ".join(f"w{i}" for i in range(200)), "tool_uses": []})
    await sim.latency(ttft_ms=50, tokens_per_second=30)
    try:
        running = asyncio.create_task(send(http, studio.org.id, studio.owner.user_id, "long story to stop"))
        cid = None
        for _ in range(500):
            cid = await pool.fetchval(
                """SELECT e.conversation_id FROM ai_conversation_events e JOIN ai_conversations c ON c.id = e.conversation_id
                   WHERE c.organization_id = $1 AND e.type = 'text_delta' LIMIT 1""", uuid.UUID(studio.org.id))
            if cid:
                break
            await asyncio.sleep(0.02)
        r = await http.post(f"{base(studio, str(cid))}/cancel", headers=auth(studio.owner.user_id))
        assert r.status_code == 202 and r.json()["status"] == "cancelling"
        stream = await asyncio.wait_for(running, 30)
    finally:
        await sim.latency(ttft_ms=0, tokens_per_second=0)
    assert stream.types()[-2:] == ["error", "done"] and stream.of("error")[0]["code"] == "aborted"
    stored = await rows(pool, "SELECT role::text AS role, content, stop_reason FROM ai_messages WHERE conversation_id = $1 ORDER BY position", cid)
    assert [m["role"] for m in stored] == ["user", "assistant"] and stored[1]["stop_reason"] == "aborted"
    assert stored[1]["content"][0]["text"] == stream.text() and 0 < len(stream.text())
    assert await pool.fetchval("SELECT status::text FROM ai_turns WHERE conversation_id = $1", cid) == "aborted"
    after = await send(http, studio.org.id, studio.owner.user_id, "who am I?", str(cid))
    assert after.types()[-1] == "done" and not after.of("error")
    idle = await http.post(f"{base(studio, str(cid))}/cancel", headers=auth(studio.owner.user_id))
    assert idle.json()["status"] == "idle"
    assert_requests_valid(await sim.requests())


async def test_a_stop_asked_for_before_the_turn_runs_stops_it_before_its_model_call(
        http: httpx.AsyncClient, pool: asyncpg.Pool, redis: Redis, sim: Sim) -> None:
    """The stop is stored before the command is taken (a cancel that raced the send): the runner's claim
    reads it, and the turn ends aborted with nothing asked of the model."""
    studio = await make_studio(pool)
    key = str(uuid.uuid4())
    turn_id = str(uuid.uuid5(IDEMPOTENCY_NS, f"{studio.owner.user_id}:{key}"))
    await TurnLock(redis, ttl_s=30).request_cancel(turn_id)
    asked = len(await sim.requests())
    stream = await sse(http, "POST", f"/organizations/{studio.org.id}/agent/messages", json={"message": "stop me first"},
                       headers={**auth(studio.owner.user_id), "Idempotency-Key": key})
    assert stream.types()[-2:] == ["error", "done"] and stream.of("error")[0]["code"] == "aborted"
    assert await pool.fetchval("SELECT status::text FROM ai_turns WHERE id = $1", uuid.UUID(turn_id)) == "aborted"
    assert not [r for r in (await sim.requests())[asked:] if "stop me first" in str(r.get("body"))]


async def test_cancel_a_suspended_conversation(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim) -> None:
    studio = await make_studio(pool)
    wid = await make_workout(pool, studio.org.id, "Keep")
    await sim.script("delete then cancel", {"text": None, "tool_uses": [tool("workouts__delete", id=wid)]})
    first = await send(http, studio.org.id, studio.owner.user_id, "delete then cancel")
    cid, tool_use_id = first.conversation_id, first.of("confirmation_pending")[0]["toolUseId"]
    r = await http.post(f"{base(studio, cid)}/cancel", headers=auth(studio.owner.user_id))
    assert r.status_code == 202
    tail = await sse(http, "GET", f"{base(studio, cid)}/events", headers={**auth(studio.owner.user_id), "Last-Event-ID": first.ids[-1]})
    assert tail.types() == ["error", "done"] and tail.events[0]["code"] == "aborted"
    assert await status_of(pool, cid, tool_use_id) == "rejected_by_user"
    assert not await workout_deleted(pool, wid)
    after = await send(http, studio.org.id, studio.owner.user_id, "who am I?", cid)
    assert after.types()[-1] == "done" and not after.of("error")
    assert_requests_valid(await sim.requests())
