"""Prometheus metrics of the NATS services (the gateway keeps its own registry and /metrics route).
Each service process serves them on SPOTTER_METRICS_PORT (0: off, the default outside Kubernetes,
where every service of `make up` shares one network namespace)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram, start_http_server

_LATENCY = (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64)

TURNS = Counter("spotter_turns_total", "Turns by how they ended.", ["outcome"])
REDELIVERIES = Counter("spotter_redeliveries_total", "Turn commands delivered again after a lost attempt.", ["command"])
TOOL_RUNS = Counter("spotter_tool_runs_total", "Tool calls by router, action and outcome.", ["router", "action", "outcome"])
MODEL_CALL_SECONDS = Histogram("spotter_model_call_seconds", "Model call wall time.", ["model", "outcome"], buckets=_LATENCY)
MODEL_FIRST_CHUNK_SECONDS = Histogram("spotter_model_time_to_first_chunk_seconds", "Time to the first streamed chunk.",
                                      ["model"], buckets=_LATENCY)
MODEL_TOKENS = Counter("spotter_model_tokens_total", "Tokens by model and kind (input, output, cache_read, cache_write).",
                       ["model", "kind"])
MODEL_COST = Counter("spotter_model_cost_usd_micros_total", "Settled model cost by model, in micro-dollars.", ["model"])


def serve(port: int) -> None:
    if port:
        start_http_server(port)
