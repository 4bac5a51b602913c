"""Micro-batched settlements against real Postgres and Redis: settles arriving together share one
transaction, yet each caller gets its own cost or its own refusal, a retry in the same batch charges
once, a hot org's chain keeps two batches in flight (a failed COMMIT failing only its own), and two
billing replicas settling one hot org lose nothing. Plus the tier cache's bounds."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable

import asyncpg
import pytest
from redis.asyncio import Redis

from spotter_billing import ledger
from spotter_billing.core import Billing
from spotter_billing.pricing import RateCard
from spotter_shared.contracts.billing import BudgetCheck, ModelUsage, ReserveBudget, SettleUsage, UsageQuery
from spotter_shared.errors import ErrorCode, SpotterError
from tests.factories import Studio, make_studio

from .conftest import HOLD_TTL, FakeClock

MODEL = "claude-sonnet-5-5"  # output $10/MTok: 10 micros per output token


def settle(studio: Studio, conversation: str | None, output_tokens: int, *, user: str | None = None,
           reservation_id: str | None = None, count_message: bool = True) -> SettleUsage:
    return SettleUsage(
        reservation_id=reservation_id or f"res-{uuid.uuid4()}", organization_id=studio.org.id,
        user_id=user or studio.owner.user_id, conversation_id=conversation, model=MODEL,
        usage=ModelUsage(output_tokens=output_tokens), count_message=count_message,
    )


@pytest.fixture
def batches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of each transaction the ledger writes (to show a test really went through a batch)."""
    sizes: list[int] = []
    record = ledger.Ledger._record

    async def counted(self: ledger.Ledger, charges: list[ledger.Charge], *rest: object) -> object:
        sizes.append(len(charges))
        return await record(self, charges, *rest)

    monkeypatch.setattr(ledger.Ledger, "_record", counted)
    return sizes


async def two_waves(billing: Billing, pool: asyncpg.Pool, new_conversation: Callable, first: int, second: int,
                    ) -> tuple[Studio, str, list[SettleUsage], list[SettleUsage]]:
    """A hot org (metered, its tier cached) with one conversation, and two waves of settles for it:
    `first` of 1, 2, … output tokens, then `second` of 100, 101, …"""
    studio = await make_studio(pool, tier="elite")
    conversation = await new_conversation(studio)
    await billing.precheck(BudgetCheck(organization_id=studio.org.id))
    return (studio, conversation, [settle(studio, conversation, i + 1) for i in range(first)],
            [settle(studio, conversation, 100 + i) for i in range(second)])


def second_wave_meanwhile(monkeypatch: pytest.MonkeyPatch, billing: Billing, second: list[SettleUsage]) -> list[asyncio.Task[object]]:
    """Once the first batch starts recording, `second` is settled too (so it waits behind that batch);
    the tasks settling it, filled in then."""
    record = ledger.Ledger._record
    later: list[asyncio.Task[object]] = []

    async def recording(self: ledger.Ledger, charges: list[ledger.Charge], *rest: object) -> object:
        if not later:
            later.extend(asyncio.create_task(billing.settle(r)) for r in second)
            await asyncio.sleep(0)
        return await record(self, charges, *rest)

    monkeypatch.setattr(ledger.Ledger, "_record", recording)
    return later


async def totals(pool: asyncpg.Pool, studio: Studio) -> tuple[int, int, int]:
    """(messages, cost) in ai_usage_daily and the cost in ai_conversation_usage, for the org."""
    daily = await pool.fetchrow("SELECT coalesce(sum(messages), 0) AS m, coalesce(sum(cost_usd_micros), 0) AS c "
                                "FROM ai_usage_daily WHERE organization_id = $1", studio.org.id)
    lifetime = await pool.fetchval("SELECT coalesce(sum(cost_usd_micros), 0) FROM ai_conversation_usage "
                                   "WHERE organization_id = $1", studio.org.id)
    return int(daily["m"]), int(daily["c"]), int(lifetime)


async def test_settles_arriving_together_share_a_transaction_and_each_gets_its_own_cost(
    billing: Billing, pool: asyncpg.Pool, new_conversation: Callable, batches: list[int]
) -> None:
    studio = await make_studio(pool, tier="elite")
    a, b = await new_conversation(studio), await new_conversation(studio)
    await billing.precheck(BudgetCheck(organization_id=studio.org.id))  # the tier is cached: no await before the queue
    reqs = [settle(studio, (a, b, None)[i % 3], i + 1, user=(studio.owner.user_id, studio.coach.user_id)[i % 2])
            for i in range(30)]
    settled = await asyncio.gather(*(billing.settle(r) for r in reqs))
    assert [s.cost_usd_micros for s in settled] == [(i + 1) * 10 for i in range(30)]
    assert batches == [30]
    assert await totals(pool, studio) == (30, sum((i + 1) * 10 for i in range(30)),
                                          sum((i + 1) * 10 for i in range(30) if i % 3 != 2))


