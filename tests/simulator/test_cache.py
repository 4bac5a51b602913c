"""Prompt caching: breakpoints write, identical prefixes read, entries expire."""

from __future__ import annotations

import anthropic
import pytest

from .helpers import MODEL, Sim

# Token rule: ceil(chars / 4) per text block. 4400 chars -> 1100 tokens, 2000 -> 500.
BIG = "a" * 4400
MID = "b" * 2000
QUESTION = "hi there"  # 2 tokens


def system(first_ttl: str = "1h", second_ttl: str = "5m") -> list[dict]:
    return [
        {"type": "text", "text": BIG, "cache_control": {"type": "ephemeral", "ttl": first_ttl}},
        {"type": "text", "text": MID, "cache_control": {"type": "ephemeral", "ttl": second_ttl}},
    ]


async def usage_of(client: anthropic.AsyncAnthropic, model: str = "claude-opus-5", **kwargs) -> dict:
    kwargs.setdefault("system", system())
    kwargs.setdefault("messages", [{"role": "user", "content": QUESTION}])
    async with client.messages.stream(model=model, max_tokens=100, **kwargs) as s:
        msg = await s.get_final_message()
    u = msg.usage
    return {
        "input": u.input_tokens,
        "read": u.cache_read_input_tokens,
        "write": u.cache_creation_input_tokens,
        "5m": u.cache_creation.ephemeral_5m_input_tokens,
        "1h": u.cache_creation.ephemeral_1h_input_tokens,
    }


@pytest.mark.asyncio
async def test_first_request_writes_second_reads(client: anthropic.AsyncAnthropic, sim: Sim):
    assert await usage_of(client) == {"input": 2, "read": 0, "write": 1600, "5m": 500, "1h": 1100}
    assert await usage_of(client) == {"input": 2, "read": 1600, "write": 0, "5m": 0, "1h": 0}


@pytest.mark.asyncio
async def test_non_streaming_usage_matches(client: anthropic.AsyncAnthropic, sim: Sim):
    await usage_of(client)
    msg = await client.messages.create(model="claude-opus-5", max_tokens=100, system=system(),
                                       messages=[{"role": "user", "content": QUESTION}])
    assert (msg.usage.cache_read_input_tokens, msg.usage.cache_creation_input_tokens, msg.usage.input_tokens) == (1600, 0, 2)


@pytest.mark.asyncio
async def test_entries_expire_by_ttl_and_reads_refresh(client: anthropic.AsyncAnthropic, sim: Sim):
    await usage_of(client)
    sim.clock.advance(301)  # the 5m prefix is gone, the 1h one survives
    assert await usage_of(client) == {"input": 2, "read": 1100, "write": 500, "5m": 500, "1h": 0}
    sim.clock.advance(3399)  # 3700 s after the write, but only 3399 s after the read that refreshed it
    assert (await usage_of(client))["read"] == 1100
    sim.clock.advance(3601)
    assert await usage_of(client) == {"input": 2, "read": 0, "write": 1600, "5m": 500, "1h": 1100}


@pytest.mark.asyncio
async def test_growing_conversation_reads_previous_prefix(client: anthropic.AsyncAnthropic, sim: Sim):
    cc = {"type": "ephemeral"}
    turn1 = [{"role": "user", "content": [{"type": "text", "text": "c" * 4800, "cache_control": cc}]}]
    u1 = await usage_of(client, system="s" * 400, messages=turn1)
    assert u1 == {"input": 0, "read": 0, "write": 1300, "5m": 1300, "1h": 0}

    turn2 = [
        {"role": "user", "content": [{"type": "text", "text": "c" * 4800}]},  # marker moved, content same
        {"role": "assistant", "content": "d" * 400},
        {"role": "user", "content": [{"type": "text", "text": "e" * 400, "cache_control": cc}, {"type": "text", "text": "tail"}]},
    ]
    sim.script([{"text": "ok"}])
    u2 = await usage_of(client, system="s" * 400, messages=turn2)
    # The old breakpoint is gone, but its prefix ends two blocks before the new one: the API's
    # automatic lookback finds it, so only the new blocks are written.
    assert u2 == {"input": 1, "read": 1300, "write": 200, "5m": 200, "1h": 0}

    turn2[0]["content"][0]["cache_control"] = cc  # keep the old breakpoint too
    turn2[2]["content"][1]["text"] = "tail!"
    u3 = await usage_of(client, system="s" * 400, messages=turn2)
    assert u3 == {"input": 2, "read": 1500, "write": 0, "5m": 0, "1h": 0}


