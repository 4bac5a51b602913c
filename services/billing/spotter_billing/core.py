"""Billing's core: seed 000's daily cap enforced by reservation (SPEC decision 7), cost recorded per
org/user/day and per conversation. Knows nothing about NATS.

Where the numbers live:
- Postgres `ai_usage_daily` is the truth of what was spent; `ai_conversation_usage` holds each
  conversation's lifetime totals (billing's own table: the conversation row is the orchestrator's).
- Redis mirrors today's settled spend per org (`…:spent:<day>`) next to the org's outstanding holds
  (`…:holds` amount per reservation, `…:deadlines` its expiry), so one Lua script sees spend and
  holds in a single atomic step. Keys carry the org in a hash tag, so this works on Redis Cluster.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from time import monotonic
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
from spotter_shared.errors import ErrorCode, SpotterError

from .caps import UNMETERED, daily_cap, precheck_verdict, refusal_message
from .pricing import RateCard


Clock = Callable[[], datetime]

# Share of the daily cap from which the usage snapshot asks the client to suggest an upgrade.
UPGRADE_HINT_AT = 0.8
T = TypeVar("T")


def utc_now() -> datetime:
    return datetime.now(UTC)


# Holds past their deadline are purged first, so a crashed caller's hold stops counting by itself
# (litellm #36926). Then the hold is granted only while spend + holds is under the cap: every
# grant but the last fits under it, so the overrun is bounded by one call (litellm #34732).
#
# The reservation id names the model call, so a call redelivered after its replica died reserves
# under the same id: it gets the first verdict and takes over its own hold (refreshed for a full
# TTL, re-added if it had expired) instead of holding a second time. A call already settled is
# answered `settled`: its attempt made and charged it, so a repeat of it needs an id of its own.
_RESERVE = """
local prior = redis.call('GET', KEYS[4])
if prior then
  local settled = redis.call('GET', KEYS[5])
  if settled and settled ~= ARGV[8] then return 'settled:' .. settled end
  if string.sub(prior, 1, 8) == 'granted:' and not settled then
    redis.call('HSET', KEYS[2], ARGV[4], string.sub(prior, 9))
    redis.call('ZADD', KEYS[3], ARGV[5], ARGV[4])
    redis.call('PEXPIRE', KEYS[2], ARGV[7])
    redis.call('PEXPIRE', KEYS[3], ARGV[7])
  end
  return prior
end
local spent = redis.call('GET', KEYS[1])
if not spent then return 'uninitialised' end
local now = tonumber(ARGV[1])
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)) do
  redis.call('HDEL', KEYS[2], id)
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local held = 0
for _, v in ipairs(redis.call('HVALS', KEYS[2])) do held = held + tonumber(v) end
local verdict = 'refused:0'
if tonumber(spent) + held < tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[2], ARGV[4], ARGV[3])
  redis.call('ZADD', KEYS[3], ARGV[5], ARGV[4])
  redis.call('PEXPIRE', KEYS[2], ARGV[7])
  redis.call('PEXPIRE', KEYS[3], ARGV[7])
  verdict = 'granted:' .. ARGV[3]
end
redis.call('SET', KEYS[4], verdict, 'PX', ARGV[6])
return verdict
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

# Marks the reservation settled, releases its hold and adds the cost to the mirror, in one step.
# The mirror is only incremented, never created here: creating it from this cost alone would
# forget the rest of the day's spend (it is initialised from Postgres instead).
_FINISH = """
redis.call('SET', KEYS[4], ARGV[2], 'PX', ARGV[3])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('INCRBY', KEYS[1], ARGV[2]) end
return 1
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

_UNCLAIM = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

_PENDING = "pending"
_UNINITIALISED = "uninitialised"

# Settles take this lock shared and initialising the mirror takes it exclusively, so the Postgres
# sum read for the mirror and the increments applied to it never miss or double-count a charge.
_LOCK_SHARED = "SELECT pg_advisory_xact_lock_shared(hashtextextended('spotter.billing.spend:' || $1::text, 0))"
_LOCK_EXCLUSIVE = "SELECT pg_advisory_xact_lock(hashtextextended('spotter.billing.spend:' || $1::text, 0))"

_SPENT_TODAY = """SELECT coalesce(sum(cost_usd_micros), 0)::bigint FROM ai_usage_daily
                  WHERE organization_id = $1 AND day = $2"""

# SQL increments: concurrent settles for the same org/user/day never lose an update (seed 000).
_UPSERT_DAILY = """
INSERT INTO ai_usage_daily (organization_id, user_id, day, messages, input_tokens, output_tokens,
                            cache_read_tokens, cache_creation_tokens, cost_usd_micros)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (organization_id, user_id, day) DO UPDATE SET
    messages = ai_usage_daily.messages + excluded.messages,
    input_tokens = ai_usage_daily.input_tokens + excluded.input_tokens,
    output_tokens = ai_usage_daily.output_tokens + excluded.output_tokens,
    cache_read_tokens = ai_usage_daily.cache_read_tokens + excluded.cache_read_tokens,
    cache_creation_tokens = ai_usage_daily.cache_creation_tokens + excluded.cache_creation_tokens,
    cost_usd_micros = ai_usage_daily.cost_usd_micros + excluded.cost_usd_micros
