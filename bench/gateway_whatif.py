"""A what-if, not a service change: the gateway exactly as services/gateway/main.py runs it, except
for `EventFeed.events` (streams.py), which here

- reads the log only when it has to: at the start, on a gap (a live event that is not the next
  sequence number), after a page of 1000 rows, and after a quiet poll interval — not after every
  live event it has just handed on (the shipped loop re-reads Postgres after each wake-up);
- waits for the next wake-up with `asyncio.timeout` instead of `asyncio.wait_for` (which makes a task
  per wait), every BENCH_GATEWAY_POLL_S seconds (default 1.0, as shipped).

The order, the no-duplicates rule and the gap recovery are the shipped ones (BENCH_GATEWAY_FEED=0
keeps the shipped loop). BENCH_GATEWAY_GC="t0,t1,t2" sets the cyclic garbage collector's thresholds
(and freezes what start-up allocated); BENCH_GATEWAY_GC_STATS=1 logs, every 5 s, the time it took.
bench_fanout.py runs it with `--what-if`.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import spotter_gateway.streams as streams
from spotter_gateway.streams import EventFeed, LoggedEvent, StopRule, StreamIdle

POLL_S = float(os.environ.get("BENCH_GATEWAY_POLL_S", "1.0"))
PAGE = 1000  # read_after's LIMIT


async def events(self: EventFeed, after: int, stop: StopRule, idle_timeout_s: float,
                 still_running: Callable[[], Any]) -> AsyncIterator[LoggedEvent]:
    cursor = after
    idle = 0.0
    check_running = True
    read = True
    try:
        while True:
            self._wake.clear()
            batch = self._take_live(cursor)
            if not batch and (read or self._live):  # start, quiet poll, full page, or a gap
                batch = await self.read_after(cursor)
                read = len(batch) >= PAGE
            for event in batch:
                cursor = event.seq
                yield event
                if stop(event):
                    return
            if not batch and check_running and not await still_running():
                for event in await self.read_after(cursor):
                    cursor = event.seq
                    yield event
                    if stop(event):
                        return
                return
            try:
                async with asyncio.timeout(POLL_S):
                    await self._wake.wait()
                idle, check_running = 0.0, False
            except TimeoutError:
                check_running, read = True, True
                idle += POLL_S
                if idle >= idle_timeout_s:
                    raise StreamIdle() from None
    finally:
        await self.close()


def gc_stats() -> None:
    spent, count, started = [0.0], [0], [0.0]

    def callback(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            spent[0] += time.perf_counter() - started[0]
            count[0] += 1

    gc.callbacks.append(callback)

    def report() -> None:
        last_spent, last_count, last_t = 0.0, 0, time.perf_counter()
        while True:
            time.sleep(5.0)
            now = time.perf_counter()
            print(f"[whatif-gc] {count[0] - last_count} collections, {1000 * (spent[0] - last_spent):.0f} ms "
                  f"in {now - last_t:.1f} s (gen counts {gc.get_count()})", file=sys.stderr, flush=True)
            last_spent, last_count, last_t = spent[0], count[0], now

    threading.Thread(target=report, daemon=True).start()


def run() -> None:
    if os.environ.get("BENCH_GATEWAY_FEED", "1") == "1":
        streams.EventFeed.events = events  # type: ignore[assignment]
    if os.environ.get("BENCH_GATEWAY_GC"):
        # e.g. "50000,50,100": far fewer collections, and far fewer full ones, than CPython's (700, 10, 10).
        gc.set_threshold(*(int(x) for x in os.environ["BENCH_GATEWAY_GC"].split(",")))
        gc.freeze()  # what start-up allocated is never scanned again
    if os.environ.get("BENCH_GATEWAY_GC_STATS") == "1":
        gc_stats()
    from spotter_gateway.main import run as gateway_run

    gateway_run()


if __name__ == "__main__":
    run()
