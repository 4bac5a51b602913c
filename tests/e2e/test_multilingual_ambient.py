"""Ambient context in Hebrew and Russian, end to end (issue 8): a coach's question in either
language reaches the model with the right member and the right exercise in the turn's
`<ambient_context>` block — found by rag's hybrid search over the studio (indexed through the
REINDEX subject, as `spotter reindex` does) and the global exercise library, whose entries carry
Hebrew and Russian names. The studio's member is spelled in Latin letters; the questions spell
him in Hebrew and Cyrillic."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from typing import Any

import asyncpg
import httpx
import nats
import pytest

from spotter_orchestrator.prompt import AMBIENT_ROOM_TOKENS
from spotter_shared.contracts.rag import REINDEX, ReindexRequest, ReindexResult
from tests.factories import make_studio

from .client import Sim, auth, send
from .conftest import Platform

MEMBERS = [
    {"full_name": "Saar Cohen", "plan": "Unlimited", "payment_status": "paid"},
    {"full_name": "Dana Levi", "plan": "3x/week", "payment_status": "overdue"},
    {"full_name": "Olga Petrova", "plan": "Unlimited", "payment_status": "paid"},
]


async def reindex(platform: Platform, org_id: str) -> ReindexResult:
    nc = await nats.connect(platform.env["NATS_URL"])
    try:
        for attempt in range(50):  # rag may still be subscribing when the first test of a session runs
            try:
                msg = await nc.request(REINDEX.subject, ReindexRequest(organization_id=org_id).to_bytes(), timeout=120)
                break
            except nats.errors.NoRespondersError:
                await asyncio.sleep(0.2)
        else:
            raise AssertionError("rag never answered REINDEX")
    finally:
        await nc.close()
    return ReindexResult.model_validate_json(msg.data)


def ambient_of(body: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(scope, label, id) of each ambient hit in the newest user turn of a model request."""
    text = "\n".join(b.get("text", "") for b in body["messages"][-1]["content"] if b.get("type") == "text")
    block = re.search(r'<ambient_context untrusted="true">\n(.*?)\n</ambient_context>', text, re.S)
    assert block, f"no ambient block in the newest user turn: {text[:600]}"
    return [(m[1], m[2], m[3]) for m in
            (re.match(r"- (\w+) (.+?) \(id ([0-9a-f-]+)\)", line) for line in block.group(1).splitlines()) if m]


async def last_request_with(sim: Sim, words: str) -> dict[str, Any]:
    for entry in reversed(await sim.requests()):
        body = entry.get("body") or {}
        if any(words in b.get("text", "") for m in body.get("messages", [])[-1:] for b in m["content"]):
            return body
    raise AssertionError(f"no model request carried {words!r}")


@pytest.fixture
async def studio(pool: asyncpg.Pool, platform: Platform):
    s = await make_studio(pool, extra_members=MEMBERS, programs=["Strength Foundations", "Marathon Prep"])
    result = await reindex(platform, s.org.id)
    assert result.indexed >= len(MEMBERS) + 2 and result.model
    return s


async def global_exercise_ids(pool: asyncpg.Pool, names: list[str]) -> dict[str, str]:
    rows = await pool.fetch("SELECT name, id FROM exercises WHERE organization_id IS NULL AND name = ANY($1)", names)
    return {r["name"]: str(r["id"]) for r in rows}


@pytest.mark.parametrize("question", [
    # "Build Saar Cohen a workout with back squats for next week"
    "תבנה לסער כהן אימון עם סקוואט אחורי לשבוע הבא",
    # "Put together a workout with barbell squats for Saar Cohen"
    "Составь тренировку с приседаниями со штангой для Саар Коэн",
], ids=["hebrew", "russian"])
async def test_question_finds_member_and_exercise(question: str, studio, http: httpx.AsyncClient,
                                                   pool: asyncpg.Pool, sim: Sim) -> None:
    stream = await send(http, studio.org.id, studio.owner.user_id, question)
    assert stream.status == 200 and stream.types()[-1] == "done" and not stream.of("error"), stream.events

    hits = ambient_of(await last_request_with(sim, question))
    saar = studio.people["Saar Cohen"].membership_id
    assert ("member", "Saar Cohen", saar) in hits, hits
    # Only Saar: the other members are not named in the question.
    assert [h for h in hits if h[0] == "member"] == [("member", "Saar Cohen", saar)]
    squats = await global_exercise_ids(pool, ["Back Squat", "Front Squat", "Goblet Squat", "Overhead Squat",
                                              "Pause Squat", "Box Squat", "Zercher Squat", "Air Squat"])
    exercise_ids = {h[2] for h in hits if h[0] == "exercise"}
    assert exercise_ids & set(squats.values()), (hits, squats)
    assert squats["Back Squat"] in exercise_ids, hits
    assert len(hits) <= 5
    # The simulator's demo policy names what the context holds, in the caller's language.
    assert "Saar Cohen" in stream.text() and ("מזהה" in stream.text() or "вижу" in stream.text()), stream.text()


