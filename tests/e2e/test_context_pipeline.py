"""The context pipeline over HTTP+SSE against the running platform (issue 8): a prompt that stays
cached across turns, compaction of a long conversation, titles in the user's language, and the
conversation's locale. The simulator is the only model fake; what the orchestrator sent it is read
from its request log."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from typing import Any

import asyncpg
import httpx

from spotter_orchestrator.compaction import title_prompt
from tests.factories import make_studio

from .client import Sim, Stream, auth, send, sse
from .conftest import Platform
from .helpers import assert_requests_valid, message_roles, rows

SAARS = [{"full_name": "Saar Levi", "plan": "3x/week", "payment_status": "overdue"}]
POLL_S = 15.0  # an upper bound for background work (titles); never a performance assertion


async def agent_requests(sim: Sim, tag: str) -> list[dict[str, Any]]:
    """This conversation's agent requests, oldest first (its first user message carries `tag`)."""
    def first_text(body: dict[str, Any]) -> str:
        content = body["messages"][0]["content"]
        return content if isinstance(content, str) else " ".join(b.get("text", "") for b in content)
    return [r["body"] for r in await sim.requests() if r.get("body") and tag in first_text(r["body"])]


async def side_requests(sim: Sim, kind: str, text: str) -> list[dict[str, Any]]:
    r = await sim.client.get("/_sim/requests", params={"kind": kind})
    r.raise_for_status()
    return [e for e in r.json()["requests"] if text in str(e.get("body"))]


def flat(body: dict[str, Any]) -> list[Any]:
    """The prompt in cache order, block by block, without the cache markers (the tail moves)."""
    def plain(block: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in block.items() if k != "cache_control"}
    return ([("tool", plain(t)) for t in body.get("tools", [])]
            + [("system", plain(b)) for b in body["system"]]
            + [(m["role"], plain(b)) for m in body["messages"] for b in m["content"]])


async def wait_for(probe: Any, what: str) -> Any:
    deadline = asyncio.get_running_loop().time() + POLL_S
    while True:
        value = await probe()
        if value:
            return value
        assert asyncio.get_running_loop().time() < deadline, f"{what} did not happen"
        await asyncio.sleep(0.1)


def finished(stream: Stream) -> None:
    assert stream.status == 200 and stream.types()[-1] == "done" and not stream.of("error"), stream.events


async def test_each_prompt_extends_the_last_and_reads_it_from_the_cache(http: httpx.AsyncClient, pool: asyncpg.Pool,
                                                                         sim: Sim) -> None:
    studio = await make_studio(pool, extra_members=SAARS)
    tag = uuid.uuid4().hex[:8]
    prompts = [f"who am I? ({tag})", "what programs do we run?", "find Saar Levi", "which members are at risk?"]
    streams: list[Stream] = []
    cid = None
    for prompt in prompts:
        stream = await send(http, studio.org.id, studio.owner.user_id, prompt, cid)
        finished(stream)
        assert stream.of("tool_completed"), f"{prompt!r} ran no tool"
        cid = stream.conversation_id
        streams.append(stream)

    requests = await agent_requests(sim, tag)
    assert len(requests) == 2 * len(prompts)  # a tool call and the answer, per turn
    assert_requests_valid([{"body": b} for b in requests])
    for before, after in zip(requests, requests[1:]):
        assert flat(after)[: len(flat(before))] == flat(before), "a prompt must extend the previous one"
    for body in requests:
        # Two cached system blocks; the turn's context opens the newest user turn, after the history.
        assert [b["cache_control"] for b in body["system"]] == [{"type": "ephemeral", "ttl": "1h"}] * 2
        words = [m for m in body["messages"] if m["role"] == "user" and m["content"][-1].get("type") == "text"]
        context = words[-1]["content"][-2]["text"]
        assert context.startswith("<turn_context>") and f"name: {studio.owner.full_name}" in context
    for i, stream in enumerate(streams):
        usage = stream.of("done")[0]["usage"]
        total = usage["cacheReadTokens"] + usage["cacheCreationTokens"] + usage["inputTokens"]
        assert usage["cacheReadRatio"] == round(usage["cacheReadTokens"] / total, 4)
        if i >= 2:
            assert usage["cacheReadRatio"] >= 0.9, (i, usage)


