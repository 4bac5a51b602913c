"""Billing's subscribers: each validates its payload (the parameter is the contract) and asks the core."""

from __future__ import annotations

from faststream.nats import NatsRouter

from spotter_shared import bus
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
from spotter_shared.service import CORE, FromContext

from .core import Billing

router = NatsRouter()


@bus.subscriber(router, BUDGET_CHECK)
async def precheck(body: BudgetCheck, core: Billing = FromContext(CORE)) -> BudgetVerdict:
    return await core.precheck(body)


@bus.subscriber(router, RESERVE)
async def reserve(body: ReserveBudget, core: Billing = FromContext(CORE)) -> Reservation:
    return await core.reserve(body)


@bus.subscriber(router, SETTLE)
async def settle(body: SettleUsage, core: Billing = FromContext(CORE)) -> Settlement:
    return await core.settle(body)


@bus.subscriber(router, USAGE)
async def usage(body: UsageQuery, core: Billing = FromContext(CORE)) -> UsageSnapshot:
    return await core.usage(body)