async def test_chit_chat_gets_no_ambient_context(studio, http: httpx.AsyncClient, sim: Sim) -> None:
    # "Good morning, how are you doing today, my friend?" — 30+ characters, names nothing in the studio.
    question = "Доброе утро, как у тебя сегодня дела, мой друг?"
    stream = await send(http, studio.org.id, studio.owner.user_id, question)
    assert stream.status == 200 and stream.types()[-1] == "done", stream.events
    body = await last_request_with(sim, question)
    text = "\n".join(b.get("text", "") for b in body["messages"][-1]["content"] if b.get("type") == "text")
    assert "<turn_context>" in text and "<ambient_context" not in text, text[:800]


async def test_reindex_subject_refuses_a_bad_organization_id(platform: Platform) -> None:
    nc = await nats.connect(platform.env["NATS_URL"])
    try:
        msg = await nc.request(REINDEX.subject, b'{"organizationId": "not-a-uuid"}', timeout=10)
    finally:
        await nc.close()
    assert msg.headers and msg.headers.get("spotter-error"), msg.data
    assert b"invalid_request" in msg.data


def tool(name: str, **tool_input: Any) -> dict[str, Any]:
    return {"name": name, "input": tool_input}


@pytest.mark.parametrize("query", ["find a squat variation", "приседания", "סקוואט"], ids=["english", "russian", "hebrew"])
async def test_search_tools_find_the_squats_in_three_languages(query: str, studio, http: httpx.AsyncClient,
                                                               pool: asyncpg.Pool, sim: Sim) -> None:
    """read__exercises_search and read__search_anything through the running tool-runner and rag: the
    same hybrid search, by name, alias in another script, or meaning."""
    words = f"search tools {uuid.uuid4().hex[:8]}"
    await sim.script(words, {"text": None, "tool_uses": [tool("read__exercises_search", query=query, limit=10),
                                                        tool("read__search_anything", query=query, kinds=["exercise"])]},
                     {"text": "Here they are.", "tool_uses": []})
    stream = await send(http, studio.org.id, studio.owner.user_id, words)
    assert stream.types()[-1] == "done" and not stream.of("error"), stream.events
    completed = {e["toolUseId"]: e for e in stream.of("tool_completed")}
    started = {e["toolUseId"]: e["action"] for e in stream.of("tool_started")}
    by_action = {started[i]: e for i, e in completed.items()}
    exercises = by_action["exercises_search"]["output"]
    assert by_action["exercises_search"]["ok"] and exercises["matchedBy"] == "name_and_meaning", exercises
    names = [e["name"] for e in exercises["exercises"]]
    assert any("Squat" in n for n in names[:3]), names
    hits = by_action["search_anything"]["output"]["hits"]
    assert hits and all(h["kind"] == "exercise" for h in hits)
    assert any("Squat" in h["label"] for h in hits[:3]), hits


async def test_an_ambient_block_past_the_first_reservations_room_is_reserved_again_and_charged_once(
        pool: asyncpg.Pool, platform: Platform, http: httpx.AsyncClient, sim: Sim) -> None:
    # A new message's first reservation is asked while ambient search runs, with room for a block of
    # AMBIENT_ROOM_TOKENS; names as long as the schema allows make a larger one, which is held again once
    # known (the draft's hold released), so the call is charged once and no hold is left.
    long = "Abcdefghijklmnopqrstuvwxy " * 9
    studio = await make_studio(pool, extra_members=[{"full_name": f"Saar {long}{n}", "plan": "Unlimited"} for n in range(3)],
                               programs=[f"Saar Strength {long}{n}" for n in range(2)])
    await reindex(platform, studio.org.id)
    owner = studio.owner.user_id

    async def usage() -> dict[str, Any]:
        return (await http.get(f"/organizations/{studio.org.id}/agent/usage", headers=auth(owner))).json()

    opened = await send(http, studio.org.id, owner, "hi")
    conversation = opened.of("done")[0]["conversationId"]
    for _ in range(100):  # the title's call, after `done`, settled
        if (await usage())["reservedUsdMicros"] == 0 and await pool.fetchval(
                "SELECT title <> 'hi' FROM ai_conversations WHERE id = $1", uuid.UUID(conversation)):
            break
        await asyncio.sleep(0.1)
    before = await pool.fetchval("SELECT cost_usd_micros FROM ai_conversation_usage WHERE conversation_id = $1",
                                 uuid.UUID(conversation))

    question = "can you find saar and tell me about their payment plan and their strength program"
    stream = await send(http, studio.org.id, owner, question, conversation)
    assert stream.status == 200 and stream.types()[-1] == "done" and not stream.of("error"), stream.events
    body = await last_request_with(sim, question)
    block = re.search(r'<ambient_context untrusted="true">.*?</ambient_context>',
                      "\n".join(b.get("text", "") for b in body["messages"][-1]["content"]), re.S)
    assert block and len(json.dumps(block.group(0))) > 3 * AMBIENT_ROOM_TOKENS, block
    charged = stream.of("done")[0]["usage"]["costUsdMicros"]
    after = await pool.fetchval("SELECT cost_usd_micros FROM ai_conversation_usage WHERE conversation_id = $1",
                                uuid.UUID(conversation))
    assert charged > 0 and after - before == charged
    assert (await usage())["reservedUsdMicros"] == 0
