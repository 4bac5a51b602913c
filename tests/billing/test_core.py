"""Billing core against real Postgres and Redis: caps, reservations under concurrency, hold expiry,
idempotent settlement and exact increments."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from redis.asyncio import Redis

from spotter_billing.core import Billing
from spotter_shared import metrics
from spotter_shared.contracts.billing import (
    BudgetCheck,
    ModelUsage,
    ReserveBudget,
    SettleUsage,
    UsageQuery,
    UsageSnapshot,
    call_reservation_id,
)
from spotter_shared.errors import ErrorCode, SpotterError
from tests.factories import Studio, make_studio

from .conftest import HOLD_TTL, FakeClock

MODEL = "claude-sonnet-5-5"
LITE_REFUSAL = (
    "Your org has reached its AI daily spending limit ($1.00). It resets at 00:00 UTC. "
    "Upgrade your plan for a higher limit."
)


def rid() -> str:
    return f"res-{uuid.uuid4()}"


def reserve_req(studio: Studio, *, input_tokens: int = 1_000, max_output_tokens: int = 1_000, reservation_id: str | None = None) -> ReserveBudget:
    return ReserveBudget(
        reservation_id=reservation_id or rid(), organization_id=studio.org.id, model=MODEL,
        input_tokens=input_tokens, max_output_tokens=max_output_tokens,
    )


def settle_req(studio: Studio, conversation_id: str, usage: ModelUsage | None, *, reservation_id: str | None = None, count_message: bool = False) -> SettleUsage:
    return SettleUsage(
        reservation_id=reservation_id or rid(), organization_id=studio.org.id, user_id=studio.owner.user_id,
        conversation_id=conversation_id, model=MODEL, usage=usage, count_message=count_message,
    )


async def spend(billing: Billing, studio: Studio, conversation_id: str, output_tokens: int) -> int:
    """Settle a call of `output_tokens` Sonnet 5.5 output tokens ($10/MTok = 10 micros each)."""
    settled = await billing.settle(settle_req(studio, conversation_id, ModelUsage(output_tokens=output_tokens)))
    return settled.cost_usd_micros


async def usage_of(billing: Billing, studio: Studio) -> UsageSnapshot:
    return await billing.usage(UsageQuery(organization_id=studio.org.id))


async def daily_row(pool: asyncpg.Pool, studio: Studio) -> asyncpg.Record | None:
    return await pool.fetchrow(
        "SELECT * FROM ai_usage_daily WHERE organization_id = $1 AND user_id = $2", studio.org.id, studio.owner.user_id
    )


# ---------------------------------------------------------------------- precheck / caps


async def test_precheck_refuses_at_the_cap_with_seed_message(billing: Billing, pool: asyncpg.Pool, new_conversation: Callable) -> None:
    studio = await make_studio(pool, tier="lite")
    conversation = await new_conversation(studio)
    fresh = await billing.precheck(BudgetCheck(organization_id=studio.org.id))
    assert fresh.ok and fresh.remaining_usd_micros == 1_000_000

    await spend(billing, studio, conversation, 99_999)  # 999_990 micros
    below = await billing.precheck(BudgetCheck(organization_id=studio.org.id))
    assert below.ok and below.remaining_usd_micros == 10

    await spend(billing, studio, conversation, 1)  # exactly at the cap
    refused = await billing.precheck(BudgetCheck(organization_id=studio.org.id))
    assert (refused.ok, refused.code, refused.message, refused.remaining_usd_micros) == (
        False, "agent_budget_exceeded", LITE_REFUSAL, 0,
    )


async def test_a_new_messages_first_reservation_reads_the_tier_fresh(billing: Billing, pool: asyncpg.Pool, new_conversation: Callable) -> None:
    """Its reservation is the message's budget verdict, as the pre-check was: an upgrade counts at once.
    The calls after it take the tier from billing's cache (TIER_CACHE_S)."""
    studio = await make_studio(pool, tier="lite")
    await spend(billing, studio, await new_conversation(studio), 100_000)  # at the $1.00 cap
    assert not (await billing.reserve(reserve_req(studio))).ok
    await pool.execute("UPDATE organizations SET tier = 'pro' WHERE id = $1", uuid.UUID(studio.org.id))
    assert not (await billing.reserve(reserve_req(studio))).ok  # the cached tier: still lite
    fresh = await billing.reserve(reserve_req(studio).model_copy(update={"fresh_tier": True}))
    assert fresh.ok and fresh.amount_usd_micros > 0
    assert (await billing.reserve(reserve_req(studio))).ok  # the cache now holds pro


