"""Requests the real API rejects are rejected here too, with the same error shape."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from .helpers import DEMO_TOOLS, LEGACY_MODEL, MODEL, Sim

EPH = {"type": "ephemeral"}
EPH_1H = {"type": "ephemeral", "ttl": "1h"}
TOOL_USE = {"type": "tool_use", "id": "toolu_sim_a", "name": "read__programs_list", "input": {}}


def body(**overrides: Any) -> dict[str, Any]:
    base = {"model": MODEL, "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}


def without(key: str) -> dict[str, Any]:
    b = body()
    del b[key]
    return b


def text(t: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": t, **extra}


INVALID: list[tuple[str, dict[str, Any], str]] = [
    ("missing model", without("model"), "model: Field required"),
    ("non-string model", body(model=5), "model: Input should be a valid string"),
    ("missing max_tokens", without("max_tokens"), "max_tokens: Field required"),
    ("non-integer max_tokens", body(max_tokens="ten"), "max_tokens: Input should be a valid integer"),
    ("negative max_tokens", body(max_tokens=-1), "max_tokens: Input should be greater than or equal to 0"),
    ("missing messages", without("messages"), "messages: Field required"),
    ("empty messages", body(messages=[]), "messages: at least one message is required"),
    ("bad role", body(messages=[{"role": "bot", "content": "x"}]), "messages.0.role"),
    ("starts with assistant", body(model=LEGACY_MODEL, messages=[{"role": "assistant", "content": "x"},
                                                                {"role": "user", "content": "y"}]),
     'first message must use the "user" role'),
    ("prefill on 5.x", body(messages=[{"role": "user", "content": "x"}, {"role": "assistant", "content": "The"}]),
     "does not support assistant message prefill"),
    ("empty text block", body(messages=[{"role": "user", "content": [text("")]}]),
     "text content blocks must be non-empty"),
    ("response-only field echoed back", body(messages=[{"role": "user", "content": [text("x", parsed_output=None)]}]),
     "messages.0.content.0.text.parsed_output: Extra inputs are not permitted"),
    ("tool_use without tool_result", body(messages=[
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": [TOOL_USE]},
        {"role": "user", "content": "never answered"}]),
     "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_sim_a"),
    ("tool_result for unknown id", body(messages=[
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": [TOOL_USE]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_sim_a", "content": "ok"},
                                     {"type": "tool_result", "tool_use_id": "toolu_other", "content": "ok"}]}]),
     "messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: toolu_other"),
    ("tool_result not immediately after", body(messages=[
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": [TOOL_USE]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_sim_a", "content": "ok"}]},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_sim_a", "content": "again"}]}]),
     "messages.4.content.0: unexpected `tool_use_id`"),
    ("five cache breakpoints", body(system=[text("a", cache_control=EPH), text("b", cache_control=EPH)],
                                    messages=[{"role": "user", "content": [text(c, cache_control=EPH) for c in "cde"]}]),
     "A maximum of 4 blocks with cache_control may be provided. Found 5."),
    ("1h after 5m", body(tools=[{**DEMO_TOOLS[0], "cache_control": EPH}], system=[text("s", cache_control=EPH_1H)]),
     "system.0.cache_control.ttl: a ttl='1h' cache_control block must not come after a ttl='5m' cache_control block"),
    ("temperature on 5.x", body(temperature=0.2), "temperature: sampling parameters are not supported"),
    ("top_p on 5.x", body(top_p=0.9), "top_p: sampling parameters are not supported"),
    ("top_k on 5.x", body(top_k=5), "top_k: sampling parameters are not supported"),
    ("tool_choice any on 5.x", body(tools=DEMO_TOOLS, tool_choice={"type": "any"}), "tool_choice.type: 'any'"),
    ("tool_choice tool on 5.x", body(tools=DEMO_TOOLS, tool_choice={"type": "tool", "name": "read__programs_list"}),
     "tool_choice.type: 'tool'"),
    ("thinking disabled on 5.x", body(thinking={"type": "disabled"}), "use 'between_tools'"),
    ("thinking budget on 5.x", body(max_tokens=5000, thinking={"type": "enabled", "budget_tokens": 2000}),
     "thinking.budget_tokens"),
    ("tool name with a dot", body(tools=[{**DEMO_TOOLS[0], "name": "read.context"}]),
     "tools.0.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'"),
    ("duplicate tool names", body(tools=[DEMO_TOOLS[0], DEMO_TOOLS[0]]), "Tool names must be unique"),
]


@pytest.mark.asyncio
@pytest.mark.parametrize(("payload", "message"), [(p, m) for _, p, m in INVALID], ids=[n for n, _, _ in INVALID])
async def test_invalid_requests_get_400(client: anthropic.AsyncAnthropic, sim: Sim, payload: dict, message: str):
    with pytest.raises(anthropic.BadRequestError) as caught:
        await client.post("/v1/messages", cast_to=anthropic.types.Message, body=payload)
    err = caught.value
    assert err.status_code == 400
    assert err.type == "invalid_request_error"
    assert message in (err.api_message or "")
    assert err.body == {"type": "error", "error": {"type": "invalid_request_error", "message": err.api_message},
                        "request_id": err.request_id}
    logged = sim.requests()[-1]
    assert logged["verdict"]["ok"] is False and logged["verdict"]["status"] == 400
    assert logged["verdict"]["message"] == err.api_message


VALID: list[tuple[str, dict[str, Any]]] = [
    ("consecutive user messages merge", body(messages=[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])),
    ("prefill on 4.x", body(model=LEGACY_MODEL, messages=[{"role": "user", "content": "x"}, {"role": "assistant", "content": "The"}])),
    ("sampling params on 4.x", body(model=LEGACY_MODEL, temperature=0.3, top_k=4)),
    ("tool_choice any on 4.x", body(model=LEGACY_MODEL, tools=DEMO_TOOLS, tool_choice={"type": "any"})),
    ("tool_choice auto on 5.x", body(tools=DEMO_TOOLS, tool_choice={"type": "auto"})),
    ("thinking between_tools", body(thinking={"type": "between_tools"})),
    ("thinking adaptive", body(thinking={"type": "adaptive"})),
    ("four breakpoints, 1h before 5m", body(
        tools=[{**DEMO_TOOLS[0], "cache_control": EPH_1H}],
        system=[text("a", cache_control=EPH_1H), text("b", cache_control=EPH)],
        messages=[{"role": "user", "content": [text("c", cache_control=EPH)]}])),
    ("tool_result split across merged user messages", body(messages=[
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": [TOOL_USE, {**TOOL_USE, "id": "toolu_sim_b"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_sim_a", "content": "1"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_sim_b", "content": "2"}]}])),
]


@pytest.mark.asyncio
@pytest.mark.parametrize("payload", [p for _, p in VALID], ids=[n for n, _ in VALID])
async def test_valid_requests_pass(client: anthropic.AsyncAnthropic, sim: Sim, payload: dict):
    msg = await client.post("/v1/messages", cast_to=anthropic.types.Message, body=payload)
    assert msg.content and msg.stop_reason in ("end_turn", "tool_use")
    assert sim.requests()[-1]["verdict"] == {"ok": True, "status": 200}


@pytest.mark.asyncio
async def test_edited_thinking_block_is_rejected(client: anthropic.AsyncAnthropic, sim: Sim):
    messages: list = [{"role": "user", "content": "who am i"}]
    first = await client.messages.create(model=MODEL, max_tokens=200, tools=DEMO_TOOLS, messages=messages)
    assert first.content[0].type == "thinking"
    assistant = first.to_param()
    tool_id = first.content[-1].id
    answer = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id,
                                           "content": '{"user": {"name": "Ana", "role": "owner"}, "org": {"name": "Core Studio"}}'}]}

    edited = {"role": "assistant", "content": [
        {"type": "thinking", "thinking": first.content[0].thinking + " (edited)", "signature": first.content[0].signature},
        *assistant["content"][1:],
    ]}
    with pytest.raises(anthropic.BadRequestError, match=r"messages\.1\.content\.0: Invalid `signature` in `thinking` block"):
        await client.messages.create(model=MODEL, max_tokens=200, tools=DEMO_TOOLS, messages=[*messages, edited, answer])

    ok = await client.messages.create(model=MODEL, max_tokens=200, tools=DEMO_TOOLS, messages=[*messages, assistant, answer])
    assert ok.content[0].text == "You are Ana (owner) at Core Studio."


@pytest.mark.asyncio
async def test_unknown_route_uses_api_error_shape(client: anthropic.AsyncAnthropic, sim: Sim):
    with pytest.raises(anthropic.NotFoundError) as caught:
        await client.get("/v1/nope", cast_to=dict)
    assert caught.value.type == "not_found_error"
