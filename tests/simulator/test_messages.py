"""Wire format: the real SDK streams and parses the simulator's responses."""

from __future__ import annotations

import asyncio
import json
import math
import time

import anthropic
import httpx
import pytest

from .helpers import DEMO_TOOLS, LEGACY_MODEL, MODEL, Sim


@pytest.mark.asyncio
async def test_streaming_text_arrives_in_chunks_and_final_message_matches(client: anthropic.AsyncAnthropic, sim: Sim):
    text = "Warm up, then three rounds of squats, lunges and planks."
    sim.script([{"text": text}])
    chunks: list[str] = []
    async with client.messages.stream(model=MODEL, max_tokens=500, messages=[{"role": "user", "content": "plan"}]) as s:
        async for chunk in s.text_stream:
            chunks.append(chunk)
        final = await s.get_final_message()

    assert len(chunks) > 3
    assert all(1 <= len(c.split()) <= 3 for c in chunks)
    assert "".join(chunks) == text
    assert final.id.startswith("msg_sim_")
    assert final.stop_reason == "end_turn"
    assert final.model == MODEL
    assert [b.type for b in final.content] == ["text"]
    assert final.usage.output_tokens == math.ceil(len(text) / 4)
    assert final.usage.input_tokens == 1  # "plan"
    assert final.usage.cache_read_input_tokens == 0
    assert final.usage.cache_creation_input_tokens == 0
    assert final.usage.cache_creation is not None
    assert final.usage.cache_creation.ephemeral_5m_input_tokens == 0
    assert s.request_id and s.request_id.startswith("req_sim_")


@pytest.mark.asyncio
async def test_raw_event_sequence_matches_the_api(sim: Sim):
    sim.script([{"text": "Hi there.", "tool_uses": [{"name": "read__programs_list", "input": {"active": True}}]}])
    body = {"model": LEGACY_MODEL, "max_tokens": 100, "stream": True, "tools": DEMO_TOOLS,
            "messages": [{"role": "user", "content": "go"}]}
    events: list[tuple[str, dict]] = []
    async with httpx.AsyncClient(base_url=sim.base_url) as http:
        async with http.stream("POST", "/v1/messages", json=body) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            name = None
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    data = json.loads(line[6:])
                    assert data["type"] == name  # the event name always equals data.type
                    events.append((name, data))

    names = [n for n, _ in events]
    assert names[:2] == ["message_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    assert names.count("content_block_start") == names.count("content_block_stop") == 2
    start = events[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None
    assert set(start["usage"]) >= {"input_tokens", "output_tokens", "cache_read_input_tokens",
                                   "cache_creation_input_tokens", "cache_creation"}
    json_parts = [d["delta"]["partial_json"] for n, d in events
                  if n == "content_block_delta" and d["delta"]["type"] == "input_json_delta"]
    assert json.loads("".join(json_parts)) == {"active": True}
    delta = events[-2][1]
    assert delta["delta"]["stop_reason"] == "tool_use"
    assert delta["usage"]["output_tokens"] > 0


@pytest.mark.asyncio
async def test_streaming_tool_use_with_signed_thinking_round_trips(client: anthropic.AsyncAnthropic, sim: Sim):
    messages: list = [{"role": "user", "content": "Can you find Dana Whitfield?"}]
    async with client.messages.stream(model=MODEL, max_tokens=500, tools=DEMO_TOOLS, messages=messages) as s:
        first = await s.get_final_message()

    assert first.stop_reason == "tool_use"
    assert [b.type for b in first.content] == ["thinking", "text", "tool_use"]
    thinking, _, tool_use = first.content
    assert thinking.signature and thinking.thinking
    assert tool_use.id.startswith("toolu_sim_")
    assert tool_use.name == "read__members_search"
    assert tool_use.input == {"query": "Dana Whitfield"}

    result = {"items": [{"name": "Dana Whitfield", "plan": "Unlimited", "payment_status": "overdue"}]}
    messages += [
        first.to_param(),
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use.id, "content": json.dumps(result)}]},
    ]
    async with client.messages.stream(model=MODEL, max_tokens=500, tools=DEMO_TOOLS, messages=messages) as s:
        second = await s.get_final_message()
    assert second.stop_reason == "end_turn"
    assert second.content[0].text == "Found Dana Whitfield — Unlimited, payment overdue."


