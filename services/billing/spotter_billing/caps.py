"""Seed 000's per-org daily $ cap: the tier table, the refusal and the preCheck verdict."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from spotter_shared.contracts.billing import BudgetVerdict
from spotter_shared.errors import ErrorCode, SpotterError

UNMETERED = -1

# PLATFORM_TIER_MAP.aiDailyBudgetUsdMicros (seed 000).
TIER_DAILY_CAP_USD_MICROS: dict[str, int] = {
    "lite": 1_000_000,
    "pro": 5_000_000,
    "elite": 25_000_000,
    "unmetered": UNMETERED,
}


def daily_cap(tier: str) -> int:
    try:
        return TIER_DAILY_CAP_USD_MICROS[tier]
    except KeyError:
        raise SpotterError(ErrorCode.INTERNAL, f"tier {tier!r} has no daily cap") from None


def format_usd(micros: int) -> str:
    return str((Decimal(micros) / 1_000_000).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def refusal_message(cap_usd_micros: int) -> str:
    return (
        f"Your org has reached its AI daily spending limit (${format_usd(cap_usd_micros)}). "
        "It resets at 00:00 UTC. Upgrade your plan for a higher limit."
    )


def precheck_verdict(cap_usd_micros: int, spent_usd_micros: int) -> BudgetVerdict:
    """Seed 000 preCheck: unmetered allows; spent >= cap refuses with remaining 0."""
    if cap_usd_micros == UNMETERED:
        return BudgetVerdict(ok=True)
    if spent_usd_micros >= cap_usd_micros:
        return BudgetVerdict(
            ok=False,
            code=ErrorCode.AGENT_BUDGET_EXCEEDED.value,
            message=refusal_message(cap_usd_micros),
            remaining_usd_micros=0,
        )
    return BudgetVerdict(ok=True, remaining_usd_micros=cap_usd_micros - spent_usd_micros)
