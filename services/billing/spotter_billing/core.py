"""Billing's core: seed 000's daily cap enforced by reservation (SPEC decision 7), cost recorded per
org/user/day and per conversation. Knows nothing about NATS.

Where the numbers live:
- Postgres `ai_usage_daily` is the truth of what was spent; `ai_conversation_usage` holds each
  conversation's lifetime totals (billing's own table: the conversation row is the orchestrator's).
- Redis mirrors today's settled spend per org (`…:spent:<day>`) next to the org's outstanding holds
  (`…:holds` amount per reservation, `…:deadlines` its expiry), so one Lua script sees spend and
  holds in a single atomic step. Keys carry the org in a hash tag, so this works on Redis Cluster.
- Settles are written by the Ledger (ledger.py), micro-batched per org: one transaction and one
  Redis step for the settles that arrive together, each caller answered its own cost.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import TypeVar

import asyncpg
from redis.asyncio import Redis

from spotter_shared.contracts.billing import (
    BudgetCheck,
    BudgetVerdict,
    ReserveBudget,
    Reservation,
    Settlement,
    SettleUsage,
    UsageQuery,
    UsageSnapshot,
)
from spotter_shared import metrics
from spotter_shared.batches import Batches
from spotter_shared.errors import ErrorCode, SpotterError

from .caps import UNMETERED, daily_cap, precheck_verdict, refusal_message
from .ledger import LOCK_EXCLUSIVE, PENDING, Charge, Keys, Ledger
from .pricing import RateCard
from .tiers import Tiers


Clock = Callable[[], datetime]

# How long reserve and settle trust an org's tier read by this process, and for how many orgs.
KEY_CACHE_SIZE = 10_000
# Share of the daily cap from which the usage snapshot asks the client to suggest an upgrade.
UPGRADE_HINT_AT = 0.8
T = TypeVar("T")


def utc_now() -> datetime:
    return datetime.now(UTC)


# Reserves arriving together for one org and day, in one step, each as if alone and in order.
# KEYS: the day's spend mirror, holds, deadlines, then per reserve its verdict and settlement
# markers; ARGV: now, the new holds' deadline, the verdicts' TTL, the holds' TTL, `pending`, then per
# reserve its id, upper-bound amount and the org's cap. Answers one verdict per reserve.
#
# Holds past their deadline are purged first, so a crashed caller's hold stops counting by itself
# (litellm #36926). Then a hold is granted only while spend + holds is under the cap: every grant
# but the last fits under it, so the overrun is bounded by one call (litellm #34732).
#
# The reservation id names the model call, so a call redelivered after its replica died reserves
# under the same id: it gets the first verdict and takes over its own hold (refreshed for a full
# TTL, re-added if it had expired) instead of holding a second time. A call already settled is
# answered `settled`: its attempt made and charged it, so a repeat of it needs an id of its own.
# Without a mirror (`uninitialised`) nothing new is granted: the caller loads it and asks again.
_RESERVE = """
local spent = redis.call('GET', KEYS[1])
local now = tonumber(ARGV[1])
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)) do
  redis.call('HDEL', KEYS[2], id)
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local held = 0
for _, v in ipairs(redis.call('HVALS', KEYS[2])) do held = held + tonumber(v) end
local verdicts, touched = {}, false
for i = 1, (#KEYS - 3) / 2 do
  local verdict_key, settled_key = KEYS[2 + 2 * i], KEYS[3 + 2 * i]
  local id, amount, cap = ARGV[3 + 3 * i], ARGV[4 + 3 * i], ARGV[5 + 3 * i]
  local prior = redis.call('GET', verdict_key)
  local settled = prior and redis.call('GET', settled_key)
  if settled and settled ~= ARGV[5] then
    verdicts[i] = 'settled:' .. settled
  elseif prior then
    if string.sub(prior, 1, 8) == 'granted:' and not settled then
      if redis.call('HSET', KEYS[2], id, string.sub(prior, 9)) == 1 then held = held + tonumber(string.sub(prior, 9)) end
      redis.call('ZADD', KEYS[3], ARGV[2], id)
      touched = true
    end
    verdicts[i] = prior
  elseif not spent then
    verdicts[i] = 'uninitialised'
  else
    local verdict = 'refused:0'
    if tonumber(spent) + held < tonumber(cap) then
      redis.call('HSET', KEYS[2], id, amount)
      redis.call('ZADD', KEYS[3], ARGV[2], id)
      held = held + tonumber(amount)
      touched = true
      verdict = 'granted:' .. amount
    end
    redis.call('SET', verdict_key, verdict, 'PX', ARGV[3])
    verdicts[i] = verdict
  end
end
if touched then
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
  redis.call('PEXPIRE', KEYS[3], ARGV[4])
end
return verdicts
"""

def _live_holds(holds: str, deadlines: str) -> str:
    """Lua: drop the holds past their deadline, then `values` (the live holds) and `held` (their sum)."""
    return f"""
local now = tonumber(ARGV[1])
for _, id in ipairs(redis.call('ZRANGEBYSCORE', {deadlines}, '-inf', now)) do
  redis.call('HDEL', {holds}, id)
end
redis.call('ZREMRANGEBYSCORE', {deadlines}, '-inf', now)
local values = redis.call('HVALS', {holds})
local held = 0
for _, v in ipairs(values) do held = held + tonumber(v) end
"""


# Settled spend (-1 when the mirror is missing) and live holds, after purging expired holds.
_SNAPSHOT = _live_holds("KEYS[2]", "KEYS[3]") + """
local spent = redis.call('GET', KEYS[1])
if not spent then return {-1, held} end
return {tonumber(spent), held}
"""

# One org's live holds, counted and summed (the holds gauge).
_HELD = _live_holds("KEYS[1]", "KEYS[2]") + """
return {#values, held}
"""

# A release (a call that produced no usage: a provider error, a stop, a shutdown) drops the hold and
# forgets the id, so the redelivered attempt's call under the same id reserves afresh instead of
# running unheld and settling against a zero. A call settled (or being settled) with usage is left alone.
_RELEASE = """
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('DEL', KEYS[4])
return 1
"""

_UNINITIALISED = "uninitialised"

_SPENT_TODAY = """SELECT coalesce(sum(cost_usd_micros), 0)::bigint FROM ai_usage_daily
                  WHERE organization_id = $1 AND day = $2"""

class Billing:
    def __init__(
        self,
        pool: asyncpg.Pool,
        redis: Redis,
        rates: RateCard,
        clock: Clock = utc_now,
        *,
        hold_ttl: timedelta = timedelta(minutes=10),
        settle_wait: timedelta = timedelta(seconds=5),
    ) -> None:
        self._pool = pool
        self._redis = redis
        self._rates = rates
        self._clock = clock
        self._hold_ms = _ms(hold_ttl)
        # A first verdict / settlement is remembered long enough for any retry of the same call.
        self._verdict_ms = _ms(timedelta(days=1))
        self._ledger = Ledger(
            pool, redis, settle_wait_s=settle_wait.total_seconds(), settled_ms=_ms(timedelta(days=2)),
            # A claim outlives any settle transaction; if its holder dies, a retry may claim again.
            claim_ms=_ms(timedelta(minutes=1)),
        )
        self._tiers = Tiers(pool)
        self._key_cache: dict[tuple[str, date], Keys] = {}
        self._reserve_script = redis.register_script(_RESERVE)
        self._reserves: Batches[_Reserve] = Batches(self._reserve_together)
        self._snapshot_script = redis.register_script(_SNAPSHOT)
        self._release_script = redis.register_script(_RELEASE)
        self._held_script = redis.register_script(_HELD)

    async def start(self) -> None:
        """Listen for tier changes, so a cached tier is exact (tiers.py)."""
        await self._tiers.start()

    async def stop(self) -> None:
        await self._tiers.stop()

    # ------------------------------------------------------------------ endpoints

    async def precheck(self, req: BudgetCheck) -> BudgetVerdict:
        org = _uuid(req.organization_id, "organization_id")
        now = self._now()
        # An org metered moments ago: its spend is read while its tier is read fresh (one round trip
        # instead of two on the way to the turn's first token); the fresh tier decides.
        cached = self._tiers.cached(org)
        early = asyncio.ensure_future(self._spend(org, now)) if cached is not None and daily_cap(cached) != UNMETERED else None
        try:
            cap = daily_cap(await self._tiers.read(org, fresh=True))
            if cap == UNMETERED:
                return precheck_verdict(cap, 0)
            spent, held = await (early or self._spend(org, now))
            return precheck_verdict(cap, spent + held)
        finally:
            if early is not None:
                # Never cancelled midway through a Redis call (its connection could answer the next caller).
                await asyncio.gather(early, return_exceptions=True)

    async def reserve(self, req: ReserveBudget) -> Reservation:
        org = _uuid(req.organization_id, "organization_id")
        # A new message's first call reads the tier fresh, as the pre-check does: its reservation is
        # that message's verdict, so an upgrade counts at once. Later calls take it from the cache.
        fresh = req.fresh_tier
        cap = daily_cap(self._tiers.cached(org, fresh=fresh) or await self._tiers.read(org, fresh=fresh))
        now = self._now()
        day = now.date()
        amount = self._rates.upper_bound(req.model, req.input_tokens, req.max_output_tokens, day)
        keys = self._keys(org, day)
        if cap == UNMETERED:
            # Nothing is held, but a call already settled still needs a new id to be charged again.
            settled = await self._redis.get(keys.settlement(req.reservation_id))
            if settled is not None and settled != PENDING:
                return Reservation(ok=False, amount_usd_micros=0, settled=True)
            return Reservation(ok=True, amount_usd_micros=amount)
        ask = _Reserve(req.reservation_id, keys, amount, cap, now, asyncio.get_running_loop().create_future())
        self._reserves.add(keys.spent, ask)
        verdict = await ask.verdict
        status, held = verdict.split(":")
        if status == "granted":
            return Reservation(ok=True, amount_usd_micros=int(held))
        if status == "settled":
            return Reservation(ok=False, amount_usd_micros=0, settled=True)
        return Reservation(
            ok=False,
            amount_usd_micros=0,
            code=ErrorCode.AGENT_BUDGET_EXCEEDED.value,
            message=refusal_message(cap),
        )

    async def settle(self, req: SettleUsage) -> Settlement:
        org = _uuid(req.organization_id, "organization_id")
        user = _uuid(req.user_id, "user_id")
        conversation = _uuid(req.conversation_id, "conversation_id") if req.conversation_id is not None else None
        if self._tiers.cached(org) is None:
            await self._tiers.read(org, fresh=False)  # only that the org exists
        now = self._now()
        keys = self._keys(org, now.date())
        if req.usage is None:
            await self._release_script(
                keys=[keys.holds, keys.deadlines, keys.settlement(req.reservation_id), keys.reservation(req.reservation_id)],
                args=[req.reservation_id],
            )
            return Settlement(cost_usd_micros=0)
        cost = self._rates.price(req.model, req.usage, now.date())
        usage = req.usage
        charged = await self._ledger.charge(Charge(
            reservation_id=req.reservation_id, keys=keys, user=user, conversation=conversation,
            messages=int(req.count_message), input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_creation_tokens=usage.cache_write_5m_tokens + usage.cache_write_1h_tokens, cost=cost,
        ))
        return Settlement(cost_usd_micros=charged)

    async def usage(self, req: UsageQuery) -> UsageSnapshot:
        org = _uuid(req.organization_id, "organization_id")
        tier = await self._tiers.read(org, fresh=True)
        cap = daily_cap(tier)
        now = self._now()
        spent, held = await self._spend(org, now)
        # Holds count against the cap, as in the precheck, so the footer and a refusal always agree;
        # they are reported apart so spent is only what the provider really charged.
        used = spent + held
        resets_at = datetime.combine(now.date() + timedelta(days=1), time(0), tzinfo=UTC)
        metered = cap != UNMETERED
        percent = round(used / cap, 4) if metered else 0.0
        return UsageSnapshot(
            tier=tier,
            cap_usd_micros=cap,
            spent_usd_micros=spent,
            reserved_usd_micros=held,
            remaining_usd_micros=max(0, cap - used) if metered else None,
            percent_used=percent,
            resets_at=resets_at.isoformat().replace("+00:00", "Z"),
            show_upgrade_hint=metered and percent >= UPGRADE_HINT_AT,
        )

    async def sample_holds(self) -> None:
        """Set the holds gauges from every org's holds in Redis (SCAN: no org list needed, and a
        hold whose caller died is gone once its deadline passes). On Redis Cluster, SCAN each node."""
        now_ms, count, held = _epoch_ms(self._now()), 0, 0
        async for deadlines in self._redis.scan_iter(match="spotter:billing:{*}:deadlines", count=1000):
            holds = deadlines.removesuffix("deadlines") + "holds"
            n, amount = await self._held_script(keys=[holds, deadlines], args=[now_ms])
            count, held = count + int(n), held + int(amount)
        metrics.RESERVATIONS_HELD.set(count)
        metrics.RESERVED_USD.set(held)

    # ------------------------------------------------------------------ steps

    def _now(self) -> datetime:
        now = self._clock()
        return now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)

    def _keys(self, org: str, day: date) -> Keys:
        """The org's keys for the day, one instance per org and day while cached (their names are
        worked out once, see Keys)."""
        keys = self._key_cache.get((org, day))
        if keys is None:
            if len(self._key_cache) >= KEY_CACHE_SIZE:
                self._key_cache.clear()  # bounded, as the tiers
            keys = self._key_cache[(org, day)] = Keys(org, day)
        return keys

    async def _spend(self, org: str, now: datetime) -> tuple[int, int]:
        """Today's settled spend and the live holds of an org."""
        keys = Keys(org, now.date())

        async def snapshot() -> list[int] | str:
            spent, held = await self._snapshot_script(keys=[keys.spent, keys.holds, keys.deadlines], args=[_epoch_ms(now)])
            return _UNINITIALISED if spent < 0 else [spent, held]

        spent, held = await self._with_mirror(keys, now, snapshot)
        return int(spent), int(held)

    async def _with_mirror(self, keys: Keys, now: datetime, script: Callable[[], Awaitable[T]]) -> T:
        """Run a script that needs the spend mirror, initialising the mirror when it is missing."""
        for _ in range(3):
            result = await script()
            if result != _UNINITIALISED:
                return result
            await self._init_mirror(keys, now)
        raise SpotterError(ErrorCode.INTERNAL, "spend mirror could not be initialised")

    async def _init_mirror(self, keys: Keys, now: datetime) -> None:
        """Load the day's settled spend from Postgres into Redis, unless someone already has."""
        day_end = datetime.combine(keys.day + timedelta(days=1), time(0), tzinfo=UTC)
        # Relative to our clock, one day past the day's end: never expires while the day runs.
        ttl = int((day_end - now).total_seconds()) + 86_400
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(LOCK_EXCLUSIVE, keys.org)
            spent = await conn.fetchval(_SPENT_TODAY, keys.org, keys.day)
            await self._redis.set(keys.spent, spent, ex=ttl, nx=True)

    async def _reserve_together(self, asks: list[_Reserve]) -> None:
        """One org's and day's reserves that arrived together, in one script (see _RESERVE)."""
        first = asks[0]
        keys, now_ms = first.keys, _epoch_ms(first.now)
        waiting = asks
        try:
            for _ in range(3):
                verdicts = await self._reserve_script(
                    keys=[keys.spent, keys.holds, keys.deadlines,
                          *(k for a in waiting for k in (keys.reservation(a.reservation_id), keys.settlement(a.reservation_id)))],
                    args=[now_ms, now_ms + self._hold_ms, self._verdict_ms, self._hold_ms, PENDING,
                          *(v for a in waiting for v in (a.reservation_id, a.amount, a.cap))],
                )
                for ask, verdict in zip(waiting, verdicts, strict=True):
                    if verdict != _UNINITIALISED and not ask.verdict.done():
                        ask.verdict.set_result(verdict)
                waiting = [a for a, v in zip(waiting, verdicts, strict=True) if v == _UNINITIALISED]
                if not waiting:
                    return
                await self._init_mirror(keys, first.now)
            raise SpotterError(ErrorCode.INTERNAL, "spend mirror could not be initialised")
        except BaseException as exc:
            for ask in asks:
                if not ask.verdict.done():
                    ask.verdict.set_exception(exc)
            if not isinstance(exc, Exception):
                raise

@dataclass(frozen=True)
class _Reserve:
    reservation_id: str
    keys: Keys
    amount: int
    cap: int
    now: datetime
    verdict: asyncio.Future[str]


# A UUID already in its canonical form (as every caller sends it): str(uuid.UUID(v)) would give it back.
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _uuid(value: str, field: str) -> str:
    if _CANONICAL_UUID.fullmatch(value):
        return value
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise SpotterError(ErrorCode.INVALID_REQUEST, f"{field} is not a UUID") from None


def _ms(delta: timedelta) -> int:
    return int(delta.total_seconds() * 1000)


def _epoch_ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)
