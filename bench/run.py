"""`make bench`: platform overhead on time-to-first-token and turns per second, through the gateway
versus calling the model simulator directly, at 1 and 20 concurrent conversations; then p50/p95 of
every read tool over Demo Gym's studio year (bench_tools.py); retrieval quality and speed
(retrieval.py: hit@5 per language over a labelled set, HNSW recall@10 over 100k vectors, the
ambient round trip); and prompt caching, seed 000's layout versus ours, over a scripted 10-turn
conversation (prompt_cache.py).

Everything runs in one process tree on ephemeral servers; the figures that matter are ratios
gateway ÷ direct measured in the same run (the machines are shared and noisy), written to
bench/results/latest.{md,json} and to the README between `<!-- bench:start -->` / `<!-- bench:end -->`.

    .venv/bin/python bench/run.py            # full run (~2-3 minutes)
    .venv/bin/python bench/run.py --quick    # smoke run, results not written to the README
    .venv/bin/python bench/run.py --tools-only  # only the read tools; printed, nothing written

Exit status: 0 when every turn and read-tool call succeeded, 1 when any failed (errors are listed), 2 when the
platform could not be started or a process died.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import platform as pyplatform
import resource
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

import anthropic  # noqa: E402
import asyncpg  # noqa: E402
import httpx  # noqa: E402

from bench_clients import (  # noqa: E402
    Conversations, DirectPlan, Gateway, Workload, direct_turn, gateway_turn, run_closed_loop, sample_round,
)
from bench_platform import DEMO_EMAIL, Platform, say  # noqa: E402
from bench_report import (  # noqa: E402
    context_section, detail_table, markdown, ratio_table, tools_section, update_readme, write_results,
)
from bench_stats import Samples, TurnResult, cpu_at_rest, cpu_delta, cpu_snapshot, ratio  # noqa: E402
from bench_tools import measure_read_tools  # noqa: E402
import prompt_cache  # noqa: E402
import retrieval  # noqa: E402
from peers import langgraph_peer  # noqa: E402
import bench_fanout  # noqa: E402
import bench_settle  # noqa: E402
import floor  # noqa: E402

PLAIN = Workload(
    key="plain", title="plain text turn", message="hello there, how are you today?", model_calls=1,
    expect_text="Spotter",
)
ONE_TOOL = Workload(
    key="one_tool", title="one read tool", message="who am I?", model_calls=2,
    tools=("get_current_context",), expect_text="You are",
)
# The same turns in a conversation that already has a few exchanges: no conversation to create and
# no title call after `done` (a new conversation's turn makes one), so a plain follow-up's model work
# is one streamed call.
PLAIN_FOLLOW_UP = Workload(
    key="plain_follow_up", title="plain text turn, follow-up", message=PLAIN.message, model_calls=1,
    expect_text=PLAIN.expect_text, follow_up=True,
)
ONE_TOOL_FOLLOW_UP = Workload(
    key="one_tool_follow_up", title="one read tool, follow-up", message=ONE_TOOL.message, model_calls=2,
    tools=ONE_TOOL.tools, expect_text=ONE_TOOL.expect_text, follow_up=True,
)
# A plain follow-up whose message rag embeds: long enough, with words that are not stopwords, and three
# words drawn at random each turn (Workload.fresh). The simulator answers it in plain text (what the ambient context
# named, or its greeting): one model call, as the plain follow-up.
PLAIN_FRESH = Workload(
    key="plain_fresh", title="plain text turn, follow-up, new words", message="any ideas for kettlebell swings and rowing intervals",
    model_calls=1, follow_up=True, fresh=True,
)
# A follow-up cell first opens one conversation per this many messages its turns will add: a plain turn
# adds two (the message, the answer), a one-tool turn four (with the tool call and its result), so every
# conversation ends the cell with at most 12 messages, well below compaction's 24 (a one-tool follow-up
# cell of one conversation per five turns reached it, and measured three compactions).
MESSAGES_PER_CONVERSATION = 10


def turns_per_conversation(w: Workload) -> int:
    return max(1, MESSAGES_PER_CONVERSATION // (2 * w.model_calls))
TITLE_BUDGET_S = 1.5  # the orchestrator's SPOTTER_TITLE_BUDGET_S: a title call is over by then
ELITE_CAP_USD_MICROS = 25_000_000  # billing's caps.py: the metered tier the bench moves a busy run to


@dataclass(frozen=True)
class Cell:
    workload: Workload
    concurrency: int
    rounds: int
    turns_per_round: int


def plan_cells(quick: bool) -> list[Cell]:
    if quick:
        return [Cell(PLAIN, 1, 2, 3), Cell(PLAIN, 20, 2, 20), Cell(ONE_TOOL, 1, 2, 2), Cell(ONE_TOOL, 20, 2, 20),
                Cell(PLAIN_FOLLOW_UP, 1, 2, 3), Cell(PLAIN_FOLLOW_UP, 20, 2, 20), Cell(ONE_TOOL_FOLLOW_UP, 20, 2, 20),
                Cell(PLAIN_FRESH, 1, 2, 3), Cell(PLAIN_FRESH, 20, 2, 20)]
    return [
        # At 20 conversations a round's wall time is its slowest conversation's: one slow round moves a
        # cell's turns/s by ~5 %, so the plain cells, which have targets, run eight.
        Cell(PLAIN, 1, 4, 10),      # 40 turns per path
        Cell(PLAIN, 20, 8, 40),     # 320 turns per path
        Cell(ONE_TOOL, 1, 4, 6),    # 24 turns per path
        Cell(ONE_TOOL, 20, 4, 30),  # 120 turns per path
        Cell(PLAIN_FOLLOW_UP, 1, 4, 10),
        Cell(PLAIN_FOLLOW_UP, 20, 8, 40),
        Cell(ONE_TOOL_FOLLOW_UP, 20, 4, 30),
        Cell(PLAIN_FRESH, 1, 4, 10),
        Cell(PLAIN_FRESH, 20, 8, 40),
    ]


class Failure(RuntimeError):
    pass


class Bench:
    def __init__(self, p: Platform, quick: bool) -> None:
        self.p = p
        self.quick = quick
        self.gw = Gateway(p.gateway_url, p.org_id, p.token)
        self.http = httpx.AsyncClient(
            timeout=httpx.Timeout(10.0, read=90.0),
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=100),
        )
        self.sim_ctl = httpx.AsyncClient(base_url=p.sim_url, timeout=10.0)
        self.model = anthropic.AsyncAnthropic(base_url=p.sim_url, api_key="sk-ant-simulator", max_retries=0)
        self.plans: dict[str, list[DirectPlan]] = {}  # per workload; a follow-up's, one per depth, replayed in turn
        self.replayed: Counter[str] = Counter()
        self.conversations: dict[str, Conversations] = {}  # per follow-up workload
        self.peer_answers: dict[str, Any] = {}  # the model turns Spotter got, replayed to the peer
        self.notes: list[str] = []
        self.tier = "pro"
        self.restore_tier: Optional[str] = None  # set when we switched the org's tier for the run
        self.all_errors: list[tuple[str, str]] = []  # (where, error)

    async def close(self) -> None:
        await self.http.aclose()
        await self.sim_ctl.aclose()
        await self.model.close()

    # ---------------------------------------------------------------- one turn of each kind
    async def gateway(self, w: Workload) -> TurnResult:
        if w.follow_up:
            return await self.conversations.setdefault(w.key, Conversations()).turn(self.http, self.gw, w)
        return await gateway_turn(self.http, self.gw, w)

    async def open_conversations(self, w: Workload, n: int) -> None:
        """Before a follow-up cell: at least `n` idle conversations, each with one exchange (not measured)."""
        pool = self.conversations.setdefault(w.key, Conversations())
        missing = n - len(pool)
        if missing > 0:
            results, _ = await run_closed_loop(lambda: pool.open(self.http, self.gw, w), missing, min(20, missing))
            errs = [r.error for r in results if not r.ok]
            if errs:
                raise Failure(f"opening conversations for {w.key}: {len(errs)} error(s), first: {errs[0]}")

    async def direct(self, w: Workload) -> TurnResult:
        plans = self.plans[w.key]
        self.replayed[w.key] += 1
        return await direct_turn(self.model, plans[self.replayed[w.key] % len(plans)], w)

    def check_alive(self) -> None:
        dead = self.p.dead()
        if dead:
            raise Failure("process died during the benchmark: " + ", ".join(dead))

    # ---------------------------------------------------------------- setup
    async def capture_plan(self, w: Workload) -> int:
        """Run gateway turns and take the request bodies the orchestrator sent to the model: the direct
        baseline replays exactly those. A follow-up cell's turns go into conversations one to
        `turns_per_conversation` exchanges deep, evenly, and a deeper conversation is a longer request (the
        simulator's work grows with it), so its baseline replays one turn's requests at each of those
        depths, in turn, all captured in one conversation (not one of the cell's)."""
        pool = Conversations()
        if w.follow_up:
            await pool.open(self.http, self.gw, w)
            await asyncio.sleep(TITLE_BUDGET_S)  # its title call, made after `done`, is not the next turn's
        plans: list[DirectPlan] = []
        for _ in range(turns_per_conversation(w) if w.follow_up else 1):
            await self.sim_ctl.delete("/_sim/requests")
            r = await pool.turn(self.http, self.gw, w) if w.follow_up else await self.gateway(w)
            if not r.ok:
                raise Failure(f"capture turn for {w.key!r} failed: {r.error}")
            log = (await self.sim_ctl.get("/_sim/requests")).json()["requests"]
            calls = [e for e in log if e.get("path") == "/v1/messages" and e.get("body")]
            bodies = [e["body"] for e in calls]
            if len(bodies) != w.model_calls:
                raise Failure(f"{w.key}: expected {w.model_calls} model call(s) per turn, the simulator saw {len(bodies)}")
            bad = [e["verdict"] for e in log if not e.get("verdict", {}).get("ok")]
            if bad:
                raise Failure(f"{w.key}: the simulator rejected the orchestrator's request: {bad}")
            plans.append(DirectPlan(calls=[{k: v for k, v in b.items() if k != "stream"} for b in bodies]))
            if not plans[1:]:
                self.peer_answers[w.key] = langgraph_peer.answers_from_requests(calls)
        self.plans[w.key] = plans
        # Sanity: the direct replay works and yields text.
        d = await self.direct(w)
        if not d.ok:
            raise Failure(f"direct replay of {w.key!r} failed: {d.error}")
        return len(plans) + w.follow_up  # the gateway turns it ran

    async def usage(self) -> dict[str, Any]:
        r = await self.http.get(f"{self.gw.base_url}/organizations/{self.gw.org_id}/agent/usage", headers=self.gw.headers)
        r.raise_for_status()
        return r.json()

    async def set_tier(self, tier: str) -> str:
        """Set the demo org's tier; returns the previous one."""
        conn = await asyncpg.connect(self.p.env["DATABASE_URL"])
        try:
            async with conn.transaction():
                old = await conn.fetchval("SELECT tier::text FROM organizations WHERE id = $1::uuid FOR UPDATE", self.gw.org_id)
                await conn.execute("UPDATE organizations SET tier = $2::org_tier WHERE id = $1::uuid", self.gw.org_id, tier)
        finally:
            await conn.close()
        return old

    async def switch_tier(self, tier: str) -> None:
        old = await self.set_tier(tier)
        if self.restore_tier is None:
            self.restore_tier = old
        self.tier = tier

    async def warm_up(self, cells: list[Cell]) -> int:
        turns = 0
        for w in {c.workload.key: c.workload for c in cells}.values():
            for c in sorted({c.concurrency for c in cells}):
                n = max(2, c)
                for fn in (self.direct, self.gateway):
                    results, _ = await run_closed_loop(lambda fn=fn, w=w: fn(w), n, c)
                    errs = [r.error for r in results if not r.ok]
                    if errs:
                        raise Failure(f"warm-up {w.key} c={c} {fn.__name__}: {len(errs)} error(s), first: {errs[0]}")
                    if fn == self.gateway:
                        turns += n
        self.check_alive()
        return turns

    async def settle_budget(self, spent_turns: int, planned_gateway_turns: int) -> None:
        """Keep the demo org's real tier (pro, metered: the budget reservation is part of the platform)
        unless the run would come near its daily cap; then switch the org to unmetered before measuring."""
        u = await self.usage()
        cap = u.get("capUsdMicros", u.get("cap_usd_micros", -1))
        spent = u.get("spentUsdMicros", u.get("spent_usd_micros", 0))
        tier = u.get("tier", "?")
        self.tier = tier
        if cap is None or cap < 0:
            return
        per_turn = spent / max(1, spent_turns)
        # Holds for in-flight turns count too: ~ one reservation per concurrent turn.
        projected = spent + per_turn * planned_gateway_turns * 1.5 + 20 * 50_000
        say(f"budget: tier {tier}, spent ${spent / 1e6:.3f} of ${cap / 1e6:.2f} after {spent_turns} gateway turns "
            f"(~${per_turn / 1e6:.4f}/turn); projected ${projected / 1e6:.2f}")
        if projected > 0.8 * cap:
            # A metered tier with room keeps the reservations in what is measured; unmetered skips them.
            roomy = ELITE_CAP_USD_MICROS if projected <= 0.8 * ELITE_CAP_USD_MICROS else None
            await self.switch_tier("elite" if roomy else "unmetered")
            note = (f"The demo org (tier {tier}, daily cap ${cap / 1e6:.2f}) was switched to `{self.tier}` before measuring: "
                    f"the run was projected to spend ${projected / 1e6:.2f}. "
                    + (f"Its cap is ${roomy / 1e6:.2f}: budget reservations are still made and measured."
                       if roomy else "Budget reservations are then skipped."))
            self.notes.append(note)
            say(note)

    # ---------------------------------------------------------------- measurement
    async def measure(self, cell: Cell) -> dict[str, Any]:
        w, c = cell.workload, cell.concurrency
        samples = {"direct": Samples(), "gateway": Samples()}
        cpu = {"direct": Counter(), "gateway": Counter()}
        if w.follow_up:
            # Conversations of its own, so none grows past compaction over the cells and the warm-up.
            self.conversations[w.key] = Conversations()
            await self.open_conversations(w, max(c, -(-cell.rounds * cell.turns_per_round // turns_per_conversation(w))))
        roots = self.p.pids()
        for rnd in range(cell.rounds):
            order = ("direct", "gateway") if rnd % 2 == 0 else ("gateway", "direct")
            for path in order:
                fn = self.direct if path == "direct" else self.gateway
                before, self_before = cpu_snapshot(roots), _self_cpu()
                results, wall = await sample_round(samples[path], lambda fn=fn: fn(w), cell.turns_per_round, c)
                delta = cpu_delta(before, cpu_snapshot(roots))
                delta["bench-client"] = _self_cpu() - self_before
                cpu[path].update(delta)
                for r in results:
                    if not r.ok:
                        self.all_errors.append((f"{w.key} c={c} {path} round {rnd + 1}", r.error or "?"))
                s = samples[path].summary()
                say(f"{w.key:>8} c={c:<2} round {rnd + 1}/{cell.rounds} {path:>7}: {len(results)} turns in {wall:.2f}s, "
                    f"ttft p50 {s['ttft_p50_ms']} ms, errors {len(samples[path].errors)}")
                self.check_alive()
        d, g = samples["direct"].summary(), samples["gateway"].summary()
        n_ok = {k: max(1, len(v.ok)) for k, v in samples.items()}
        return {
            "workload": w.key,
            "title": w.title,
            "message": w.message,
            "model_calls_per_turn": w.model_calls,
            "concurrency": c,
            "direct": d,
            "gateway": g,
            "ratios": {
                "ttft_p50": ratio(g["ttft_p50_ms"], d["ttft_p50_ms"]),
                "ttft_p95": ratio(g["ttft_p95_ms"], d["ttft_p95_ms"]),
                "turn_p50": ratio(g["turn_p50_ms"], d["turn_p50_ms"]),
                "throughput": ratio(g["turns_per_s"], d["turns_per_s"]),
                "throughput_by_round_wall": ratio(g["turns_per_s_by_round_wall"], d["turns_per_s_by_round_wall"]),
            },
            "added_ttft_p50_ms": None if g["ttft_p50_ms"] is None or d["ttft_p50_ms"] is None
            else round(g["ttft_p50_ms"] - d["ttft_p50_ms"], 1),
            "cpu_ms_per_turn": {
                path: {k: round(v * 1000 / n_ok[path], 1) for k, v in sorted(cpu[path].items(), key=lambda kv: -kv[1])}
                for path in ("direct", "gateway")
            },
        }


def _self_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _nproc() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        return os.cpu_count() or 1


async def run_bench(
    p: Platform, cells: list[Cell], quick: bool, tool_calls: int, *, context: bool = True, peers: bool = True,
    scale: bool = True,
) -> tuple[list[dict[str, Any]], Bench, dict[str, Any], dict[str, Any]]:
    b = Bench(p, quick)
    extra: dict[str, Any] = {}
    try:
        out = []
        # rag indexes the freshly seeded database by itself: let that finish first, so its CPU does
        # not land in the overhead figures.
        async with asyncpg.create_pool(p.env["DATABASE_URL"], min_size=1, max_size=1) as pool:
            waited = await retrieval.wait_index_quiet(pool)
        say(f"waited {waited}s for rag's first index of the demo studio")
        # The platform at rest, once it has settled: what every replica costs with nothing to do.
        rest_s = 5 if quick else 15
        extra["at_rest"] = {"seconds": rest_s, "ms_per_s": await cpu_at_rest(p.pids(), rest_s)}
        say("at rest: " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(extra["at_rest"]["ms_per_s"].items())) + " ms/s")
        if cells:
            t = time.perf_counter()
            captured = 0
            for w in {c.workload.key: c.workload for c in cells}.values():
                captured += await b.capture_plan(w)
            warm = await b.warm_up(cells)
            say(f"captured request shapes and warmed up in {time.perf_counter() - t:.1f}s")
            await b.settle_budget(warm + captured,
                                  sum(c.rounds * c.turns_per_round for c in cells))
            for cell in cells:
                out.append(await b.measure(cell))
            if PLAIN_FOLLOW_UP.key in b.plans:
                # The same plain follow-ups through the floor (bench/floor.py): Spotter's guarantees and nothing else.
                t = time.perf_counter()
                async with asyncpg.create_pool(p.env["DATABASE_URL"], min_size=1, max_size=1) as pool:
                    user_id = str(await pool.fetchval("SELECT id FROM users WHERE email = $1", DEMO_EMAIL))
                extra["floor"] = await floor.measure_floor(
                    p, b.http, b.gw, PLAIN_FOLLOW_UP, b.plans[PLAIN_FOLLOW_UP.key][0].calls[0], user_id,
                    rounds=2 if quick else 4, turns_per_round=20 if quick else 40, concurrency=20)
                b.all_errors += [tuple(e) for e in extra["floor"]["errors"]]
                say(f"floor in {time.perf_counter() - t:.1f}s: Spotter's CPU per plain follow-up {extra['floor']['cpu_ratio']}x the floor's")
            if peers:
                # The peer on the same simulator, same workloads and turn counts, after Spotter's rounds
                # (the simulator's scripts are global: nothing else may run meanwhile).
                t = time.perf_counter()
                # Its threads start empty per run: it gets the cells whose turns open a conversation.
                extra["peer"] = await langgraph_peer.measure_cells(
                    p.sim_url, [c for c in cells if not c.workload.follow_up], answers=b.peer_answers or None, log_dir=p.log_dir,
                    extra_pids={"simulator": p.procs["spotter-sim"].pid})
                b.all_errors += [tuple(e) for e in extra["peer"]["errors"]]
                say(f"peer (LangGraph) in {time.perf_counter() - t:.1f}s")
        if scale:
            # Issue 14's scale figures on this same stack: one gateway holding many SSE streams, and
            # budget settlements on one hot organization (each its own org, created by the bench).
            t = time.perf_counter()
            extra["fanout"] = await bench_fanout.measure_fanout(
                p, streams=500 if quick else 5000, seconds=10 if quick else 20, token_seconds=5 if quick else 10)
            say(f"SSE fan-out in {time.perf_counter() - t:.1f}s")
            t = time.perf_counter()
            extra["settle"] = [await bench_settle.measure_apart(p, seconds=5 if quick else 20,
                                                                sweep_seconds=2 if quick else 5,
                                                                open_seconds=5 if quick else 10)]
            say(f"settlements in {time.perf_counter() - t:.1f}s")
            b.check_alive()
        # After the platform runs, so these calls do not compete with them for the two cores.
        t = time.perf_counter()
        tools = await measure_read_tools(p.env["DATABASE_URL"], p.org_id, calls=tool_calls, warmups=1 if quick else 3)
        say(f"read tools: {len(tools['tools'])} tools x {tool_calls} calls in {time.perf_counter() - t:.1f}s")
        b.all_errors += [(f"read tool {name}", err) for name, err in tools["errors"]]
        b.check_alive()
        if context:
            t = time.perf_counter()
            extra["retrieval"] = await retrieval.run(p.env["DATABASE_URL"], p.env["NATS_URL"], org_id=p.org_id, quick=quick)
            b.all_errors += [("retrieval", e) for e in extra["retrieval"]["errors"]]
            say(f"retrieval in {time.perf_counter() - t:.1f}s")
            t = time.perf_counter()
            extra["prompt_cache"] = await prompt_cache.measure_prompt_cache(p)
            b.all_errors += [("prompt cache", e) for e in extra["prompt_cache"]["errors"]]
            say(f"prompt cache, both layouts, in {time.perf_counter() - t:.1f}s")
            b.check_alive()
        return out, b, tools, extra
    finally:
        if b.restore_tier:  # DATABASE_URL may be a developer's database: leave the org as it was
            try:
                await b.set_tier(b.restore_tier)
            except Exception as exc:  # noqa: BLE001
                say(f"could not restore the demo org's tier {b.restore_tier!r}: {exc}")
        await b.close()


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="few turns, smoke test: writes results/quick.{md,json}; the README is left alone")
    ap.add_argument("--ttft-ms", type=int, default=200, help="simulator time to first token (default 200)")
    ap.add_argument("--tokens-per-second", type=float, default=200.0, help="simulator output pace (default 200)")
    ap.add_argument("--no-readme", action="store_true", help="do not touch README.md")
    ap.add_argument("--no-peers", action="store_true", help="skip the peer agent server (LangGraph) comparison")
    ap.add_argument("--no-scale", action="store_true", help="skip the SSE fan-out and settlement benchmarks")
    ap.add_argument("--results-dir", default=str(BENCH_DIR / "results"))
    ap.add_argument("--tools-only", action="store_true",
                    help="only the read tools over the demo year: printed, nothing written")
    ap.add_argument("--tool-calls", type=int, default=None,
                    help="measured calls per read tool (default 30, 5 with --quick)")
    args = ap.parse_args(argv)

    # SIGTERM (e.g. a CI timeout) runs the finally blocks, so no server outlives us.
    def on_term(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt()

    signal.signal(signal.SIGTERM, on_term)

    started = time.perf_counter()
    results_dir = Path(args.results_dir)
    p = Platform(ttft_ms=args.ttft_ms, tokens_per_second=args.tokens_per_second, log_dir=results_dir / "logs")
    cells_plan = [] if args.tools_only else plan_cells(args.quick)
    tool_calls = args.tool_calls or (5 if args.quick else 30)
    rc = 0
    try:
        try:
            p.start()
        except Exception as exc:
            say(f"could not start the platform: {type(exc).__name__}: {exc}")
            _dump_logs(p)
            return 2
        try:
            cells, b, tools, extra = asyncio.run(run_bench(p, cells_plan, args.quick, tool_calls,
                                                           context=not args.tools_only,
                                                           peers=not (args.tools_only or args.no_peers),
                                                           scale=not (args.tools_only or args.no_scale)))
        except Failure as exc:
            say(f"FAILED: {exc}")
            _dump_logs(p)
            return 2
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    finally:
        p.close()

    runtime = time.perf_counter() - started
    meta = {
        "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "nproc": _nproc(),
        "machine": f"{pyplatform.system()} {pyplatform.machine()}",
        "python": pyplatform.python_version(),
        "sim_ttft_ms": args.ttft_ms,
        "sim_tokens_per_second": args.tokens_per_second,
        "tier": b.tier,
        "quick": args.quick,
        "runtime_s": round(runtime, 1),
        "workloads_note": (
            f"Workloads: “{PLAIN.message}” (the simulator answers in plain text, one model call) and "
            f"“{ONE_TOOL.message}” (get_current_context, then the answer: two model calls; its direct baseline "
            "is those two calls made back to back). Each turn of those rows opens its conversation, so after `done` "
            "the orchestrator also makes the conversation's title call (a second, small model call; reserved and "
            "settled; its CPU counts, its time does not). The *follow-up* rows send the same messages into "
            f"conversations the bench opened before measuring (one per {turns_per_conversation(PLAIN_FOLLOW_UP)} plain or "
            f"{turns_per_conversation(ONE_TOOL_FOLLOW_UP)} one-tool turns of the cell, each with one exchange, so none "
            "grows past 12 messages, below compaction's 24): no conversation to create and "
            "no title call, the model work of a plain follow-up is one streamed call. Their direct baseline replays, "
            "in turn, the requests of a turn at each depth the cell's turns have (a conversation's 2nd to "
            f"{turns_per_conversation(PLAIN_FOLLOW_UP) + 1}th turn, or 2nd to {turns_per_conversation(ONE_TOOL_FOLLOW_UP) + 1}rd), "
            "since a longer conversation is a longer request. Neither message is searched for ambient context (one is "
            "under 30 characters, the other has no terms once stopwords are stripped: the orchestrator does not ask "
            "rag, `spotter_shared.terms.searchable`); the *new words* rows send "
            f"“{PLAIN_FRESH.message}” and three everyday words drawn at random, so rag embeds each one (nothing "
            "memoised), as it does a real staff message."
        ),
        "notes": b.notes,
    }
    if args.tools_only:
        print()
        print("\n".join(tools_section(tools, meta, handler=True)))
        for where, err in b.all_errors:
            say(f"FAILED {where}: {err}")
        return 1 if b.all_errors else 0
    print()
    print(ratio_table(cells))
    print()
    print(detail_table(cells))
    print()
    print("\n".join(tools_section(tools, meta, handler=True)))
    print()
    print("\n".join(context_section(extra)))
    print()
    md, js = write_results(results_dir, cells, meta, stem="quick" if args.quick else "latest", tools=tools, extra=extra)
    say(f"wrote {md.relative_to(REPO) if md.is_relative_to(REPO) else md} and {js.name}")

    errors = b.all_errors
    if errors:
        rc = 1
        say(f"{len(errors)} turn(s) or tool call(s) FAILED:")
        for (where, err), n in Counter(errors).most_common(20):
            say(f"  {n}× {where}: {err}")
        say("README left unchanged because of the errors.")
    elif args.quick or args.no_readme:
        say("README left unchanged (--quick / --no-readme).")
    else:
        action = update_readme(REPO / "README.md", markdown(cells, meta, for_readme=True, tools=tools, extra=extra))
        say(f"README.md: {action}")
    say(f"total runtime {runtime:.1f}s")
    return rc


def _dump_logs(p: Platform, lines: int = 40) -> None:
    for name in list(p.procs):
        text = p.output(name).splitlines()[-lines:]
        if text:
            print(f"----- last {len(text)} lines of {name}", file=sys.stderr)
            print("\n".join(text), file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
