"""Budget settlements on one hot organization (issue 14): settlements per second, settle latency
p50/p99, and whether the recorded spend is exact, against the real billing service over NATS.

What the benchmark plays: the orchestrator's model loop without the model. Each worker is one
conversation of the organization running turns back to back; each turn makes `calls_per_turn` model
calls, and each call is what `Loop.call_model` asks of billing (orchestrator/loop.py, peers.py):
`spotter.billing.reserve` (ReserveBudget under `call_reservation_id(turn, call)`) and, once the
"model" has answered, `spotter.billing.settle` (SettleUsage with the call's usage, the turn's user
and conversation, count_message on the turn's first call). Requests are the contracts' bytes on core
NATS (nats-py, the same subjects, queue group and error header as the services' requesters), with
the orchestrator's 5 s deadline. No precheck (once per turn, not per call) and no model.

The organization is new, on tier `elite` (metered: reservations go through the Lua hold script
against its $25 cap); its users are coaches of it (`--users`); usage per call is small and random
(every bucket, fractional rates, so rounding is exercised) so a long run stays far under the cap.

What is measured: settlements completed per second over the window (reserve+settle pairs: every
settlement has its reservation before it, as in a turn), the client-side round trip of each settle
request (p50/p99; the reserve's too), for a few concurrencies (workers in flight) and then for the
best of them at full length. A closed loop measures its own queue (Little's law: 128 in flight at
2,500/s is ~50 ms each by construction), so the latency target is judged by an open loop instead:
arrivals at a fixed offered rate (`--open-rates`, 2,000/s and 2,500/s by default; Poisson gaps, or
evenly spaced), each a reserve then settle pair as in the closed loop, started on schedule however many
are still in flight. There a settle's latency is counted from when it was due, not from when it was
sent: its round trip plus how late the client started its arrival (scheduled time to reserve sent),
so a client falling behind cannot hide a stall (coordinated omission); the pair's latency from the
scheduled arrival is reported too, and how late the client's own event loop ran (its stalls would
read as billing's). A phase that falls more than OVERLOAD_S of arrivals behind stops offering and is
reported overloaded. The target is judged at the first offered rate ≥ 2,000/s (`at_target`,
`target_met`: kept up, nothing failed, settle p99 within 20 ms). Then exactness, over every phase: the organization's spend in Postgres
(ai_usage_daily, the truth), in each conversation's lifetime row (ai_conversation_usage), and in
billing's Redis mirror (`spotter:billing:{org}:spent:<day>`) must each equal the sum of the costs
billing answered, which must equal the rate card's price of every call computed here; no hold may
be left (but a call given up after ATTEMPTS, whose hold waits for its deadline as a crashed caller's
would) and the `messages` count must equal the turns.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import signal
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Optional

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

import asyncpg  # noqa: E402
import nats  # noqa: E402
from nats.errors import TimeoutError as NatsTimeout  # noqa: E402
from redis.asyncio import Redis  # noqa: E402

from spotter_billing.pricing import RateCard  # noqa: E402
from spotter_shared.contracts.base import ERROR_HEADER, ErrorReply  # noqa: E402
from spotter_shared.contracts.billing import (  # noqa: E402
    RESERVE, SETTLE, USAGE, ModelUsage, ReserveBudget, Reservation, Settlement, SettleUsage, UsageQuery,
    call_reservation_id,
)

from bench_stats import percentile  # noqa: E402
from bench_substack import CpuWatch, SubStack, new_name, say, wait_nats_responder  # noqa: E402

MODEL = "claude-sonnet-5-5"
TIMEOUT_S = 5.0  # orchestrator/peers.py BILLING_TIMEOUT_S
ATTEMPTS = 3
MAX_OUTPUT = 8
TARGET_PER_S = 2000.0
TARGET_P99_MS = 20.0
# Offered rates of the open loop; the latency target is judged at the first one at or above TARGET_PER_S.
OPEN_RATES = (2000.0, 2500.0)
# An open-loop phase keeps up when it answers at least this share of the offered rate within its window.
KEPT_UP = 0.97
# An open-loop phase stops offering once more than this many seconds of arrivals are unanswered.
OVERLOAD_S = 1.0


def random_usage(rng: random.Random) -> tuple[ModelUsage, int]:
    """A small call's usage and the prompt estimate reserved for it."""
    usage = ModelUsage(
        input_tokens=rng.randint(1, 10), output_tokens=rng.randint(1, MAX_OUTPUT), cache_read_tokens=rng.randint(0, 200),
        cache_write_5m_tokens=rng.randint(0, 9), cache_write_1h_tokens=rng.randint(0, 5),
    )
    estimate = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_5m_tokens + usage.cache_write_1h_tokens + 16
    return usage, estimate


