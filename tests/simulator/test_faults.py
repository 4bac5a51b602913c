"""Injected failures surface as the SDK's typed errors."""

from __future__ import annotations

import math

import anthropic
import pytest

from .helpers import MODEL, Sim

HELLO = [{"role": "user", "content": "hello"}]


async def create(client: anthropic.AsyncAnthropic, content: str = "hello") -> anthropic.types.Message:
    return await client.messages.create(model=MODEL, max_tokens=100, messages=[{"role": "user", "content": content}])


@pytest.mark.asyncio
async def test_429_with_retry_after(client: anthropic.AsyncAnthropic, sim: Sim):
    sim.fault(429, retry_after=7)
    with pytest.raises(anthropic.RateLimitError) as caught:
        await create(client)
    err = caught.value
    assert err.status_code == 429
    assert err.response.headers["retry-after"] == "7"
    assert err.type == "rate_limit_error"
    assert err.body["type"] == "error" and err.body["request_id"] == err.request_id
    assert (await create(client)).stop_reason == "end_turn"  # count=1: only the first request fails


@pytest.mark.asyncio
@pytest.mark.parametrize(("status", "error_class", "error_type"), [
    (529, anthropic.OverloadedError, "overloaded_error"),
    (500, anthropic.InternalServerError, "api_error"),
    (503, anthropic.ServiceUnavailableError, "api_error"),
])
async def test_server_errors(client: anthropic.AsyncAnthropic, sim: Sim, status: int, error_class: type, error_type: str):
    sim.fault(status, count=2)
    for _ in range(2):
        with pytest.raises(error_class) as caught:
            await create(client)
        assert isinstance(caught.value, anthropic.InternalServerError)
        assert caught.value.status_code == status and caught.value.type == error_type
    await create(client)


@pytest.mark.asyncio
async def test_fault_match_only_hits_matching_requests(client: anthropic.AsyncAnthropic, sim: Sim):
    sim.fault(529, match="Programs")
    await create(client, "hello")
    with pytest.raises(anthropic.OverloadedError):
        await create(client, "list programs please")
    assert [r["verdict"]["status"] for r in sim.requests()] == [200, 529]


@pytest.mark.asyncio
async def test_sdk_retries_through_a_fault(sim: Sim):
    sim.fault(429, retry_after=0.05)
    async with anthropic.AsyncAnthropic(base_url=sim.base_url, api_key="test", max_retries=2) as client:
        msg = await create(client)
    assert msg.stop_reason == "end_turn"
    log = sim.requests()
    assert [r["verdict"]["status"] for r in log] == [429, 200]
    assert log[0]["body"] == log[1]["body"]


@pytest.mark.asyncio
async def test_mid_stream_error_event(client: anthropic.AsyncAnthropic, sim: Sim):
    full = "one two three four five six seven eight nine ten eleven twelve"
    sim.script([{"text": full}])
    sim.fault(529, after_tokens=4)
    received: list[str] = []
    with pytest.raises(anthropic.APIStatusError) as caught:
        async with client.messages.stream(model=MODEL, max_tokens=100, messages=HELLO) as s:
            async for chunk in s.text_stream:
                received.append(chunk)
    err = caught.value
    assert err.status_code == 200  # the stream had already started
    assert err.body["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    partial = "".join(received)
    assert partial and full.startswith(partial) and partial != full
    assert sum(math.ceil(len(c) / 4) for c in received) >= 4  # the fault waited for 4 output tokens
    logged = sim.requests()[-1]
    assert logged["fault"]["after_tokens"] == 4 and logged["verdict"]["status"] == 200


@pytest.mark.asyncio
async def test_mid_stream_fault_on_non_streaming_request_is_plain_http_error(client: anthropic.AsyncAnthropic, sim: Sim):
    sim.fault(529, after_tokens=3)
    with pytest.raises(anthropic.OverloadedError):
        await create(client)


@pytest.mark.asyncio
async def test_invalid_requests_do_not_consume_faults(client: anthropic.AsyncAnthropic, sim: Sim):
    sim.fault(529)
    with pytest.raises(anthropic.BadRequestError):
        await client.messages.create(model=MODEL, max_tokens=100, messages=HELLO, extra_body={"temperature": 0.5})
    with pytest.raises(anthropic.OverloadedError):
        await create(client)


@pytest.mark.asyncio
async def test_clear_faults(client: anthropic.AsyncAnthropic, sim: Sim):
    sim.fault(500, count=5)
    assert len(sim.http.get("/_sim/faults").json()["faults"]) == 1
    sim.http.delete("/_sim/faults").raise_for_status()
    await create(client)


def test_unknown_fault_status_is_rejected(sim: Sim):
    assert sim.http.post("/_sim/faults", json={"status": 418, "count": 1}).status_code == 422
