"""bench/critical_path.py reads the spans the services print with OTEL_TRACES_EXPORTER=console: its reader
is checked against the SDK's own console exporter, so an SDK that prints spans differently fails here,
not as an empty report."""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from critical_path import FIRST_DELTA, Turn, spans_in, timeline  # noqa: E402


def printed(service: str, log_dir: Path, spans: list[tuple[str, trace.SpanKind, float, float, dict]], trace_id: int) -> None:
    """The spans as `service`'s log shows them: each a (name, kind, start, end, attributes), under `trace_id`,
    printed by the console exporter among the service's other log lines."""
    out = io.StringIO()
    out.write("2026-11-27 19:27:13,827 INFO gateway spotter: {\"event\": \"turn.started\"}\n")
    provider = TracerProvider(resource=Resource.create({"service.name": f"spotter-{service}"}))
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=out)))
    tracer = provider.get_tracer("test")
    parent = trace.set_span_in_context(NonRecordingSpan(SpanContext(trace_id, 0xABC, True, TraceFlags(1))))
    for name, kind, start, end, attributes in spans:
        tracer.start_span(name, context=parent, kind=kind, attributes=attributes,
                          start_time=int(start * 1e9)).end(end_time=int(end * 1e9))
    provider.shutdown()
    (log_dir / f"{service}.log").write_text(out.getvalue())


def test_the_timeline_is_read_from_the_services_console_spans(tmp_path: Path) -> None:
    t0, trace_id = time.time(), 0x0AF7651916CD43DD8448EB211C80319C
    printed("gateway", tmp_path, [
        ("POST /organizations/{orgId}/agent/messages", trace.SpanKind.SERVER, t0, t0 + 0.5, {}),
        ("SELECT", trace.SpanKind.CLIENT, t0 + 0.001, t0 + 0.0015, {"db.statement": "SELECT u.id, u.locale FROM users u"}),
    ], trace_id)
    printed("orchestrator", tmp_path, [
        ("spotter.cmd.turn.send process", trace.SpanKind.CONSUMER, t0 + 0.004, t0 + 0.4, {}),
        ("WITH", trace.SpanKind.CLIENT, t0 + 0.005, t0 + 0.007, {"db.statement": "WITH conversation AS (INSERT INTO x)"}),
        ("WITH", trace.SpanKind.CLIENT, t0 + 0.009, t0 + 0.010, {"db.statement": "WITH c AS (UPDATE y)"}),
        # The same statement again, and a span after the first delta: neither is on the way to it.
        ("WITH", trace.SpanKind.CLIENT, t0 + 0.011, t0 + 0.012, {"db.statement": "WITH c AS (UPDATE y)"}),
        ("spotter.billing.settle publish", trace.SpanKind.PRODUCER, t0 + 0.3, t0 + 0.301, {}),
    ], trace_id)
    printed("billing", tmp_path, [("spotter.billing.precheck process", trace.SpanKind.CONSUMER, t0 + 0.006, t0 + 0.0065, {})],
            0x1234)  # another trace: not this turn's

    rows = timeline([Turn(f"{trace_id:032x}", t0 + 0.25)], spans_in(tmp_path))

    assert [(label, round(start, 1), round(length, 1), n) for label, start, length, n in rows] == [
        ("gateway: POST /organizations/{orgId}/agent/messages", 0.0, 500.0, 1),
        ("gateway: SELECT (SELECT u.id, u.locale FROM…)", 1.0, 0.5, 1),
        ("orchestrator: spotter.cmd.turn.send process", 4.0, 396.0, 1),
        ("orchestrator: WITH (WITH conversation AS (INSERT…)", 5.0, 2.0, 1),
        ("orchestrator: WITH (WITH c AS (UPDATE…)", 9.0, 1.0, 1),
        (FIRST_DELTA, 250.0, 0.0, 1),
    ]


def test_a_turn_whose_trace_is_missing_is_left_out(tmp_path: Path) -> None:
    assert timeline([Turn("f" * 32, time.time())], spans_in(tmp_path)) == []
