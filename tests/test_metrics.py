"""Gauges of shared state: a durable consumer's backlog as JetStream reports it (a private NATS
server), and the sampler that keeps going when a sample fails."""

from __future__ import annotations

import asyncio
import logging

import pytest
from faststream.nats import NatsBroker
from nats.js.api import ConsumerConfig, StreamConfig

from spotter_shared import metrics
from spotter_shared.bus import consumer_lag


def _gauge(gauge: metrics.Gauge, *labels: str) -> float:
    return gauge.labels(*labels)._value.get()


async def test_consumer_lag_is_what_jetstream_has_not_delivered_yet(private_nats: str) -> None:
    broker = NatsBroker(private_nats)
    await broker.connect()
    try:
        js = broker.config.connection_state.stream
        await js.add_stream(StreamConfig(name="LAG", subjects=["lag.>"]))
        await js.add_consumer("LAG", ConsumerConfig(durable_name="worker", ack_wait=30))
        sample = consumer_lag(broker, "LAG", ["worker"])

        for i in range(5):
            await js.publish(f"lag.{i}", b"{}")
        await sample()
        assert _gauge(metrics.CONSUMER_PENDING, "LAG", "worker") == 5
        assert _gauge(metrics.CONSUMER_ACK_PENDING, "LAG", "worker") == 0

        # A replica takes two and dies before acking: they are in flight, three still wait.
        sub = await js.pull_subscribe("lag.>", durable="worker", stream="LAG")
        taken = await sub.fetch(2, timeout=2)
        assert len(taken) == 2
        await sample()
        assert _gauge(metrics.CONSUMER_PENDING, "LAG", "worker") == 3
        assert _gauge(metrics.CONSUMER_ACK_PENDING, "LAG", "worker") == 2
    finally:
        await broker.stop()


async def test_a_failing_sample_is_logged_and_the_others_still_run(caplog: pytest.LogCaptureFixture) -> None:
    ran: list[str] = []

    async def broken() -> None:
        raise ConnectionError("redis went away")

    async def working() -> None:
        ran.append("working")

    sampler = metrics.Sampler(interval_s=0.01)
    sampler.add(broken)
    sampler.add(working)
    with caplog.at_level(logging.WARNING, logger="spotter_shared.metrics"):
        for _ in range(100):
            if len(ran) >= 3:
                break
            await asyncio.sleep(0.01)
    await sampler.stop()
    assert len(ran) >= 3, "the sampler kept sampling after a failure"
    assert "redis went away" in caplog.text


async def test_without_a_metrics_port_nothing_is_sampled() -> None:
    ran: list[str] = []

    async def sample() -> None:
        ran.append("x")

    sampler = metrics.Sampler(interval_s=0)
    sampler.add(sample)
    await asyncio.sleep(0.05)
    await sampler.stop()
    assert ran == []
