"""Where a turn's CPU goes: runs plain (or one-tool) turns through the gateway while py-spy samples every
Spotter process, then prints each process's CPU per turn and the top functions by own time and by
inclusive time (collapsed stacks aggregated by `function (file)`).

    .venv/bin/python bench/profile_turns.py                 # 200 plain turns, concurrency 4
    .venv/bin/python bench/profile_turns.py --workload one_tool --turns 120 --top 25

py-spy samples from outside the process at 100 Hz, pausing it for each sample (accurate idle detection:
idle stacks are left out, so the percentages are of time spent working).
Results go to bench/results/profile-<workload>.md; raw stacks to the log directory."""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

import asyncpg  # noqa: E402
import httpx  # noqa: E402

from bench_clients import Conversations, Gateway, gateway_turn, run_closed_loop  # noqa: E402
from bench_platform import Platform, say  # noqa: E402
from bench_stats import TurnResult, cpu_delta, cpu_snapshot  # noqa: E402
from run import ONE_TOOL, ONE_TOOL_FOLLOW_UP, PLAIN, PLAIN_FOLLOW_UP, PLAIN_FRESH  # noqa: E402
import retrieval  # noqa: E402

PY_SPY = Path(sys.executable).parent / "py-spy"
SPOTTER = ("spotter-gateway", "spotter-orchestrator", "spotter-tool-runner", "spotter-billing", "spotter-rag")
RATE = 100
WORKLOADS = {w.key: w for w in (PLAIN, ONE_TOOL, PLAIN_FOLLOW_UP, ONE_TOOL_FOLLOW_UP, PLAIN_FRESH)}


def frame_name(frame: str) -> str:
    """`fn (path/to/module.py:12)` → `fn (module.py)`: lines folded, so one function is one row."""
    name, _, where = frame.partition(" (")
    file = where.split(":")[0].rsplit("/", 1)[-1].rstrip(")")
    return f"{name} ({file})" if file else name


# Leaves where a thread waits rather than works (py-spy still samples some of them): left out.
IDLE = ("EpollSelector.select (", "Condition.wait (", "_worker (", "Queue.get (", "WorkerThread.run (")


def aggregate(raw: Path) -> tuple[Counter[str], Counter[str], int]:
    """Own and inclusive sample counts per function over the samples where a thread was working, and
    how many those were, from py-spy's raw output."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [frame_name(f) for f in stack.split(";") if f and not f.startswith("process ") and not f.startswith("thread ")]
        if not frames or frames[-1].startswith(IDLE):
            continue
        total += n
        own[frames[-1]] += n
        for name in set(frames):
            inclusive[name] += n
    return own, inclusive, total


async def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", choices=tuple(WORKLOADS), default="plain")
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--ttft-ms", type=int, default=200)
    ap.add_argument("--tps", type=float, default=200.0)
    ap.add_argument("--out", type=Path, default=None, help="the report (default bench/results/profile-<workload>.md)")
    ap.add_argument("--log-dir", type=Path, default=BENCH_DIR / "results" / "profile-logs", help="raw stacks and logs")
    args = ap.parse_args(argv)
    workload = WORKLOADS[args.workload]
    log_dir = args.log_dir
    p = Platform(ttft_ms=args.ttft_ms, tokens_per_second=args.tps, log_dir=log_dir).start()
    try:
        gw = Gateway(p.gateway_url, p.org_id, p.token)
        async with httpx.AsyncClient(timeout=httpx.Timeout(10, read=90), limits=httpx.Limits(max_connections=100)) as http:
            async with asyncpg.create_pool(p.env["DATABASE_URL"], min_size=1, max_size=1) as pool:
                await retrieval.wait_index_quiet(pool)  # rag's first index of the demo studio is not a turn's
            conversations = Conversations()

            async def turn() -> TurnResult:
                if workload.follow_up:
                    return await conversations.turn(http, gw, workload)
                return await gateway_turn(http, gw, workload)

            if workload.follow_up:  # a conversation per few measured turns, each with one exchange already
                await run_closed_loop(lambda: conversations.open(http, gw, workload),
                                      max(args.concurrency, args.turns // 5), args.concurrency)
            warm, _ = await run_closed_loop(turn, 20, args.concurrency)
            if any(not r.ok for r in warm):
                say(f"warm-up failed: {[r.error for r in warm if not r.ok][:3]}")
                return 1
            pids = {name: p.procs[name].pid for name in SPOTTER}
            samplers = {
                name: subprocess.Popen([str(PY_SPY), "record", "--rate", str(RATE), "--format", "raw",
                                        "--pid", str(pid), "--output", str(log_dir / f"{name}.raw"), "--duration", "600"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for name, pid in pids.items()
            }
            time.sleep(1.0)
            roots = p.pids()  # Spotter's processes and its servers (NATS, Postgres, Redis)
            before = cpu_snapshot(roots)
            results, wall = await run_closed_loop(turn, args.turns, args.concurrency)
            cpu = cpu_delta(before, cpu_snapshot(roots))
            for sampler in samplers.values():
                sampler.send_signal(2)  # SIGINT: py-spy writes what it has
            for sampler in samplers.values():
                sampler.wait(timeout=60)
        ok = sum(r.ok for r in results)
        lines = [f"# Profile: {ok} {workload.title} turns, concurrency {args.concurrency}, {wall:.1f} s", "",
                 "| process | CPU ms per turn |", "|---|---:|"]
        for name, seconds in sorted(cpu.items(), key=lambda kv: -kv[1]):
            lines.append(f"| {name} | {seconds * 1000 / max(ok, 1):.1f} |")
        platform = sum(v for k, v in cpu.items() if k != "sim")
        lines.append(f"| **Spotter's processes and servers (not the simulator)** | **{platform * 1000 / max(ok, 1):.1f}** |")
        for name in SPOTTER:
            raw = log_dir / f"{name}.raw"
            if not raw.exists():
                continue
            own, inclusive, total = aggregate(raw)
            # Inclusive: leave out the frames nearly every sample sits under (the event loop's own).
            below = [(n, c) for n, c in inclusive.most_common() if c < 0.8 * total][: args.top]
            lines += ["", f"## {name} ({total} working samples)", "", "| own % | function | | inclusive % | function |",
                      "|---:|---|---|---:|---|"]
            for (o_name, o_n), (i_name, i_n) in zip(own.most_common(args.top), below):
                lines.append(f"| {100 * o_n / total:.1f} | `{o_name}` | | {100 * i_n / total:.1f} | `{i_name}` |")
        report = "\n".join(lines) + "\n"
        out = args.out or BENCH_DIR / "results" / f"profile-{workload.key}.md"
        out.write_text(report)
        print(report)
        return 0 if ok == len(results) else 1
    finally:
        p.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