async def test_pro_refusal_names_five_dollars(billing: Billing, pool: asyncpg.Pool, new_conversation: Callable) -> None:
    studio = await make_studio(pool, tier="pro")
    await spend(billing, studio, await new_conversation(studio), 500_000)
    refused = await billing.precheck(BudgetCheck(organization_id=studio.org.id))
    assert not refused.ok
    assert refused.message == LITE_REFUSAL.replace("$1.00", "$5.00")
    reservation = await billing.reserve(reserve_req(studio))
    assert (reservation.ok, reservation.amount_usd_micros, reservation.code, reservation.message) == (
        False, 0, "agent_budget_exceeded", refused.message,
    )


async def test_unmetered_is_always_allowed(billing: Billing, pool: asyncpg.Pool, new_conversation: Callable) -> None:
    studio = await make_studio(pool, tier="unmetered")
    await spend(billing, studio, await new_conversation(studio), 10_000_000)  # $100
    verdict = await billing.precheck(BudgetCheck(organization_id=studio.org.id))
    assert verdict.ok and verdict.remaining_usd_micros is None
    for _ in range(3):
        held = await billing.reserve(reserve_req(studio, input_tokens=500_000, max_output_tokens=64_000))
        assert held.ok and held.amount_usd_micros == 500_000 * 4 + 64_000 * 10  # informational upper bound
    snapshot = await billing.usage(UsageQuery(organization_id=studio.org.id))
    assert (snapshot.tier, snapshot.cap_usd_micros, snapshot.spent_usd_micros) == ("unmetered", -1, 100_000_000)
    assert snapshot.remaining_usd_micros is None and snapshot.percent_used == 0.0


# ---------------------------------------------------------------------- reservations


async def test_concurrent_reserves_overrun_the_cap_by_at_most_one_hold(billing: Billing, pool: asyncpg.Pool, new_conversation: Callable) -> None:
    studio = await make_studio(pool, tier="lite")
    spent = await spend(billing, studio, await new_conversation(studio), 95_000)
    assert spent == 950_000
    # Each hold: 1_000 prompt tokens × $4 + 1_000 output × $10 = 14_000 micros.
    results = await asyncio.gather(*(billing.reserve(reserve_req(studio)) for _ in range(20)))
    granted = [r.amount_usd_micros for r in results if r.ok]
    assert all(a == 14_000 for a in granted)
    # Granted while spend + holds < cap: 950_000 + 3 × 14_000 < 1_000_000 ≤ 950_000 + 4 × 14_000.
    assert len(granted) == 4
    assert spent + sum(granted) - max(granted) < 1_000_000 < spent + sum(granted)
    refused = [r for r in results if not r.ok]
    assert all(r.code == "agent_budget_exceeded" and r.message == LITE_REFUSAL and r.amount_usd_micros == 0 for r in refused)
    verdict = await billing.precheck(BudgetCheck(organization_id=studio.org.id))
    assert not verdict.ok  # holds count as spend


async def test_reserve_is_idempotent_per_reservation_id(billing: Billing, pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool, tier="lite")
    req = reserve_req(studio, input_tokens=10_000, max_output_tokens=10_000)  # 140_000 micros
    first, second = await asyncio.gather(billing.reserve(req), billing.reserve(req))
    assert first == second and first.ok and first.amount_usd_micros == 140_000
    snapshot = await billing.usage(UsageQuery(organization_id=studio.org.id))
    assert (snapshot.reserved_usd_micros, snapshot.spent_usd_micros) == (140_000, 0)  # held once