@dataclass
class Fixture:
    database_url: str
    org_id: str = ""
    users: list[str] = field(default_factory=list)
    conversations: list[tuple[str, str]] = field(default_factory=list)  # (conversation, its user)

    async def create(self, users: int, conversations: int) -> "Fixture":
        from spotter_cli.org import NewOrg, create

        conn = await asyncpg.connect(self.database_url)
        try:
            tag = uuid.uuid4().hex[:10]
            owner = f"settle-{tag}-0@bench.invalid"
            # `spotter org create NAME --tier elite --owner EMAIL`, called in process.
            self.org_id = await create(conn, NewOrg(name=new_name("Settle Bench"), tier="elite", owner_email=owner,
                                                    owner_name="Settle Bench 0", timezone="UTC", locale="en"))
            org = uuid.UUID(self.org_id)
            async with conn.transaction():
                owner_id = await conn.fetchval("SELECT id FROM users WHERE lower(email) = lower($1)", owner)
                ids = [owner_id]
                for i in range(1, users):
                    uid = await conn.fetchval("INSERT INTO users (email, full_name) VALUES ($1, $2) RETURNING id",
                                              f"settle-{tag}-{i}@bench.invalid", f"Settle Bench {i}")
                    await conn.execute("INSERT INTO memberships (organization_id, user_id, role, status) "
                                       "VALUES ($1, $2, 'coach', 'active')", org, uid)
                    ids.append(uid)
                self.users = [str(u) for u in ids]
                memberships = {str(r["user_id"]): r["id"] for r in await conn.fetch(
                    "SELECT user_id, id FROM memberships WHERE organization_id = $1", org)}
                rows = []
                for i in range(conversations):
                    user = self.users[i % len(self.users)]
                    cid = uuid.uuid4()
                    rows.append((cid, org, uuid.UUID(user), memberships[user], f"settle {i}", MODEL))
                    self.conversations.append((str(cid), user))
                await conn.copy_records_to_table(
                    "ai_conversations", columns=["id", "organization_id", "user_id", "membership_id", "title", "model"],
                    records=rows)
        finally:
            await conn.close()
        return self

    async def cleanup(self, redis_url: str) -> None:
        if not self.org_id:
            return
        redis = Redis.from_url(redis_url, decode_responses=True)
        try:
            batch: list[str] = []
            async for key in redis.scan_iter(match=f"spotter:billing:{{{self.org_id}}}:*", count=5000):
                batch.append(key)
                if len(batch) >= 5000:
                    await redis.unlink(*batch)
                    batch = []
            if batch:
                await redis.unlink(*batch)
        finally:
            await redis.aclose()
        conn = await asyncpg.connect(self.database_url)
        try:
            await conn.execute("DELETE FROM organizations WHERE id = $1", uuid.UUID(self.org_id))
            await conn.execute("DELETE FROM users WHERE id = ANY($1::uuid[])", [uuid.UUID(u) for u in self.users])
        finally:
            await conn.close()


class RemoteFailure(Exception):
    pass


@dataclass
class Ledger:
    """Everything billing answered over the whole run, for the exactness check."""

    settled_cost: int = 0  # sum of Settlement.cost_usd_micros
    priced_cost: int = 0  # sum of the rate card's price, computed here
    settlements: int = 0
    turns: int = 0
    mismatches: int = 0  # settlements whose cost differs from the rate card's price
    given_up: int = 0  # calls given up (see Step.failed): each may leave its hold, until the hold's deadline
    days: set[date] = field(default_factory=set)


@dataclass
class Step:
    concurrency: int
    seconds: float
    settle_ms: list[float] = field(default_factory=list)
    reserve_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    timeouts: int = 0  # requests asked again after a timeout
    failed: int = 0  # calls given up (a refusal, an error reply, or no answer after ATTEMPTS)
    wall_s: float = 0.0
    cores: dict[str, float] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        n = len(self.settle_ms)
        return {
            "concurrency": self.concurrency,
            "settlements": n,
            "wall_s": round(self.wall_s, 2),
            "settlements_per_s": round(n / self.wall_s, 1) if self.wall_s else None,
            "settle_p50_ms": _r(percentile(self.settle_ms, 50)),
            "settle_p99_ms": _r(percentile(self.settle_ms, 99)),
            "settle_max_ms": _r(max(self.settle_ms) if self.settle_ms else None),
            "reserve_p50_ms": _r(percentile(self.reserve_ms, 50)),
            "reserve_p99_ms": _r(percentile(self.reserve_ms, 99)),
            "errors": len(self.errors),
            "timeouts": self.timeouts,
            "failed": self.failed,
            "first_errors": self.errors[:3],
            "cores": self.cores,
        }


