"""One turn as one OpenTelemetry trace: the caller's W3C `traceparent` is continued by the gateway and
carried through every NATS hop to the orchestrator, tool-runner, billing and rag, down to Postgres,
Redis and the model call. The services export over OTLP/HTTP (the OTEL_* variables) to the test's
receiver (tests/otlp.py), and the test prints the trace it got."""

from __future__ import annotations

import secrets
import uuid

import asyncpg
import httpx

from tests.factories import make_studio
from tests.otlp import Span, render
from tests.platform import Platform

from .client import auth, sse

# Long enough (30 characters) and with names in it, so the turn also asks rag for ambient context.
MESSAGE = "could you please find Saar Levi"


def _ancestors(span: Span, by_id: dict[str, Span]) -> list[Span]:
    chain = []
    while span.parent_id in by_id:
        span = by_id[span.parent_id]
        chain.append(span)
    return chain


def _complete(spans: list[Span]) -> bool:
    names = {s.name for s in spans}
    ids = {s.span_id for s in spans}
    return ({"tool-runner.execute"} <= names and any(n.startswith("chat ") for n in names)
            and {s.service for s in spans} >= {"spotter-gateway", "spotter-orchestrator", "spotter-tool-runner",
                                               "spotter-billing", "spotter-rag"}
            # the request's own span, exported by the gateway in a batch of its own once the stream closed
            and any(s.service == "spotter-gateway" and s.kind == "server" for s in spans)
            # every span's parent arrived (each service exports in batches of its own, a child can come
            # before its parent): only the request's span hangs from outside, from the caller
            and sum(s.parent_id not in ids for s in spans) == 1
            # the turn's model calls settled, and the command's consumer span, which ends last (after the title)
            and sum(s.name.startswith("spotter.billing.settle") and s.kind == "consumer" for s in spans) >= 2
            and any(s.kind == "consumer" and "spotter.cmd.turn.send" in s.name and s.service == "spotter-orchestrator"
                    for s in spans))


async def test_one_turn_is_one_trace_from_the_http_request_to_postgres_redis_and_the_model(
    http: httpx.AsyncClient, pool: asyncpg.Pool, platform: Platform
) -> None:
    studio = await make_studio(pool, extra_members=[{"full_name": "Saar Levi", "plan": "3x/week", "payment_status": "overdue"}])
    trace_id, caller_span = secrets.token_hex(16), secrets.token_hex(8)
    headers = {**auth(studio.owner.user_id), "traceparent": f"00-{trace_id}-{caller_span}-01"}

    stream = await sse(http, "POST", f"/organizations/{studio.org.id}/agent/messages",
                       json={"conversationId": None, "message": MESSAGE}, headers=headers)
    assert stream.status == 200 and stream.types()[-1] == "done"

    spans = platform.traces.wait_for(trace_id, _complete, timeout=30)
    print(f"\ntrace {trace_id}: {len(spans)} spans\n{render(spans)}")
    assert _complete(spans), {s.service for s in spans}
    by_id = {s.span_id: s for s in spans}

    # The gateway continued the caller's trace: its server span is the child of the caller's span,
    # named by the route template, not the URL with ids in it.
    server = [s for s in spans if s.service == "spotter-gateway" and s.kind == "server"]
    assert len(server) == 1 and server[0].parent_id == caller_span
    assert server[0].name == "POST /organizations/{orgId}/agent/messages"
    # Nothing is orphaned: every span hangs under that request.
    assert all(s is server[0] or server[0] in _ancestors(s, by_id) for s in spans), render(spans)

    # The durable command crossed JetStream: the orchestrator's consumer span descends from the request.
    turn = [s for s in spans if s.service == "spotter-orchestrator" and s.kind == "consumer" and "spotter.cmd.turn.send" in s.name]
    assert len(turn) == 1

    model = [s for s in spans if s.name.startswith("chat ")]
    assert all(turn[0] in _ancestors(s, by_id) for s in model)
    first = model[0].attributes
    assert first["gen_ai.operation.name"] == "chat" and first["gen_ai.provider.name"] == "anthropic"
    assert first["gen_ai.usage.output_tokens"] > 0 and "gen_ai.usage.cache_read.input_tokens" in first

    tool = next(s for s in spans if s.name == "tool-runner.execute")
    assert (tool.attributes["router"], tool.attributes["action"], tool.attributes["outcome"]) == ("read", "members_search", "succeeded")
    assert turn[0] in _ancestors(tool, by_id)
    tool_sql = [s for s in spans if s.attributes.get("db.system") == "postgresql" and tool in _ancestors(s, by_id)]
    assert tool_sql, "the tool's Postgres queries are spans under the tool run"

    assert any(s.attributes.get("db.system") == "redis" for s in spans), "the turn lock's Redis calls are spans"
    for service in ("spotter-billing", "spotter-rag"):
        assert any(s.service == service and s.kind == "consumer" and turn[0] in _ancestors(s, by_id) for s in spans)

    # No user text in any span: not the message, not the member's name the tool found.
    for s in spans:
        blob = repr(s.attributes) + repr(s.events) + s.name
        assert MESSAGE not in blob and "Saar Levi" not in blob, (s.name, s.attributes)


async def test_an_error_reply_names_the_callers_trace(http: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool)
    trace_id = secrets.token_hex(16)
    response = await http.get(f"/organizations/{studio.org.id}/agent/conversations/{uuid.uuid4()}",
                              headers={**auth(studio.owner.user_id), "traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"})
    assert response.status_code == 404
    assert response.json()["error"]["traceId"] == trace_id == response.headers["x-trace-id"]


async def test_a_search_query_stays_out_of_the_request_span(http: httpx.AsyncClient, pool: asyncpg.Pool, platform: Platform) -> None:
    studio = await make_studio(pool)
    trace_id = secrets.token_hex(16)
    response = await http.get(f"/organizations/{studio.org.id}/agent/conversations", params={"q": "secret plans"},
                              headers={**auth(studio.owner.user_id), "traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"})
    assert response.status_code == 200
    spans = platform.traces.wait_for(trace_id, lambda got: any(s.kind == "server" for s in got))
    server = [s for s in spans if s.kind == "server"]
    assert server and server[0].attributes.get("http.route") == "/organizations/{orgId}/agent/conversations"
    assert all("secret" not in repr(s.attributes) for s in spans), [s.attributes for s in spans]