async def test_redelivered_call_takes_over_its_own_hold(billing: Billing, pool: asyncpg.Pool, clock: FakeClock, new_conversation: Callable) -> None:
    """A replica dies mid-call; the redelivered attempt reserves under the same call id: one hold,
    refreshed for the new attempt, and one charge when it settles."""
    studio = await make_studio(pool, tier="lite")
    conversation = await new_conversation(studio)
    call = call_reservation_id(str(uuid.uuid4()), 0)
    req = reserve_req(studio, input_tokens=10_000, max_output_tokens=10_000, reservation_id=call)  # 140_000
    assert (await billing.reserve(req)).ok  # the attempt that is then SIGKILLed
    clock.advance(HOLD_TTL - timedelta(minutes=1))
    again = await billing.reserve(req)  # the redelivered attempt
    assert again.ok and again.amount_usd_micros == 140_000
    assert (await usage_of(billing, studio)).reserved_usd_micros == 140_000
    # Past the first attempt's deadline the hold still stands: the redelivered attempt owns it now.
    clock.advance(timedelta(minutes=2))
    assert (await usage_of(billing, studio)).reserved_usd_micros == 140_000
    settled = await billing.settle(settle_req(studio, conversation, ModelUsage(output_tokens=1_000), reservation_id=call))
    assert settled.cost_usd_micros == 10_000
    snapshot = await usage_of(billing, studio)
    assert (snapshot.spent_usd_micros, snapshot.reserved_usd_micros) == (10_000, 0)


async def test_redelivered_call_after_its_hold_expired_is_held_again_once(billing: Billing, pool: asyncpg.Pool, clock: FakeClock) -> None:
    studio = await make_studio(pool, tier="lite")
    req = reserve_req(studio, input_tokens=0, max_output_tokens=10_000, reservation_id=call_reservation_id(str(uuid.uuid4()), 3))
    assert (await billing.reserve(req)).ok
    clock.advance(HOLD_TTL + timedelta(seconds=1))
    assert (await usage_of(billing, studio)).reserved_usd_micros == 0
    await asyncio.gather(billing.reserve(req), billing.reserve(req))
    assert (await usage_of(billing, studio)).reserved_usd_micros == 100_000


@pytest.mark.parametrize("tier", ["pro", "unmetered"])
async def test_a_settled_call_made_again_is_held_and_charged_under_its_repeat_id(billing: Billing, pool: asyncpg.Pool, new_conversation: Callable, tier: str) -> None:
    """An attempt settles its call and dies before recording it: the redelivered attempt makes the
    call again. Billing answers `settled` for the old id (nothing held, charged once); the repeat id
    is held and charged like a new call."""
    studio = await make_studio(pool, tier=tier)
    conversation = await new_conversation(studio)
    turn = str(uuid.uuid4())
    call = call_reservation_id(turn, 0)
    req = reserve_req(studio, input_tokens=1_000, max_output_tokens=1_000, reservation_id=call)
    assert (await billing.reserve(req)).ok
    usage = ModelUsage(input_tokens=1_000, output_tokens=1_000)
    first = await billing.settle(settle_req(studio, conversation, usage, reservation_id=call))
    again = await billing.reserve(req)
    assert again.settled and not again.ok and again.amount_usd_micros == 0
    retried = await billing.settle(settle_req(studio, conversation, usage, reservation_id=call))
    assert first.cost_usd_micros == retried.cost_usd_micros == 12_000  # settle twice charges once
    assert (await usage_of(billing, studio)).reserved_usd_micros == 0
    repeat = call_reservation_id(turn, 0, repeat=1)
    assert repeat != call
    held = await billing.reserve(req.model_copy(update={"reservation_id": repeat}))
    assert held.ok and not held.settled
    assert (await usage_of(billing, studio)).reserved_usd_micros == (14_000 if tier == "pro" else 0)
    await billing.settle(settle_req(studio, conversation, usage, reservation_id=repeat))
    snapshot = await usage_of(billing, studio)
    assert (snapshot.spent_usd_micros, snapshot.reserved_usd_micros) == (24_000, 0)
    assert (await daily_row(pool, studio))["cost_usd_micros"] == 24_000