@dataclass
class OpenStep:
    """An open-loop phase: arrivals at a fixed offered rate."""

    rate: float
    seconds: float
    arrivals_kind: str
    arrivals: int = 0
    in_window: int = 0  # settlements answered within the arrival window
    settle_ms: list[float] = field(default_factory=list)  # from when the settle was due (round trip + start lag)
    settle_rtt_ms: list[float] = field(default_factory=list)  # settle sent to answered
    pair_ms: list[float] = field(default_factory=list)  # scheduled arrival to settle answered
    reserve_ms: list[float] = field(default_factory=list)
    lag_ms: list[float] = field(default_factory=list)  # scheduled arrival to reserve sent
    loop_lag_ms: list[float] = field(default_factory=list)  # the client's event loop, late on a 5 ms timer
    errors: list[str] = field(default_factory=list)
    timeouts: int = 0
    failed: int = 0
    max_in_flight: int = 0
    overloaded_at_s: Optional[float] = None  # when arrivals were stopped, far behind (see OVERLOAD_S)
    window_s: float = 0.0  # how long arrivals were offered
    wall_s: float = 0.0
    cores: dict[str, float] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        return {
            "offered_per_s": self.rate,
            "overloaded_at_s": self.overloaded_at_s,
            "arrivals_kind": self.arrivals_kind,
            "seconds": self.seconds,
            "arrivals": self.arrivals,
            "settlements": len(self.settle_ms),
            "wall_s": round(self.wall_s, 2),
            # Answered within the arrival window, per second of it: what billing kept up with.
            "settlements_per_s": round(self.in_window / self.window_s, 1) if self.window_s else None,
            "settle_p50_ms": _r(percentile(self.settle_ms, 50)),
            "settle_p99_ms": _r(percentile(self.settle_ms, 99)),
            "settle_max_ms": _r(max(self.settle_ms) if self.settle_ms else None),
            "settle_rtt_p50_ms": _r(percentile(self.settle_rtt_ms, 50)),
            "settle_rtt_p99_ms": _r(percentile(self.settle_rtt_ms, 99)),
            "pair_p50_ms": _r(percentile(self.pair_ms, 50)),
            "pair_p99_ms": _r(percentile(self.pair_ms, 99)),
            "reserve_p50_ms": _r(percentile(self.reserve_ms, 50)),
            "reserve_p99_ms": _r(percentile(self.reserve_ms, 99)),
            "start_lag_p99_ms": _r(percentile(self.lag_ms, 99)),
            "client_loop_lag_p99_ms": _r(percentile(self.loop_lag_ms, 99)),
            "client_loop_lag_max_ms": _r(max(self.loop_lag_ms) if self.loop_lag_ms else None),
            "max_in_flight": self.max_in_flight,
            "errors": len(self.errors),
            "timeouts": self.timeouts,
            "failed": self.failed,
            "first_errors": self.errors[:3],
            "cores": self.cores,
        }


def _r(x: Optional[float], nd: int = 2) -> Optional[float]:
    return None if x is None else round(x, nd)