async def test_a_bad_user_or_conversation_fails_only_its_own_settle(
    billing: Billing, pool: asyncpg.Pool, new_conversation: Callable, batches: list[int]
) -> None:
    studio, other = await make_studio(pool, tier="elite"), await make_studio(pool, tier="elite")
    ours, theirs = await new_conversation(studio), await new_conversation(other)
    await billing.precheck(BudgetCheck(organization_id=studio.org.id))
    good = [settle(studio, ours, 100) for _ in range(4)]
    no_user = settle(studio, ours, 200, user=str(uuid.uuid4()))
    their_conversation = settle(studio, theirs, 300)
    outcomes = await asyncio.gather(*(billing.settle(r) for r in [good[0], no_user, good[1], their_conversation, *good[2:]]),
                                    return_exceptions=True)
    assert [o.cost_usd_micros for o in outcomes if not isinstance(o, BaseException)] == [1_000] * 4
    refused = [o for o in outcomes if isinstance(o, SpotterError)]
    assert sorted((e.code, e.message) for e in refused) == [
        (ErrorCode.NOT_FOUND, "conversation not found in this organization"), (ErrorCode.NOT_FOUND, "user not found")]
    assert batches[0] == 6 and sorted(batches[1:]) == [1] * 6  # refused together, then written one by one
    assert await totals(pool, studio) == (4, 4_000, 4_000)
    # The refused settles let go of their claims: corrected, the same calls are charged once.
    fixed = await billing.settle(their_conversation.model_copy(update={"conversation_id": ours}))
    again = await billing.settle(their_conversation.model_copy(update={"conversation_id": ours}))
    assert fixed.cost_usd_micros == again.cost_usd_micros == 3_000
    assert await totals(pool, studio) == (5, 7_000, 7_000)


async def test_a_retry_in_the_same_batch_is_answered_the_first_cost_and_charged_once(
    billing: Billing, pool: asyncpg.Pool, new_conversation: Callable, batches: list[int]
) -> None:
    studio = await make_studio(pool, tier="pro")
    conversation = await new_conversation(studio)
    await billing.precheck(BudgetCheck(organization_id=studio.org.id))
    call = settle(studio, conversation, 700)
    settled = await asyncio.gather(*(billing.settle(call) for _ in range(4)), billing.settle(settle(studio, conversation, 1)))
    assert [s.cost_usd_micros for s in settled] == [7_000] * 4 + [10]
    assert batches == [2]  # one transaction, the four attempts of the call written as one
    assert await totals(pool, studio) == (2, 7_010, 7_010)


async def test_two_replicas_settling_one_hot_org_lose_nothing_and_release_every_hold(
    pool: asyncpg.Pool, redis: Redis, rates: RateCard, clock: FakeClock, new_conversation: Callable
) -> None:
    replicas = [Billing(pool, redis, rates, clock, hold_ttl=HOLD_TTL) for _ in range(2)]
    studio = await make_studio(pool, tier="elite")
    conversations = [await new_conversation(studio) for _ in range(3)]

    async def call(i: int) -> int:
        core = replicas[i % 2]
        rid = f"res-{uuid.uuid4()}"
        held = await core.reserve(ReserveBudget(reservation_id=rid, organization_id=studio.org.id, model=MODEL,
                                                input_tokens=10, max_output_tokens=100))
        assert held.ok
        req = settle(studio, conversations[i % 3], i % 50 + 1, reservation_id=rid)
        first = await core.settle(req)
        # Its retry reaches the other replica: the same cost, nothing more charged.
        assert (await replicas[(i + 1) % 2].settle(req)).cost_usd_micros == first.cost_usd_micros
        return first.cost_usd_micros

    costs = await asyncio.gather(*(call(i) for i in range(200)))
    assert sum(costs) == sum((i % 50 + 1) * 10 for i in range(200))
    assert await totals(pool, studio) == (200, sum(costs), sum(costs))
    snapshot = await replicas[0].usage(UsageQuery(organization_id=studio.org.id))
    assert (snapshot.spent_usd_micros, snapshot.reserved_usd_micros) == (sum(costs), 0)


