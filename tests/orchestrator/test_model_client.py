"""The orchestrator's lean Messages API client (model.py over messages_http.py) against the simulator.

Parity: the simulator's replies are recorded over HTTP once, then the same bytes go through the
anthropic SDK's path (what model.py used to do: `messages.stream(...)`, `get_final_message()`,
`block.model_dump(mode="json", exclude_none=True)`) and through the lean client; the ModelReply must
be equal, key order included, since stored content is replayed to the model byte for byte.

Replies the simulator cannot give (recorded bytes, rarer blocks, a cut connection, a stall, odd retry
headers) come from a small aiohttp server of the test's own: the client always talks over real sockets."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gzip
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import aiohttp
import anthropic
import httpx
import httpx2
import pytest
from aiohttp import web
from aiohttp.test_utils import RawTestServer
from multidict import CIMultiDict, CIMultiDictProxy
from anthropic._constants import ANTHROPIC_API_VERSION
from opentelemetry.sdk.trace import TracerProvider

from spotter_orchestrator import messages_http
from spotter_orchestrator.messages_http import BodyEncoder, MessagesHTTP, ProviderFailure, parse_sse, retry_delay, should_retry
from spotter_orchestrator.model import ModelClient, ModelReply, ProviderError
from spotter_orchestrator.settings import OrchestratorSettings
from spotter_shared.contracts.billing import ModelUsage
from spotter_shared.errors import ErrorCode
from spotter_sim import SimClock, SimConfig, create_app

from tests.servers import serve_in_thread
from tests.simulator.helpers import DEMO_TOOLS, LEGACY_MODEL, MODEL, Sim

SYSTEM = [{"type": "text", "text": "You are Spotter. Hebrew: סשן.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
TOOLS = [*DEMO_TOOLS[:-1], {**DEMO_TOOLS[-1], "cache_control": {"type": "ephemeral", "ttl": "1h"}}]

# Replies the simulator is scripted to give: text, thinking + text + tool use (5.x models sign their
# thinking), several tools with nested, null and non-ASCII input, escapes, and a text-only 4.x reply.
SCRIPTS: dict[str, tuple[str, dict[str, Any]]] = {
    "plain": (MODEL, {"text": "Three members are overdue: Dana, Noa and Eli.", "tool_uses": []}),
    "tool": (MODEL, {"text": "Looking them up.", "tool_uses": [{"name": "read__members_search", "input": {"query": "Dana \"D\" Whitfield\\n"}}]}),
    "tools": (MODEL, {"text": "", "tool_uses": [
        {"name": "read__members_search", "input": {"query": "שרה", "filters": {"plan": None, "tags": ["a", 1, 2.5, True]}}},
        {"name": "read__programs_list", "input": {}}]}),
    "thinking": (MODEL, {"thinking": "Let me think about the schedule — carefully.", "text": "Mondays at 7:00 🏋️.", "tool_uses": []}),
    "legacy": (LEGACY_MODEL, {"text": "No thinking on 4.x, just words " * 20, "tool_uses": []}),
}


@pytest.fixture(scope="module")
def sim() -> Iterator[Sim]:
    config = SimConfig(ttft_ms=0, tokens_per_second=0, max_requests_logged=1000)
    clock = SimClock()
    with serve_in_thread(create_app(config, clock=clock), "simulator", timeout=10) as url:
        control = Sim(url, clock)
        yield control
        control.http.close()


def params(model: str, text: str, *, tools: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "max_tokens": 800, "system": SYSTEM,
                            "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}]}
    if tools:
        body["tools"] = TOOLS
    return body


def settings(sim: Sim, retries: int = 0) -> OrchestratorSettings:
    return OrchestratorSettings(anthropic_base_url=sim.base_url, anthropic_api_key="test", spotter_provider_retries=retries)


@dataclasses.dataclass
class Sent:
    """One request as the test's provider received it."""

    method: str
    path: str
    headers: CIMultiDictProxy[str]
    body: bytes
    peer: tuple[str, int]


Answer = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]


@contextlib.asynccontextmanager
async def provider(answer: Answer) -> AsyncIterator[tuple[str, list[Sent]]]:
    """A provider on a local port that answers each request with `answer`; yields its base URL and the
    requests it received."""
    sent: list[Sent] = []

    async def handle(request: web.BaseRequest) -> web.StreamResponse:
        sent.append(Sent(request.method, request.path, request.headers, await request.read(),
                         request.transport.get_extra_info("peername")[:2]))  # type: ignore[union-attr]
        return await answer(request)

    server = RawTestServer(handle, host="127.0.0.1")
    await server.start_server()
    try:
        yield f"http://127.0.0.1:{server.port}", sent
    finally:
        await server.close()