@pytest.mark.asyncio
async def test_non_streaming_create_returns_full_message(client: anthropic.AsyncAnthropic, sim: Sim):
    sim.script([{"tool_uses": [{"name": "read__members_search", "input": {"query": "a"}},
                               {"name": "read__members_search", "input": {"query": "b"}}]}])
    msg = await client.messages.create(model=LEGACY_MODEL, max_tokens=100, tools=DEMO_TOOLS,
                                       messages=[{"role": "user", "content": "two searches"}])
    assert isinstance(msg, anthropic.types.Message)
    assert [b.type for b in msg.content] == ["tool_use", "tool_use"]  # no thinking on 4.x models
    assert msg.content[0].id != msg.content[1].id
    assert [b.input for b in msg.content] == [{"query": "a"}, {"query": "b"}]
    assert msg.stop_reason == "tool_use"
    assert msg.usage.input_tokens > 0 and msg.usage.output_tokens > 0


@pytest.mark.asyncio
async def test_ids_are_unique(client: anthropic.AsyncAnthropic, sim: Sim):
    ids = set()
    for _ in range(3):
        msg = await client.messages.create(model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "hi"}])
        ids.add(msg.id)
    assert len(ids) == 3


@pytest.mark.asyncio
async def test_max_tokens_cuts_text(client: anthropic.AsyncAnthropic, sim: Sim):
    sim.script([{"text": "x" * 400}])
    msg = await client.messages.create(model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "long"}])
    assert msg.stop_reason == "max_tokens"
    assert msg.content[0].text == "x" * 40
    assert msg.usage.output_tokens == 10


@pytest.mark.asyncio
async def test_latency_controls_pace_the_stream(client: anthropic.AsyncAnthropic, sim: Sim):
    assert sim.latency(ttft_ms=300, tokens_per_second=400) == {"ttft_ms": 300, "tokens_per_second": 400}
    sim.script([{"text": "word " * 100}])  # 125 tokens -> ~0.31 s at 400 tok/s
    began = time.monotonic()
    first_at = None
    async with client.messages.stream(model=MODEL, max_tokens=500, messages=[{"role": "user", "content": "x"}]) as s:
        async for _ in s.text_stream:
            first_at = first_at or time.monotonic()
    done = time.monotonic()
    assert first_at is not None
    assert first_at - began >= 0.3
    assert done - first_at >= 0.25


@pytest.mark.asyncio
async def test_count_tokens_endpoint(client: anthropic.AsyncAnthropic, sim: Sim):
    counted = await client.messages.count_tokens(model=MODEL, system="s" * 40,
                                                 messages=[{"role": "user", "content": "abcdefgh"}])
    assert counted.input_tokens == 10 + 2


@pytest.mark.asyncio
async def test_a_request_still_arriving_is_not_listed(sim: Sim):
    """The log lists a request once its body is read: a caller listing it while another request is
    still being received (a title call right after `done`) never sees an entry without a body."""
    body = json.dumps({"model": MODEL, "max_tokens": 50, "messages": [{"role": "user", "content": "slow body"}]}).encode()
    half_sent = asyncio.Event()
    finish = asyncio.Event()

    async def chunks():
        yield body[:10]
        half_sent.set()
        await finish.wait()
        yield body[10:]

    async with httpx.AsyncClient(base_url=sim.base_url, timeout=10) as http:
        sending = asyncio.create_task(http.post("/v1/messages", content=chunks(), headers={
            "x-api-key": "test", "anthropic-version": "2023-06-01", "content-type": "application/json"}))
        await half_sent.wait()
        await asyncio.sleep(0.2)  # the simulator has the headers and is waiting for the rest
        listed = (await http.get("/_sim/requests", params={"kind": "all"})).json()["requests"]
        finish.set()
        assert (await sending).status_code == 200
    assert listed == []
    (entry,) = sim.requests()
    assert entry["body"]["messages"][0]["content"] == "slow body"