async def test_release_forgets_the_call_so_its_retry_is_held_and_charged(billing: Billing, pool: asyncpg.Pool, new_conversation: Callable) -> None:
    """A graceful shutdown releases the in-flight call; the redelivered attempt's call under the same
    id must be held and charged like any other, never run unheld against the release's zero."""
    studio = await make_studio(pool, tier="lite")
    conversation = await new_conversation(studio)
    call = call_reservation_id(str(uuid.uuid4()), 1)
    req = reserve_req(studio, input_tokens=0, max_output_tokens=10_000, reservation_id=call)
    assert (await billing.reserve(req)).ok
    assert (await billing.settle(settle_req(studio, conversation, None, reservation_id=call))).cost_usd_micros == 0
    assert (await usage_of(billing, studio)).reserved_usd_micros == 0
    assert (await billing.reserve(req)).ok
    assert (await usage_of(billing, studio)).reserved_usd_micros == 100_000
    settled = await billing.settle(settle_req(studio, conversation, ModelUsage(output_tokens=2_000), reservation_id=call))
    assert settled.cost_usd_micros == 20_000
    # A release arriving late changes nothing once the call is settled with usage.
    assert (await billing.settle(settle_req(studio, conversation, None, reservation_id=call))).cost_usd_micros == 0
    assert (await billing.settle(settle_req(studio, conversation, ModelUsage(output_tokens=2_000), reservation_id=call))).cost_usd_micros == 20_000
    snapshot = await usage_of(billing, studio)
    assert (snapshot.spent_usd_micros, snapshot.reserved_usd_micros) == (20_000, 0)


async def test_refusal_is_also_remembered(billing: Billing, pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool, tier="lite")
    big_id = rid()
    assert (await billing.reserve(reserve_req(studio, input_tokens=0, max_output_tokens=100_000, reservation_id=big_id))).ok
    req = reserve_req(studio)
    assert not (await billing.reserve(req)).ok
    await billing.settle(SettleUsage(
        reservation_id=big_id, organization_id=studio.org.id, user_id=studio.owner.user_id,
        conversation_id=str(uuid.uuid4()), model=MODEL, usage=None,
    ))
    assert not (await billing.reserve(req)).ok  # the first verdict, although budget is free again
    assert (await billing.reserve(reserve_req(studio))).ok


async def test_expired_holds_stop_counting(billing: Billing, pool: asyncpg.Pool, clock: FakeClock) -> None:
    studio = await make_studio(pool, tier="lite")
    # A caller reserves the whole day's budget, then crashes and never settles.
    crashed = await billing.reserve(reserve_req(studio, input_tokens=0, max_output_tokens=100_000))
    assert crashed.ok and crashed.amount_usd_micros == 1_000_000
    assert not (await billing.reserve(reserve_req(studio))).ok
    assert not (await billing.precheck(BudgetCheck(organization_id=studio.org.id))).ok

    clock.advance(HOLD_TTL - timedelta(seconds=1))
    assert not (await billing.precheck(BudgetCheck(organization_id=studio.org.id))).ok

    clock.advance(timedelta(seconds=2))
    verdict = await billing.precheck(BudgetCheck(organization_id=studio.org.id))
    assert verdict.ok and verdict.remaining_usd_micros == 1_000_000
    assert (await billing.reserve(reserve_req(studio))).ok


async def test_settle_releases_the_hold_and_charges_the_real_cost(billing: Billing, pool: asyncpg.Pool, new_conversation: Callable) -> None:
    studio = await make_studio(pool, tier="lite")
    conversation = await new_conversation(studio)
    reservation_id = rid()
    held = await billing.reserve(reserve_req(studio, input_tokens=0, max_output_tokens=100_000, reservation_id=reservation_id))
    assert held.ok and not (await billing.precheck(BudgetCheck(organization_id=studio.org.id))).ok

    usage = ModelUsage(input_tokens=100, output_tokens=2_000, cache_read_tokens=5_000, cache_write_1h_tokens=1_000)
    settled = await billing.settle(settle_req(studio, conversation, usage, reservation_id=reservation_id))
    assert settled.cost_usd_micros == 100 * 2 + 2_000 * 10 + 5_000 * 0.1 + 1_000 * 4  # 24_700 (reads $0.10 since 2026-10-07)
    verdict = await billing.precheck(BudgetCheck(organization_id=studio.org.id))
    assert verdict.ok and verdict.remaining_usd_micros == 1_000_000 - 24_700


async def test_settle_without_usage_only_releases(billing: Billing, pool: asyncpg.Pool, new_conversation: Callable) -> None:
    studio = await make_studio(pool, tier="lite")
    conversation = await new_conversation(studio)
    reservation_id = rid()
    assert (await billing.reserve(reserve_req(studio, input_tokens=0, max_output_tokens=100_000, reservation_id=reservation_id))).ok
    settled = await billing.settle(settle_req(studio, conversation, None, reservation_id=reservation_id, count_message=True))
    assert settled.cost_usd_micros == 0
    assert (await billing.precheck(BudgetCheck(organization_id=studio.org.id))).remaining_usd_micros == 1_000_000
    assert await daily_row(pool, studio) is None


