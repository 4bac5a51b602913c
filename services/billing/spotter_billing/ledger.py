"""Billing's writes of settled spend, micro-batched per organization. Knows nothing about NATS.

Settles arriving together for one org are written together (batches.py): one Redis script claims
all their reservation ids, one transaction adds their increments in one statement (summed per
org/user/day and per conversation) and, still under the shared spend lock and before COMMIT, one
Redis script marks them settled, releases their holds and adds their costs to the mirror. Each
caller is answered its own cost. While a batch is being written the next one gathers, so a quiet
org's settle is written at once, alone, and a hot org's settles share a COMMIT.

On a hot org the batches are chained: the settles waiting when a batch reaches its Redis step are
claimed by that same script (so the next batch needs no claim round trip of its own) and the next
transaction is opened meanwhile. The next batch's increments are sent as soon as that step is done,
while this batch commits (where they touch this batch's rows, Postgres holds them until the COMMIT),
and its Redis step waits for this COMMIT: a chain's batches follow each other two round trips apart
(Redis step, COMMIT) instead of three, and at most two of an org's batches are in flight. Every
batch locks its rows in the same order and a committing batch waits for nothing: no deadlock.

A batch Postgres refuses (a user or conversation that is not there, or any other failure before
the Redis step) is written again one settle at a time, so one bad call fails only itself.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import date
from functools import cached_property
from time import monotonic
from typing import Any

import asyncpg
from redis.asyncio import Redis

from spotter_shared.batches import Batches
from spotter_shared.errors import ErrorCode, SpotterError

PENDING = "pending"
# At most this many settles in one transaction (the rest wait for the next one).
MAX_BATCH = 256


@dataclass(frozen=True)
class Keys:
    """An org's billing keys in Redis; the org in a hash tag, so they share a Redis Cluster slot.
    The fixed ones are worked out once per instance (a reserve and a settle each ask for several)."""

    org: str
    day: date

    def _key(self, name: str) -> str:
        return f"{self._prefix}{name}"

    @cached_property
    def _prefix(self) -> str:
        return f"spotter:billing:{{{self.org}}}:"

    @cached_property
    def spent(self) -> str:
        return self._key(f"spent:{self.day.isoformat()}")

    @cached_property
    def holds(self) -> str:
        return self._key("holds")

    @cached_property
    def deadlines(self) -> str:
        return self._key("deadlines")

    def reservation(self, reservation_id: str) -> str:
        return self._key(f"reservation:{reservation_id}")

    def settlement(self, reservation_id: str) -> str:
        return self._key(f"settled:{reservation_id}")


# Settles take this lock shared (in _ADD, until COMMIT) and initialising the mirror takes it
# exclusively, so the Postgres sum read for the mirror and the increments applied to it never miss
# or double-count a charge.
LOCK_EXCLUSIVE = "SELECT pg_advisory_xact_lock(hashtextextended('spotter.billing.spend:' || $1::text, 0))"

# Claims each settlement marker that is free; answers, in order, '' for a claim or the marker's
# value (a cost already charged, or `pending` while another settle of the same call runs).
_CLAIM = """
local out = {}
for i, marker in ipairs(KEYS) do
  local prior = redis.call('GET', marker)
  if prior then
    out[i] = prior
  else
    redis.call('SET', marker, ARGV[1], 'PX', ARGV[2])
    out[i] = ''
  end