"""

# Selecting the conversation scopes it to the org: a conversation of another org (or none) inserts
# no row, which settle answers as not_found.
_ADD_LIFETIME = """
INSERT INTO ai_conversation_usage (conversation_id, organization_id, total_input_tokens, total_output_tokens,
                                   total_cache_read_tokens, total_cache_creation_tokens, cost_usd_micros)
SELECT id, organization_id, $3, $4, $5, $6, $7 FROM ai_conversations WHERE id = $1 AND organization_id = $2
ON CONFLICT (conversation_id) DO UPDATE SET
    total_input_tokens = ai_conversation_usage.total_input_tokens + excluded.total_input_tokens,
    total_output_tokens = ai_conversation_usage.total_output_tokens + excluded.total_output_tokens,
    total_cache_read_tokens = ai_conversation_usage.total_cache_read_tokens + excluded.total_cache_read_tokens,
    total_cache_creation_tokens = ai_conversation_usage.total_cache_creation_tokens + excluded.total_cache_creation_tokens,
    cost_usd_micros = ai_conversation_usage.cost_usd_micros + excluded.cost_usd_micros,
    updated_at = now()
"""


@dataclass(frozen=True)
class _Keys:
    org: str
    day: date

    def _key(self, name: str) -> str:
        return f"spotter:billing:{{{self.org}}}:{name}"

    @property
    def spent(self) -> str:
        return self._key(f"spent:{self.day.isoformat()}")

    @property
    def holds(self) -> str:
        return self._key("holds")

    @property
    def deadlines(self) -> str:
        return self._key("deadlines")

    def reservation(self, reservation_id: str) -> str:
        return self._key(f"reservation:{reservation_id}")

    def settlement(self, reservation_id: str) -> str:
        return self._key(f"settled:{reservation_id}")


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
        self._settle_wait = settle_wait.total_seconds()
        # A first verdict / settlement is remembered long enough for any retry of the same call.
        self._verdict_ms = _ms(timedelta(days=1))
        self._settled_ms = _ms(timedelta(days=2))
        # A claim outlives any settle transaction; if its holder dies, a retry may claim again.
        self._claim_ms = _ms(timedelta(minutes=1))
        self._reserve_script = redis.register_script(_RESERVE)
        self._snapshot_script = redis.register_script(_SNAPSHOT)
        self._finish_script = redis.register_script(_FINISH)
        self._unclaim_script = redis.register_script(_UNCLAIM)
        self._release_script = redis.register_script(_RELEASE)
        self._held_script = redis.register_script(_HELD)

    # ------------------------------------------------------------------ endpoints

    async def precheck(self, req: BudgetCheck) -> BudgetVerdict:
        org = _uuid(req.organization_id, "organization_id")
        cap = daily_cap(await self._tier(org))
        if cap == UNMETERED:
            return precheck_verdict(cap, 0)
        spent, held = await self._spend(org, self._now())
        return precheck_verdict(cap, spent + held)

    async def reserve(self, req: ReserveBudget) -> Reservation:
        org = _uuid(req.organization_id, "organization_id")
        cap = daily_cap(await self._tier(org))
        now = self._now()
        amount = self._rates.upper_bound(req.model, req.input_tokens, req.max_output_tokens, now.date())
        keys = _Keys(org, now.date())
        if cap == UNMETERED:
            # Nothing is held, but a call already settled still needs a new id to be charged again.
            settled = await self._redis.get(keys.settlement(req.reservation_id))
            if settled is not None and settled != _PENDING:
                return Reservation(ok=False, amount_usd_micros=0, settled=True)
            return Reservation(ok=True, amount_usd_micros=amount)
        now_ms = _epoch_ms(now)
        verdict = await self._with_mirror(
            keys, now,
            lambda: self._reserve_script(
                keys=[keys.spent, keys.holds, keys.deadlines, keys.reservation(req.reservation_id),
                      keys.settlement(req.reservation_id)],
                args=[now_ms, cap, amount, req.reservation_id, now_ms + self._hold_ms, self._verdict_ms, self._hold_ms,
                      _PENDING],
            ),
        )
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
        await self._tier(org)
        now = self._now()
        keys = _Keys(org, now.date())
        if req.usage is None:
            await self._release_script(
                keys=[keys.holds, keys.deadlines, keys.settlement(req.reservation_id), keys.reservation(req.reservation_id)],
                args=[req.reservation_id],
            )
            return Settlement(cost_usd_micros=0)
        cost = self._rates.price(req.model, req.usage, now.date())
        marker = keys.settlement(req.reservation_id)
        prior = await self._claim(marker)
        if prior is not None:
            # A retried settle (e.g. after a timeout) answers the first result and charges nothing.
            return Settlement(cost_usd_micros=prior)
        try:
            await self._record(req, org, user, conversation, keys, cost)
        except BaseException:
            await self._unclaim_script(keys=[marker], args=[_PENDING])
            raise
        return Settlement(cost_usd_micros=cost)

    async def usage(self, req: UsageQuery) -> UsageSnapshot:
        org = _uuid(req.organization_id, "organization_id")
        tier = await self._tier(org)
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

    async def _tier(self, org: str) -> str:
        tier = await self._pool.fetchval("SELECT tier::text FROM organizations WHERE id = $1", org)
        if tier is None:
            raise SpotterError(ErrorCode.NOT_FOUND, "organization not found")
        return tier

    async def _spend(self, org: str, now: datetime) -> tuple[int, int]:
        """Today's settled spend and the live holds of an org."""
        keys = _Keys(org, now.date())

        async def snapshot() -> list[int] | str:
            spent, held = await self._snapshot_script(keys=[keys.spent, keys.holds, keys.deadlines], args=[_epoch_ms(now)])
            return _UNINITIALISED if spent < 0 else [spent, held]

        spent, held = await self._with_mirror(keys, now, snapshot)
        return int(spent), int(held)

    async def _with_mirror(self, keys: _Keys, now: datetime, script: Callable[[], Awaitable[T]]) -> T:
        """Run a script that needs the spend mirror, initialising the mirror when it is missing."""
        for _ in range(3):
            result = await script()
            if result != _UNINITIALISED:
                return result
            await self._init_mirror(keys, now)
        raise SpotterError(ErrorCode.INTERNAL, "spend mirror could not be initialised")

    async def _init_mirror(self, keys: _Keys, now: datetime) -> None:
        """Load the day's settled spend from Postgres into Redis, unless someone already has."""
        day_end = datetime.combine(keys.day + timedelta(days=1), time(0), tzinfo=UTC)
        # Relative to our clock, one day past the day's end: never expires while the day runs.
        ttl = int((day_end - now).total_seconds()) + 86_400
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(_LOCK_EXCLUSIVE, keys.org)
            spent = await conn.fetchval(_SPENT_TODAY, keys.org, keys.day)
            await self._redis.set(keys.spent, spent, ex=ttl, nx=True)

    async def _claim(self, marker: str) -> int | None:
        """Claim the right to settle; None when claimed, else the cost an earlier settle charged."""
        give_up = monotonic() + self._settle_wait
        while True:
            if await self._redis.set(marker, _PENDING, nx=True, px=self._claim_ms):
                return None
            value = await self._redis.get(marker)
            if value is None:
                continue  # the earlier attempt failed and let go: claim again
            if value != _PENDING:
                return int(value)
            if monotonic() >= give_up:
                raise SpotterError(ErrorCode.INTERNAL, "settlement already in progress; retry later")
            await asyncio.sleep(0.02)

    async def _record(self, req: SettleUsage, org: str, user: str, conversation: str | None, keys: _Keys, cost: int) -> None:
        usage = req.usage
        assert usage is not None
        cache_creation = usage.cache_write_5m_tokens + usage.cache_write_1h_tokens
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(_LOCK_SHARED, org)
            try:
                await conn.execute(
                    _UPSERT_DAILY, org, user, keys.day, int(req.count_message), usage.input_tokens,
                    usage.output_tokens, usage.cache_read_tokens, cache_creation, cost,
                )
            except asyncpg.ForeignKeyViolationError:
                raise SpotterError(ErrorCode.NOT_FOUND, "user not found") from None
            if conversation is not None:
                try:
                    status = await conn.execute(
                        _ADD_LIFETIME, conversation, org, usage.input_tokens, usage.output_tokens,
                        usage.cache_read_tokens, cache_creation, cost,
                    )
                except asyncpg.ForeignKeyViolationError:
                    status = None  # the conversation was deleted between the SELECT and the INSERT
                if status != "INSERT 0 1":
                    raise SpotterError(ErrorCode.NOT_FOUND, "conversation not found in this organization")
            # Redis is updated before COMMIT, still under the shared lock (see _LOCK_SHARED). If the
            # process dies between the two, the call goes uncharged rather than charged twice.
            await self._finish(keys, req.reservation_id, cost)

    async def _finish(self, keys: _Keys, reservation_id: str, cost: int) -> None:
        await self._finish_script(
            keys=[keys.spent, keys.holds, keys.deadlines, keys.settlement(reservation_id)],
            args=[reservation_id, cost, self._settled_ms],
        )


def _uuid(value: str, field: str) -> str:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise SpotterError(ErrorCode.INVALID_REQUEST, f"{field} is not a UUID") from None


def _ms(delta: timedelta) -> int:
    return int(delta.total_seconds() * 1000)


def _epoch_ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)
