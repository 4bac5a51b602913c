"""Complete agent turns over HTTP+SSE against the running services."""

from __future__ import annotations

import asyncio
import re
import uuid

import asyncpg
import httpx
import pytest

from tests.factories import make_studio

from .client import Sim, auth, send, sse
from .helpers import assert_requests_valid, message_roles, rows

SAARS = [
    {"full_name": "Saar Cohen", "plan": "Unlimited", "payment_status": "paid"},
    {"full_name": "Saar Levi", "plan": "3x/week", "payment_status": "overdue"},
]


async def test_read_tool_turn_streams_in_order_and_persists(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim) -> None:
    studio = await make_studio(pool, extra_members=SAARS)
    stream = await send(http, studio.org.id, studio.owner.user_id, "find Saar Levi")

    assert stream.status == 200
    types = stream.types()
    assert types[0] == "conversation_started"
    assert types[-1] == "done" and types.count("done") == 1
    core = [t for t in types if t != "text_delta"]
    assert core == ["conversation_started", "message_done", "tool_started", "tool_completed", "message_done", "done"]
    # Every event carries its sequence number in the conversation's log, in order.
    assert stream.ids == [str(i) for i in range(1, len(types) + 1)]

    started = stream.of("tool_started")[0]
    assert (started["router"], started["action"]) == ("read", "members_search")
    completed = stream.of("tool_completed")[0]
    assert completed["ok"] is True and completed["toolUseId"] == started["toolUseId"]
    assert [m["name"] for m in completed["output"]["members"]] == ["Saar Levi"]
    assert "Saar Levi" in stream.text() and "overdue" in stream.text()
    usage = stream.of("done")[0]["usage"]
    assert set(usage) == {"inputTokens", "outputTokens", "cacheReadTokens", "cacheCreationTokens", "costUsdMicros",
                          "cacheReadRatio"}
    assert usage["outputTokens"] > 0 and usage["costUsdMicros"] > 0

    cid = stream.conversation_id
    assert await message_roles(pool, cid) == ["user", "assistant", "tool_result", "assistant"]
    executions = await rows(pool, "SELECT status::text AS status, router, action, duration_ms FROM ai_tool_executions WHERE conversation_id = $1", uuid.UUID(cid))
    assert [(e["status"], e["router"], e["action"]) for e in executions] == [("succeeded", "read", "members_search")]
    assert executions[0]["duration_ms"] is not None
    logged = await rows(pool, "SELECT seq, type FROM ai_conversation_events WHERE conversation_id = $1 ORDER BY seq", uuid.UUID(cid))
    assert [r["type"] for r in logged] == types
    # The last reply, its message_done, `done` and the turn's status were one statement: one transaction id.
    # `done` reports the turn's usage as the turn's row has it.
    last = await rows(pool, """SELECT (SELECT xmin::text FROM ai_messages WHERE conversation_id = $1 ORDER BY position DESC LIMIT 1) AS reply,
                                      (SELECT xmin::text FROM ai_conversation_events WHERE conversation_id = $1 AND type = 'message_done' ORDER BY seq DESC LIMIT 1) AS message_done,
                                      (SELECT xmin::text FROM ai_conversation_events WHERE conversation_id = $1 AND type = 'done') AS done,
                                      t.xmin::text AS turn, t.status::text AS status, t.input_tokens, t.output_tokens, t.cost_usd_micros
                                 FROM ai_turns t WHERE t.conversation_id = $1""", uuid.UUID(cid))
    assert len(last) == 1 and len({last[0][k] for k in ("reply", "message_done", "done", "turn")}) == 1, last
    assert (last[0]["status"], last[0]["input_tokens"], last[0]["output_tokens"], last[0]["cost_usd_micros"]) == (
        "completed", usage["inputTokens"], usage["outputTokens"], usage["costUsdMicros"])
    # The tool's tool_completed and the tool_result message the model reads: one statement as well.
    results = await rows(pool, """SELECT (SELECT xmin::text FROM ai_messages WHERE conversation_id = $1 AND role = 'tool_result') AS message,
                                         (SELECT xmin::text FROM ai_conversation_events WHERE conversation_id = $1 AND type = 'tool_completed') AS event""",
                         uuid.UUID(cid))
    assert results[0]["message"] == results[0]["event"], results
    # The reply that asked for the tool and the tool's tool_started (it runs next, nobody to ask): one statement.
    asked = await rows(pool, """SELECT (SELECT xmin::text FROM ai_messages WHERE conversation_id = $1 AND role = 'assistant' ORDER BY position LIMIT 1) AS reply,
                                       (SELECT xmin::text FROM ai_conversation_events WHERE conversation_id = $1 AND type = 'tool_started') AS started""",
                       uuid.UUID(cid))
    assert asked[0]["reply"] == asked[0]["started"], asked
    # The title (summary model, after `done`) is billed to the same day and conversation: at least the turn.
    daily = await rows(pool, "SELECT messages, cost_usd_micros, output_tokens FROM ai_usage_daily WHERE organization_id = $1", uuid.UUID(studio.org.id))
    assert len(daily) == 1 and daily[0]["messages"] == 1
    assert daily[0]["cost_usd_micros"] >= usage["costUsdMicros"] and daily[0]["output_tokens"] >= usage["outputTokens"]
    conv = (await rows(pool, "SELECT cost_usd_micros, total_output_tokens FROM ai_conversation_usage WHERE conversation_id = $1", uuid.UUID(cid)))[0]
    assert conv["cost_usd_micros"] >= usage["costUsdMicros"] and conv["total_output_tokens"] >= usage["outputTokens"]
    assert_requests_valid(await sim.requests())


