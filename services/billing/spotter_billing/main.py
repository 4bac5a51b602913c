"""Billing service entrypoint: one thin subscriber per billing subject over core.Billing."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from faststream import FastStream

from spotter_shared.bus import create_broker
from spotter_shared.contracts.billing import (
    BUDGET_CHECK,
    RESERVE,
    SETTLE,
    USAGE,
    BudgetCheck,
    BudgetVerdict,
    ReserveBudget,
    Reservation,
    Settlement,
    SettleUsage,
    UsageQuery,
    UsageSnapshot,
)
from spotter_shared.service import Holder, Infra, run_app, service_app
from spotter_shared.settings import CommonSettings

from .core import Billing
from .pricing import RateCard


class BillingSettings(CommonSettings):
    # A hold outlives any model call; past it the hold stops counting (crashed caller).
    spotter_billing_hold_ttl_seconds: float = 600.0
    # Another rate card than the packaged rates.json.
    spotter_billing_rates_file: Path | None = None


def create_app(settings: BillingSettings) -> FastStream:
    broker = create_broker(settings.nats_url, "spotter-billing")
    billing: Holder[Billing] = Holder()

    @broker.subscriber(BUDGET_CHECK.subject, queue=BUDGET_CHECK.queue)
    async def precheck(body: BudgetCheck) -> BudgetVerdict:
        return await billing.get().precheck(body)

    @broker.subscriber(RESERVE.subject, queue=RESERVE.queue)
    async def reserve(body: ReserveBudget) -> Reservation:
        return await billing.get().reserve(body)

    @broker.subscriber(SETTLE.subject, queue=SETTLE.queue)
    async def settle(body: SettleUsage) -> Settlement:
        return await billing.get().settle(body)

    @broker.subscriber(USAGE.subject, queue=USAGE.queue)
    async def usage(body: UsageQuery) -> UsageSnapshot:
        return await billing.get().usage(body)

    async def on_ready(infra: Infra) -> None:
        rates = RateCard.load(settings.spotter_billing_rates_file)
        hold_ttl = timedelta(seconds=settings.spotter_billing_hold_ttl_seconds)
        billing.set(Billing(infra.pool, infra.redis, rates, hold_ttl=hold_ttl))

    return service_app("billing", settings, broker, on_ready)


def run() -> None:
    run_app(create_app(BillingSettings()))
