"""Billing: daily caps, reservations before each model call, settlement after it, usage snapshot."""

from __future__ import annotations

from pydantic import Field

from .base import Contract, request_endpoint

BILLING_QUEUE = "billing"


class BudgetCheck(Contract):
    organization_id: str = Field(description="Organization to check.")


class BudgetVerdict(Contract):
    ok: bool = Field(description="Whether a new turn may start.")
    code: str | None = Field(default=None, description="agent_budget_exceeded when refused.")
    message: str | None = Field(default=None, description="Seed 000's exact refusal message.")
    remaining_usd_micros: int | None = Field(default=None, description="Remaining today; null when unmetered.")


def call_reservation_id(turn_id: str, call: int | str, repeat: int = 0) -> str:
    """The reservation id of one model call: its turn and its place in the turn (the loop's call
    index, or a side task's name). Derived, never random, so a command redelivered after a crash
    reserves under the id its dead attempt used and finds that hold instead of adding one. `repeat`
    counts the times the call had to be made again after an attempt settled it but died before
    recording it (billing answers `settled`), so the repeated call is held and charged too."""
    return f"{turn_id}:{call}" if repeat == 0 else f"{turn_id}:{call}:{repeat}"


class ReserveBudget(Contract):
    reservation_id: str = Field(
        description="Id of the model call, stable across redeliveries (turn id and the call's index in the turn): "
                    "reserving again under it finds the same hold; settle with the same id.",
    )
    organization_id: str = Field(description="Organization paying.")
    model: str = Field(description="Model id priced from the rate card.")
    input_tokens: int = Field(ge=0, description="Upper estimate of prompt tokens.")
    max_output_tokens: int = Field(ge=0, description="max_tokens of the call.")
    fresh_tier: bool = Field(
        default=False,
        description="Read the org's tier fresh rather than from billing's few-second cache: the first call of a "
                    "new user message, whose reservation is that message's budget verdict (the pre-check's).",
    )


class Reservation(Contract):
    ok: bool = Field(description="Whether the call may proceed.")
    amount_usd_micros: int = Field(description="Upper-bound cost held.")
    settled: bool = Field(
        default=False,
        description="An earlier attempt already made and settled this call (it died before recording it): "
                    "nothing is held; reserve the repeated call under the next id (call_reservation_id's repeat).",
    )
    code: str | None = Field(default=None, description="agent_budget_exceeded when refused.")
    message: str | None = Field(default=None, description="Refusal message.")


class ModelUsage(Contract):
    input_tokens: int = Field(default=0, ge=0, description="Uncached input tokens.")
    output_tokens: int = Field(default=0, ge=0, description="Output tokens.")
    cache_read_tokens: int = Field(default=0, ge=0, description="Cache read tokens.")
    cache_write_5m_tokens: int = Field(default=0, ge=0, description="5-minute cache write tokens.")
    cache_write_1h_tokens: int = Field(default=0, ge=0, description="1-hour cache write tokens.")


class SettleUsage(Contract):
    """Replace a reservation by the real cost. Usage null releases it without charge."""

    reservation_id: str = Field(description="Reservation to settle; a second settle under it charges nothing more.")
    organization_id: str = Field(description="Organization.")
    user_id: str = Field(description="User the turn belongs to.")
    conversation_id: str | None = Field(
        default=None, description="Conversation whose lifetime totals grow; null for calls outside an operator "
        "conversation (the member coach keeps its session's totals itself).")
    model: str = Field(description="Model that answered.")
    usage: ModelUsage | None = Field(default=None, description="Usage reported by the provider.")
    count_message: bool = Field(default=False, description="Count one turn in ai_usage_daily.messages.")


class Settlement(Contract):
    cost_usd_micros: int = Field(description="Cost charged for the call.")


class UsageQuery(Contract):
    organization_id: str = Field(description="Organization.")


class UsageSnapshot(Contract):
    tier: str = Field(description="lite, pro, elite or unmetered.")
    cap_usd_micros: int = Field(description="Daily cap; -1 when unmetered.")
    spent_usd_micros: int = Field(description="Settled today (UTC): the real cost of finished model calls.")
    reserved_usd_micros: int = Field(description="Held now for model calls not yet settled.")
    remaining_usd_micros: int | None = Field(description="cap - spent - reserved, at least 0; null when unmetered.")
    percent_used: float = Field(description="(spent + reserved) / cap, as the precheck counts it; 0 when unmetered.")
    resets_at: str = Field(description="Next 00:00 UTC, ISO 8601.")
    show_upgrade_hint: bool = Field(description="percentUsed >= 0.8 on a metered tier: show the upgrade hint.")


BUDGET_CHECK = request_endpoint(
    "spotter.billing.precheck", BudgetCheck, BudgetVerdict, queue=BILLING_QUEUE, description="Seed 000 preCheck of the org daily cap.",
)
RESERVE = request_endpoint(
    "spotter.billing.reserve", ReserveBudget, Reservation, queue=BILLING_QUEUE, description="Hold an upper-bound cost before a model call.",
)
SETTLE = request_endpoint(
    "spotter.billing.settle", SettleUsage, Settlement, queue=BILLING_QUEUE, description="Charge the real cost of a call and release its hold.",
)
USAGE = request_endpoint(
    "spotter.billing.usage", UsageQuery, UsageSnapshot, queue=BILLING_QUEUE, description="Org daily AI spend snapshot.",
)