async def test_a_long_conversation_compacts_and_keeps_working(http: httpx.AsyncClient, pool: asyncpg.Pool,
                                                              sim: Sim, platform: Platform) -> None:
    studio = await make_studio(pool)
    tag = uuid.uuid4().hex[:8]
    first = await send(http, studio.org.id, studio.owner.user_id, f"who am I? ({tag})")
    finished(first)
    cid = first.conversation_id
    for i in range(2, 12):
        finished(await send(http, studio.org.id, studio.owner.user_id, f"note {i} for {tag}", cid))
    # The 12th turn stores the 25th message and tries to compact, but the summary model fails: the
    # turn goes on uncompacted, with the whole history.
    await sim.fault(status=529, kind="summary", match=tag)
    finished(await send(http, studio.org.id, studio.owner.user_id, f"note 12 for {tag}", cid))
    assert "system_note" not in await message_roles(pool, cid)
    [uncompacted] = [b for b in await agent_requests(sim, tag) if f"note 12 for {tag}" in str(b["messages"][-1])]
    assert len(uncompacted["messages"]) == 25
    assert '"event": "agent.compaction.failed", "reason": "provider"' in platform.procs["spotter-orchestrator"].output_text()

    # The 13th, on a 26-message conversation, compacts: 21 summarized, the last 6 kept.
    finished(await send(http, studio.org.id, studio.owner.user_id, f"note 13 for {tag}", cid))
    roles = await message_roles(pool, cid)
    assert len(roles) == 29 and roles.count("system_note") == 1 and roles[27] == "system_note"
    note = (await rows(pool, """SELECT content, page_context FROM ai_messages
                                 WHERE conversation_id = $1 AND role = 'system_note'""", uuid.UUID(cid)))[0]
    through = note["page_context"]["summarizedThroughMessageId"]
    ordered = await rows(pool, "SELECT id::text AS id, role::text AS role FROM ai_messages WHERE conversation_id = $1 "
                               "ORDER BY position", uuid.UUID(cid))
    cut = [m["id"] for m in ordered].index(through) + 1
    assert cut == 21 and ordered[cut]["role"] == "assistant"
    summary = note["content"][0]["text"]
    assert summary.startswith("<conversation_summary>") and f"«who am I? ({tag})»" in summary
    assert "read__get_current_context" in summary  # the summary lists what the tools did
    conversation = (await rows(pool, "SELECT summary FROM ai_conversations WHERE id = $1", uuid.UUID(cid)))[0]
    assert conversation["summary"] and conversation["summary"] in summary
    assert len(await side_requests(sim, "summary", f"who am I? ({tag})")) == 2  # the failed one, then this

    [compacted] = [b for b in await agent_requests(sim, "<conversation_summary>") if f"note 13 for {tag}" in str(b["messages"][-1])]
    messages = compacted["messages"]
    assert messages[0]["content"][0]["text"] == summary  # the summary first, then only the kept tail
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user", "assistant", "user"]
    assert f"note 10 for {tag}" not in str(messages[1:]) and f"note 11 for {tag}" in str(messages[1:])

    after = await send(http, studio.org.id, studio.owner.user_id, f"who am I? again {tag}", cid)
    finished(after)
    assert after.of("tool_completed")[0]["ok"] is True
    latest = [b for b in await agent_requests(sim, "<conversation_summary>") if f"again {tag}" in str(b["messages"])]
    assert len(latest) == 2 and all(b["messages"][0]["content"][0]["text"] == summary for b in latest)
    assert (await message_roles(pool, cid)).count("system_note") == 1  # 11 past the anchor: not yet again
    assert_requests_valid([{"body": b} for b in latest])