async def test_second_turn_reads_prompt_cache_and_keeps_history(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim) -> None:
    studio = await make_studio(pool)
    first = await send(http, studio.org.id, studio.owner.user_id, "who am I?")
    second = await send(http, studio.org.id, studio.owner.user_id, "what programs do we run?", first.conversation_id)
    assert second.types()[0] != "conversation_started"
    assert second.conversation_id == first.conversation_id
    # Sequence numbers continue the same log.
    assert int(second.ids[0]) == int(first.ids[-1]) + 1
    assert second.of("done")[0]["usage"]["cacheReadTokens"] > 0
    assert await message_roles(pool, first.conversation_id) == ["user", "assistant", "tool_result", "assistant"] * 2
    request = (await sim.requests())[-1]["body"]
    system = request["system"]
    # Static prompt and organization, both 1 h; the per-turn context lives in the user turn, after the history.
    assert [b.get("cache_control") for b in system] == [{"type": "ephemeral", "ttl": "1h"}, {"type": "ephemeral", "ttl": "1h"}]
    assert request["tools"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert request["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert all(tool["name"].count("__") == 1 for tool in request["tools"])


async def test_failed_tool_is_data_and_the_loop_goes_on(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim) -> None:
    studio = await make_studio(pool)
    await sim.script(
        "show member zzbadinput",
        {"text": None, "tool_uses": [{"name": "read__members_get", "input": {"membershipId": "not-a-uuid"}}]},
        {"text": "That id was not valid.", "tool_uses": []},
    )
    stream = await send(http, studio.org.id, studio.owner.user_id, "show member zzbadinput")
    completed = stream.of("tool_completed")[0]
    assert completed["ok"] is False and completed["output"]["code"] == "invalid_input"
    assert stream.types()[-1] == "done" and not stream.of("error")
    assert "not valid" in stream.text()
    request = (await sim.requests())[-1]["body"]
    result = request["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["is_error"] is True


async def test_replay_from_last_event_id_and_after(http: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool)
    original = await send(http, studio.org.id, studio.owner.user_id, "who am I?")
    cid = original.conversation_id
    url = f"/organizations/{studio.org.id}/agent/conversations/{cid}/events"
    n = len(original.events)

    replay = await sse(http, "GET", url, headers={**auth(studio.owner.user_id), "Last-Event-ID": "3"}, until_done=False)
    assert replay.events == original.events[3:]
    assert replay.ids == [str(i) for i in range(4, n + 1)]

    by_query = await sse(http, "GET", f"{url}?after=0", headers=auth(studio.owner.user_id), until_done=False)
    assert by_query.events == original.events

    caught_up = await sse(http, "GET", f"{url}?after={n}", headers=auth(studio.owner.user_id), until_done=False)
    assert caught_up.status == 200 and caught_up.events == []


async def test_disconnect_does_not_stop_the_turn_and_resume_continues_live(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim) -> None:
    studio = await make_studio(pool)
    long_text = " ".join(f"word{i}" for i in range(60))
    await sim.script("slow resume please", {"text": long_text, "tool_uses": []})
    await sim.latency(ttft_ms=200, tokens_per_second=40)
    try:
        partial = await send(http, studio.org.id, studio.owner.user_id, "slow resume please", stop_after=2)
        assert partial.types() == ["conversation_started", "text_delta"]
        cid = (await rows(pool, "SELECT id FROM ai_conversations WHERE organization_id = $1", uuid.UUID(studio.org.id)))[0]["id"]
        rest = await sse(
            http, "GET", f"/organizations/{studio.org.id}/agent/conversations/{cid}/events",
            headers={**auth(studio.owner.user_id), "Last-Event-ID": partial.ids[-1]},
        )
    finally:
        await sim.latency(ttft_ms=0, tokens_per_second=0)
    assert rest.types()[-1] == "done"
    assert rest.ids[0] == str(int(partial.ids[-1]) + 1)
    full_text = "".join(e["delta"] for e in partial.events + rest.events if e["type"] == "text_delta")
    assert full_text == long_text


async def test_second_send_while_running_is_conversation_busy(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim) -> None:
    studio = await make_studio(pool)
    first = await send(http, studio.org.id, studio.owner.user_id, "who am I?")
    cid = first.conversation_id
    await sim.script("busy turn please", {"text": " ".join(["slow"] * 40), "tool_uses": []})
    await sim.latency(ttft_ms=300, tokens_per_second=30)
    try:
        running = asyncio.create_task(send(http, studio.org.id, studio.owner.user_id, "busy turn please", cid))
        await _wait_for_running_turn(pool, cid)
        before = await message_roles(pool, cid)
        busy = await send(http, studio.org.id, studio.owner.user_id, "are you there?", cid)
        finished = await running
    finally:
        await sim.latency(ttft_ms=0, tokens_per_second=0)
    assert busy.types() == ["error", "done"]
    assert busy.events[0]["code"] == "conversation_busy" and busy.events[0]["traceId"]
    assert busy.ids == [None, None]  # not part of the conversation's log
    assert finished.types()[-1] == "done" and not finished.of("error")
    after = await message_roles(pool, cid)
    assert after == before + ["assistant"]  # the busy send wrote nothing


async def _wait_for_running_turn(pool: asyncpg.Pool, cid: str) -> None:
    # Running, and already streaming: its user message is stored.
    for _ in range(500):
        if await pool.fetchval(
            """SELECT 1 FROM ai_turns t JOIN ai_conversation_events e ON e.turn_id = t.id
               WHERE t.conversation_id = $1 AND t.status = 'running' AND e.type = 'text_delta' LIMIT 1""",
            uuid.UUID(cid),
        ):
            return
        await asyncio.sleep(0.02)
    raise AssertionError("turn never started")


async def test_over_budget_org_gets_exact_refusal(http: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool, tier="lite")
    await pool.execute(
        """INSERT INTO ai_usage_daily (organization_id, user_id, day, cost_usd_micros)
           VALUES ($1, $2, (now() AT TIME ZONE 'utc')::date, 1000000)""",
        uuid.UUID(studio.org.id), uuid.UUID(studio.admin.user_id),
    )
    stream = await send(http, studio.org.id, studio.owner.user_id, "who am I?")
    assert stream.types() == ["conversation_started", "error", "done"]
    error = stream.of("error")[0]
    assert error["code"] == "agent_budget_exceeded"
    assert error["message"] == (
        "Your org has reached its AI daily spending limit ($1.00). It resets at 00:00 UTC. "
        "Upgrade your plan for a higher limit."
    )
    assert stream.of("done")[0]["usage"]["costUsdMicros"] == 0
    assert await message_roles(pool, stream.conversation_id) == []


async def test_provider_overload_maps_to_stable_code(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim) -> None:
    studio = await make_studio(pool)
    await sim.fault(status=529, count=1, match="overload me now")
    stream = await send(http, studio.org.id, studio.owner.user_id, "overload me now")
    error = stream.of("error")[0]
    assert error["code"] == "provider_overloaded" and error["traceId"]
    assert stream.types()[-1] == "done"
    # The conversation stays usable: the next turn answers.
    ok = await send(http, studio.org.id, studio.owner.user_id, "who am I?", stream.conversation_id)
    assert not ok.of("error") and ok.types()[-1] == "done"
    assert_requests_valid(await sim.requests())


async def test_mid_stream_error_event_is_classified(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim) -> None:
    studio = await make_studio(pool)
    await sim.script("break midway", {"text": " ".join(["token"] * 30), "tool_uses": []})
    await sim.fault(status=529, count=1, match="break midway", after_tokens=5)
    stream = await send(http, studio.org.id, studio.owner.user_id, "break midway")
    assert stream.of("error")[0]["code"] == "provider_overloaded"
    assert stream.types()[-1] == "done"


async def test_list_and_detail(http: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool, extra_members=SAARS)
    a = await send(http, studio.org.id, studio.coach.user_id, "who am I?")
    b = await send(http, studio.org.id, studio.coach.user_id, "find Saar Cohen")
    listing = (await http.get(f"/organizations/{studio.org.id}/agent/conversations", headers=auth(studio.coach.user_id))).json()
    assert [c["id"] for c in listing["conversations"]] == [b.conversation_id, a.conversation_id]
    other = (await http.get(f"/organizations/{studio.org.id}/agent/conversations", headers=auth(studio.admin.user_id))).json()
    assert other["conversations"] == []  # only the caller's own

    detail = (await http.get(f"/organizations/{studio.org.id}/agent/conversations/{b.conversation_id}", headers=auth(studio.coach.user_id))).json()
    assert [m["role"] for m in detail["messages"]] == ["user", "assistant", "tool_result", "assistant"]
    call = detail["messages"][1]["toolCalls"][0]
    assert (call["router"], call["action"], call["status"]) == ("read", "members_search", "succeeded")
    assert detail["messages"][0]["text"] == "find Saar Cohen"
    assert detail["usage"]["costUsdMicros"] > 0


async def test_me_and_usage(http: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool)
    me = (await http.get("/me", headers=auth(studio.owner.user_id))).json()
    assert me["user"]["id"] == studio.owner.user_id
    assert [(m["organizationId"], m["role"]) for m in me["memberships"]] == [(studio.org.id, "owner")]
    await send(http, studio.org.id, studio.owner.user_id, "who am I?")
    usage = (await http.get(f"/organizations/{studio.org.id}/agent/usage", headers=auth(studio.owner.user_id))).json()
    assert usage["tier"] == "pro" and usage["capUsdMicros"] == 5_000_000
    assert usage["spentUsdMicros"] > 0 and usage["resetsAt"].endswith(("Z", "+00:00"))


async def test_demo_policy_asks_which_saar_and_answers_with_the_pick(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim) -> None:
    """The newcomer path of `spotter chat`, unscripted: search → "Which Saar?" → pick → detail."""
    studio = await make_studio(pool, extra_members=SAARS)
    first = await send(http, studio.org.id, studio.owner.user_id, "find Saar")
    card = first.of("disambiguation_pending")[0]
    assert card["prompt"] == "Which Saar?" and sorted(c["label"] for c in card["candidates"]) == ["Saar Cohen", "Saar Levi"]
    levi = next(c for c in card["candidates"] if c["label"] == "Saar Levi")
    picked = await sse(http, "POST", f"/organizations/{studio.org.id}/agent/conversations/{first.conversation_id}/pick/{card['toolUseId']}",
                       json={"id": levi["id"]}, headers=auth(studio.owner.user_id))
    assert [(e["action"], e["ok"]) for e in picked.of("tool_completed")] == [("ask_user_to_pick", True), ("members_get", True)]
    assert "Saar Levi" in picked.text() and picked.types()[-1] == "done"
    assert_requests_valid(await sim.requests())


async def test_thinking_blocks_are_replayed_unchanged_and_never_shown(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim) -> None:
    studio = await make_studio(pool, extra_members=SAARS)
    await sim.script("think then search", {"thinking": "PRIVATE-REASONING about which tool fits.", "text": None,
                                           "tool_uses": [{"name": "read__members_search", "input": {"query": "Saar"}}]},
                     {"text": "Two members found.", "tool_uses": []})
    stream = await send(http, studio.org.id, studio.owner.user_id, "think then search")
    assert "PRIVATE-REASONING" not in stream.text() and stream.types()[-1] == "done"
    stored = await rows(pool, "SELECT content FROM ai_messages WHERE conversation_id = $1 AND role = 'assistant' ORDER BY position",
                        uuid.UUID(stream.conversation_id))
    thinking = stored[0]["content"][0]
    assert thinking["type"] == "thinking" and thinking["signature"]
    follow_up = (await sim.requests())[-1]
    replayed = follow_up["body"]["messages"][1]["content"][0]
    assert replayed == thinking  # byte-for-byte, signature included (the simulator verifies it)
    assert follow_up["verdict"]["ok"]
    # Sonnet 5.x: lowest thinking setting, never `disabled` (the API rejects it).
    assert follow_up["body"]["thinking"] == {"type": "between_tools"}


@pytest.mark.parametrize(("status", "code"), [(429, "provider_rate_limited"), (500, "provider_unavailable"), (503, "provider_unavailable")])
async def test_provider_http_errors_map_to_stable_codes(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim, status: int, code: str) -> None:
    studio = await make_studio(pool)
    message = f"fail with {status} please"
    await sim.fault(status=status, count=1, match=message, retry_after=0.01 if status == 429 else None)
    stream = await send(http, studio.org.id, studio.owner.user_id, message)
    error = stream.of("error")[0]
    assert error["code"] == code and uuid.UUID(error["traceId"])
    assert stream.types()[-1] == "done"
    # The reservation was released: nothing was charged for the failed call.
    assert stream.of("done")[0]["usage"]["costUsdMicros"] == 0


async def test_disabled_agent_answers_agent_disabled(http: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool)
    await pool.execute("UPDATE organizations SET agent_enabled = false WHERE id = $1", uuid.UUID(studio.org.id))
    stream = await send(http, studio.org.id, studio.owner.user_id, "who am I?")
    assert stream.types() == ["conversation_started", "error", "done"]
    assert stream.of("error")[0]["code"] == "agent_disabled"


async def test_web_ui_is_served(http: httpx.AsyncClient) -> None:
    # The app web/ builds (make bootstrap); tests/browser drives it, tests/gateway/test_studio_api.py the serving rules.
    page = await http.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<div id="root">' in page.text
    script = re.search(r'<script type="module"[^>]* src="(/assets/[^"]+\.js)"', page.text)
    assert script is not None, page.text
    bundle = await http.get(script.group(1))
    assert bundle.status_code == 200 and "javascript" in bundle.headers["content-type"]


async def test_retried_post_with_idempotency_key_replays_the_same_turn(http: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool)
    key = f"retry-{uuid.uuid4()}"
    headers = {**auth(studio.owner.user_id), "Idempotency-Key": key}
    url = f"/organizations/{studio.org.id}/agent/messages"
    first = await sse(http, "POST", url, json={"conversationId": None, "message": "who am I?"}, headers=headers)
    again = await sse(http, "POST", url, json={"conversationId": None, "message": "who am I?"}, headers=headers)
    assert again.events == first.events and again.ids == first.ids
    assert await pool.fetchval("SELECT count(*) FROM ai_turns t JOIN ai_conversations c ON c.id = t.conversation_id WHERE c.organization_id = $1",
                               uuid.UUID(studio.org.id)) == 1
