"""Billing service entrypoint: the broker with billing's subscribers, over a Billing core."""

from __future__ import annotations

from datetime import timedelta

from faststream import FastStream

from spotter_shared.service import Infra, run_app, service_app, service_broker

from .core import Billing
from .handlers import router
from .pricing import RateCard
from .settings import BillingSettings

__all__ = ["BillingSettings", "create_app", "run"]


def create_app(settings: BillingSettings) -> FastStream:
    async def make_core(infra: Infra) -> Billing:
        rates = RateCard.load(settings.spotter_billing_rates_file)
        hold_ttl = timedelta(seconds=settings.spotter_billing_hold_ttl_seconds)
        return Billing(infra.pool, infra.redis, rates, hold_ttl=hold_ttl)

    broker = service_broker("spotter-billing", settings, router)
    return service_app("billing", settings, broker, make_core)


def run() -> None:
    run_app(create_app(BillingSettings()))
