"""Billing's responders: each validates its payload (the parameter is the contract) and asks the core.

They are hot (a reserve and a settle per model call), so they answer on the bare NATS connection
(`bus.Responders`: no FastStream middleware per message, many requests in flight at once); the router
declares them for the AsyncAPI document and is never subscribed by FastStream."""

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
responders = bus.Responders(router)


@responders(BUDGET_CHECK)
async def precheck(body: BudgetCheck, core: Billing = FromContext(CORE)) -> BudgetVerdict:
    return await core.precheck(body)


@responders(RESERVE)
async def reserve(body: ReserveBudget, core: Billing = FromContext(CORE)) -> Reservation:
    return await core.reserve(body)


@responders(SETTLE)
async def settle(body: SettleUsage, core: Billing = FromContext(CORE)) -> Settlement:
    return await core.settle(body)


@responders(USAGE)
async def usage(body: UsageQuery, core: Billing = FromContext(CORE)) -> UsageSnapshot:
    return await core.usage(body)