def lean_settings(url: str, retries: int = 0, key: str = "test") -> OrchestratorSettings:
    return OrchestratorSettings(anthropic_base_url=url, anthropic_api_key=key, spotter_provider_retries=retries)


async def ignore(text: str) -> None:
    pass


def record(sim: Sim, body: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    """One real reply of the simulator, raw: the SSE stream or the JSON body, and its headers."""
    with httpx.Client(timeout=10) as http:
        response = http.post(f"{sim.base_url}/v1/messages", json=body, headers={"authorization": "Bearer test"})
    assert response.status_code == 200, response.text
    return response.content, {"content-type": response.headers["content-type"], "request-id": response.headers["request-id"]}


def old_reply(final: Any) -> ModelReply:
    """model.py's reply_of and usage_of as they were on the SDK's final message."""
    usage = final.usage
    created = usage.cache_creation_input_tokens or 0
    split = getattr(usage, "cache_creation", None)
    five = getattr(split, "ephemeral_5m_input_tokens", None) if split else None
    hour = getattr(split, "ephemeral_1h_input_tokens", None) if split else None
    if five is None and hour is None:
        five, hour = 0, created
    return ModelReply(
        content=[block.model_dump(mode="json", exclude_none=True) for block in final.content],
        stop_reason=final.stop_reason,
        usage=ModelUsage(input_tokens=usage.input_tokens or 0, output_tokens=usage.output_tokens or 0,
                         cache_read_tokens=usage.cache_read_input_tokens or 0, cache_write_5m_tokens=five or 0,
                         cache_write_1h_tokens=hour or 0),
    )


async def through_sdk(raw: bytes, headers: dict[str, str], body: dict[str, Any], *, stream: bool) -> tuple[ModelReply, list[str]]:
    transport = httpx2.MockTransport(lambda request: httpx2.Response(200, headers=headers, content=raw))
    texts: list[str] = []
    async with anthropic.AsyncAnthropic(api_key="test", base_url="http://sim.test", max_retries=0,
                                        http_client=httpx2.AsyncClient(transport=transport)) as client:
        if not stream:
            return old_reply(await client.messages.create(**body)), texts
        async with client.messages.stream(**body) as s:
            async for event in s:
                if event.type == "text":
                    texts.append(event.text)
            return old_reply(await s.get_final_message()), texts


async def through_lean(raw: bytes, headers: dict[str, str], body: dict[str, Any], *, stream: bool) -> tuple[ModelReply, list[str]]:
    async def answer(request: web.BaseRequest) -> web.Response:
        return web.Response(status=200, headers=headers, body=raw)

    texts: list[str] = []

    async def on_text(text: str) -> None:
        texts.append(text)

    async with provider(answer) as (url, sent):
        client = ModelClient(lean_settings(url))
        try:
            reply = await (client.stream(body, on_text) if stream else client.create(body))
        finally:
            await client.close()
    assert len(sent) == 1
    return reply, texts


def assert_same(new: ModelReply, old: ModelReply) -> None:
    assert new == old
    # Equal dicts can differ in key order; the stored, replayed JSON may not.
    assert json.dumps(new.content, ensure_ascii=False) == json.dumps(old.content, ensure_ascii=False)


@pytest.mark.parametrize("case", sorted(SCRIPTS))
async def test_a_streamed_reply_is_the_one_the_sdk_made(sim: Sim, case: str) -> None:
    model, script = SCRIPTS[case]
    sim.script([script], match=f"parity stream {case}")
    body = params(model, f"parity stream {case}")
    if model == MODEL:
        body["thinking"] = {"type": "between_tools"}  # what ModelClient.stream adds on 5.x
    raw, headers = record(sim, {**body, "stream": True})

    old, old_texts = await through_sdk(raw, headers, body, stream=True)
    new, new_texts = await through_lean(raw, headers, {k: v for k, v in body.items() if k != "thinking"}, stream=True)
    assert_same(new, old)
    assert new_texts == old_texts
    assert [b["type"] for b in new.content] == [b["type"] for b in old.content] != []
    if case == "thinking":
        assert [b["type"] for b in new.content] == ["thinking", "text"] and new.content[0]["signature"]
    if case == "tools":
        assert new.content[-2]["input"] == script["tool_uses"][0]["input"] and new.content[-1]["input"] == {}


@pytest.mark.parametrize("case", ["tools", "legacy"])
async def test_a_created_reply_is_the_one_the_sdk_made(sim: Sim, case: str) -> None:
    model, script = SCRIPTS[case]
    sim.script([script], match=f"parity create {case}")
    body = params(model, f"parity create {case}")
    raw, headers = record(sim, body)
    old, _ = await through_sdk(raw, headers, body, stream=False)
    new, _ = await through_lean(raw, headers, body, stream=False)
    assert_same(new, old)


# Blocks the simulator never sends, as the API sends them: CRLF line ends, a comment, redacted thinking,
# citations (shaped by the SDK's own models, off the hot path), a tool with no input JSON, a block of a
# type this SDK does not know, and a message_delta that omits the cache counts (message_start's stand).
TRANSCRIPT = "\r\n\r\n".join([
    'event: message_start\r\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-5-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":30,"cache_read_input_tokens":7,"cache_creation":{"ephemeral_5m_input_tokens":10,"ephemeral_1h_input_tokens":20},"output_tokens":1}}}',
    ": a comment",
    'event: ping\r\ndata: {"type":"ping"}',
    'event: content_block_start\r\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"EmwKAhgB"}}',
    'event: content_block_stop\r\ndata: {"type":"content_block_stop","index":0}',
    'event: content_block_start\r\ndata: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":"","citations":null}}',
    'event: content_block_delta\r\ndata: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"The plan "}}',
    'event: content_block_delta\r\ndata: {"type":"content_block_delta","index":1,"delta":{"type":"citations_delta","citation":{"type":"char_location","cited_text":"plan","document_index":0,"document_title":null,"start_char_index":0,"end_char_index":4}}}',
    'event: content_block_delta\r\ndata: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"costs $40."}}',
    'event: content_block_stop\r\ndata: {"type":"content_block_stop","index":1}',
    'event: content_block_start\r\ndata: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"read__programs_list","input":{}}}',
    'event: content_block_delta\r\ndata: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}',
    'event: content_block_stop\r\ndata: {"type":"content_block_stop","index":2}',
    'event: content_block_start\r\ndata: {"type":"content_block_start","index":3,"content_block":{"type":"future_block","zeta":1,"alpha":null}}',
    'event: content_block_stop\r\ndata: {"type":"content_block_stop","index":3}',
    'event: message_delta\r\ndata: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":42}}',
    'event: message_stop\r\ndata: {"type":"message_stop"}',
    "",
]).encode()


async def test_a_transcript_of_rarer_blocks_folds_as_the_sdk_folds_it() -> None:
    headers = {"content-type": "text/event-stream", "request-id": "req_1"}
    body = params(MODEL, "rare blocks")
    old, old_texts = await through_sdk(TRANSCRIPT, headers, body, stream=True)
    new, new_texts = await through_lean(TRANSCRIPT, headers, body, stream=True)
    assert_same(new, old)
    assert new_texts == old_texts == ["The plan ", "costs $40."]
    assert new.usage == ModelUsage(input_tokens=12, output_tokens=42, cache_read_tokens=7, cache_write_5m_tokens=10,
                                   cache_write_1h_tokens=20)
    assert new.content[1]["citations"][0]["cited_text"] == "plan" and new.content[2]["input"] == {}


async def test_a_compressed_stream_is_decoded_though_none_was_asked_for() -> None:
    async def answer(request: web.BaseRequest) -> web.Response:
        return web.Response(status=200, body=gzip.compress(TRANSCRIPT),
                            headers={"content-type": "text/event-stream", "content-encoding": "gzip"})

    texts: list[str] = []

    async def on_text(text: str) -> None:
        texts.append(text)

    async with provider(answer) as (url, sent):
        client = ModelClient(lean_settings(url))
        reply = await client.stream(params(MODEL, "gzip"), on_text)
        await client.close()
    assert "accept-encoding" not in sent[0].headers
    assert texts == ["The plan ", "costs $40."] and reply.stop_reason == "tool_use"


def test_sse_events_split_anywhere_are_parsed_whole() -> None:
    events, rest = [], b""
    for i in range(0, len(TRANSCRIPT), 7):  # CRLFs and events cut across reads
        got, rest = parse_sse(rest + TRANSCRIPT[i:i + 7])
        events += got
    assert rest == b""
    assert [name for name, _ in events][:3] == ["message_start", "ping", "content_block_start"]
    assert len(events) == TRANSCRIPT.count(b"data:") and all(json.loads(data)["type"] == name for name, data in events)


# Against the simulator, live -------------------------------------------------------------------------
async def test_a_turns_request_goes_out_as_given_and_streams_its_tool_call(sim: Sim) -> None:
    sim.reset()
    sim.script([SCRIPTS["tool"][1]], match="live tool call")
    client = ModelClient(settings(sim))
    texts: list[str] = []

    async def on_text(text: str) -> None:
        texts.append(text)

    body = params(MODEL, "live tool call")
    reply = await client.stream(body, on_text)
    second = await client.stream(body, on_text)  # same catalog objects: the encoded tools are reused
    await client.close()
    assert "".join(texts) == "Looking them up." * 2
    assert [b["type"] for b in reply.content] == ["thinking", "text", "tool_use"] and reply.stop_reason == "tool_use"
    assert reply.content[2]["input"] == {"query": 'Dana "D" Whitfield\\n'}
    assert reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0
    assert [b["type"] for b in second.content] == ["thinking", "text", "tool_use"]
    logged = sim.requests()
    assert len(logged) == 2
    # Exactly the caller's parameters (cache_control, non-ASCII text), thinking for 5.x, and stream.
    assert logged[-1]["body"] == {**body, "thinking": {"type": "between_tools"}, "stream": True}


async def test_a_retryable_status_is_retried_before_the_stream_starts(sim: Sim) -> None:
    sim.reset()
    sim.script([SCRIPTS["plain"][1]], match="retry me")
    sim.fault(529, count=1, match="retry me", retry_after=0.01)
    client = ModelClient(settings(sim, retries=1))

    async def on_text(text: str) -> None:
        pass

    reply = await client.stream(params(MODEL, "retry me"), on_text)
    await client.close()
    assert reply.stop_reason == "end_turn"
    assert sorted(r["verdict"]["status"] for r in sim.requests()) == [200, 529]


@pytest.mark.parametrize(("status", "code"), [(529, ErrorCode.PROVIDER_OVERLOADED), (429, ErrorCode.PROVIDER_RATE_LIMITED),
                                              (500, ErrorCode.PROVIDER_UNAVAILABLE), (401, ErrorCode.PROVIDER_UNAUTHORIZED),
                                              (400, ErrorCode.PROVIDER_INVALID_REQUEST)])
async def test_an_error_status_maps_to_its_code(sim: Sim, status: int, code: ErrorCode) -> None:
    sim.reset()
    sim.fault(status, count=1, match=f"fail {status}")
    # Retries on: a 4xx other than 429 is not retried (the one-shot fault would have let a retry pass).
    client = ModelClient(settings(sim, retries=0 if status >= 429 else 2))

    async def on_text(text: str) -> None:
        pass

    with pytest.raises(ProviderError) as raised:
        await client.stream(params(MODEL, f"fail {status}"), on_text)
    await client.close()
    assert raised.value.code == code
    assert len(sim.requests()) == 1


async def test_an_error_event_mid_stream_is_classified_and_never_retried(sim: Sim) -> None:
    sim.reset()
    sim.script([{"text": "one two three four five six seven eight nine ten", "tool_uses": []}], match="break midway")
    sim.fault(529, count=1, match="break midway", after_tokens=3)
    client = ModelClient(settings(sim, retries=2))
    texts: list[str] = []

    async def on_text(text: str) -> None:
        texts.append(text)

    with pytest.raises(ProviderError) as raised:
        await client.stream(params(MODEL, "break midway"), on_text)
    await client.close()
    assert raised.value.code == ErrorCode.PROVIDER_OVERLOADED
    assert raised.value.message == "The AI provider is overloaded. Retry in a moment."
    assert texts and "".join(texts) != "one two three four five six seven eight nine ten"
    assert len(sim.requests()) == 1


async def test_a_provider_that_cannot_be_reached_is_unavailable_after_its_retries() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    client = ModelClient(OrchestratorSettings(anthropic_base_url=f"http://127.0.0.1:{port}", anthropic_api_key="k",
                                              spotter_provider_retries=1))
    with pytest.raises(ProviderError) as raised:
        await client.create(params(MODEL, "anyone there?"))
    await client.close()
    assert raised.value.code == ErrorCode.PROVIDER_UNAVAILABLE


# Pieces ----------------------------------------------------------------------------------------------
async def test_headers_are_the_sdks_and_carry_the_calls_trace_context(monkeypatch: pytest.MonkeyPatch) -> None:
    from spotter_orchestrator import model

    monkeypatch.setattr(model, "_tracer", TracerProvider().get_tracer(model.__name__))

    async def answer(request: web.BaseRequest) -> web.Response:
        return web.json_response({"type": "error", "error": {"type": "invalid_request_error", "message": "no"}}, status=400)

    async with provider(answer) as (url, sent):
        client = ModelClient(lean_settings(f"{url}/", retries=2, key="sk-1"))
        with pytest.raises(ProviderError) as raised:
            await client.create(params(LEGACY_MODEL, "headers"))
        await client.close()
    assert raised.value.code == ErrorCode.PROVIDER_INVALID_REQUEST
    (request,) = sent  # a 400 is not retried
    assert messages_http.API_VERSION == ANTHROPIC_API_VERSION
    assert (request.method, request.path) == ("POST", "/v1/messages")
    assert request.headers["anthropic-version"] == ANTHROPIC_API_VERSION
    assert request.headers["authorization"] == "Bearer sk-1" and request.headers["content-type"] == "application/json"
    assert request.headers["accept"] == "application/json"
    assert request.headers["traceparent"].startswith("00-")
    # Nothing the HTTP library would add on its own: no accept-encoding, no user-agent.
    assert {name.lower() for name in request.headers} == {
        "host", "content-length", "authorization", "anthropic-version", "content-type", "accept", "traceparent"}
    assert json.loads(request.body) == params(LEGACY_MODEL, "headers")
    assert request.body == BodyEncoder().encode(params(LEGACY_MODEL, "headers"))


def test_retry_delays_follow_the_sdks_schedule() -> None:
    def headers(**values: str) -> CIMultiDictProxy[str]:
        # As aiohttp gives a response's headers; the server's spelling of a name does not matter.
        return CIMultiDictProxy(CIMultiDict({k.replace("_", "-").title(): v for k, v in values.items()}))

    assert retry_delay(0, headers(retry_after_ms="250", retry_after="9")) == 0.25
    assert retry_delay(0, headers(retry_after="3")) == 3.0
    assert 0.375 <= retry_delay(0, headers(retry_after="0")) <= 0.5  # a zero ask is ignored
    assert 0.75 <= retry_delay(1, None) <= 1.0
    assert 6.0 <= retry_delay(10, None) <= 8.0
    assert 50 < retry_delay(0, headers(retry_after="Thu, 01 Jan 2099 00:00:00 GMT"))

    assert [should_retry(s, headers()) for s in (408, 409, 429, 500, 529, 400, 401, 404)] == [True] * 5 + [False] * 3
    assert should_retry(400, headers(x_should_retry="true")) and not should_retry(503, headers(x_should_retry="false"))


async def test_the_servers_retry_headers_are_followed_over_the_wire() -> None:
    """`x-should-retry: true` retries a 400 after `retry-after-ms`; `x-should-retry: false` stops a 503."""
    answers = [(400, {"x-should-retry": "true", "retry-after-ms": "20", "retry-after": "30"}), (200, {})]

    async def answer(request: web.BaseRequest) -> web.Response:
        status, headers = answers.pop(0)
        if status != 200:
            return web.json_response({"type": "error", "error": {"type": "api_error", "message": "x"}}, status=status,
                                     headers=headers)
        return web.Response(body=TRANSCRIPT, headers={"content-type": "text/event-stream", "request-id": "req_9"})

    async with provider(answer) as (url, sent):
        http = MessagesHTTP(url, "k", max_retries=2)
        started = asyncio.get_running_loop().time()
        message = await http.stream(params(MODEL, "retry"), {}, lambda: None, ignore)
        waited = asyncio.get_running_loop().time() - started
        answers[:] = [(503, {"x-should-retry": "false", "request-id": "req_10"})]
        with pytest.raises(ProviderFailure) as raised:
            await http.stream(params(MODEL, "stop"), {}, lambda: None, ignore)
        await http.aclose()
    assert (message.retries, message.request_id) == (1, "req_9") and 0.02 <= waited < 5  # retry-after-ms, not 30 s
    assert (raised.value.status, raised.value.request_id) == (503, "req_10")
    assert raised.value.body == {"type": "error", "error": {"type": "api_error", "message": "x"}}
    assert len(sent) == 3


def test_the_body_is_encoded_once_and_the_catalog_json_reused() -> None:
    encoder = BodyEncoder()
    body = {**params(MODEL, "שלום \"quoted\""), "stream": True}
    first = encoder.encode(body)
    assert json.loads(first) == body and "שלום".encode() in first
    assert first == json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    # Next turn: new lists around the same schemas and strings: the same bytes.
    rebuilt = {**body, "tools": [dict(t) for t in TOOLS], "system": [dict(b) for b in SYSTEM]}
    assert encoder.encode(rebuilt) == first
    # A changed string is a different key: never stale.
    changed = {**body, "system": [{**SYSTEM[0], "text": "other"}]}
    assert json.loads(encoder.encode(changed))["system"][0]["text"] == "other"


def test_the_same_tools_list_is_found_by_identity() -> None:
    """A catalog's tools are one list object while the catalog is cached (prompt.tool_params): its JSON is
    found without building the per-item key. Shown by what the contract forbids: changed in place, the
    same object still encodes as it was first seen."""
    encoder = BodyEncoder()
    tools = [dict(t) for t in TOOLS]
    body = {**params(MODEL, "hi"), "tools": tools}
    first = encoder.encode(body)
    tools[0]["description"] = "changed in place"
    assert encoder.encode(body) == first
    assert b"changed in place" in encoder.encode({**body, "tools": [dict(t) for t in tools]})


@pytest.mark.parametrize("tail", ["cut", "garbled", "stalled"])
async def test_a_stream_that_breaks_after_it_started_is_unavailable_and_not_retried(
        tail: str, monkeypatch: pytest.MonkeyPatch) -> None:
    head = TRANSCRIPT[:TRANSCRIPT.index(b"costs $40.")]  # up to the first text delta, whole
    head = head[:head.rindex(b"\r\n\r\n") + 4]
    if tail == "stalled":  # no byte for longer than the read timeout
        monkeypatch.setattr(messages_http, "TIMEOUT", aiohttp.ClientTimeout(total=None, connect=600.0, sock_connect=5.0, sock_read=0.3))
    release = asyncio.Event()

    async def answer(request: web.BaseRequest) -> web.StreamResponse:
        headers = {"content-type": "text/event-stream"}
        if tail == "garbled":
            return web.Response(status=200, headers=headers, body=head + b"event: content_block_delta\r\ndata: {not json\r\n\r\n")
        response = web.StreamResponse(status=200, headers=headers)  # chunked
        await response.prepare(request)
        await response.write(head)
        if tail == "cut":
            request.transport.abort()  # type: ignore[union-attr]  # the connection is lost mid-body
        else:
            await release.wait()
        return response

    texts: list[str] = []

    async def on_text(text: str) -> None:
        texts.append(text)

    async with provider(answer) as (url, sent):
        client = ModelClient(lean_settings(url, retries=2, key="k"))
        with pytest.raises(ProviderError) as raised:
            await client.stream(params(MODEL, "break"), on_text)
        await client.close()
        release.set()
    assert raised.value.code == ErrorCode.PROVIDER_UNAVAILABLE
    assert texts == ["The plan "] and len(sent) == 1


async def test_one_pooled_keep_alive_connection_serves_call_after_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Calls reuse one connection, made lazily in the running loop, whose socket has TCP keep-alive on."""
    made: list[socket.socket] = []
    make = messages_http._socket

    def spy(addr_info: tuple[Any, ...]) -> socket.socket:
        sock = make(addr_info)
        made.append(sock)
        return sock

    monkeypatch.setattr(messages_http, "_socket", spy)

    async def answer(request: web.BaseRequest) -> web.Response:
        return web.Response(body=TRANSCRIPT, headers={"content-type": "text/event-stream"})

    async with provider(answer) as (url, sent):
        client = ModelClient(lean_settings(url))
        for _ in range(3):
            await client.stream(params(MODEL, "again"), ignore)
        assert len(made) == 1  # one connection, kept alive
        (sock,) = made
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        if hasattr(socket, "TCP_KEEPINTVL"):
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL) == 60
        assert {s.peer for s in sent} == {sock.getsockname()[:2]}  # that socket carried all three calls
        await client.close()
    assert len(sent) == 3


def test_a_client_is_made_outside_any_loop_as_the_service_makes_it() -> None:
    """main.create_app makes the ModelClient before the loop runs; its HTTP session waits for a call."""
    client = ModelClient(lean_settings("https://api.example.test"))
    assert client._http._session is None
    asyncio.run(client.close())  # closing an unused client is fine
