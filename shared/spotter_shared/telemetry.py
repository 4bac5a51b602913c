"""Logging and OpenTelemetry set-up, one call per process."""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from typing import Any

from opentelemetry import trace
from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor
from opentelemetry.instrumentation.redis import RedisInstrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import format_trace_id

from .settings import CommonSettings

_configured = False
# Whether spans are recorded; setup() decides (until then, as the SDK does: yes).
_recording = True

# seed 000 scrub(): these keys never leave the server in telemetry, at any depth, in any spelling
# (apiKey, api_key, API-KEY …). A key that only contains one (promptLength, inputTokens) stays.
SCRUBBED_KEYS = frozenset({"content", "text", "prompt", "message", "output", "input", "token", "apiKey", "secret", "password"})
_SCRUBBED = frozenset(re.sub(r"[^a-z0-9]", "", k.lower()) for k in SCRUBBED_KEYS)


def _scrubbed_key(key: object) -> bool:
    return isinstance(key, str) and re.sub(r"[^a-z0-9]", "", key.lower()) in _SCRUBBED


def scrub(value: Any) -> Any:
    """`value` without the scrubbed keys, in nested mappings and lists too."""
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items() if not _scrubbed_key(k)}
    if isinstance(value, (list, tuple)):
        return [scrub(v) for v in value]
    return value


def setup(service: str, settings: CommonSettings) -> None:
    global _configured, _recording
    if _configured:
        return
    _configured = True
    logging.basicConfig(
        level=settings.spotter_log_level.upper(),
        stream=sys.stderr,
        format=f"%(asctime)s %(levelname)s {service} %(name)s: %(message)s",
    )
    logging.getLogger("faststream").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    # The sampler (OTEL_TRACES_SAMPLER), batching (OTEL_BSP_*) and extra resource attributes
    # (OTEL_RESOURCE_ATTRIBUTES) are read by the SDK itself; the exporters are chosen here.
    exporters = span_exporters(os.environ)
    # Nothing to export to: spans are not recorded (about 20 µs saved on each of a turn's ~100),
    # but trace context is still made and propagated, so trace ids in logs and errors stay real.
    sampler = ALWAYS_OFF if not exporters and "OTEL_TRACES_SAMPLER" not in os.environ else None
    _recording = sampler is None
    provider = TracerProvider(resource=Resource.create({"service.name": f"spotter-{service}"}), sampler=sampler)
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    # Every Postgres query (statement text, never its parameters) and Redis command (name only,
    # arguments shown as "?") becomes a child span of whatever the service is doing. They are the
    # most frequent spans (tens per turn), so they are wrapped only when spans go somewhere.
    if exporters and instrumented("asyncpg"):
        AsyncPGInstrumentor().instrument()
    if exporters and instrumented("redis"):
        RedisInstrumentor().instrument()


def instrumented(library: str) -> bool:
    """False for a library named in OTEL_PYTHON_DISABLED_INSTRUMENTATIONS (the variable
    `opentelemetry-instrument` reads: asyncpg, redis, fastapi)."""
    disabled = os.environ.get("OTEL_PYTHON_DISABLED_INSTRUMENTATIONS", "")
    return library not in {name.strip() for name in disabled.split(",")}


def span_exporters(env: os._Environ[str] | dict[str, str]) -> list[SpanExporter]:
    """The exporters OTEL_TRACES_EXPORTER names (`otlp`, `console`, `none`, comma-separated). Unset,
    it is `otlp` when an OTLP endpoint is configured and `none` otherwise: a laptop without a
    collector does not log a failed export every few seconds. OTLP is HTTP/protobuf; the exporter
    reads OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT, _HEADERS, _TIMEOUT and _COMPRESSION itself."""
    configured = env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    names = [n.strip() for n in env.get("OTEL_TRACES_EXPORTER", "otlp" if configured else "none").split(",") if n.strip()]
    protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf"
    exporters: list[SpanExporter] = []
    for name in names:
        if name == "otlp":
            if protocol != "http/protobuf":
                raise ValueError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol}: only http/protobuf is installed")
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporters.append(OTLPSpanExporter())
        elif name == "console":
            exporters.append(ConsoleSpanExporter())
        elif name != "none":
            raise ValueError(f"OTEL_TRACES_EXPORTER={name}: expected otlp, console or none")
    return exporters


def spans_recorded() -> bool:
    """Whether this process records spans (setup found somewhere to send them, or a sampler was asked for)."""
    return _recording


def current_trace_id() -> str | None:
    """The W3C trace id (32 hex digits) of the span in progress, if one is being recorded."""
    ctx = trace.get_current_span().get_span_context()
    return format_trace_id(ctx.trace_id) if ctx.is_valid else None


def event(logger: logging.Logger, name: str, **attrs: object) -> None:
    """One observability event as a JSON log line (`{"event": name, …}`) and a span event,
    scrubbed of user text. Seed 000's events go through the typed models in observability.py."""
    safe = scrub({k: v for k, v in attrs.items() if v is not None})
    logger.info("%s", json.dumps({"event": name, **safe}, ensure_ascii=False, default=str, sort_keys=False))
    span = trace.get_current_span()
    if span.is_recording():
        span.add_event(name, {k: v if isinstance(v, (str, int, float, bool)) else json.dumps(v, default=str) for k, v in safe.items()})
