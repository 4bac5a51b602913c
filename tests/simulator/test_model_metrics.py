"""The orchestrator's model client against the simulator: each call is measured (wall time, time to
first chunk, tokens by kind) under its model, failures under their code, and traced as a GenAI span
without user text; a NATS service serves the metrics over HTTP on SPOTTER_METRICS_PORT."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import REGISTRY

from spotter_orchestrator import model
from spotter_orchestrator.model import ModelClient, ProviderError
from spotter_orchestrator.settings import OrchestratorSettings
from spotter_shared import metrics

from .helpers import Sim

MODEL = "claude-sonnet-5-5"


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def params(text: str) -> dict:
    return {"model": MODEL, "max_tokens": 256, "messages": [{"role": "user", "content": text}]}


async def test_a_streamed_call_is_measured_under_its_model(sim: Sim) -> None:
    sim.script([{"text": "one two three four five", "tool_uses": []}], match="measure me")
    client = ModelClient(OrchestratorSettings(anthropic_base_url=sim.base_url, anthropic_api_key="test", spotter_provider_retries=0))
    before = {kind: sample("spotter_model_tokens_total", model=MODEL, kind=kind) for kind in ("input", "output")}
    calls = sample("spotter_model_call_seconds_count", model=MODEL, outcome="ok")
    firsts = sample("spotter_model_time_to_first_chunk_seconds_count", model=MODEL)
    chunks: list[str] = []

    async def on_text(text: str) -> None:
        chunks.append(text)

    reply = await client.stream(params("measure me"), on_text)
    await client.close()
    assert "".join(chunks) == "one two three four five"
    assert sample("spotter_model_call_seconds_count", model=MODEL, outcome="ok") == calls + 1
    assert sample("spotter_model_time_to_first_chunk_seconds_count", model=MODEL) == firsts + 1
    assert sample("spotter_model_tokens_total", model=MODEL, kind="input") == before["input"] + reply.usage.input_tokens
    assert sample("spotter_model_tokens_total", model=MODEL, kind="output") == before["output"] + reply.usage.output_tokens > before["output"]


async def test_a_failed_call_is_measured_under_its_code(sim: Sim) -> None:
    sim.fault(529, match="overload me")
    client = ModelClient(OrchestratorSettings(anthropic_base_url=sim.base_url, anthropic_api_key="test", spotter_provider_retries=0))
    failed = sample("spotter_model_call_seconds_count", model=MODEL, outcome="provider_overloaded")

    async def on_text(text: str) -> None:
        pass

    with pytest.raises(ProviderError):
        await client.stream(params("overload me"), on_text)
    await client.close()
    assert sample("spotter_model_call_seconds_count", model=MODEL, outcome="provider_overloaded") == failed + 1


def test_a_service_serves_its_metrics_on_the_configured_port() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    metrics.TURNS.labels("completed").inc()
    metrics.serve(port)
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    for name in ("spotter_turns_total", "spotter_tool_runs_total", "spotter_model_call_seconds",
                 "spotter_model_time_to_first_chunk_seconds", "spotter_model_tokens_total",
                 "spotter_model_cost_usd_micros_total", "spotter_redeliveries_total", "spotter_consumer_pending_messages",
                 "spotter_consumer_ack_pending_messages", "spotter_reservations_held", "spotter_reserved_usd_micros"):
        assert f"# TYPE {name}" in body, name
    assert 'spotter_turns_total{outcome="completed"}' in body


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    """The model client's spans, in memory: its tracer from a provider of the test's own, whatever
    another test of this process made the global one."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(model, "_tracer", provider.get_tracer(model.__name__))
    return exporter


async def test_a_model_call_is_a_gen_ai_span_without_user_text(sim: Sim, spans: InMemorySpanExporter) -> None:
    sim.script([{"text": "the private answer", "tool_uses": []}], match="trace me please")
    client = ModelClient(OrchestratorSettings(anthropic_base_url=sim.base_url, anthropic_api_key="test", spotter_provider_retries=0))
    spans.clear()

    async def on_text(text: str) -> None:
        pass

    reply = await client.stream(params("trace me please"), on_text)
    await client.close()
    (span,) = [s for s in spans.get_finished_spans() if s.name == f"chat {MODEL}"]
    attributes = dict(span.attributes or {})
    print(f"\n{span.name} kind={span.kind.name} " + " ".join(f"{k}={v}" for k, v in sorted(attributes.items())))
    assert span.kind == trace.SpanKind.CLIENT
    assert attributes["gen_ai.operation.name"] == "chat" and attributes["gen_ai.provider.name"] == "anthropic"
    assert attributes["gen_ai.request.model"] == MODEL and attributes["gen_ai.response.model"] == MODEL
    assert attributes["gen_ai.usage.input_tokens"] == reply.usage.input_tokens
    assert attributes["gen_ai.usage.output_tokens"] == reply.usage.output_tokens > 0
    assert attributes["gen_ai.usage.cache_read.input_tokens"] == reply.usage.cache_read_tokens
    assert "gen_ai.usage.cache_creation.input_tokens" in attributes
    assert tuple(attributes["gen_ai.response.finish_reasons"]) == ("end_turn",)
    assert attributes["gen_ai.response.time_to_first_chunk"] >= 0
    assert "private answer" not in str(attributes) and "trace me" not in str(attributes)
