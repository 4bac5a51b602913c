"""An OTLP/HTTP trace receiver in the test process: the platform's services export their spans to it
through the standard OTEL_* variables (the same path as a production collector), and tests read them
back as plain records, grouped by trace."""

from __future__ import annotations

import gzip
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


@dataclass(frozen=True)
class Span:
    service: str
    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_id: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    events: tuple[str, ...]


def _value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, which) if which else None


@dataclass
class Collector:
    spans: list[Span] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def receive(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        received = []
        for rs in request.resource_spans:
            resource = {kv.key: _value(kv.value) for kv in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    received.append(Span(
                        service=str(resource.get("service.name", "")), name=s.name, kind=KINDS.get(s.kind, str(s.kind)),
                        trace_id=s.trace_id.hex(), span_id=s.span_id.hex(), parent_id=s.parent_span_id.hex(),
                        start_ns=s.start_time_unix_nano, end_ns=s.end_time_unix_nano,
                        attributes={kv.key: _value(kv.value) for kv in s.attributes},
                        events=tuple(e.name for e in s.events),
                    ))
        with self._lock:
            self.spans.extend(received)

    def trace(self, trace_id: str) -> list[Span]:
        with self._lock:
            return sorted((s for s in self.spans if s.trace_id == trace_id), key=lambda s: s.start_ns)

    def wait_for(self, trace_id: str, ready: Any, timeout: float = 15.0) -> list[Span]:
        """The trace's spans once `ready(spans)` holds (exports are batched, so they trickle in)."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.trace(trace_id)
            if ready(spans) or time.monotonic() > deadline:
                return spans
            time.sleep(0.1)


def render(spans: list[Span]) -> str:
    """The trace as an indented tree: service, kind, name and duration per span."""
    by_parent: dict[str, list[Span]] = {}
    ids = {s.span_id for s in spans}
    for s in spans:
        by_parent.setdefault(s.parent_id if s.parent_id in ids else "", []).append(s)
    lines: list[str] = []

    def walk(parent: str, depth: int) -> None:
        for s in by_parent.get(parent, []):
            lines.append(f"{'  ' * depth}{s.service:<22} {s.kind:<8} {s.name}  {(s.end_ns - s.start_ns) / 1e6:.1f} ms")
            walk(s.span_id, depth + 1)

    walk("", 0)
    return "\n".join(lines)


def serve() -> tuple[Collector, ThreadingHTTPServer]:
    collector = Collector()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/traces":
                self.send_error(404)
                return
            collector.receive(body)
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, name="otlp-receiver", daemon=True).start()
    return collector, server