async def test_the_holds_gauge_counts_live_holds_in_every_org(billing: Billing, pool: asyncpg.Pool, clock: FakeClock,
                                                               new_conversation: Callable) -> None:
    def gauges() -> tuple[float, float]:
        return metrics.RESERVATIONS_HELD._value.get(), metrics.RESERVED_USD._value.get()

    # Other tests' holds share this Redis: compare with what was held before.
    await billing.sample_holds()
    count, held = gauges()
    a, b = await make_studio(pool, tier="pro"), await make_studio(pool, tier="pro")
    first = await billing.reserve(reserve_req(a, reservation_id=(settled_id := rid())))
    second = await billing.reserve(reserve_req(b))
    await billing.sample_holds()
    assert gauges() == (count + 2, held + first.amount_usd_micros + second.amount_usd_micros)

    await billing.settle(settle_req(a, await new_conversation(a), ModelUsage(output_tokens=10), reservation_id=settled_id))
    await billing.sample_holds()
    assert gauges() == (count + 1, held + second.amount_usd_micros)

    clock.advance(HOLD_TTL + timedelta(seconds=1))  # the other caller died: its hold lapses
    await billing.sample_holds()
    assert gauges()[0] <= count


# ---------------------------------------------------------------------- settlement


async def test_settle_twice_charges_once(billing: Billing, pool: asyncpg.Pool, new_conversation: Callable) -> None:
    studio = await make_studio(pool, tier="pro")
    conversation = await new_conversation(studio)
    req = settle_req(studio, conversation, ModelUsage(input_tokens=1_000, output_tokens=1_000), count_message=True)
    first = await billing.settle(req)
    retried = await billing.settle(req)  # e.g. the caller timed out and retried
    raced = await asyncio.gather(*(billing.settle(settle_req(
        studio, conversation, ModelUsage(output_tokens=500), reservation_id="raced-" + req.reservation_id)) for _ in range(5)))
    assert first.cost_usd_micros == retried.cost_usd_micros == 12_000
    assert {r.cost_usd_micros for r in raced} == {5_000}

    row = await daily_row(pool, studio)
    assert (row["messages"], row["input_tokens"], row["output_tokens"], row["cost_usd_micros"]) == (1, 1_000, 1_500, 17_000)
    conv = await pool.fetchrow("SELECT * FROM ai_conversation_usage WHERE conversation_id = $1", conversation)
    assert (conv["total_output_tokens"], conv["cost_usd_micros"]) == (1_500, 17_000)
    assert (await billing.usage(UsageQuery(organization_id=studio.org.id))).spent_usd_micros == 17_000


async def test_concurrent_settles_lose_no_increment(billing: Billing, pool: asyncpg.Pool, clock: FakeClock, new_conversation: Callable) -> None:
    studio = await make_studio(pool, tier="elite")
    conversation = await new_conversation(studio)
    usage = ModelUsage(input_tokens=11, output_tokens=1_234, cache_read_tokens=5_000, cache_write_5m_tokens=300, cache_write_1h_tokens=700)
    cost = 11 * 2 + 1_234 * 10 + 5_000 * 0.1 + 300 * 2.5 + 700 * 4  # 16_412 (reads $0.10 since 2026-10-07)
    # Half of them race the first read of the spend mirror, which is initialised meanwhile.
    calls = [billing.settle(settle_req(studio, conversation, usage, count_message=True)) for _ in range(50)]
    calls += [billing.usage(UsageQuery(organization_id=studio.org.id)) for _ in range(10)]
    results = await asyncio.gather(*calls)
    assert {r.cost_usd_micros for r in results[:50]} == {16_412} == {cost}

    row = await daily_row(pool, studio)
    assert row["day"] == clock.now.date()  # the UTC day
    assert (row["messages"], row["input_tokens"], row["output_tokens"], row["cache_read_tokens"],
            row["cache_creation_tokens"], row["cost_usd_micros"]) == (50, 550, 61_700, 250_000, 50_000, 50 * 16_412)
    conv = await pool.fetchrow("SELECT * FROM ai_conversation_usage WHERE conversation_id = $1", conversation)
    assert (conv["total_input_tokens"], conv["total_output_tokens"], conv["total_cache_read_tokens"],
            conv["total_cache_creation_tokens"], conv["cost_usd_micros"]) == (550, 61_700, 250_000, 50_000, 50 * 16_412)
    # The Redis mirror agrees with Postgres exactly.
    assert (await billing.usage(UsageQuery(organization_id=studio.org.id))).spent_usd_micros == 50 * 16_412


