"""One gateway holding many SSE streams (issue 14): delivery lag and memory per stream at one event
per second per stream, then aggregate text_delta tokens per second.

What runs: NATS, Postgres, Redis and the gateway alone (`__main__`), or any stack that has a
gateway (`measure_fanout(platform, …)` with bench_platform.Platform or bench_substack.SubStack).

What the benchmark plays, and how:
- The turns. For each stream a conversation of a new benchmark organization's owner is created with
  a `running` turn (ai_conversations, ai_turns), its first logged event (`conversation_started`,
  seq 1, in ai_conversation_events) and the turn's lease in Redis (TurnLock.claim: what the gateway
  takes on send and the orchestrator keeps alive while the turn runs). These are the orchestrator's
  tables, written here only as set-up.
- The orchestrator's emitter. Each event is a `ConversationEvent` envelope (the contract, byte for
  byte: checked against `ConversationEvent.to_bytes()`) published on core NATS at
  `spotter.events.conversation.<id>` with the next sequence number. With `store` (the default) the
  events of each ~2 ms publishing tick are first COPYed into ai_conversation_events, then published:
  stored before published, as the emitter does (it stores one statement per event; the batching is
  ours, so the orchestrator's own write cost is not what is measured). A `text_delta`'s text carries
  the stamp `~<phase><CLOCK_MONOTONIC ns>~<tokens>~` followed by that many words.
- The clients: `GET /organizations/{org}/agent/conversations/{id}/events?after=0` — the route a
  browser resumes or follows a running turn on (POST /messages streams through the same EventFeed
  after publishing its command, which would need the orchestrator to run real turns). Spread over
  `client_procs` processes of bench/sse_load.py.

What is measured: the gateway's whole path for a live event — its one bare NATS subscription,
LiveEvents → EventFeed hand-off, the stream's loop (and the replica's watchdog over quiet streams:
one query and one Redis script a second for all of them), its SSE response (sse.py) and uvicorn —
plus NATS and the client's socket read. Lag = arrival in the client process − the stamp (with
`store`, the stamp is taken before the COPY, so lag includes the store; its own p50/p99 is
reported apart). Memory: the gateway's VmRSS (its process tree) after a warm-up, with every stream
open, and after the events, divided by the number of streams.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
import uuid
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional
from urllib.parse import urlsplit

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

import asyncpg  # noqa: E402
import nats  # noqa: E402
from redis.asyncio import Redis  # noqa: E402

from spotter_shared.contracts.events import (  # noqa: E402
    ConversationEvent, ConversationStarted, TextDelta, conversation_subject,
)
from spotter_shared.turnlock import TurnLock  # noqa: E402

from bench_stats import _proc_table, percentile  # noqa: E402
from bench_substack import CpuWatch, SubStack, new_name, raise_nofile, say  # noqa: E402
from spotter_cli.supervisor import wait_http_ok  # noqa: E402
from sse_load import ClientPool, Totals, open_streams  # noqa: E402

MODEL = "claude-sonnet-5-5"
# Token deltas every 40 ms per stream: 2.5x the event rate of the orchestrator's default window
# (SPOTTER_DELTA_FLUSH_MS=100), so the token phase holds for windows down to 40 ms.
DELTA_FLUSH_S = 0.04
LEASE_TTL_S = 1800.0

TARGET_LAG_P99_MS = 100.0
TARGET_KB_PER_STREAM = 64.0
TARGET_TOKENS_PER_S = 10_000.0
TARGET_STREAMS = 5000


# --------------------------------------------------------------------------- set-up


@dataclass
class Conv:
    id: str
    turn_id: str
    subject: str = ""
    seq: int = 1  # conversation_started is seq 1

    def __post_init__(self) -> None:
        self.subject = conversation_subject(self.id)


@dataclass
class Fixture:
    database_url: str
    redis_url: str
    org_id: str = ""
    user_id: str = ""
    token: str = ""
    convs: list[Conv] = field(default_factory=list)

    async def create(self, n: int) -> "Fixture":
        from spotter_cli.org import NewOrg, create
        from spotter_shared.auth import issue_dev_token
        from spotter_shared.settings import AuthSettings

        conn = await asyncpg.connect(self.database_url)
        try:
            name = new_name("Fanout Bench")
            email = f"fanout-{uuid.uuid4().hex[:10]}@bench.invalid"
            # `spotter org create NAME --tier pro --owner EMAIL`, called in process.
            self.org_id = await create(conn, NewOrg(name=name, tier="pro", owner_email=email, owner_name="Fanout Bench",
                                                    timezone="UTC", locale="en"))
            row = await conn.fetchrow(
                "SELECT u.id AS user_id, m.id AS membership_id FROM users u JOIN memberships m ON m.user_id = u.id "
                "WHERE lower(u.email) = lower($1) AND m.organization_id = $2", email, uuid.UUID(self.org_id))
            self.user_id = str(row["user_id"])
            membership = row["membership_id"]
            self.convs = [Conv(id=str(uuid.uuid4()), turn_id=str(uuid.uuid4())) for _ in range(n)]
            org, user = uuid.UUID(self.org_id), uuid.UUID(self.user_id)
            async with conn.transaction():
                await conn.copy_records_to_table(
                    "ai_conversations", columns=["id", "organization_id", "user_id", "membership_id", "title", "model", "last_event_seq"],
                    records=[(uuid.UUID(c.id), org, user, membership, f"fan-out {i}", MODEL, 1) for i, c in enumerate(self.convs)])
                await conn.copy_records_to_table(
                    "ai_turns", columns=["id", "conversation_id", "command_id", "kind", "status"],
                    records=[(uuid.UUID(c.turn_id), uuid.UUID(c.id), f"bench-{c.turn_id}", "send", "running") for c in self.convs])
                await conn.copy_records_to_table(
                    "ai_conversation_events", columns=["conversation_id", "seq", "turn_id", "type", "data"],
                    records=[(uuid.UUID(c.id), 1, uuid.UUID(c.turn_id), "conversation_started",
                              json.dumps(ConversationStarted(conversation_id=c.id).model_dump(mode="json", exclude_none=True)))
                             for c in self.convs])
            await conn.execute("ANALYZE ai_conversations; ANALYZE ai_turns; ANALYZE ai_conversation_events")
        finally:
            await conn.close()
        redis = Redis.from_url(self.redis_url, decode_responses=True)
        try:
            lock = TurnLock(redis, LEASE_TTL_S)
            for i in range(0, n, 50):
                claimed = await asyncio.gather(*(lock.claim(c.id, c.turn_id) for c in self.convs[i:i + 50]))
                if not all(claimed):
                    raise RuntimeError("a benchmark conversation's lease was already held")
        finally:
            await redis.aclose()
        self.token = issue_dev_token(AuthSettings(), self.user_id)
        return self

    def path(self, c: Conv) -> str:
        return f"/organizations/{self.org_id}/agent/conversations/{c.id}/events?after=0"

    async def cleanup(self) -> None:
        if not self.org_id:
            return
        redis = Redis.from_url(self.redis_url, decode_responses=True)
        try:
            keys = [f"spotter:turn-lock:{c.id}" for c in self.convs]
            for i in range(0, len(keys), 1000):
                await redis.delete(*keys[i:i + 1000])
        finally:
            await redis.aclose()
        conn = await asyncpg.connect(self.database_url)
        try:
            # The conversations, turns and events go with the organization (ON DELETE CASCADE).
            await conn.execute("DELETE FROM organizations WHERE id = $1", uuid.UUID(self.org_id))
            await conn.execute("DELETE FROM users WHERE id = $1", uuid.UUID(self.user_id))
        finally:
            await conn.close()


# --------------------------------------------------------------------------- the orchestrator's side


def envelope(c: Conv, seq: int, delta: str) -> bytes:
    """A text_delta's ConversationEvent as the orchestrator publishes it (emitter.Emitter._write: the
    stored event's dict in the envelope, json.dumps, on the bare NATS connection); checked against
    the contract in Publisher.check()."""
    return json.dumps({"conversationId": c.id, "seq": seq, "turnId": c.turn_id,
                       "event": {"type": "text_delta", "delta": delta}}, ensure_ascii=False).encode()


@dataclass
class PhaseResult:
    tag: str
    events: int = 0
    warm_events: int = 0
    tokens: int = 0
    wall_s: float = 0.0
    behind_max_ms: float = 0.0  # how far the publisher fell behind its schedule at worst
    store_ms: list[float] = field(default_factory=list)


class Publisher:
    def __init__(self, nats_url: str, database_url: Optional[str]) -> None:
        self.nats_url = nats_url
        self.database_url = database_url
        self.nc: Any = None
        self.db: Optional[asyncpg.Connection] = None

    async def open(self) -> "Publisher":
        self.nc = await nats.connect(self.nats_url, pending_size=64 * 1024 * 1024)
        if self.database_url:
            self.db = await asyncpg.connect(self.database_url)
        return self

    async def close(self) -> None:
        if self.nc is not None:
            await self.nc.drain()
        if self.db is not None:
            await self.db.close()

    @staticmethod
    def check(c: Conv) -> None:
        delta = "~A123~2~ tok tok"
        want = ConversationEvent(conversation_id=c.id, seq=7, turn_id=c.turn_id, event=TextDelta(delta=delta))
        if ConversationEvent.model_validate_json(envelope(c, 7, delta)) != want:
            raise AssertionError(f"envelope is not the contract's ConversationEvent: {envelope(c, 7, delta)!r}")

    async def run(self, convs: list[Conv], *, rate: float, seconds: float, tokens: int, tag: str,
                  warm_s: float = 0.0, warm_tag: str = "") -> PhaseResult:
        """`rate` events per second per conversation for `seconds`, spread evenly: event j (over all
        conversations) is due at t0 + j / (rate × n), for conversation j mod n. Events due in the first
        `warm_s` carry `warm_tag` instead of `tag` (left out of the figures)."""
        n = len(convs)
        total_rate = rate * n
        total = int(total_rate * seconds)
        filler = " tok" * tokens
        res = PhaseResult(tag=tag)
        warm_until = int(total_rate * warm_s)
        j = 0
        t0 = time.monotonic()
        publish = self.nc.publish
        while j < total:
            now = time.monotonic()
            due = min(total, int((now - t0) * total_rate) + 1)
            if due > j:
                res.behind_max_ms = max(res.behind_max_ms, (now - (t0 + j / total_rate)) * 1000.0)
                batch = []
                for jj in range(j, due):
                    c = convs[jj % n]
                    c.seq += 1
                    ph = warm_tag if jj < warm_until else tag
                    batch.append((c, c.seq, f"~{ph}{time.monotonic_ns()}~{tokens}~{filler}", ph))
                if self.db is not None:
                    s0 = time.perf_counter()
                    await self.db.copy_records_to_table(
                        "ai_conversation_events", columns=["conversation_id", "seq", "turn_id", "type", "data"],
                        records=[(uuid.UUID(c.id), seq, uuid.UUID(c.turn_id), "text_delta",
                                  json.dumps({"type": "text_delta", "delta": delta})) for c, seq, delta, _ in batch])
                    res.store_ms.append((time.perf_counter() - s0) * 1000.0)
                for c, seq, delta, ph in batch:
                    await publish(c.subject, envelope(c, seq, delta))
                    if ph == tag:
                        res.events += 1
                        res.tokens += tokens
                    else:
                        res.warm_events += 1
                j = due
            await asyncio.sleep(0.002)
        await self.nc.flush()
        res.wall_s = time.monotonic() - t0
        return res


# --------------------------------------------------------------------------- measurement


def tree_rss_kb(pid: Optional[int]) -> Optional[int]:
    """VmRSS of a process and its descendants, KiB."""
    if pid is None:
        return None
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for p, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(p)
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            pass
        stack.extend(children.get(p, ()))
    return total


async def drain(pool: ClientPool, tags: set[str], published: int, limit_s: float) -> Optional[float]:
    """Seconds after the last publish until the clients hold every event of the phase (None: not
    within `limit_s`; what was still queued then counts as missing)."""
    t0 = time.perf_counter()
    while True:
        counts = await pool.counts()
        if sum(counts.get(t, 0) for t in tags) >= published:
            return round(time.perf_counter() - t0, 1)
        if time.perf_counter() - t0 > limit_s:
            return None
        await asyncio.sleep(0.5)


def _lag_summary(phase: Optional[dict[str, Any]]) -> dict[str, Any]:
    if not phase:
        return {"received": 0, "p50_ms": None, "p99_ms": None, "max_ms": None, "tokens": 0, "receive_window_s": None}
    lags = [x / 1e6 for x in phase["lags_ns"]]
    # From the phase's first stamp to its last arrival: a backlog at the start or the end lengthens it.
    window = (phase["last_ns"] - phase["first_sent_ns"]) / 1e9 if phase["first_sent_ns"] else None
    return {
        "received": phase["events"],
        "p50_ms": _r(percentile(lags, 50)),
        "p90_ms": _r(percentile(lags, 90)),
        "p99_ms": _r(percentile(lags, 99)),
        "p999_ms": _r(percentile(lags, 99.9)),
        "max_ms": _r(max(lags) if lags else None),
        "tokens": phase["tokens"],
        "receive_window_s": round(window, 3) if window else None,
    }


def _r(x: Optional[float], nd: int = 1) -> Optional[float]:
    return None if x is None else round(x, nd)


async def measure_fanout(
    target: Any,
    *,
    streams: int,
    seconds: float = 30.0,
    token_streams: int = 100,
    tokens_per_s: float = 150.0,
    token_seconds: float = 15.0,
    store: bool = True,
    client_procs: int = 2,
    warm_s: float = 3.0,
    idle_s: float = 5.0,
    drain_s: float = 30.0,
) -> dict[str, Any]:
    """`target`: anything with `env` (NATS_URL, DATABASE_URL, REDIS_URL), `gateway_url` and `pids()`
    (bench_platform.Platform, bench_substack.SubStack)."""
    env = target.env
    url = urlsplit(target.gateway_url)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    gw_pid = target.pids().get("gateway")
    raise_nofile()
    t_setup = time.perf_counter()
    fx = Fixture(env["DATABASE_URL"], env["REDIS_URL"])
    pool: Optional[ClientPool] = None
    pub = Publisher(env["NATS_URL"], env["DATABASE_URL"] if store else None)
    out: dict[str, Any] = {"loadavg_before": os.getloadavg()[0], "streams_asked": streams, "seconds": seconds, "store": store, "client_procs": client_procs,
                           "token_streams": min(token_streams, streams), "tokens_per_s_per_stream": tokens_per_s,
                           "token_seconds": token_seconds}
    try:
        await fx.create(streams)
        Publisher.check(fx.convs[0])
        await pub.open()
        out["setup_s"] = round(time.perf_counter() - t_setup, 1)
        say(f"fan-out: {streams} conversations with a running turn created in {out['setup_s']}s")

        # Warm-up: a few streams opened and closed in process (pool connections, first-request imports),
        # so the baseline RSS is the gateway's, not its first requests'.
        warm = Totals()
        opened, _ = await open_streams(host, port, [fx.path(c) for c in fx.convs[:50]], fx.token, warm, parallel=25)
        for s in opened:
            s.close()
        if warm.connect_errors:
            raise RuntimeError(f"warm-up streams failed: {warm.connect_errors[:3]}")
        await asyncio.sleep(1.5)
        rss0 = tree_rss_kb(gw_pid)

        pool = ClientPool(host, port, [fx.path(c) for c in fx.convs], fx.token, procs=client_procs, parallel=100)
        pool.start()
        watch = CpuWatch({**target.pids(), **{f"client-{i + 1}": p for i, p in enumerate(pool.pids)}}, self_name="publisher (bench)")
        c0 = watch.snapshot()
        t0 = time.perf_counter()
        conn = await pool.connected()
        out["connect"] = {
            "open": conn["open"], "failed": conn["error_count"], "errors": conn["errors"][:5],
            "wall_s": round(time.perf_counter() - t0, 1),
            "setup_p50_ms": _r(percentile([x * 1000 for x in conn["setup_s"]], 50)),
            "setup_p99_ms": _r(percentile([x * 1000 for x in conn["setup_s"]], 99)),
            "cores": watch.since(c0),
        }
        say(f"fan-out: {conn['open']}/{streams} streams open in {out['connect']['wall_s']}s "
            f"({conn['error_count']} failed{': ' + conn['errors'][0] if conn['errors'] else ''})")
        await asyncio.sleep(1.0)
        rss1 = tree_rss_kb(gw_pid)

        # Streams open, nothing published: what holding them costs.
        c0 = watch.snapshot()
        await asyncio.sleep(idle_s)
        out["idle"] = {"seconds": idle_s, "cores": watch.since(c0)}

        # Phase A: one event per second per stream.
        c0 = watch.snapshot()
        a = await pub.run(fx.convs, rate=1.0, seconds=seconds + warm_s, tokens=1, tag="A", warm_s=warm_s, warm_tag="W")
        drain_a = await drain(pool, {"A", "W"}, a.events + a.warm_events, drain_s)
        out["fanout_cores"] = watch.since(c0)  # publishing and draining
        rss2 = tree_rss_kb(gw_pid)
        say(f"fan-out: phase A published {a.events} events in {a.wall_s:.1f}s (publisher behind by ≤ {a.behind_max_ms:.0f} ms)")

        # Phase B: text deltas every 40 ms (the shortest window we stand behind) on `token_streams` streams.
        m = min(token_streams, streams)
        per_event = max(1, round(tokens_per_s * DELTA_FLUSH_S))
        c0 = watch.snapshot()
        b = await pub.run(fx.convs[:m], rate=1.0 / DELTA_FLUSH_S, seconds=token_seconds + 2.0, tokens=per_event, tag="B",
                          warm_s=2.0, warm_tag="V")
        drain_b = await drain(pool, {"B", "V"}, b.events + b.warm_events, drain_s)
        out["tokens_cores"] = watch.since(c0)
        say(f"fan-out: phase B published {b.events} deltas ({b.tokens} tokens) in {b.wall_s:.1f}s")

        stats = await pool.stop()
        await asyncio.sleep(2.0)
        rss3 = tree_rss_kb(gw_pid)

        la, lb = _lag_summary(stats["phases"].get("A")), _lag_summary(stats["phases"].get("B"))
        open_n = conn["open"]
        out["memory"] = {
            "rss_baseline_kb": rss0, "rss_streams_open_kb": rss1, "rss_after_events_kb": rss2, "rss_after_close_kb": rss3,
            "kb_per_stream_open": _r((rss1 - rss0) / open_n) if open_n and rss0 and rss1 else None,
            "kb_per_stream_after_events": _r((rss2 - rss0) / open_n) if open_n and rss0 and rss2 else None,
        }
        out["fanout"] = {
            "published": a.events, "publish_wall_s": round(a.wall_s - warm_s, 1),
            "events_per_s": round(a.events / max(1e-9, a.wall_s - warm_s), 1),
            "publisher_behind_max_ms": round(a.behind_max_ms, 1), "drain_s": drain_a,
            "phase_events": a.events + a.warm_events, "phase_wall_s": round(a.wall_s + (drain_a if drain_a is not None else drain_s), 2),
            "store_p50_ms": _r(percentile(a.store_ms, 50), 2), "store_p99_ms": _r(percentile(a.store_ms, 99), 2),
            **la, "missing": a.events - la["received"],
        }
        window = lb["receive_window_s"] or 0.0
        out["tokens"] = {
            "streams": m, "deltas_per_s_per_stream": round(1.0 / DELTA_FLUSH_S, 1), "tokens_per_delta": per_event,
            "published_deltas": b.events, "published_tokens": b.tokens,
            "offered_tokens_per_s": round(b.tokens / max(1e-9, b.wall_s - 2.0), 0), "token_wall_s": round(b.wall_s, 2),
            "delivered_tokens_per_s": round(lb["tokens"] / window, 0) if window else None,
            "delivered_deltas_per_s": round(lb["received"] / window, 0) if window else None,
            "publisher_behind_max_ms": round(b.behind_max_ms, 1), "drain_s": drain_b,
            "phase_events": b.events + b.warm_events, "phase_wall_s": round(b.wall_s + (drain_b if drain_b is not None else drain_s), 2),
            **lb, "missing": b.events - lb["received"],
        }
        out["errors"] = {
            "connect_failed": conn["error_count"], "lost_streams": stats["lost"], "open_at_stop": stats["open_at_stop"],
            "sse_id_gaps": stats["gaps"], "sse_id_repeats": stats["dups"], "http_errors": stats["http_errors"][:5],
            "other_events": stats["other_events"],
        }
        out["client_cpu_s"] = stats["cpu_s"]
        out["loadavg_after"] = os.getloadavg()[0]
        return out
    finally:
        if pool is not None:
            pool.kill()
        await pub.close()
        await fx.cleanup()


# --------------------------------------------------------------------------- report


def _ms(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{x:.1f} ms"


def _us(x: Optional[float]) -> str:
    return "n/a" if x is None or x < 0 else f"{x:.0f} µs"


def _drained(s: Optional[float]) -> str:
    return "not within the 30 s wait" if s is None else f"{s:.1f} s"


def _yes(ok: Optional[bool]) -> str:
    return "n/a" if ok is None else ("**yes**" if ok else "**no**")


def markdown(r: dict[str, Any]) -> str:
    f, t, mem, e, c = r["fanout"], r["tokens"], r["memory"], r["errors"], r["connect"]
    kb = mem["kb_per_stream_after_events"]
    kb_open = mem["kb_per_stream_open"]
    full = c["open"] >= TARGET_STREAMS
    tok = "n/a" if t["delivered_tokens_per_s"] is None else f"{t['delivered_tokens_per_s']:,.0f}"
    gw_idle = r["idle"]["cores"].get("gateway", 0.0)
    per_idle = gw_idle / c["open"] * 1e6 if c["open"] else None
    # All of the gateway's CPU in the phase (holding the streams included) ÷ the events it delivered.
    per_a = r["fanout_cores"].get("gateway", 0.0) * f["phase_wall_s"] / f["phase_events"] * 1e6 if f["phase_events"] else None
    per_b = r["tokens_cores"].get("gateway", 0.0) * t["phase_wall_s"] / t["phase_events"] * 1e6 if t["phase_events"] else None
    kb_s = "n/a" if kb is None else f"{kb:.1f} KB"
    kb_open_s = "n/a" if kb_open is None else f"{kb_open:.1f} KB"
    rows = [
        "| measure | result | target | met |",
        "|---|---:|---:|---|",
        f"| SSE streams open on one gateway | {c['open']} of {r['streams_asked']} ({c['failed']} failed; opened in {c['wall_s']} s, "
        f"set-up p50 {_ms(c['setup_p50_ms'])}, p99 {_ms(c['setup_p99_ms'])}) | 5,000 | {_yes(full)} |",
        f"| delivery lag at 1 event/s per stream, p50 / p99 / max | {_ms(f['p50_ms'])} / **{_ms(f['p99_ms'])}** / {_ms(f['max_ms'])} "
        f"| p99 ≤ 100 ms | {_yes(None if f['p99_ms'] is None else f['p99_ms'] <= TARGET_LAG_P99_MS)} |",
        f"| events delivered / published (phase A, {f['publish_wall_s']} s at {f['events_per_s']:.0f} events/s) "
        f"| {f['received']} / {f['published']} | all | {_yes(f['missing'] == 0)} |",
        f"| gateway memory per stream (VmRSS growth ÷ streams: streams open / after the events) "
        f"| {kb_open_s} / **{kb_s}** | ≤ 64 KB "
        f"| {_yes(None if kb is None else max(kb, kb_open or 0) <= TARGET_KB_PER_STREAM)} |",
        f"| text_delta tokens delivered, all streams ({t['streams']} streams × {t['deltas_per_s_per_stream']:.0f} deltas/s × "
        f"{t['tokens_per_delta']} tokens; offered {t['offered_tokens_per_s']:.0f}/s) "
        f"| **{tok}/s** | ≥ 10,000/s "
        f"| {_yes(None if t['delivered_tokens_per_s'] is None else t['delivered_tokens_per_s'] >= TARGET_TOKENS_PER_S)} |",
        f"| lag during the token phase, p50 / p99 | {_ms(t['p50_ms'])} / {_ms(t['p99_ms'])} | | |",
        f"| gateway CPU: holding a stream idle / all its CPU ÷ events delivered at 1 event/s / ÷ deltas in the token phase "
        f"| {_us(per_idle)} per stream-second / {_us(per_a)} / {_us(per_b)} | | |",
        f"| deltas delivered / published (token phase) | {t['received']} / {t['published_deltas']} | all | {_yes(t['missing'] == 0)} |",
        f"| streams lost, SSE id gaps / repeats | {e['lost_streams']}, {e['sse_id_gaps']} / {e['sse_id_repeats']} | 0 | "
        f"{_yes(e['lost_streams'] == 0 and e['sse_id_gaps'] == 0 and e['sse_id_repeats'] == 0)} |",
    ]
    cores = [
        "| CPU (cores) | " + " | ".join(["opening streams", "holding them idle", "1 event/s per stream", "token phase"]) + " |",
        "|---|---:|---:|---:|---:|",
    ]
    names: list[str] = []
    for d in (c["cores"], r["idle"]["cores"], r["fanout_cores"], r["tokens_cores"]):
        for k in d:
            if k not in names:
                names.append(k)
    for k in names:
        cores.append(f"| {k} | " + " | ".join(f"{d.get(k, 0.0):.2f}" for d in (c["cores"], r["idle"]["cores"], r["fanout_cores"], r["tokens_cores"])) + " |")
    stored = (f"yes (COPY per ~2 ms tick; store p50 {_ms(f['store_p50_ms'])}, p99 {_ms(f['store_p99_ms'])}, inside the lag)"
              if r["store"] else "no (published only)")
    notes = (
        f"Gateway VmRSS: {mem['rss_baseline_kb'] / 1024:.1f} MB after warm-up, {mem['rss_streams_open_kb'] / 1024:.1f} MB with the streams open, "
        f"{mem['rss_after_events_kb'] / 1024:.1f} MB after the events, {mem['rss_after_close_kb'] / 1024:.1f} MB once closed. "
        f"Events stored before publishing: {stored}. "
        f"Publisher behind schedule at worst: {f['publisher_behind_max_ms']:.0f} ms (phase A), {t['publisher_behind_max_ms']:.0f} ms (token phase). "
        f"Backlog cleared {_drained(f['drain_s'])} after the last publish of phase A, {_drained(t['drain_s'])} after the token phase's. "
        f"Client processes: {r['client_procs']} (CPU {r['client_cpu_s']} s). Lag p90 / p99.9: {_ms(f.get('p90_ms'))} / {_ms(f.get('p999_ms'))}. "
        f"Load average (1 min) before / after: {r['loadavg_before']:.2f} / {r['loadavg_after']:.2f} on {os.cpu_count()} CPUs."
    )
    return "\n".join(rows) + "\n\n" + "\n".join(cores) + "\n\n" + notes


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, default=TARGET_STREAMS, help="concurrent SSE streams (5000: the target; 500: a quick run)")
    ap.add_argument("--seconds", type=float, default=30.0, help="measured seconds at 1 event/s per stream (default 30)")
    ap.add_argument("--token-streams", type=int, default=100, help="streams receiving text deltas in the token phase (default 100)")
    ap.add_argument("--tokens-per-s", type=float, default=150.0, help="model output per token stream, tokens/s (default 150)")
    ap.add_argument("--token-seconds", type=float, default=15.0, help="measured seconds of the token phase (default 15)")
    ap.add_argument("--no-store", action="store_true", help="publish events without storing them first")
    ap.add_argument("--client-procs", type=int, default=2, help="client processes (default 2)")
    ap.add_argument("--json", type=Path, default=None, help="also write the raw figures here")
    args = ap.parse_args(argv)

    def on_term(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt()

    signal.signal(signal.SIGTERM, on_term)
    started = time.perf_counter()
    stack = SubStack({}, log_dir=BENCH_DIR / "results" / "logs" / "fanout", extra_env={"SPOTTER_LOG_LEVEL": "WARNING"})
    try:
        stack.start()
        stack.add("spotter-gateway")
        wait_http_ok(f"{stack.gateway_url}/readyz", timeout=90, watch=stack.procs.values())
        say(f"gateway up at {stack.gateway_url} (pid {stack.pids().get('gateway')})")
        result = asyncio.run(measure_fanout(
            stack, streams=args.streams, seconds=args.seconds, token_streams=args.token_streams,
            tokens_per_s=args.tokens_per_s, token_seconds=args.token_seconds, store=not args.no_store,
            client_procs=args.client_procs))
        dead = stack.dead()
        if dead:
            say("process died during the benchmark: " + ", ".join(dead))
            print(stack.output("gateway")[-3000:], file=sys.stderr)
            return 2
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    finally:
        stack.close()
    result["runtime_s"] = round(time.perf_counter() - started, 1)
    print()
    print(f"### SSE fan-out: {args.streams} streams on one gateway")
    print()
    print(markdown(result))
    print(f"\nWhole run (stack start included): {result['runtime_s']} s.")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))
    bad = result["errors"]
    return 1 if (bad["connect_failed"] or bad["lost_streams"] or result["fanout"]["missing"] or result["tokens"]["missing"]) else 0


if __name__ == "__main__":
    sys.exit(main())
