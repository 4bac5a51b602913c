"""Prometheus metrics of the NATS services (the gateway keeps its own registry and /metrics route).
Each service process serves them on SPOTTER_METRICS_PORT (0: off, the default outside Kubernetes,
where every service of `make up` shares one network namespace).

Counters and histograms are counted where things happen. Gauges of shared state (a durable
consumer's backlog, the budget holds in Redis) are sampled by a `Sampler` every few seconds while
metrics are served; every replica reports the same value, so dashboards take `max` over replicas."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from nats.js import JetStreamContext
from prometheus_client import Counter, Gauge, Histogram, start_http_server

log = logging.getLogger(__name__)

_LATENCY = (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64)

TURNS = Counter("spotter_turns_total", "Turns by how they ended.", ["outcome"])
REDELIVERIES = Counter("spotter_redeliveries_total", "Turn commands delivered again after a lost attempt.", ["command"])
TOOL_RUNS = Counter("spotter_tool_runs_total", "Tool calls by router, action and outcome.", ["router", "action", "outcome"])
MODEL_CALL_SECONDS = Histogram("spotter_model_call_seconds", "Model call wall time.", ["model", "outcome"], buckets=_LATENCY)
MODEL_FIRST_CHUNK_SECONDS = Histogram("spotter_model_time_to_first_chunk_seconds", "Time to the first streamed chunk.",
                                      ["model"], buckets=_LATENCY)
MODEL_TOKENS = Counter("spotter_model_tokens_total", "Tokens by model and kind (input, output, cache_read, cache_write).",
                       ["model", "kind"])
AMBIENT_SEARCHES = Counter("spotter_rag_ambient_searches_total",
                           "Ambient searches answered, by their semantic half: used; late (the query's vector missed "
                           "its wait, lexical hits only); failed; off (no embedder); timeout (no hits at all).",
                           ["semantic"])
MODEL_COST = Counter("spotter_model_cost_usd_micros_total", "Settled model cost by model, in micro-dollars.", ["model"])

CONSUMER_PENDING = Gauge("spotter_consumer_pending_messages",
                         "Messages a durable consumer has not delivered yet: its lag.", ["stream", "consumer"])
CONSUMER_ACK_PENDING = Gauge("spotter_consumer_ack_pending_messages",
                             "Messages delivered and not yet acknowledged (turns in progress).", ["stream", "consumer"])
CONSUMER_REDELIVERED = Gauge("spotter_consumer_redelivered_messages",
                             "Unacknowledged messages that have been delivered more than once.", ["stream", "consumer"])
RESERVATIONS_HELD = Gauge("spotter_reservations_held", "Live budget holds (reserved, not yet settled) in all organizations.")
RESERVED_USD = Gauge("spotter_reserved_usd_micros", "What the live budget holds reserve, in micro-dollars.")

Sample = Callable[[], Awaitable[None]]


def serve(port: int) -> None:
    if port:
        start_http_server(port)


async def sample_consumers(js: JetStreamContext, stream: str, consumers: list[str]) -> None:
    for name in consumers:
        info = await js.consumer_info(stream, name)
        CONSUMER_PENDING.labels(stream, name).set(info.num_pending or 0)
        CONSUMER_ACK_PENDING.labels(stream, name).set(info.num_ack_pending or 0)
        CONSUMER_REDELIVERED.labels(stream, name).set(info.num_redelivered or 0)


class Sampler:
    """Runs each sample every `interval_s` in the background. A failing sample (a NATS or Redis
    hiccup) is logged and tried again next round; it never stops the others or the service."""

    def __init__(self, interval_s: float) -> None:
        self._interval_s = interval_s
        self._samples: list[Sample] = []
        self._task: asyncio.Task[None] | None = None

    def add(self, sample: Sample) -> None:
        self._samples.append(sample)
        if self._task is None and self._interval_s > 0:
            self._task = asyncio.create_task(self._run(), name="metrics-sampler")

    async def sample_once(self) -> None:
        for sample in self._samples:
            try:
                await sample()
            except Exception as exc:  # noqa: BLE001 (a gauge goes stale; the service goes on)
                log.warning("metrics sample %s failed: %s", getattr(sample, "__name__", sample), exc)

    async def _run(self) -> None:
        while True:
            await self.sample_once()
            await asyncio.sleep(self._interval_s)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