async def test_reserve_trusts_a_tier_it_read_moments_ago_and_the_precheck_reads_it_fresh(
    billing: Billing, pool: asyncpg.Pool, redis: Redis
) -> None:
    studio = await make_studio(pool, tier="lite")
    holds = f"spotter:billing:{{{studio.org.id}}}:holds"

    async def held(reservation_id: str) -> bool:
        await billing.reserve(ReserveBudget(reservation_id=reservation_id, organization_id=studio.org.id, model=MODEL,
                                            input_tokens=1, max_output_tokens=1))
        return bool(await redis.hexists(holds, reservation_id))

    assert await held("before")  # lite is metered: the call is held
    await pool.execute("UPDATE organizations SET tier = 'unmetered' WHERE id = $1", studio.org.id)
    assert await held("cached")  # within TIER_CACHE_S reserve still caps by the tier it read
    verdict = await billing.precheck(BudgetCheck(organization_id=studio.org.id))
    assert verdict.ok and verdict.remaining_usd_micros is None  # the precheck reads it fresh: unmetered
    assert not await held("after")  # and reserve follows the tier the precheck read


async def test_settles_arriving_while_a_batch_is_written_are_claimed_by_its_redis_step(
    billing: Billing, pool: asyncpg.Pool, redis: Redis, new_conversation: Callable, batches: list[int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A hot org's batches are chained: what waits when a batch reaches its Redis step is claimed by
    that script (no claim of its own) and written next, each call charged once, a repeat of a call of
    the batch before answered its cost."""
    studio, conversation, first, second = await two_waves(billing, pool, new_conversation, 5, 3)
    claims: list[int] = []
    claim_script = billing._ledger._claim_script

    async def counted_claim(*, keys: list[str], args: list[object]) -> list[str]:
        claims.append(len(keys))
        return await claim_script(keys=keys, args=args)

    monkeypatch.setattr(billing._ledger, "_claim_script", counted_claim)
    record = ledger.Ledger._record
    later: list[asyncio.Task[object]] = []

    async def second_wave_meanwhile(self: ledger.Ledger, charges: list[ledger.Charge], *rest: object) -> object:
        if not later:  # the first batch is being written: the second wave arrives now
            later.extend(asyncio.create_task(billing.settle(r)) for r in [*second, first[0]])
            await asyncio.sleep(0)
        return await record(self, charges, *rest)

    monkeypatch.setattr(ledger.Ledger, "_record", second_wave_meanwhile)
    settled = await asyncio.gather(*(billing.settle(r) for r in first))
    again = await asyncio.gather(*later)
    assert [s.cost_usd_micros for s in settled] == [(i + 1) * 10 for i in range(5)]
    assert [s.cost_usd_micros for s in again] == [(100 + i) * 10 for i in range(3)] + [10]
    assert claims == [5]  # the second batch was claimed by the first one's Redis step
    assert batches == [5, 3]  # and the repeat of a call of the first was answered, not written
    cost = sum((i + 1) * 10 for i in range(5)) + sum((100 + i) * 10 for i in range(3))
    assert await totals(pool, studio) == (8, cost, cost)
    snapshot = await billing.usage(UsageQuery(organization_id=studio.org.id))
    assert snapshot.spent_usd_micros == cost  # the Redis mirror too
    markers = [await redis.get(ledger.Keys(studio.org.id, billing._now().date()).settlement(r.reservation_id))
               for r in [*first, *second]]
    assert markers == [str((i + 1) * 10) for i in range(5)] + [str((100 + i) * 10) for i in range(3)]


async def test_a_failed_redis_step_fails_nothing_twice_and_the_waiting_settles_are_written_after(
    billing: Billing, pool: asyncpg.Pool, new_conversation: Callable, batches: list[int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Redis step that would have claimed the next batch fails: the batch is written again one by
    one, and the settles that were waiting are claimed and written after it, each charged once."""
    studio, conversation, first, second = await two_waves(billing, pool, new_conversation, 3, 2)
    finish_script = billing._ledger._finish_script
    failed: list[int] = []

    async def flaky_finish(*, keys: list[str], args: list[object]) -> list[str]:
        if not failed:
            failed.append(len(keys))
            raise ConnectionError("redis went away")
        return await finish_script(keys=keys, args=args)

    monkeypatch.setattr(billing._ledger, "_finish_script", flaky_finish)
    later = second_wave_meanwhile(monkeypatch, billing, second)
    settled = await asyncio.gather(*(billing.settle(r) for r in first))
    again = await asyncio.gather(*later)
    assert failed == [2 + 2 * 3 + 2]  # the failed step carried the two waiting settles' claims
    assert [s.cost_usd_micros for s in settled] == [10, 20, 30]
    assert [s.cost_usd_micros for s in again] == [1_000, 1_010]
    assert batches[0] == 3 and sorted(batches[1:]) == [1, 1, 1, 2]  # one by one, then the waiting two together
    cost = 60 + 2_010
    assert await totals(pool, studio) == (5, cost, cost)


async def test_the_next_batch_adds_its_increments_while_the_batch_before_commits(
    billing: Billing, pool: asyncpg.Pool, new_conversation: Callable, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A chain keeps two batches in flight: the next one's increments go to Postgres while the one
    before is still committing (Postgres holds them on the shared rows), and its Redis step waits for
    that COMMIT. Every call is charged once, each answered its own cost."""
    studio, conversation, first, second = await two_waves(billing, pool, new_conversation, 4, 3)
    events: list[str] = []
    first_commit_may_go = asyncio.Event()
    commit = ledger._commit

    async def held_commit(batch: list[object], opened: object) -> None:
        n = len(batch)
        events.append(f"commit {n} begins")
        if n == len(first):
            with contextlib.suppress(TimeoutError):  # a chain that waited for this COMMIT first fails below
                await asyncio.wait_for(first_commit_may_go.wait(), 5.0)
        await commit(batch, opened)
        events.append(f"commit {n} done")

    record = ledger.Ledger._record
    later: list[asyncio.Task[object]] = []

    async def traced_record(self: ledger.Ledger, charges: list[ledger.Charge], *rest: object) -> object:
        events.append(f"add {len(charges)}")
        if not later:  # the first batch is being written: the second wave arrives now
            later.extend(asyncio.create_task(billing.settle(r)) for r in second)
            await asyncio.sleep(0)
        else:
            first_commit_may_go.set()  # the next batch is adding: only now may the first one commit
        return await record(self, charges, *rest)

    finish = ledger.Ledger._finish

    async def traced_finish(self: ledger.Ledger, batch: list[object], nexts: list[object]) -> list[str]:
        events.append(f"redis step {len(batch)}")
        return await finish(self, batch, nexts)

    monkeypatch.setattr(ledger, "_commit", held_commit)
    monkeypatch.setattr(ledger.Ledger, "_record", traced_record)
    monkeypatch.setattr(ledger.Ledger, "_finish", traced_finish)
    settled = await asyncio.gather(*(billing.settle(r) for r in first))
    again = await asyncio.gather(*later)
    at = events.index
    assert events[:2] == ["add 4", "redis step 4"] and events[-2:] == ["commit 3 begins", "commit 3 done"]
    assert at("add 3") < at("commit 4 done") < at("redis step 3")  # added meanwhile; marked after the COMMIT
    assert [s.cost_usd_micros for s in settled] == [(i + 1) * 10 for i in range(4)]
    assert [s.cost_usd_micros for s in again] == [(100 + i) * 10 for i in range(3)]
    cost = sum((i + 1) * 10 for i in range(4)) + sum((100 + i) * 10 for i in range(3))
    assert await totals(pool, studio) == (7, cost, cost)
    assert (await billing.usage(UsageQuery(organization_id=studio.org.id))).spent_usd_micros == cost


async def test_a_failed_commit_fails_its_own_batch_only_and_the_next_one_is_still_written(
    billing: Billing, pool: asyncpg.Pool, new_conversation: Callable, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The COMMIT of a batch fails while the next batch is already adding: that batch's callers get
    the failure (their calls go uncharged in Postgres, never charged twice: a retry is answered the
    marked cost), and the next batch is written and answered as usual."""
    studio, conversation, first, second = await two_waves(billing, pool, new_conversation, 3, 2)
    close = ledger._close
    failed: list[bool] = []

    async def first_commit_fails(opened: object, *, commit: bool) -> None:
        if commit and not failed:
            failed.append(True)
            await close(opened, commit=False)
            raise ConnectionError("the connection went away under COMMIT")
        await close(opened, commit=commit)

    monkeypatch.setattr(ledger, "_close", first_commit_fails)
    later = second_wave_meanwhile(monkeypatch, billing, second)
    outcomes = await asyncio.gather(*(billing.settle(r) for r in first), return_exceptions=True)
    again = await asyncio.gather(*later)
    assert all(isinstance(o, ConnectionError) for o in outcomes)
    assert [s.cost_usd_micros for s in again] == [1_000, 1_010]
    assert await totals(pool, studio) == (2, 2_010, 2_010)
    retried = await billing.settle(first[0])  # answered the marked cost, charged nothing
    assert retried.cost_usd_micros == 10
    assert await totals(pool, studio) == (2, 2_010, 2_010)
