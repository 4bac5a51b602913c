"""Billing service entrypoint: the broker with billing's subscribers, over a Billing core."""

from __future__ import annotations

from datetime import timedelta

from faststream import FastStream

from spotter_shared import bus
from spotter_shared.service import Infra, run_app, service_app, service_broker
from spotter_shared.storage_snapshot import SnapshotSchedule

from .core import Billing
from .handlers import responders, router
from .pricing import RateCard
from .settings import BillingSettings

__all__ = ["BillingSettings", "create_app", "run"]


def create_app(settings: BillingSettings) -> FastStream:
    schedules: list[SnapshotSchedule] = []
    serving: list[bus.Serving] = []
    cores: list[Billing] = []

    async def make_core(infra: Infra) -> Billing:
        rates = RateCard.load(settings.spotter_billing_rates_file)
        hold_ttl = timedelta(seconds=settings.spotter_billing_hold_ttl_seconds)
        # Seed 000's daily agent.storage.snapshot runs here: billing is always up and cheap to wake.
        schedule = SnapshotSchedule(infra.pool, infra.redis)
        schedule.start()
        schedules.append(schedule)
        billing = Billing(infra.pool, infra.redis, rates, hold_ttl=hold_ttl)
        await billing.start()
        cores.append(billing)
        infra.gauges.add(billing.sample_holds)
        serving.append(await responders.start(infra.broker, billing))
        return billing

    async def on_stop() -> None:
        for schedule in schedules:
            await schedule.stop()
        for core in cores:
            await core.stop()

    broker = service_broker("spotter-billing", settings, router)
    return service_app("billing", settings, broker, make_core, on_stop=on_stop, serving=serving)


def run() -> None:
    run_app(create_app(BillingSettings()))