class Driver:
    def __init__(self, nats_url: str, fx: Fixture, *, calls_per_turn: int = 2, seed: int = 14) -> None:
        self.nats_url = nats_url
        self.fx = fx
        self.calls_per_turn = calls_per_turn
        self.rng = random.Random(seed)
        self.card = RateCard.load()
        self.ledger = Ledger()
        self.nc: Any = None

    async def open(self) -> "Driver":
        self.nc = await nats.connect(self.nats_url, pending_size=64 * 1024 * 1024)
        return self

    async def close(self) -> None:
        if self.nc is not None:
            await self.nc.drain()

    async def ask(self, subject: str, payload: bytes, reply_type: type) -> Any:
        msg = await self.nc.request(subject, payload, timeout=TIMEOUT_S)
        if msg.headers and msg.headers.get(ERROR_HEADER):
            err = ErrorReply.model_validate_json(msg.data)
            raise RemoteFailure(f"{subject}: {err.code}: {err.message}")
        return reply_type.model_validate_json(msg.data)

    async def ask_again(self, subject: str, payload: bytes, reply_type: type, step: Step) -> Any:
        """Both requests are idempotent under the reservation id: after a timeout the orchestrator's
        redelivered turn asks again under the same id (a reserve finds its hold, a settle answers the
        first charge), and so does this. Each timeout is counted as an error."""
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return await self.ask(subject, payload, reply_type)
            except (NatsTimeout, asyncio.TimeoutError) as exc:
                step.errors.append(f"timeout on {subject} (attempt {attempt}): {type(exc).__name__}")
                step.timeouts += 1
        raise RemoteFailure(f"{subject}: no answer after {ATTEMPTS} attempts")

    async def _call(self, rid: str, conversation: str, user: str, first: bool, step: Any) -> Optional[tuple[float, float]]:
        """One model call: its reserve, then its settle (count_message on the turn's first call), the
        answer recorded for the exactness check. The reserve's and the settle's round trips (s), or
        None once the call failed (counted in `step`)."""
        org = self.fx.org_id
        usage, estimate = random_usage(self.rng)
        try:
            t0 = time.perf_counter()
            held: Reservation = await self.ask_again(RESERVE.subject, ReserveBudget(
                reservation_id=rid, organization_id=org, model=MODEL, input_tokens=estimate,
                max_output_tokens=MAX_OUTPUT).to_bytes(), Reservation, step)
            t1 = time.perf_counter()
            if not held.ok:
                raise RemoteFailure(f"reservation refused: {held.code or ('settled' if held.settled else '?')}")
            settled: Settlement = await self.ask_again(SETTLE.subject, SettleUsage(
                reservation_id=rid, organization_id=org, user_id=user, conversation_id=conversation, model=MODEL,
                usage=usage, count_message=first).to_bytes(), Settlement, step)
            t2 = time.perf_counter()
        except RemoteFailure as exc:
            step.errors.append(f"{type(exc).__name__}: {exc}")
            step.failed += 1
            self.ledger.given_up += 1
            return None
        day = datetime.now(UTC).date()
        priced = self.card.price(MODEL, usage, day)
        self.ledger.days.add(day)
        self.ledger.settlements += 1
        self.ledger.turns += first
        self.ledger.settled_cost += settled.cost_usd_micros
        self.ledger.priced_cost += priced
        if priced != settled.cost_usd_micros:
            self.ledger.mismatches += 1
        return t1 - t0, t2 - t1

    async def _worker(self, conversation: str, user: str, step: Step, stop_at: float) -> None:
        while time.monotonic() < stop_at:
            turn = str(uuid.uuid4())
            for call in range(self.calls_per_turn):
                times = await self._call(call_reservation_id(turn, call), conversation, user, call == 0, step)
                if times is None:
                    await asyncio.sleep(0.05)
                    break
                step.reserve_ms.append(times[0] * 1000.0)
                step.settle_ms.append(times[1] * 1000.0)

    async def run(self, concurrency: int, seconds: float, roots: dict[str, Optional[int]]) -> Step:
        step = Step(concurrency, seconds)
        convs = self.fx.conversations[:concurrency]
        if len(convs) < concurrency:
            raise ValueError(f"only {len(self.fx.conversations)} conversations for concurrency {concurrency}")
        watch = CpuWatch(roots, self_name="client (bench)")
        c0 = watch.snapshot()
        t0 = time.monotonic()
        await asyncio.gather(*(self._worker(c, u, step, t0 + seconds) for c, u in convs))
        step.wall_s = time.monotonic() - t0
        step.cores = watch.since(c0)
        return step

    async def run_open(self, rate: float, seconds: float, roots: dict[str, Optional[int]], *, poisson: bool = True) -> "OpenStep":
        """Arrivals at `rate` a second for `seconds` (Poisson gaps, or evenly spaced), each one model
        call (a reserve then its settle), started at its scheduled time whatever is still in flight:
        the turns' calls in order, the turns round-robin over the fixture's conversations."""
        step = OpenStep(rate, seconds, "poisson" if poisson else "even")
        rng = random.Random(f"open {rate}")
        convs = self.fx.conversations
        tasks: set[asyncio.Task[None]] = set()
        in_flight = 0

        async def arrival(due: float, rid: str, conversation: str, user: str, first: bool) -> None:
            nonlocal in_flight
            in_flight += 1
            step.max_in_flight = max(step.max_in_flight, in_flight)
            lag = time.perf_counter() - due  # how late this arrival starts: the client's own queue
            try:
                times = await self._call(rid, conversation, user, first, step)
            finally:
                in_flight -= 1
            if times is None:
                return
            reserve, settle = times
            done = time.perf_counter()
            step.lag_ms.append(lag * 1000.0)
            step.reserve_ms.append(reserve * 1000.0)
            step.settle_rtt_ms.append(settle * 1000.0)
            step.settle_ms.append((settle + lag) * 1000.0)
            step.pair_ms.append((done - due) * 1000.0)
            if done <= end:
                step.in_window += 1

        async def watch_loop() -> None:
            """How late this client's event loop wakes a 5 ms timer: its own stalls, which would
            otherwise read as billing's latency."""
            while True:
                t = time.perf_counter()
                await asyncio.sleep(0.005)
                step.loop_lag_ms.append((time.perf_counter() - t - 0.005) * 1000.0)

        watch = CpuWatch(roots, self_name="client (bench)")
        c0 = watch.snapshot()
        watcher = asyncio.create_task(watch_loop())
        start = time.perf_counter()
        end = start + seconds
        due, n, turn = start, 0, ""
        while due < end:
            now = time.perf_counter()
            if in_flight > rate * OVERLOAD_S:
                # More than OVERLOAD_S of arrivals unanswered: the rate is past what the machine answers.
                # Stop offering (the rest would only pile up timeouts and retries into the next phase).
                step.overloaded_at_s = round(now - start, 2)
                end = now
                break
            while due <= now and due < end:
                call = n % self.calls_per_turn
                if call == 0:
                    turn = str(uuid.uuid4())
                conversation, user = convs[(n // self.calls_per_turn) % len(convs)]
                task = asyncio.create_task(arrival(due, call_reservation_id(turn, call), conversation, user, call == 0))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                n += 1
                due += rng.expovariate(rate) if poisson else 1.0 / rate
            await asyncio.sleep(max(0.0, min(due, end) - time.perf_counter()))
        step.arrivals = n
        step.window_s = end - start
        if tasks:
            await asyncio.wait(list(tasks))
        watcher.cancel()
        step.wall_s = time.perf_counter() - start
        step.cores = watch.since(c0)
        return step

    async def verify(self, database_url: str, redis_url: str) -> dict[str, Any]:
        org = uuid.UUID(self.fx.org_id)
        conn = await asyncpg.connect(database_url)
        try:
            daily = await conn.fetchrow(
                "SELECT coalesce(sum(cost_usd_micros), 0)::bigint AS cost, coalesce(sum(messages), 0)::bigint AS messages, "
                "count(*) AS rows FROM ai_usage_daily WHERE organization_id = $1", org)
            lifetime = await conn.fetchval(
                "SELECT coalesce(sum(cost_usd_micros), 0)::bigint FROM ai_conversation_usage WHERE organization_id = $1", org)
        finally:
            await conn.close()
        redis = Redis.from_url(redis_url, decode_responses=True)
        try:
            mirror = 0
            for day in sorted(self.ledger.days):
                mirror += int(await redis.get(f"spotter:billing:{{{self.fx.org_id}}}:spent:{day.isoformat()}") or 0)
            holds_left = await redis.hlen(f"spotter:billing:{{{self.fx.org_id}}}:holds")
        finally:
            await redis.aclose()
        snapshot = await self.ask(USAGE.subject, UsageQuery(organization_id=self.fx.org_id).to_bytes(), _usage_type())
        led = self.ledger
        out = {
            "settlements": led.settlements, "turns": led.turns,
            "answered_cost_usd_micros": led.settled_cost, "rate_card_cost_usd_micros": led.priced_cost,
            "price_mismatches": led.mismatches,
            "postgres_daily_usd_micros": int(daily["cost"]), "postgres_lifetime_usd_micros": int(lifetime),
            "redis_mirror_usd_micros": mirror, "usage_snapshot_spent_usd_micros": snapshot.spent_usd_micros,
            "usage_snapshot_reserved_usd_micros": snapshot.reserved_usd_micros,
            "messages_counted": int(daily["messages"]), "daily_rows": int(daily["rows"]), "holds_left": int(holds_left),
            "calls_given_up": led.given_up,
        }
        out["exact"] = (
            led.mismatches == 0 and led.settled_cost == led.priced_cost == out["postgres_daily_usd_micros"]
            == out["postgres_lifetime_usd_micros"] == out["redis_mirror_usd_micros"]
            and (len(led.days) > 1 or out["usage_snapshot_spent_usd_micros"] == led.settled_cost)
            # A call given up (no answer after ATTEMPTS, e.g. an overloaded open loop) may leave its
            # hold until the hold's deadline, as a crashed caller's would; no other call may.
            and out["holds_left"] <= led.given_up
            and (led.given_up > 0 or out["usage_snapshot_reserved_usd_micros"] == 0)
            and out["messages_counted"] == led.turns
        )
        return out


async def wait_subscribers(stack: SubStack, subject: str, n: int, timeout: float = 60.0) -> None:
    """Until `n` connections subscribe to `subject` (nats-server's /connz; a fixed wait when the
    NATS server is not ours)."""
    import urllib.request

    server = stack.stack.servers.get("nats") if stack.stack else None
    monitor = getattr(server, "monitor_url", None)
    if not monitor:
        await asyncio.sleep(5.0)
        return
    deadline = time.monotonic() + timeout
    while True:
        with urllib.request.urlopen(f"{monitor}/connz?subs=1&limit=1000", timeout=2) as r:
            conns = json.load(r).get("connections") or []
        if sum(1 for c in conns if subject in (c.get("subscriptions_list") or [])) >= n:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"fewer than {n} subscribers on {subject} after {timeout:.0f}s")
        await asyncio.sleep(0.3)


def _usage_type() -> type:
    from spotter_shared.contracts.billing import UsageSnapshot

    return UsageSnapshot


async def measure_settlements(
    target: Any,
    *,
    seconds: float = 20.0,
    sweep: tuple[int, ...] = (8, 32, 128),
    sweep_seconds: float = 5.0,
    users: int = 1,
    calls_per_turn: int = 2,
    label: str = "",
    open_rates: tuple[float, ...] = OPEN_RATES,
    open_seconds: float = 10.0,
    poisson: bool = True,
) -> dict[str, Any]:
    """`target`: anything with `env` (NATS_URL, DATABASE_URL, REDIS_URL) and `pids()` (the billing
    replicas among them). Sweeps `sweep` concurrencies for `sweep_seconds` each, then runs the one
    with the most settlements/s for `seconds` (closed loop); then offers each of `open_rates`
    settlements/s for `open_seconds` (open loop); checks the spend at the end, over all of them."""
    env = target.env
    fx = Fixture(env["DATABASE_URL"])
    driver: Optional[Driver] = None
    loadavg = os.getloadavg()[0]
    # As the services do (spotter_shared.service.settle_heap): what the process holds already is left
    # out of the cyclic collector, and young collections are rarer, so a full collection over the
    # bench's own heap does not stop this client for tens of ms and read as billing's latency.
    thresholds = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 50, 100)
    try:
        await fx.create(users, max(sweep))
        driver = await Driver(env["NATS_URL"], fx, calls_per_turn=calls_per_turn).open()
        roots = dict(target.pids())
        await driver.run(min(sweep), 1.0, roots)  # warm-up (pool connections, mirror initialised)
        steps = []
        for c in sweep:
            s = (await driver.run(c, sweep_seconds, roots)).summary()
            say(f"settle{label}: concurrency {c}: {s['settlements_per_s']}/s, settle p50 {s['settle_p50_ms']} ms, "
                f"p99 {s['settle_p99_ms']} ms, errors {s['errors']}")
            steps.append(s)
        best = max(steps, key=lambda s: s["settlements_per_s"] or 0)["concurrency"]
        main = (await driver.run(best, seconds, roots)).summary()
        say(f"settle{label}: main run, concurrency {best}: {main['settlements_per_s']}/s, settle p50 {main['settle_p50_ms']} ms, "
            f"p99 {main['settle_p99_ms']} ms, errors {main['errors']}")
        opened = []
        for rate in open_rates:
            o = (await driver.run_open(rate, open_seconds, roots, poisson=poisson)).summary()
            say(f"settle{label}: open loop, {rate:.0f}/s offered ({o['arrivals_kind']}"
                f"{', stopped at %.1f s: overloaded' % o['overloaded_at_s'] if o['overloaded_at_s'] else ''}): {o['settlements_per_s']}/s, "
                f"settle p50 {o['settle_p50_ms']} ms, p99 {o['settle_p99_ms']} ms (round trip p99 {o['settle_rtt_p99_ms']} ms), "
                f"pair p99 {o['pair_p99_ms']} ms, errors {o['errors']}")
            opened.append(o)
            await asyncio.sleep(1.0)  # anything billing still holds for this phase is answered before the next
        check = await driver.verify(env["DATABASE_URL"], env["REDIS_URL"])
        replicas = sum(1 for k in target.pids() if k == "billing" or k.startswith("billing-"))
        return {"loadavg_before": loadavg, "replicas": replicas, "users": users, "calls_per_turn": calls_per_turn, "sweep": steps, "main": main,
                "open": opened, "spend": check}
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
        if driver is not None:
            await driver.close()
        await fx.cleanup(env["REDIS_URL"])


