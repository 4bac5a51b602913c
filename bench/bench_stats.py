"""Samples, percentiles and per-process CPU accounting for the benchmark."""

from __future__ import annotations

import asyncio
import math
import os
import time
from dataclasses import dataclass, field
from typing import Iterable, Optional


@dataclass
class TurnResult:
    ok: bool
    ttft: Optional[float] = None  # seconds from request to the first text delta
    total: Optional[float] = None  # seconds from request to the end of the turn
    error: Optional[str] = None
    first_event: Optional[float] = None  # gateway only: seconds to the first SSE event of the turn
    conversation_id: Optional[str] = None  # gateway only: the conversation `done` named


@dataclass
class Samples:
    """All turns of one (workload, concurrency, path) cell, over every round."""

    results: list[TurnResult] = field(default_factory=list)
    wall: float = 0.0  # summed wall time of the rounds, each from its first start to its last completion
    rounds: int = 0
    paces: list[float] = field(default_factory=list)  # per round: its conversations' turns/s, summed

    def add_round(self, results: list[TurnResult], wall: float,
                  workers: Optional[list[tuple[int, float]]] = None) -> None:
        """`workers`: each conversation's completed turns and its time from first start to last completion
        (`run_closed_loop`'s)."""
        self.results.extend(results)
        self.wall += wall
        self.rounds += 1
        if workers:
            self.paces.append(sum(done / span for done, span in workers if span > 0))

    def turns_per_s(self) -> Optional[float]:
        """Turns per second at this concurrency: each conversation's own pace (its turns over its time from its
        first start to its last completion), summed, averaged over the rounds. A round's completed turns over its
        wall time instead waits for its slowest conversation: with two turns per conversation that is the tail of
        20 pairs of turns, not the pace (`turns_per_s_by_round_wall`, kept beside it)."""
        if self.paces and len(self.paces) == self.rounds:
            return sum(self.paces) / len(self.paces)
        return len(self.ok) / self.wall if self.wall > 0 else None

    @property
    def ok(self) -> list[TurnResult]:
        return [r for r in self.results if r.ok]

    @property
    def errors(self) -> list[TurnResult]:
        return [r for r in self.results if not r.ok]

    def summary(self) -> dict:
        ok = self.ok
        ttft = [r.ttft for r in ok if r.ttft is not None]
        total = [r.total for r in ok if r.total is not None]
        first = [r.first_event for r in ok if r.first_event is not None]
        return {
            "turns": len(self.results),
            "errors": len(self.errors),
            "rounds": self.rounds,
            "wall_s": round(self.wall, 3),
            "ttft_p50_ms": ms(percentile(ttft, 50)),
            "ttft_p95_ms": ms(percentile(ttft, 95)),
            "turn_p50_ms": ms(percentile(total, 50)),
            "turn_p95_ms": ms(percentile(total, 95)),
            "first_event_p50_ms": ms(percentile(first, 50)),
            "turns_per_s": None if (pace := self.turns_per_s()) is None else round(pace, 3),
            "turns_per_s_by_round_wall": round(len(ok) / self.wall, 3) if self.wall > 0 else None,
        }


def percentile(values: Iterable[float], q: float) -> Optional[float]:
    """Linear interpolation between closest ranks (numpy's default)."""
    xs = sorted(values)
    if not xs:
        return None
    if len(xs) == 1:
        return xs[0]
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def ms(seconds: Optional[float]) -> Optional[float]:
    return None if seconds is None else round(seconds * 1000.0, 1)


def ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    if a is None or b is None or b == 0:
        return None
    return round(a / b, 3)


# --------------------------------------------------------------------------- CPU accounting

_CLK_TCK = os.sysconf("SC_CLK_TCK")


def _proc_table() -> dict[int, tuple[int, float]]:
    """pid -> (ppid, user+system CPU seconds, children already reaped included)."""
    table: dict[int, tuple[int, float]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                rest = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # fields after the comm: state ppid ... utime(14) stime(15) cutime(16) cstime(17) (1-based in man)
        ppid = int(rest[1])
        cpu = (int(rest[11]) + int(rest[12]) + int(rest[13]) + int(rest[14])) / _CLK_TCK
        table[int(name)] = (ppid, cpu)
    return table


def cpu_snapshot(roots: dict[str, Optional[int]]) -> dict[str, float]:
    """CPU seconds used so far by each named process and all its live descendants."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out: dict[str, float] = {}
    for name, root in roots.items():
        if root is None or root not in table:
            continue
        total, stack = 0.0, [root]
        while stack:
            pid = stack.pop()
            total += table[pid][1]
            stack.extend(children.get(pid, ()))
        out[name] = total
    return out


def cpu_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: max(0.0, after[k] - before.get(k, 0.0)) for k in after}


async def cpu_at_rest(roots: dict[str, Optional[int]], seconds: float) -> dict[str, float]:
    """Milliseconds of CPU per second each named process (with its children) spends over `seconds` in
    which nothing is asked of it. /proc counts in clock ticks (10 ms): over 15 s that is ±0.7 ms/s."""
    before, start = cpu_snapshot(roots), time.monotonic()
    await asyncio.sleep(seconds)
    spent, wall = cpu_delta(before, cpu_snapshot(roots)), time.monotonic() - start
    return {name: 1000 * cpu / wall for name, cpu in spent.items()}
