"""Titles and summaries: told apart from the agent's turns by their system prompt (the orchestrator's
own prompts), answered in the conversation's language, billed and cached like any request, and
kept out of the agent's scripts, faults and request log."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest

from spotter_orchestrator.compaction import SUMMARY_PROMPT, TITLE_PROMPT, summary_prompt, title_prompt
from spotter_orchestrator.store import StoredMessage
from spotter_sim.side_tasks import LABELS, title_for

from .helpers import MODEL, Sim

HAIKU = "claude-haiku-5-5"


async def create(client: anthropic.AsyncAnthropic, system: str, prompt: str, model: str = HAIKU) -> anthropic.types.Message:
    return await client.messages.create(model=model, max_tokens=400, system=system,
                                        messages=[{"role": "user", "content": prompt}])


def stored(role: str, content: list[dict[str, Any]], n: int) -> StoredMessage:
    return StoredMessage(id=f"m{n}", role=role, content=content, turn_id="t", stop_reason=None)


@pytest.mark.parametrize(("message", "title"), [
    ("מי מהמתאמנים בסיכון לעזוב את הסטודיו?", "מהמתאמנים בסיכון לעזוב הסטודיו"),
    ("Покажи, пожалуйста, расписание занятий на завтра", "Расписание занятий завтра"),
    ("which members are at risk of leaving?", "Members risk leaving"),
])
async def test_title_from_the_first_message_in_its_own_language(client: anthropic.AsyncAnthropic, sim: Sim,
                                                                 message: str, title: str) -> None:
    sim.script([{"text": "a scripted agent turn"}])  # scripts are for the agent: never a title
    reply = await create(client, TITLE_PROMPT, title_prompt("en", message, "Here is what I found."))
    assert reply.content[0].text == title
    [entry] = sim.requests(kind="title")
    assert entry["kind"] == "title" and entry["script_id"] is None
    assert sim.requests() == []  # the default log is the agent's


def test_title_never_empty() -> None:
    assert title_for("?!") == LABELS["en"][0]
    assert title_for("מה?") == "מה"  # nothing but stopwords: the words themselves


async def test_summary_lists_what_the_transcript_holds_in_the_conversations_language(
        client: anthropic.AsyncAnthropic, sim: Sim) -> None:
    members = {"members": [{"membershipId": "ms-1", "name": "Saar Levi", "plan": "3x/week"}]}
    messages = [
        stored("user", [{"type": "text", "text": "תמצא את שער"}], 1),
        stored("assistant", [{"type": "thinking", "thinking": "private", "signature": "sig"},
                             {"type": "tool_use", "id": "tu1", "name": "read__members_search", "input": {"query": "שער"}}], 2),
        stored("tool_result", [{"type": "tool_result", "tool_use_id": "tu1", "content": json.dumps(members)}], 3),
        stored("assistant", [{"type": "text", "text": "מצאתי את Saar Levi."}], 4),
    ]
    previous = "סיכום השיחה הקודמת:\n- המשתמש ביקש: «מה יש היום?»"
    reply = await create(client, SUMMARY_PROMPT, summary_prompt("he", previous, messages))
    text = reply.content[0].text
    assert text.splitlines()[0] == "סיכום השיחה הקודמת:"
    assert "- המשתמש ביקש: «מה יש היום?»" in text  # carried over from the previous summary
    assert "«תמצא את שער»" in text and "read__members_search" in text and "Saar Levi (ms-1)" in text
    assert "private" not in text  # thinking is not part of the transcript
    [entry] = sim.requests(kind="summary")
    assert entry["response"]["usage"]["input_tokens"] > 0 and entry["response"]["usage"]["output_tokens"] > 0


async def test_side_task_faults_are_their_own(client: anthropic.AsyncAnthropic, sim: Sim) -> None:
    sim.fault(529, kind="summary")
    sim.fault(500)  # an agent fault: a title request passes it by
    assert (await create(client, TITLE_PROMPT, title_prompt("ru", "Привет", "Здравствуйте"))).content[0].text == "Привет"
    with pytest.raises(anthropic.APIStatusError) as failed:
        await create(client, SUMMARY_PROMPT, summary_prompt("en", "", [stored("user", [{"type": "text", "text": "hi"}], 1)]))
    assert failed.value.status_code == 529
    with pytest.raises(anthropic.InternalServerError):
        await create(client, "You are Spotter.", "hello", model=MODEL)
    assert [e["kind"] for e in sim.requests(kind="all")] == ["title", "summary", "agent"]


async def test_the_demo_policy_reads_the_users_words_after_the_turn_context(client: anthropic.AsyncAnthropic,
                                                                          sim: Sim) -> None:
    context = ('<turn_context>\n<caller>name: Dana</caller>\n<ambient_context untrusted="true">\n'
               "- member Kim Park (id 1)\n- program who am I (id 2)\n</ambient_context>\n</turn_context>")
    tools = [{"name": "read__get_current_context", "description": "who", "input_schema": {"type": "object"}}]
    reply = await client.messages.create(model=MODEL, max_tokens=300, tools=tools, messages=[
        {"role": "user", "content": [{"type": "text", "text": context}, {"type": "text", "text": "hello"}]}])
    # No request in "hello": the demo names what the ambient context holds ("who am I" there is data).
    assert reply.content[-1].text == ("From your message I can see: Kim Park (member), who am I (program). "
                                      "What would you like to do with them?")
    sim.script([{"text": "scripted"}], match="kim park")  # context text is not the user's words
    again = await client.messages.create(model=MODEL, max_tokens=300, tools=tools, messages=[
        {"role": "user", "content": [{"type": "text", "text": context}, {"type": "text", "text": "who am I?"}]}])
    assert [b.name for b in again.content if b.type == "tool_use"] == ["read__get_current_context"]