async def title_of(http: httpx.AsyncClient, org_id: str, user_id: str, cid: str) -> str | None:
    r = await http.get(f"/organizations/{org_id}/agent/conversations", headers=auth(user_id))
    r.raise_for_status()
    return next((c["title"] for c in r.json()["conversations"] if c["id"] == cid), None)


async def test_titles_are_written_in_the_users_language(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim) -> None:
    studio = await make_studio(pool)
    cases = [
        ("מי מהמתאמנים בסיכון לעזוב את הסטודיו?", "he-IL", "מהמתאמנים בסיכון לעזוב הסטודיו", r"^[\u0590-\u05FF ]+$"),
        ("Покажи, пожалуйста, расписание занятий на завтра", "ru", "Расписание занятий завтра", r"^[\u0400-\u04FF ]+$"),
    ]
    for message, locale, title, script in cases:
        stream = await sse(http, "POST", f"/organizations/{studio.org.id}/agent/messages",
                           json={"conversationId": None, "message": message},
                           headers={**auth(studio.owner.user_id), "x-locale": locale})
        finished(stream)
        cid = stream.conversation_id

        async def generated() -> str | None:
            found = await title_of(http, studio.org.id, studio.owner.user_id, cid)
            return found if found != message else None

        assert await wait_for(generated, f"a title for {message!r}") == title
        assert re.match(script, title)
        [request] = await side_requests(sim, "title", message)
        assert f"<locale>{locale.split('-')[0]}</locale>" in request["body"]["messages"][0]["content"]


async def test_a_title_is_asked_with_the_text_of_every_reply_of_the_first_turn(http: httpx.AsyncClient, pool: asyncpg.Pool,
                                                                               sim: Sim) -> None:
    """The first turn hands its replies' text to the title (not read back): a turn with a tool call has two
    replies, and the title's <first_reply> is both, as the conversation stored them."""
    studio = await make_studio(pool)
    message = f"who am I? {uuid.uuid4().hex[:8]}"
    stream = await sse(http, "POST", f"/organizations/{studio.org.id}/agent/messages",
                       json={"conversationId": None, "message": message}, headers={**auth(studio.owner.user_id), "x-locale": "ru"})
    finished(stream)
    assert stream.of("tool_completed")
    contents = await pool.fetch("SELECT content FROM ai_messages WHERE conversation_id = $1 AND role = 'assistant' ORDER BY position",
                                uuid.UUID(stream.conversation_id))
    assert len(contents) == 2
    blocks = [json.loads(c["content"]) if isinstance(c["content"], str) else c["content"] for c in contents]
    texts = ["".join(b.get("text", "") for b in content if b.get("type") == "text") for content in blocks]
    reply = " ".join(texts).strip()
    assert reply

    async def asked() -> list[dict[str, Any]]:
        return await side_requests(sim, "title", message)

    [request] = await wait_for(asked, "the title request")
    prompt = request["body"]["messages"][0]["content"]
    assert prompt == title_prompt("ru", message, reply)


async def test_the_conversation_keeps_the_callers_language(http: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool)
    cases = [({"x-locale": "ru-RU", "accept-language": "he"}, "ru", "ru-RU"),
             ({"accept-language": "he-IL,en;q=0.5"}, "he", "he-IL"), ({}, "en", "en")]
    for headers, stored, context_locale in cases:
        stream = await sse(http, "POST", f"/organizations/{studio.org.id}/agent/messages",
                           json={"conversationId": None, "message": "hello there"},
                           headers={**auth(studio.owner.user_id), **headers})
        finished(stream)
        locale = await pool.fetchval("SELECT locale FROM ai_conversations WHERE id = $1", uuid.UUID(stream.conversation_id))
        assert locale == stored
        page = await pool.fetchval("SELECT page_context FROM ai_messages WHERE conversation_id = $1 AND role = 'user'",
                                   uuid.UUID(stream.conversation_id))
        assert f"locale: {context_locale}" in page["turnContext"]  # the turn says whom to answer in which language
