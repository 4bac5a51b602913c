"""Scripts, the demo policy, and the request log."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest

from spotter_tool_runner.tools import bulk

from .demo_chat import OWNER, context
from .helpers import DEMO_TOOLS, LEGACY_MODEL, MODEL, Sim


async def ask(client: anthropic.AsyncAnthropic, messages: list[dict[str, Any]], tools: list | None = None,
              **kwargs: Any) -> anthropic.types.Message:
    async with client.messages.stream(model=kwargs.pop("model", MODEL), max_tokens=300, messages=messages,
                                      tools=tools if tools is not None else DEMO_TOOLS, **kwargs) as s:
        return await s.get_final_message()


def tool_results(msg: anthropic.types.Message, content: str, is_error: bool = False) -> dict[str, Any]:
    return {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": b.id, "content": content, "is_error": is_error}
        for b in msg.content if b.type == "tool_use"]}


@pytest.mark.asyncio
async def test_script_progresses_through_an_agent_loop(client: anthropic.AsyncAnthropic, sim: Sim):
    sim.script(match="weekly report", responses=[
        {"text": "Checking.", "tool_uses": [{"name": "read__programs_list", "input": {}}]},
        {"tool_uses": [{"name": "read__members_search", "input": {"query": "late"}}]},
        {"text": "Report ready."},
    ])
    convo: list[dict[str, Any]] = [{"role": "user", "content": "Build the WEEKLY REPORT"}]
    first = await ask(client, convo)
    assert [b.name for b in first.content if b.type == "tool_use"] == ["read__programs_list"]
    convo += [first.to_param(), tool_results(first, "[]")]
    second = await ask(client, convo)
    assert [b.input for b in second.content if b.type == "tool_use"] == [{"query": "late"}]
    convo += [second.to_param(), tool_results(second, "[]")]
    third = await ask(client, convo)
    assert third.content[0].text == "Report ready." and third.stop_reason == "end_turn"

    # New user text starts a new exchange: the script restarts at responses[0].
    convo += [third.to_param(), {"role": "user", "content": "weekly report again?"}]
    again = await ask(client, convo)
    assert [b.name for b in again.content if b.type == "tool_use"] == ["read__programs_list"]

    # Progress comes from the request, not from call order: replaying a prefix gives the same step.
    replay = await ask(client, convo[:3])
    assert [b.input for b in replay.content if b.type == "tool_use"] == [{"query": "late"}]
    script_id = sim.http.get("/_sim/script").json()["scripts"][0]["id"]
    assert {r["script_id"] for r in sim.requests()} == {script_id}


@pytest.mark.asyncio
async def test_script_runs_out_with_done(client: anthropic.AsyncAnthropic, sim: Sim):
    sim.script([{"tool_uses": [{"name": "read__programs_list", "input": {}}]}])
    convo: list[dict[str, Any]] = [{"role": "user", "content": "anything"}]
    first = await ask(client, convo, model=LEGACY_MODEL)
    convo += [first.to_param(), tool_results(first, "[]")]
    done = await ask(client, convo, model=LEGACY_MODEL)
    assert done.content[0].text == "Done." and done.stop_reason == "end_turn"


@pytest.mark.asyncio
async def test_script_match_times_and_precedence(client: anthropic.AsyncAnthropic, sim: Sim):
    sim.script([{"text": "general"}])
    sim.script([{"text": "special"}], match="special", times=1)
    assert (await ask(client, [{"role": "user", "content": "a special one"}])).content[0].text == "special"
    assert (await ask(client, [{"role": "user", "content": "a special one"}])).content[0].text == "general"
    assert (await ask(client, [{"role": "user", "content": "other"}])).content[0].text == "general"
    sim.http.delete("/_sim/script").raise_for_status()
    assert "Spotter" in (await ask(client, [{"role": "user", "content": "other"}])).content[0].text


@pytest.mark.asyncio
async def test_script_stop_reason_override(client: anthropic.AsyncAnthropic, sim: Sim):
    sim.script([{"text": "pausing", "stop_reason": "pause_turn"}])
    assert (await ask(client, [{"role": "user", "content": "x"}])).stop_reason == "pause_turn"


@pytest.mark.asyncio
@pytest.mark.parametrize(("prompt", "tool", "tool_input"), [
    ("Who am I?", "read__get_current_context", {}),
    ("show me the programs", "read__programs_list", {}),
    ("look up jo@example.com", "read__members_search", {"query": "jo@example.com"}),
    ("search for members Sam Lee", "read__members_search", {"query": "Sam Lee"}),
])
async def test_demo_policy_calls_offered_tools(client: anthropic.AsyncAnthropic, sim: Sim, prompt: str, tool: str,
                                              tool_input: dict):
    msg = await ask(client, [{"role": "user", "content": prompt}])
    uses = [b for b in msg.content if b.type == "tool_use"]
    assert [(u.name, u.input) for u in uses] == [(tool, tool_input)]
    assert msg.stop_reason == "tool_use"


@pytest.mark.asyncio
async def test_demo_policy_never_calls_missing_tools(client: anthropic.AsyncAnthropic, sim: Sim):
    msg = await ask(client, [{"role": "user", "content": "who am i"}], tools=[DEMO_TOOLS[1]])
    assert [b.type for b in msg.content] == ["text"] and "isn't available" in msg.content[0].text
    other_router = [{**DEMO_TOOLS[1], "name": "admin__programs_list"}]
    msg = await ask(client, [{"role": "user", "content": "programs"}], tools=other_router)
    assert msg.content[-1].name == "admin__programs_list"


@pytest.mark.asyncio
@pytest.mark.parametrize(("prompt", "result", "is_error", "expected"), [
    ("who am i", {"user": {"name": "Ana Ruiz", "role": "manager"}, "org": {"name": "Lift Lab"}}, False,
     "You are Ana Ruiz (manager) at Lift Lab."),
    ("programs", {"items": [{"name": "Strength 101"}, {"name": "Mobility"}]}, False,
     "Your programs: Strength 101, Mobility."),
    ("find sam", [{"name": "Sam Lee"}, {"name": "Sam Ode"}], False, "Found 2 members: Sam Lee, Sam Ode."),
    ("find sam", {"items": []}, False, "No members matched that search."),
    ("find sam", {"error": {"code": "forbidden", "message": "nope"}}, True, "I couldn't complete members_search: forbidden."),
])
async def test_demo_policy_summarises_tool_results(client: anthropic.AsyncAnthropic, sim: Sim, prompt: str,
                                                  result: Any, is_error: bool, expected: str):
    convo: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    first = await ask(client, convo)
    convo += [first.to_param(), tool_results(first, json.dumps(result), is_error)]
    answer = await ask(client, convo)
    assert answer.content[0].text == expected
    assert answer.stop_reason == "end_turn"


@pytest.mark.asyncio
async def test_demo_policy_reads_text_block_results(client: anthropic.AsyncAnthropic, sim: Sim):
    convo: list[dict[str, Any]] = [{"role": "user", "content": "find Kim"}]
    first = await ask(client, convo)
    payload = json.dumps({"items": [{"name": "Kim Park", "plan": {"name": "10-class pack"}, "payment_status": "paid"}]})
    convo += [first.to_param(), {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": first.content[-1].id, "content": [{"type": "text", "text": payload}]}]}]
    assert (await ask(client, convo)).content[0].text == "Found Kim Park — 10-class pack, payment paid."


@pytest.mark.asyncio
async def test_demo_policy_mentions_ambient_context(client: anthropic.AsyncAnthropic, sim: Sim):
    system = "You are Spotter.\n<ambient_context>\n- page: members\n- selected: Kim Park\n- filter: overdue\n</ambient_context>"
    msg = await ask(client, [{"role": "user", "content": "hello"}], system=system)
    assert msg.content[0].text.endswith("I can see 3 items in your current context.")
    plain = await ask(client, [{"role": "user", "content": "hello"}])
    assert "current context" not in plain.content[0].text


@pytest.mark.asyncio
async def test_demo_policy_chains_a_plan_over_the_real_catalog(client: anthropic.AsyncAnthropic, sim: Sim):
    """Over HTTP, unscripted: each call is computed from the previous result, the bulk action carries
    the preview's selectionToken, and a rejection ends the plan in words."""
    def calls(msg: anthropic.types.Message) -> list[tuple[str, Any]]:
        return [(b.name, b.input) for b in msg.content if b.type == "tool_use"]

    convo: list[dict[str, Any]] = [{"role": "user", "content": "delete next week's classes"}]
    first = await ask(client, convo, tools=OWNER)
    assert calls(first) == [("read__get_current_context", {})] and first.stop_reason == "tool_use"
    convo += [first.to_param(), tool_results(first, context().model_dump_json())]
    second = await ask(client, convo, tools=OWNER)
    selection = {"dateFrom": "2031-02-10", "dateTo": "2031-02-16"}
    assert calls(second) == [("class_sessions__bulk_preview", selection)]
    token = "0123456789abcdef0123456789abcdef"
    preview = bulk.Preview(count=3, items=[], truncated=False, selection_token=token)
    convo += [second.to_param(), tool_results(second, preview.model_dump_json())]
    third = await ask(client, convo, tools=OWNER)
    assert calls(third) == [("class_sessions__bulk_delete", selection | {"selectionToken": token})]
    rejected = json.dumps({"code": "rejected_by_user", "message": "The user rejected this action.", "hint": None})
    convo += [third.to_param(), tool_results(third, rejected, is_error=True)]
    final = await ask(client, convo, tools=OWNER)
    assert final.content[-1].text == "OK, I didn't run bulk delete; nothing changed." and final.stop_reason == "end_turn"
    assert all(r["verdict"]["ok"] for r in sim.requests())


@pytest.mark.asyncio
async def test_request_log_records_bodies_and_verdicts(client: anthropic.AsyncAnthropic, sim: Sim):
    await ask(client, [{"role": "user", "content": "first"}])
    with pytest.raises(anthropic.BadRequestError):
        await ask(client, [{"role": "user", "content": "second"}], extra_body={"top_k": 3})
    log = sim.requests()
    assert len(log) == 2
    assert log[0]["body"]["messages"] == [{"role": "user", "content": "first"}]
    assert log[0]["body"]["tools"] == DEMO_TOOLS and log[0]["stream"] is True
    assert log[0]["verdict"] == {"ok": True, "status": 200}
    assert log[0]["response"]["content"][0]["type"] == "text"
    assert log[1]["verdict"]["ok"] is False and "top_k" in log[1]["verdict"]["message"]
    assert log[1]["seq"] > log[0]["seq"]
    assert [r["body"]["messages"][0]["content"] for r in sim.requests(limit=1)] == ["second"]
    sim.http.delete("/_sim/requests").raise_for_status()
    assert sim.requests() == []


def test_health(sim: Sim):
    assert sim.http.get("/_sim/health").json()["status"] == "ok"