async def test_spend_mirror_is_rebuilt_from_postgres(billing: Billing, pool: asyncpg.Pool, redis: Redis, new_conversation: Callable) -> None:
    studio = await make_studio(pool, tier="lite")
    conversation = await new_conversation(studio)
    await spend(billing, studio, conversation, 30_000)  # before the mirror exists: Postgres only
    assert (await billing.usage(UsageQuery(organization_id=studio.org.id))).spent_usd_micros == 300_000
    await spend(billing, studio, conversation, 10_000)
    keys = await redis.keys(f"spotter:billing:{{{studio.org.id}}}:spent:*")
    assert len(keys) == 1 and 86_400 < await redis.ttl(keys[0]) <= 2 * 86_400
    await redis.delete(*keys)  # e.g. Redis restarted without persistence
    assert (await billing.usage(UsageQuery(organization_id=studio.org.id))).spent_usd_micros == 400_000


async def test_settle_for_unknown_conversation_charges_nothing(billing: Billing, pool: asyncpg.Pool, new_conversation: Callable) -> None:
    studio = await make_studio(pool, tier="lite")
    req = settle_req(studio, str(uuid.uuid4()), ModelUsage(output_tokens=100))
    with pytest.raises(SpotterError) as err:
        await billing.settle(req)
    assert err.value.code == ErrorCode.NOT_FOUND
    assert await daily_row(pool, studio) is None
    # The failed attempt let go of its claim: the corrected retry is charged.
    fixed = req.model_copy(update={"conversation_id": await new_conversation(studio)})
    assert (await billing.settle(fixed)).cost_usd_micros == 1_000
    assert (await daily_row(pool, studio))["cost_usd_micros"] == 1_000


async def test_settle_for_another_orgs_conversation_charges_nothing(billing: Billing, pool: asyncpg.Pool, new_conversation: Callable) -> None:
    studio, other = await make_studio(pool, tier="lite"), await make_studio(pool, tier="lite")
    theirs = await new_conversation(other)
    with pytest.raises(SpotterError) as err:
        await billing.settle(settle_req(studio, theirs, ModelUsage(output_tokens=100)))
    assert (err.value.code, err.value.message) == (ErrorCode.NOT_FOUND, "conversation not found in this organization")
    assert await daily_row(pool, studio) is None
    assert await pool.fetchval("SELECT count(*) FROM ai_conversation_usage WHERE conversation_id = $1", theirs) == 0


# ---------------------------------------------------------------------- usage / errors


async def test_usage_snapshot(pool: asyncpg.Pool, redis: Redis, rates, new_conversation: Callable) -> None:
    clock = FakeClock(datetime(2026, 11, 22, 17, 30, tzinfo=UTC))
    billing = Billing(pool, redis, rates, clock)
    studio = await make_studio(pool, tier="pro")
    await spend(billing, studio, await new_conversation(studio), 400_000)  # $4.00
    snapshot = await billing.usage(UsageQuery(organization_id=studio.org.id))
    assert snapshot.model_dump(by_alias=False) == {
        "tier": "pro", "cap_usd_micros": 5_000_000, "spent_usd_micros": 4_000_000, "reserved_usd_micros": 0,
        "remaining_usd_micros": 1_000_000, "percent_used": 0.8, "resets_at": "2026-11-23T00:00:00Z",
        "show_upgrade_hint": True,
    }
    assert snapshot.model_dump(by_alias=True, mode="json").keys() == {
        "tier", "capUsdMicros", "spentUsdMicros", "reservedUsdMicros", "remainingUsdMicros", "percentUsed",
        "resetsAt", "showUpgradeHint",
    }
    # Yesterday's spend does not count today.
    clock.advance(timedelta(hours=7))
    snapshot = await billing.usage(UsageQuery(organization_id=studio.org.id))
    assert (snapshot.spent_usd_micros, snapshot.resets_at) == (0, "2026-11-24T00:00:00Z")


