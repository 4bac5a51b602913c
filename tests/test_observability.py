"""Seed 000's observability events: typed, one JSON line each, and nothing a user wrote or a secret
in them at any depth (telemetry.scrub)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pydantic
import pytest

from spotter_shared import observability, telemetry

FORBIDDEN = ["content", "text", "prompt", "message", "output", "input", "token", "apiKey", "secret", "password",
             "api_key", "API-KEY", "Password", "TEXT"]

REQUIRED: dict[type[observability.AgentEvent], dict[str, Any]] = {
    observability.TurnStarted: {"attempt": 1, "prompt_length": 42},
    observability.TurnCompleted: {"input_tokens": 10, "output_tokens": 5, "cache_read_tokens": 900, "cache_creation_tokens": 100,
                                  "cost_usd_micros": 1234, "cache_hit_ratio": 0.99, "cache_read_ratio": 0.89},
    observability.TurnFailed: {"code": "provider_overloaded"},
    observability.ToolExecuted: {"router": "workouts", "action": "create", "duration_ms": 12, "outcome": "succeeded"},
    observability.ConfirmationPending: {"router": "workouts", "action": "delete"},
    observability.DisambiguationPending: {"router": "read", "action": "members_search"},
    observability.ReplayViolation: {"violations": 1, "reasons": ["orphaned_tool_use"], "repaired": True,
                                    "blocks": [{"type": "tool_use", "input": {"q": "Saar"}, "text": "secret words"}]},
    observability.StorageSnapshot: {"day": "2026-11-24", "tables": {"ai_messages": {"rows": 3, "bytes": 8192}}},
}


def poisoned(depth: int = 3) -> dict[str, Any]:
    """Every forbidden key, holding user text, nested in mappings and lists."""
    leaf = {key: f"USER-TEXT-{key}" for key in FORBIDDEN}
    value: dict[str, Any] = dict(leaf)
    for level in range(depth):
        value = {**leaf, f"nested{level}": value, f"list{level}": [value, "plain", {"message": "USER-TEXT-deep"}]}
    return value


def lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [json.loads(r.getMessage()) for r in caplog.records]


def test_every_event_name_with_a_poisoned_payload_logs_no_user_text(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("test.observability")
    with caplog.at_level(logging.INFO, logger="test.observability"):
        for cls in observability.EVENTS:
            telemetry.event(logger, cls.name, traceId="t-1", orgId="o-1", code="x", endpoint="messages",
                            payload=poisoned(), **{k: "USER-TEXT" for k in FORBIDDEN})
    logged = lines(caplog)
    assert [line["event"] for line in logged] == [cls.name for cls in observability.EVENTS]
    for line in logged:
        assert "USER-TEXT" not in json.dumps(line), line
        assert {"traceId", "orgId", "code", "endpoint", "payload"} <= line.keys()
        assert "nested0" in json.dumps(line["payload"])  # structure kept, only the forbidden keys gone


@pytest.mark.parametrize("cls", observability.EVENTS, ids=lambda c: c.name)
def test_each_typed_event_is_one_json_line_with_its_context(cls: type[observability.AgentEvent], caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("test.observability")
    with caplog.at_level(logging.INFO, logger="test.observability"):
        cls(trace_id="trace-9", org_id="org-9", endpoint="messages", **REQUIRED[cls]).log(logger)
    (line,) = lines(caplog)
    assert line["event"] == cls.name and line["traceId"] == "trace-9" and line["orgId"] == "org-9"
    assert line["endpoint"] == "messages"
    assert "secret words" not in json.dumps(line) and "Saar" not in json.dumps(line)
    if cls is observability.TurnCompleted:
        assert (line["cacheHitRatio"], line["cacheReadRatio"], line["costUsdMicros"]) == (0.99, 0.89, 1234)
    if cls is observability.TurnFailed:
        assert line["code"] == "provider_overloaded"


@pytest.mark.parametrize("cls", observability.EVENTS, ids=lambda c: c.name)
def test_a_typed_event_refuses_fields_it_does_not_declare(cls: type[observability.AgentEvent]) -> None:
    with pytest.raises(pydantic.ValidationError):
        cls(trace_id="t", org_id="o", message="what the user typed", **REQUIRED[cls])
    with pytest.raises(pydantic.ValidationError):
        cls(org_id="o", **REQUIRED[cls])  # no trace id: refused, not logged without one


def test_scrub_keeps_keys_that_merely_contain_a_forbidden_word() -> None:
    kept = {"promptLength": 3, "inputTokens": 4, "outputTokens": 5, "messages": 2, "tokenCount": 1}
    assert telemetry.scrub({**kept, "prompt": "x", "input": {"a": 1}, "api_key": "k"}) == kept


@pytest.mark.parametrize(("env", "kinds"), [
    ({}, []),  # no collector configured: nothing exported, nothing logged every few seconds
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, ["OTLPSpanExporter"]),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, ["OTLPSpanExporter"]),
    ({"OTEL_TRACES_EXPORTER": "console"}, ["ConsoleSpanExporter"]),
    ({"OTEL_TRACES_EXPORTER": "otlp, console"}, ["OTLPSpanExporter", "ConsoleSpanExporter"]),
    ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, []),
])
def test_the_span_exporters_are_the_ones_the_standard_variables_name(env: dict[str, str], kinds: list[str]) -> None:
    assert [type(e).__name__ for e in telemetry.span_exporters(env)] == kinds


@pytest.mark.parametrize("env", [{"OTEL_TRACES_EXPORTER": "jaeger"},
                                 {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}])
def test_an_exporter_we_do_not_ship_stops_the_service_with_a_clear_error(env: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="OTEL_"):
        telemetry.span_exporters(env)


def test_the_standard_variable_switches_an_instrumentation_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_PYTHON_DISABLED_INSTRUMENTATIONS", "redis, fastapi")
    assert not telemetry.instrumented("redis") and not telemetry.instrumented("fastapi")
    assert telemetry.instrumented("asyncpg")