end
return out
"""

# KEYS: holds, deadlines, then per settle its day's mirror and its marker, then the markers of the
# settles to claim for the next batch; ARGV: the markers' TTL, the claims' TTL, `pending`, the number
# of settles, then per settle its reservation id and cost. Marks each settle settled, releases its
# hold and adds its cost to the mirror; then claims the next batch's markers as _CLAIM does and
# answers what _CLAIM answers for them. The mirror is only incremented, never created here: creating
# it from these costs alone would forget the rest of the day's spend (it is initialised from
# Postgres instead).
_FINISH = """
local n = tonumber(ARGV[4])
for i = 1, n do
  local spent, marker = KEYS[1 + 2 * i], KEYS[2 + 2 * i]
  local id, cost = ARGV[3 + 2 * i], ARGV[4 + 2 * i]
  redis.call('SET', marker, cost, 'PX', ARGV[1])
  redis.call('HDEL', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
  if redis.call('EXISTS', spent) == 1 then redis.call('INCRBY', spent, cost) end
end
local out = {}
for j = 3 + 2 * n, #KEYS do
  local prior = redis.call('GET', KEYS[j])
  if prior then
    out[#out + 1] = prior
  else
    redis.call('SET', KEYS[j], ARGV[3], 'PX', ARGV[2])
    out[#out + 1] = ''
  end
end
return out
"""

_UNCLAIM = """
for _, marker in ipairs(KEYS) do
  if redis.call('GET', marker) == ARGV[1] then redis.call('DEL', marker) end
end
return 1
"""

# A batch's increments in one statement (one round trip): the shared spend lock, then each
# conversation's lifetime totals and each org/user/day row, summed per row first. SQL increments:
# concurrent settles never lose an update (seed 000). Every batch locks its rows in the same order
# (conversations, then days, each sorted), so two replicas' batches cannot deadlock. Joining the
# conversations scopes them to the org: one of another org (or none) inserts no row, so the count
# returned falls short of the conversations given.
_ADD = """
WITH spend_lock AS MATERIALIZED (
    SELECT pg_advisory_xact_lock_shared(hashtextextended('spotter.billing.spend:' || $1::uuid::text, 0))
), lifetime AS (
    INSERT INTO ai_conversation_usage (conversation_id, organization_id, total_input_tokens, total_output_tokens,
                                       total_cache_read_tokens, total_cache_creation_tokens, cost_usd_micros)
    SELECT c.id, c.organization_id, u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_creation_tokens, u.cost
    FROM spend_lock,
         unnest($10::uuid[], $11::int[], $12::int[], $13::int[], $14::int[], $15::bigint[])
         WITH ORDINALITY AS u(id, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, cost, ord)
    JOIN ai_conversations c ON c.id = u.id AND c.organization_id = $1::uuid
    ORDER BY u.ord
    ON CONFLICT (conversation_id) DO UPDATE SET
        total_input_tokens = ai_conversation_usage.total_input_tokens + excluded.total_input_tokens,
        total_output_tokens = ai_conversation_usage.total_output_tokens + excluded.total_output_tokens,
        total_cache_read_tokens = ai_conversation_usage.total_cache_read_tokens + excluded.total_cache_read_tokens,
        total_cache_creation_tokens = ai_conversation_usage.total_cache_creation_tokens + excluded.total_cache_creation_tokens,
        cost_usd_micros = ai_conversation_usage.cost_usd_micros + excluded.cost_usd_micros,
        updated_at = now()
    RETURNING 1
), daily AS (
    INSERT INTO ai_usage_daily (organization_id, user_id, day, messages, input_tokens, output_tokens,
                                cache_read_tokens, cache_creation_tokens, cost_usd_micros)
    SELECT $1::uuid, u.user_id, u.day, u.messages, u.input_tokens, u.output_tokens, u.cache_read_tokens,
           u.cache_creation_tokens, u.cost
    FROM spend_lock,
         unnest($2::uuid[], $3::date[], $4::int[], $5::int[], $6::int[], $7::int[], $8::int[], $9::bigint[])
         WITH ORDINALITY AS u(user_id, day, messages, input_tokens, output_tokens, cache_read_tokens,
                              cache_creation_tokens, cost, ord)
    ORDER BY u.ord
    ON CONFLICT (organization_id, user_id, day) DO UPDATE SET
        messages = ai_usage_daily.messages + excluded.messages,
        input_tokens = ai_usage_daily.input_tokens + excluded.input_tokens,
        output_tokens = ai_usage_daily.output_tokens + excluded.output_tokens,
        cache_read_tokens = ai_usage_daily.cache_read_tokens + excluded.cache_read_tokens,
        cache_creation_tokens = ai_usage_daily.cache_creation_tokens + excluded.cache_creation_tokens,
        cost_usd_micros = ai_usage_daily.cost_usd_micros + excluded.cost_usd_micros
)
SELECT count(*) FROM lifetime
"""


@dataclass(frozen=True)
class Charge:
    """One model call's settlement, priced and checked: what it adds to each table."""

    reservation_id: str
    keys: Keys
    user: str
    conversation: str | None
    messages: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_creation_tokens: int
    cost: int

    @cached_property
    def marker(self) -> str:
        return self.keys.settlement(self.reservation_id)


@dataclass
class _Pending:
    charge: Charge
    answer: asyncio.Future[int]
    # The same call settled again while this one waits in the batch: it gets this one's outcome.
    repeats: list[asyncio.Future[int]] = field(default_factory=list)

    def resolve(self, cost: int) -> None:
        for future in (self.answer, *self.repeats):
            if not future.done():  # a caller that gave up cancelled its future
                future.set_result(cost)

    def fail(self, exc: BaseException) -> None:
        for future in (self.answer, *self.repeats):
            if not future.done():
                future.set_exception(exc)


class _Refused(Exception):
    """Postgres refused a batch for one of its calls (a user or conversation that is not there)."""


class Ledger:
    def __init__(self, pool: asyncpg.Pool, redis: Redis, *, claim_ms: int, settled_ms: int, settle_wait_s: float) -> None:
        self._pool = pool
        self._redis = redis
        self._claim_ms = claim_ms
        self._settled_ms = settled_ms
        self._settle_wait = settle_wait_s
        self._claim_script = redis.register_script(_CLAIM)
        self._finish_script = redis.register_script(_FINISH)
        self._unclaim_script = redis.register_script(_UNCLAIM)
        self._batches = Batches(self._write_batch, max_batch=MAX_BATCH)
        # Tasks nobody awaits (settles waiting apart, a chain's batch whose writer was cancelled),
        # kept referenced until done.
        self._loose: set[asyncio.Task[Any]] = set()

    async def charge(self, charge: Charge) -> int:
        """The cost charged for this call: its own the first time; for a retry (e.g. after a timeout)
        the first settle's cost, charging nothing more."""
        pending = _Pending(charge, asyncio.get_running_loop().create_future())
        self._batches.add(charge.keys.org, pending)
        return await pending.answer

    async def _write_batch(self, batch: list[_Pending]) -> None:
        # The transaction is opened while the claims go to Redis: one round trip less to wait for.
        opening = asyncio.ensure_future(self._open())
        firsts = _merge_repeats(batch)
        try:
            priors = await self._claim_script(keys=[p.charge.marker for p in firsts], args=[PENDING, self._claim_ms])
            claimed = self._sort_claims(firsts, priors)
        except BaseException as exc:
            opening.add_done_callback(_close_when_opened)
            _fail(batch, exc)
            return
        # Each batch hands on the next one, already claimed, with its transaction opening, to a task
        # that writes it while this one commits (and hands on the one after, and so on).
        writing = await self._write_next(_Next(claimed, opening), None)
        while writing is not None:
            writing = await writing

    async def _write_next(self, batch: _Next, previous: asyncio.Event | None) -> asyncio.Task[Any] | None:
        """Write a claimed batch once its transaction is open, its Redis step once the batch before
        it has committed (`previous`); the task writing the batch it claimed on the way, if any."""
        try:
            opened = await batch.opening
        except BaseException as exc:
            if batch.claimed:
                await asyncio.shield(self._unclaim(batch.claimed))
            _fail(batch.claimed, exc)
            return None
        if not batch.claimed:
            await _close(opened, commit=False)
            return None
        return await self._write_claimed(batch.claimed, opened, chain=True, previous=previous)

    def _sort_claims(self, firsts: list[_Pending], priors: list[str]) -> list[_Pending]:
        """Given each call's claim answer: answer those an earlier settle charged, set apart those
        another settle is writing, and return the ones claimed."""
        claimed = []
        for pending, prior in zip(firsts, priors, strict=True):
            if prior == "":
                claimed.append(pending)
            elif prior == PENDING:
                # Another settle of this call is under way (a retry racing its first attempt, maybe
                # on another replica): wait for its outcome apart, as a settle alone.
                self._keep(asyncio.create_task(self._wait_and_write(pending)))
            else:
                pending.resolve(int(prior))  # a retry answers the first result and charges nothing
        return claimed

    def _keep(self, task: asyncio.Task[Any]) -> None:
        self._loose.add(task)
        task.add_done_callback(self._loose.discard)

    async def _open(self) -> _Opened:
        conn = await self._pool.acquire()
        try:
            tx = conn.transaction()
            await tx.start()
        except BaseException:
            await self._pool.release(conn)
            raise
        return _Opened(self._pool, conn, tx)

    async def _wait_and_write(self, pending: _Pending) -> None:
        try:
            prior = await self._claim(pending.charge.marker)
            if prior is not None:
                pending.resolve(prior)
            else:
                await self._write_claimed([pending])
        except Exception as exc:  # noqa: BLE001 — the caller is answered with it
            pending.fail(exc)

    async def _claim(self, marker: str) -> int | None:
        """Claim the right to settle; None when claimed, else the cost an earlier settle charged."""
        give_up = monotonic() + self._settle_wait
        while True:
            (prior,) = await self._claim_script(keys=[marker], args=[PENDING, self._claim_ms])
            if prior == "":
                return None
            if prior != PENDING:
                return int(prior)
            if monotonic() >= give_up:
                raise SpotterError(ErrorCode.INTERNAL, "settlement already in progress; retry later")
            await asyncio.sleep(0.02)

    async def _write_claimed(self, batch: list[_Pending], opened: _Opened | None = None, *, chain: bool = False,
                             previous: asyncio.Event | None = None) -> asyncio.Task[Any] | None:
        """Record claimed settles in one transaction and answer each. Until the Redis step the
        markers say `pending`: on a failure they are let go so a retry can claim again, and a batch
        is written again one by one. After it they hold the costs: a failed COMMIT leaves those
        calls uncharged in Postgres, never charged twice (a retry answers the marker).

        With `chain`, the Redis step also claims the settles of this org waiting by then and their
        transaction is opened meanwhile; a task writes them while this batch commits (returned, once
        this batch is answered). The Redis step waits for `previous`: the batch before committed."""
        finished = False
        following: _Next | None = None

        async def finish() -> None:
            nonlocal finished, following
            if previous is not None:
                await previous.wait()  # at most two of the org's batches in flight
            nexts = _merge_repeats(self._batches.take(batch[0].charge.keys.org, MAX_BATCH)) if chain else []
            opening = asyncio.ensure_future(self._open()) if nexts else None
            try:
                priors = await self._finish(batch, nexts)
            except BaseException:
                if nexts:
                    # The script did nothing: the waiting settles go back, first in line.
                    self._batches.put_back(batch[0].charge.keys.org, nexts)
                    opening.add_done_callback(_close_when_opened)
                raise
            finished = True
            if nexts:
                following = _Next(self._sort_claims(nexts, priors), opening)

        try:
            opened = await self._record([p.charge for p in batch], finish, opened)
        except Exception as exc:
            # Nothing is marked settled (`finish` is the last step that can fail).
            if len(batch) > 1:
                for pending in batch:
                    await self._write_claimed([pending])
            else:
                await self._unclaim(batch)
                batch[0].fail(SpotterError(ErrorCode.NOT_FOUND, str(exc)) if isinstance(exc, _Refused) else exc)
            return None
        except BaseException:
            if not finished:
                await asyncio.shield(self._unclaim(batch))
            raise
        writing, committed = None, asyncio.Event()
        if chain and following is not None:
            # Started now, it runs once this COMMIT is sent: its increments wait in Postgres for the
            # rows this batch holds, not in Python for this COMMIT's answer.
            writing = asyncio.create_task(self._write_next(following, committed))
        try:
            await _commit(batch, opened)
        except BaseException:
            if writing is not None:  # cancelled: the batch after it is written all the same
                self._keep(writing)
            raise
        finally:
            committed.set()
        return writing

    async def _record(self, charges: list[Charge], finish: Callable[[], Awaitable[None]], opened: _Opened | None) -> _Opened:
        """Add the charges in the transaction (`opened`, or a new one) and run `finish`; the
        transaction, to COMMIT (rolled back on a failure)."""
        org = charges[0].keys.org
        daily = _daily_rows(charges)
        lifetime = _lifetime_rows(charges)
        opened = opened or await self._open()
        try:
            try:
                added = await opened.conn.fetchval(_ADD, org, *_columns(daily, 8), *_columns(lifetime, 6))
            except asyncpg.ForeignKeyViolationError as exc:
                # A conversation deleted between the join and the insert is not found either.
                raise _Refused("conversation not found in this organization" if exc.table_name == "ai_conversation_usage"
                               else "user not found") from None
            if added != len(lifetime):
                raise _Refused("conversation not found in this organization")
            # Redis is updated before COMMIT, still under the shared lock (see LOCK_EXCLUSIVE). If the
            # process dies between the two, the calls go uncharged rather than charged twice.
            await finish()
        except BaseException:
            await asyncio.shield(_close(opened, commit=False))
            raise
        return opened

    async def _finish(self, batch: list[_Pending], nexts: list[_Pending]) -> list[str]:
        """Mark the batch settled (see _FINISH) and claim `nexts`; their claim answers, in order."""
        first = batch[0].charge.keys
        keys, args = [first.holds, first.deadlines], [self._settled_ms, self._claim_ms, PENDING, len(batch)]
        for pending in batch:
            charge = pending.charge
            keys += [charge.keys.spent, charge.marker]
            args += [charge.reservation_id, charge.cost]
        keys += [p.charge.marker for p in nexts]
        return await self._finish_script(keys=keys, args=args)

    async def _unclaim(self, batch: list[_Pending]) -> None:
        await self._unclaim_script(keys=[p.charge.marker for p in batch], args=[PENDING])


@dataclass(frozen=True)
class _Next:
    """A batch claimed ahead, its transaction opening meanwhile."""

    claimed: list[_Pending]
    opening: asyncio.Future[_Opened]


@dataclass(frozen=True)
class _Opened:
    """A pool connection in a transaction begun for a batch."""

    pool: asyncpg.Pool
    conn: asyncpg.Connection
    tx: Any


async def _close(opened: _Opened, *, commit: bool) -> None:
    try:
        if commit:
            await opened.tx.commit()
        elif not opened.conn.is_closed():
            await opened.tx.rollback()
    finally:
        await opened.pool.release(opened.conn)


async def _commit(batch: list[_Pending], opened: _Opened) -> None:
    """COMMIT a batch marked settled, then answer each call its cost, or every one the failure (their
    markers hold the costs: a retry is answered, never charged twice)."""
    try:
        await _close(opened, commit=True)
    except Exception as exc:  # noqa: BLE001 — the callers are answered with it
        for pending in batch:
            pending.fail(exc)
        return
    for pending in batch:
        pending.resolve(pending.charge.cost)


def _close_when_opened(opening: asyncio.Future[_Opened]) -> None:
    """A batch that failed before using its transaction: roll it back once it is open."""
    if not opening.cancelled() and opening.exception() is None:
        asyncio.ensure_future(_close(opening.result(), commit=False))


def _fail(batch: list[_Pending], exc: BaseException) -> None:
    """Answer every call of the batch with the failure; a cancellation goes on up."""
    for pending in batch:
        pending.fail(exc)
    if not isinstance(exc, Exception):
        raise exc


def _merge_repeats(batch: list[_Pending]) -> list[_Pending]:
    """One entry per reservation id; a repeat of the same call in the batch shares its outcome."""
    firsts: dict[str, _Pending] = {}
    for pending in batch:
        first = firsts.setdefault(pending.charge.reservation_id, pending)
        if first is not pending:
            first.repeats.append(pending.answer)
    return list(firsts.values())


def _daily_rows(charges: Iterable[Charge]) -> list[tuple]:
    """(user, day, messages, input, output, cache read, cache creation, cost), summed, in key order."""
    sums: dict[tuple[str, date], list[int]] = defaultdict(lambda: [0] * 6)
    for c in charges:
        row = sums[(c.user, c.keys.day)]
        for i, v in enumerate((c.messages, c.input_tokens, c.output_tokens, c.cache_read_tokens, c.cache_creation_tokens, c.cost)):
            row[i] += v
    return [(*key, *sums[key]) for key in sorted(sums)]


def _lifetime_rows(charges: Iterable[Charge]) -> list[tuple]:
    """(conversation, input, output, cache read, cache creation, cost), summed, in key order."""
    sums: dict[str, list[int]] = defaultdict(lambda: [0] * 5)
    for c in charges:
        if c.conversation is not None:
            row = sums[c.conversation]
            for i, v in enumerate((c.input_tokens, c.output_tokens, c.cache_read_tokens, c.cache_creation_tokens, c.cost)):
                row[i] += v
    return [(key, *sums[key]) for key in sorted(sums)]


def _columns(rows: list[tuple], width: int) -> list[list]:
    """Rows as `width` column arrays, for unnest."""
    return [[row[i] for row in rows] for i in range(width)]
