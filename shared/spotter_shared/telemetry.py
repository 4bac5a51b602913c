"""Logging and OpenTelemetry set-up, one call per process."""

from __future__ import annotations

import json
import logging
import re
import sys
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from .settings import CommonSettings

_configured = False

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
    """One observability event as a JSON log line (`{"event": name, …}`) and a span event,
    scrubbed of user text. Seed 000's events go through the typed models in observability.py."""
    safe = scrub({k: v for k, v in attrs.items() if v is not None})
    logger.info("%s", json.dumps({"event": name, **safe}, ensure_ascii=False, default=str, sort_keys=False))
    span = trace.get_current_span()
    if span.is_recording():
        span.add_event(name, {k: v if isinstance(v, (str, int, float, bool)) else json.dumps(v, default=str) for k, v in safe.items()})
