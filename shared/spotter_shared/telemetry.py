"""Logging and OpenTelemetry set-up, one call per process."""

from __future__ import annotations

import logging
import sys

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from .settings import CommonSettings

_configured = False

# seed 000 scrub(): these keys never leave the server in telemetry.
SCRUBBED_KEYS = frozenset({"content", "text", "prompt", "message", "output", "input", "token", "apiKey", "secret", "password"})


def scrub(attrs: dict) -> dict:
    return {k: v for k, v in attrs.items() if k not in SCRUBBED_KEYS}


def setup(service: str, settings: CommonSettings) -> None:
    global _configured
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
    provider = TracerProvider(resource=Resource.create({"service.name": f"spotter-{service}"}))
    if settings.spotter_otel_exporter == "console":
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    trace.set_tracer_provider(provider)


def event(logger: logging.Logger, name: str, **attrs: object) -> None:
    """Typed observability events of seed 000 (agent.turn.completed, …), scrubbed of user text."""
    safe = scrub(attrs)
    logger.info("%s %s", name, " ".join(f"{k}={v}" for k, v in safe.items()))
    span = trace.get_current_span()
    if span.is_recording():
        span.add_event(name, {k: v if isinstance(v, (str, int, float, bool)) else str(v) for k, v in safe.items()})
