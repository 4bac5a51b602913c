"""make bench's turns per second at a concurrency (bench_stats.Samples with bench_clients.run_closed_loop):
each conversation's own pace, summed, so one slow conversation slows its own count, not every other's."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from bench_clients import run_closed_loop  # noqa: E402
from bench_stats import Samples, TurnResult  # noqa: E402


async def test_each_conversations_pace_is_counted_and_a_straggler_only_slows_its_own() -> None:
    # Four conversations of two turns each: three take 0.05 s a turn, the fourth's second turn 0.3 s.
    durations = iter([0.05] * 4 + [0.05, 0.05, 0.05, 0.3])

    async def turn() -> TurnResult:
        delay = next(durations)
        await asyncio.sleep(delay)
        return TurnResult(True, ttft=delay / 2, total=delay)

    workers: list[tuple[int, float]] = []
    results, wall = await run_closed_loop(turn, 8, 4, workers)
    samples = Samples()
    samples.add_round(results, wall, workers)
    summary = samples.summary()

    assert len(workers) == 4 and sorted(done for done, _ in workers) == [2, 2, 2, 2]
    # Three conversations at ~20 turns/s and one at ~5.7 (two turns in 0.35 s): ~65.7/s.
    assert 50 < summary["turns_per_s"] < 70, summary
    # The round's wall (0.35 s, the straggler's) would make it 8 / 0.35 = ~23/s.
    assert summary["turns_per_s_by_round_wall"] < 25, summary


def test_rounds_without_each_conversations_time_fall_back_to_the_rounds_wall() -> None:
    samples = Samples()
    samples.add_round([TurnResult(True, total=0.1)] * 10, 2.0)
    assert samples.summary()["turns_per_s"] == 5.0 == samples.summary()["turns_per_s_by_round_wall"]