@pytest.mark.asyncio
async def test_lookback_reaches_twenty_blocks_and_no_further(client: anthropic.AsyncAnthropic, sim: Sim):
    cc = {"type": "ephemeral"}
    sim.script([{"text": "ok"}])

    def grown(extra: int) -> list[dict]:
        blocks = [{"type": "text", "text": "c" * 4800}] + [{"type": "text", "text": f"block {i:03d}"} for i in range(extra)]
        blocks[-1] = {**blocks[-1], "cache_control": cc}
        return [{"role": "user", "content": blocks}]

    await usage_of(client, system="s" * 400, messages=grown(0))  # writes the 1,300-token prefix
    assert (await usage_of(client, system="s" * 400, messages=grown(20)))["read"] == 1300  # 20 blocks back
    sim.http.delete("/_sim/cache").raise_for_status()
    await usage_of(client, system="s" * 400, messages=grown(0))
    missed = await usage_of(client, system="s" * 400, messages=grown(21))  # 21 blocks back: out of reach
    assert missed["read"] == 0 and missed["write"] == 1300 + 21 * 3


@pytest.mark.asyncio
async def test_extending_keeps_old_breakpoint_and_reads_it(client: anthropic.AsyncAnthropic, sim: Sim):
    cc = {"type": "ephemeral"}
    base = {"role": "user", "content": [{"type": "text", "text": "c" * 4800, "cache_control": cc}]}
    await usage_of(client, system="s" * 400, messages=[base])
    grown = [base, {"role": "assistant", "content": "d" * 400},
             {"role": "user", "content": [{"type": "text", "text": "e" * 400, "cache_control": cc}]}]
    assert await usage_of(client, system="s" * 400, messages=grown) == {
        "input": 0, "read": 1300, "write": 200, "5m": 200, "1h": 0}


@pytest.mark.asyncio
async def test_prefix_below_model_minimum_is_not_cached(client: anthropic.AsyncAnthropic, sim: Sim):
    small = [{"type": "text", "text": "m" * 3200, "cache_control": {"type": "ephemeral"}}]  # 800 tokens
    # claude-opus-5 needs 1024 tokens: nothing is cached, all input.
    assert await usage_of(client, model="claude-opus-5", system=small) == {"input": 802, "read": 0, "write": 0, "5m": 0, "1h": 0}
    assert (await usage_of(client, model="claude-opus-5", system=small))["read"] == 0
    # claude-sonnet-5-5 caches from 512 tokens.
    assert (await usage_of(client, model=MODEL, system=small))["write"] == 800
    assert (await usage_of(client, model=MODEL, system=small))["read"] == 800
    # Haiku needs 4096.
    assert (await usage_of(client, model="claude-haiku-5", system=system()))["write"] == 0


@pytest.mark.asyncio
async def test_cache_is_per_model(client: anthropic.AsyncAnthropic, sim: Sim):
    await usage_of(client, model="claude-opus-5")
    assert (await usage_of(client, model=MODEL))["read"] == 0


@pytest.mark.asyncio
async def test_tools_are_part_of_the_prefix(client: anthropic.AsyncAnthropic, sim: Sim):
    tools = [{"name": "read__programs_list", "description": "x" * 5000, "input_schema": {"type": "object"},
              "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    first = await usage_of(client, tools=tools)
    assert first["1h"] > 1250 + 1100  # the tool plus the 1h system block
    assert first["5m"] == 500
    tools[0]["description"] = "y" * 5000  # a changed tool invalidates everything after it
    assert (await usage_of(client, tools=tools))["read"] == 0


@pytest.mark.asyncio
async def test_top_level_cache_control_marks_last_block(client: anthropic.AsyncAnthropic, sim: Sim):
    plain_system = [{"type": "text", "text": BIG}]
    kwargs = {"system": plain_system, "extra_body": {"cache_control": {"type": "ephemeral"}}}
    assert await usage_of(client, **kwargs) == {"input": 0, "read": 0, "write": 1102, "5m": 1102, "1h": 0}
    assert (await usage_of(client, **kwargs))["read"] == 1102


@pytest.mark.asyncio
async def test_clear_cache_endpoint(client: anthropic.AsyncAnthropic, sim: Sim):
    await usage_of(client)
    sim.http.delete("/_sim/cache").raise_for_status()
    assert (await usage_of(client))["read"] == 0


@pytest.mark.asyncio
async def test_max_tokens_zero_prewarms_the_cache(client: anthropic.AsyncAnthropic, sim: Sim):
    warm = await client.messages.create(model="claude-opus-5", max_tokens=0, system=system(),
                                        messages=[{"role": "user", "content": QUESTION}])
    assert warm.content == [] and warm.stop_reason == "max_tokens" and warm.usage.cache_creation_input_tokens == 1600
    assert (await usage_of(client))["read"] == 1600