@dataclass(frozen=True)
class Attached:
    """A running stack as another process is told of it: its servers' addresses and its processes."""

    env: dict[str, str]
    processes: dict[str, Optional[int]]

    def pids(self) -> dict[str, Optional[int]]:
        return self.processes


async def measure_apart(target: Any, **options: Any) -> dict[str, Any]:
    """`measure_settlements(target, **options)` in a process of its own on uvloop, as `__main__` runs it.
    Called from make bench's process, the load generator would otherwise share that process's event loop
    (asyncio's own) and its heap of earlier phases, and its loop lag would read as billing's latency (p99
    6.5 ms there; 2.2 ms in a process of its own, both in make bench's open loop at 2,000/s)."""
    with tempfile.TemporaryDirectory(prefix="spotter-settle-") as tmp:
        spec, out = Path(tmp) / "attach.json", Path(tmp) / "result.json"
        servers = {k: target.env[k] for k in ("NATS_URL", "DATABASE_URL", "REDIS_URL")}
        spec.write_text(json.dumps({"env": servers, "pids": dict(target.pids()), "options": options}))
        proc = await asyncio.create_subprocess_exec(sys.executable, str(Path(__file__).resolve()), "--attach", str(spec),
                                                    "--json", str(out))
        try:
            code = await proc.wait()
        finally:
            if proc.returncode is None:  # interrupted: the load generator does not outlive the bench
                proc.kill()
                await proc.wait()
        if code != 0 or not out.exists():
            raise RuntimeError(f"the settlement benchmark's process exited with {code}")
        return json.loads(out.read_text())