async def test_usage_reports_holds_apart_and_hints_from_80_percent(billing: Billing, pool: asyncpg.Pool, new_conversation: Callable) -> None:
    studio = await make_studio(pool, tier="lite")  # $1.00 cap
    conversation = await new_conversation(studio)
    await spend(billing, studio, conversation, 70_000)  # $0.70 settled
    call = rid()
    assert (await billing.reserve(reserve_req(studio, input_tokens=0, max_output_tokens=9_900, reservation_id=call))).ok  # $0.099 held
    snapshot = await usage_of(billing, studio)
    assert (snapshot.spent_usd_micros, snapshot.reserved_usd_micros, snapshot.remaining_usd_micros) == (700_000, 99_000, 201_000)
    assert snapshot.percent_used == 0.799 and not snapshot.show_upgrade_hint
    assert (await billing.reserve(reserve_req(studio, input_tokens=0, max_output_tokens=100))).ok  # +$0.001: 80 % exactly
    snapshot = await usage_of(billing, studio)
    assert snapshot.percent_used == 0.8 and snapshot.show_upgrade_hint and snapshot.remaining_usd_micros == 200_000


async def test_unmetered_never_shows_the_upgrade_hint(billing: Billing, pool: asyncpg.Pool, new_conversation: Callable) -> None:
    studio = await make_studio(pool, tier="unmetered")
    await spend(billing, studio, await new_conversation(studio), 10_000_000)  # $100
    snapshot = await usage_of(billing, studio)
    assert (snapshot.spent_usd_micros, snapshot.reserved_usd_micros, snapshot.percent_used) == (100_000_000, 0, 0.0)
    assert not snapshot.show_upgrade_hint and snapshot.remaining_usd_micros is None


async def test_a_model_without_a_price_today_is_refused_before_any_hold(billing: Billing, pool: asyncpg.Pool, clock: FakeClock, new_conversation: Callable) -> None:
    studio = await make_studio(pool, tier="pro")
    conversation = await new_conversation(studio)
    clock.now = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)  # the day after Sonnet 4.5's end of life
    req = reserve_req(studio).model_copy(update={"model": "claude-sonnet-4-5"})
    with pytest.raises(SpotterError) as err:
        await billing.reserve(req)
    assert err.value.code == ErrorCode.INVALID_REQUEST and "2026-12-01" in err.value.message
    with pytest.raises(SpotterError):
        await billing.settle(settle_req(studio, conversation, ModelUsage(output_tokens=1)).model_copy(update={"model": "claude-sonnet-4-5"}))
    snapshot = await usage_of(billing, studio)
    assert (snapshot.spent_usd_micros, snapshot.reserved_usd_micros) == (0, 0)
    assert await daily_row(pool, studio) is None


async def test_unknown_organization_is_not_found(billing: Billing) -> None:
    org = str(uuid.uuid4())
    user, conversation = str(uuid.uuid4()), str(uuid.uuid4())
    calls = [
        billing.precheck(BudgetCheck(organization_id=org)),
        billing.reserve(ReserveBudget(reservation_id=rid(), organization_id=org, model=MODEL, input_tokens=1, max_output_tokens=1)),
        billing.settle(SettleUsage(reservation_id=rid(), organization_id=org, user_id=user, conversation_id=conversation,
                                   model=MODEL, usage=ModelUsage(output_tokens=1))),
        billing.usage(UsageQuery(organization_id=org)),
    ]
    for call in calls:
        with pytest.raises(SpotterError) as err:
            await call
        assert err.value.code == ErrorCode.NOT_FOUND


async def test_malformed_ids_and_unknown_models_are_invalid(billing: Billing, pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool, tier="lite")
    with pytest.raises(SpotterError) as err:
        await billing.precheck(BudgetCheck(organization_id="not-a-uuid"))
    assert err.value.code == ErrorCode.INVALID_REQUEST
    with pytest.raises(SpotterError) as err:
        await billing.reserve(reserve_req(studio).model_copy(update={"model": "gpt-imaginary"}))
    assert err.value.code == ErrorCode.INVALID_REQUEST
