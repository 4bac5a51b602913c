"""Seed 000's tier caps and its exact refusal."""

from __future__ import annotations

import pytest

from spotter_billing.caps import UNMETERED, daily_cap, precheck_verdict, refusal_message

LITE_MESSAGE = (
    "Your org has reached its AI daily spending limit ($1.00). It resets at 00:00 UTC. "
    "Upgrade your plan for a higher limit."
)
PRO_MESSAGE = (
    "Your org has reached its AI daily spending limit ($5.00). It resets at 00:00 UTC. "
    "Upgrade your plan for a higher limit."
)


def test_tier_caps() -> None:
    assert [daily_cap(t) for t in ("lite", "pro", "elite", "unmetered")] == [1_000_000, 5_000_000, 25_000_000, -1]


def test_exact_refusal_messages() -> None:
    assert refusal_message(1_000_000) == LITE_MESSAGE
    assert refusal_message(5_000_000) == PRO_MESSAGE
    assert "($25.00)" in refusal_message(25_000_000)


@pytest.mark.parametrize(("cap", "message"), [(1_000_000, LITE_MESSAGE), (5_000_000, PRO_MESSAGE)])
def test_refused_at_and_over_the_cap(cap: int, message: str) -> None:
    for spent in (cap, cap + 1):
        verdict = precheck_verdict(cap, spent)
        assert (verdict.ok, verdict.code, verdict.message, verdict.remaining_usd_micros) == (
            False, "agent_budget_exceeded", message, 0,
        )


def test_allowed_below_the_cap() -> None:
    verdict = precheck_verdict(1_000_000, 999_999)
    assert verdict.ok and verdict.code is None and verdict.remaining_usd_micros == 1


def test_unmetered_always_allowed() -> None:
    for spent in (0, 10**12):
        verdict = precheck_verdict(UNMETERED, spent)
        assert verdict.ok and verdict.code is None and verdict.remaining_usd_micros is None