def _attached(spec_file: Path, out: Path) -> int:
    """`--attach`: measure against the running stack `spec_file` describes (see measure_apart)."""
    import uvloop

    spec = json.loads(spec_file.read_text())
    result = uvloop.run(measure_settlements(Attached(spec["env"], spec["pids"]), **spec["options"]))
    out.write_text(json.dumps(result, default=str))
    return 0


# --------------------------------------------------------------------------- report


def _ms(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{x:.1f} ms"


def _cpu_per(step: dict[str, Any]) -> Optional[float]:
    """Billing's CPU (all replicas) per settlement (its reserve included), ms: what a settlement costs
    whatever else the machine runs."""
    cores = sum(v for k, v in step["cores"].items() if k == "billing" or k.startswith("billing-"))
    return cores * 1000.0 / step["settlements_per_s"] if step["settlements_per_s"] else None


def _label(r: dict[str, Any]) -> str:
    return r.get("what_if") or "as shipped"


def at_target(r: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The open-loop phase the latency target is judged by: the lowest offered rate at or above
    TARGET_PER_S (None for a result without one, e.g. an older run's JSON)."""
    phases = sorted((o for o in r.get("open") or [] if o["offered_per_s"] >= TARGET_PER_S), key=lambda o: o["offered_per_s"])
    return phases[0] if phases else None


def target_met(o: dict[str, Any]) -> bool:
    """Kept up with the offered rate, nothing failed, and settle p99 (from when due) within the target."""
    return (not o.get("overloaded_at_s") and (o["settlements_per_s"] or 0) >= KEPT_UP * o["offered_per_s"]
            and not o["failed"] and not o["timeouts"]
            and o["settle_p99_ms"] is not None and o["settle_p99_ms"] <= TARGET_P99_MS)


def markdown(results: list[dict[str, Any]]) -> str:
    rows = [
        "| billing | replicas | users | concurrency | settlements/s | settle p50 | settle p99 | reserve p50 / p99 | timeouts / failed "
        "| billing CPU per settlement | other load | spend exact |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        m = r["main"]
        rows.append(
            f"| {_label(r)} | {r['replicas']} | {r['users']} | {m['concurrency']} | **{m['settlements_per_s']:.0f}** | {_ms(m['settle_p50_ms'])} "
            f"| **{_ms(m['settle_p99_ms'])}** | {_ms(m['reserve_p50_ms'])} / {_ms(m['reserve_p99_ms'])} | {m['timeouts']} / {m['failed']} "
            f"| {_ms(_cpu_per(m))} | {m['cores'].get('other processes on the machine', 0.0):.2f} cores "
            f"| {'**yes**' if r['spend']['exact'] else '**NO**'} |")
    sweep = ["", "Sweep (each step a few seconds; the best concurrency is then run at full length):", "",
             "| billing | replicas | users | concurrency | settlements/s | settle p50 | settle p99 | timeouts / failed |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        for s in r["sweep"]:
            sweep.append(f"| {_label(r)} | {r['replicas']} | {r['users']} | {s['concurrency']} | {s['settlements_per_s']:.0f} "
                         f"| {_ms(s['settle_p50_ms'])} | {_ms(s['settle_p99_ms'])} | {s['timeouts']} / {s['failed']} |")
    opened = ["", "Open loop (arrivals at a fixed offered rate, each a reserve then its settle, started on schedule "
              "whatever is in flight; settle latency counted from when the settle was due, i.e. its round trip plus "
              "how late the client started the arrival; pair = scheduled arrival to settle answered):", "",
              "| billing | replicas | users | offered | arrivals | settlements/s | settle p50 | settle p99 | settle round trip p99 "
              "| pair p50 / p99 | reserve p50 / p99 | start lag p99 | client loop lag p99 / max | max in flight | timeouts / failed "
              "| billing CPU per settlement |",
              "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        for o in r.get("open") or []:
            opened.append(
                f"| {_label(r)} | {r['replicas']} | {r['users']} | {o['offered_per_s']:,.0f}/s | {o['arrivals_kind']}"
                f"{' (stopped at %.1f s: overloaded)' % o['overloaded_at_s'] if o.get('overloaded_at_s') else ''} "
                f"| **{o['settlements_per_s'] or 0:.0f}** | {_ms(o['settle_p50_ms'])} | **{_ms(o['settle_p99_ms'])}** "
                f"| {_ms(o['settle_rtt_p99_ms'])} | {_ms(o['pair_p50_ms'])} / {_ms(o['pair_p99_ms'])} "
                f"| {_ms(o['reserve_p50_ms'])} / {_ms(o['reserve_p99_ms'])} | {_ms(o['start_lag_p99_ms'])} "
                f"| {_ms(o.get('client_loop_lag_p99_ms'))} / {_ms(o.get('client_loop_lag_max_ms'))} | {o['max_in_flight']} "
                f"| {o['timeouts']} / {o['failed']} | {_ms(_cpu_per(o))} |")
    if len(opened) == 5:
        opened = []
    cpu = ["", "CPU during the main runs (cores): the closed loop's, then each open-loop phase's:", ""]
    for r in results:
        cpu.append(f"- {_label(r)}, {r['replicas']} replica(s), {r['users']} user(s): "
                   + ", ".join(f"{k} {v:.2f}" for k, v in r["main"]["cores"].items()))
    loads = ["", "Load average (1 min) before each configuration: " + ", ".join(f"{r['loadavg_before']:.2f}" for r in results)
             + f" on {os.cpu_count()} CPUs."]
    spend = ["", "Spend check (micro-dollars, whole run of each configuration: closed and open loop):", ""]
    for r in results:
        s = r["spend"]
        spend.append(
            f"- {_label(r)}, {r['replicas']} replica(s), {r['users']} user(s): {s['settlements']} settlements in {s['turns']} turns; "
            f"billing answered {s['answered_cost_usd_micros']}, rate card {s['rate_card_cost_usd_micros']}, "
            f"ai_usage_daily {s['postgres_daily_usd_micros']}, ai_conversation_usage {s['postgres_lifetime_usd_micros']}, "
            f"Redis mirror {s['redis_mirror_usd_micros']}, usage snapshot {s['usage_snapshot_spent_usd_micros']} "
            f"(reserved {s['usage_snapshot_reserved_usd_micros']}); holds left {s['holds_left']}"
            f"{' (calls given up %d)' % s['calls_given_up'] if s.get('calls_given_up') else ''}; "
            f"messages {s['messages_counted']} for {s['turns']} turns → {'exact' if s['exact'] else 'NOT EXACT'}")
    for r in results:
        for o in r.get("open") or []:
            cpu.append(f"- open loop at {o['offered_per_s']:,.0f}/s, {_label(r)}, {r['replicas']} replica(s), {r['users']} user(s): "
                       + ", ".join(f"{k} {v:.2f}" for k, v in o["cores"].items()))
    return "\n".join(rows + sweep + opened + cpu + loads + spend)


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicas", default="1,2", help="billing replica counts to measure, in order (default 1,2)")
    ap.add_argument("--users", default="1", help="users of the organization settling, comma-separated runs (default 1)")
    ap.add_argument("--seconds", type=float, default=20.0, help="length of the main run (default 20)")
    ap.add_argument("--sweep", default="8,32,128", help="concurrencies tried first (default 8,32,128)")
    ap.add_argument("--sweep-seconds", type=float, default=5.0)
    ap.add_argument("--open-rates", default=",".join(f"{r:.0f}" for r in OPEN_RATES),
                    help="offered settlements/s of the open-loop phases, after the closed loop (default 2000,2500; '' for none)")
    ap.add_argument("--open-seconds", type=float, default=10.0, help="length of each open-loop phase (default 10)")
    ap.add_argument("--even", action="store_true", help="open-loop arrivals evenly spaced (default: Poisson)")
    ap.add_argument("--json", type=Path, default=None, help="also write the raw figures here")
    ap.add_argument("--attach", type=Path, default=None,
                    help="measure once against a running stack this file describes (measure_apart's), not a new one")
    args = ap.parse_args(argv)
    if args.attach is not None:
        if args.json is None:
            ap.error("--attach needs --json (where the figures go)")
        return _attached(args.attach, args.json)
    replicas = [int(x) for x in args.replicas.split(",")]
    users = [int(x) for x in args.users.split(",")]
    sweep = tuple(int(x) for x in args.sweep.split(","))
    open_rates = tuple(float(x) for x in args.open_rates.split(",") if x.strip())

    def on_term(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt()

    signal.signal(signal.SIGTERM, on_term)
    started = time.perf_counter()
    stack = SubStack({}, log_dir=BENCH_DIR / "results" / "logs" / "settle", extra_env={"SPOTTER_LOG_LEVEL": "WARNING"})
    results: list[dict[str, Any]] = []
    try:
        stack.start()

        async def runs(what_if: str, argv: Optional[list[str]], env: Optional[dict[str, str]]) -> None:
            for n in replicas:
                have = sum(1 for k in stack.procs if k == "billing" or k.startswith("billing-"))
                if n > have:
                    stack.add("spotter-billing", n - have, argv=argv, env=env)
                probe = UsageQuery(organization_id=str(uuid.uuid4())).to_bytes()
                await wait_nats_responder(stack.env["NATS_URL"], USAGE.subject, probe)
                await wait_subscribers(stack, SETTLE.subject, n)  # every replica listening
                for u in users:
                    r = await measure_settlements(stack, seconds=args.seconds, sweep=sweep, sweep_seconds=args.sweep_seconds,
                                                  users=u, label=f" ({what_if or 'as shipped'}, {n} replica(s), {u} user(s))",
                                                  open_rates=open_rates, open_seconds=args.open_seconds, poisson=not args.even)
                    r["what_if"] = what_if
                    results.append(r)
                    dead = stack.dead()
                    if dead:
                        raise RuntimeError("process died during the benchmark: " + ", ".join(dead))

        import uvloop  # the services' event loop: a lighter client leaves more of the machine to billing

        uvloop.run(runs("", None, None))
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    finally:
        stack.close()
    runtime = round(time.perf_counter() - started, 1)
    print()
    print("### Budget settlements on one organization")
    print()
    print(markdown(results))
    print(f"\nTargets: ≥ {TARGET_PER_S:,.0f} settlements/s with settle p99 ≤ {TARGET_P99_MS:.0f} ms, spend exact. "
          f"Whole run (stack start included): {runtime} s.")
    for r in results:
        o = at_target(r)
        if o is not None:
            print(f"Open loop at {o['offered_per_s']:,.0f}/s offered, {r['replicas']} replica(s), {r['users']} user(s): "
                  f"{o['settlements_per_s'] or 0:,.0f}/s answered, settle p99 {_ms(o['settle_p99_ms'])} → "
                  f"{'met' if target_met(o) else 'NOT met'}.")
    if args.json:
        args.json.write_text(json.dumps({"results": results, "runtime_s": runtime}, indent=2, default=str))
    bad = any(not r["spend"]["exact"] or r["main"]["failed"] or any(o["failed"] for o in r.get("open") or []) for r in results)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
