"""Where a turn's time to first token goes: runs follow-up turns one at a time through the gateway with
every service exporting its spans to its log (OTEL_TRACES_EXPORTER=console), each turn under a W3C
`traceparent` of its own, then prints, for the spans of those traces, when each started and how long
it took, in milliseconds from the gateway's server span, as medians over the turns: the hops on the
way to the model call (the gateway's admission, the command through JetStream, begin_turn, the
pre-check, ambient search, the lease, the reservation) and from the model's first token to the
client's first `text_delta`.

    .venv/bin/python bench/critical_path.py                 # 40 plain follow-ups
    .venv/bin/python bench/critical_path.py --turns 80 --workload plain_fresh

Spans cost a little (~8 µs each when recorded, and the exporter's own work beside the turn), so the
figures are a few percent above an untraced run's; the order of the hops and the gaps between them
are what this shows. Results go to bench/results/critical-path-<workload>.md."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

import asyncpg  # noqa: E402
import httpx  # noqa: E402

from bench_clients import Gateway, Workload, gateway_turn  # noqa: E402
from bench_platform import Platform, say  # noqa: E402
from run import ONE_TOOL_FOLLOW_UP, PLAIN_FOLLOW_UP, PLAIN_FRESH, turns_per_conversation  # noqa: E402
import retrieval  # noqa: E402

WORKLOADS = {w.key: w for w in (PLAIN_FOLLOW_UP, ONE_TOOL_FOLLOW_UP, PLAIN_FRESH)}
FIRST_DELTA = "client: first text_delta"


@dataclass(frozen=True)
class Turn:
    trace_id: str
    first_delta: float  # the client's wall clock when the first text_delta arrived


async def turn(http: httpx.AsyncClient, gw: Gateway, workload: Workload, conversation_id: str | None) -> tuple[Turn, str]:
    """One turn under a traceparent of its own; its trace and the conversation it ran in."""
    trace_id = secrets.token_hex(16)
    sent = time.time()
    result = await gateway_turn(http, gw, workload, conversation_id,
                                headers={"traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"})
    if not result.ok or result.ttft is None:
        raise RuntimeError(f"turn failed: {result.error}")
    return Turn(trace_id, sent + result.ttft), result.conversation_id or ""


def spans_in(log_dir: Path) -> list[dict[str, Any]]:
    """Every span the services printed (the console exporter writes each as an indented JSON object)."""
    found: list[dict[str, Any]] = []
    decoder = json.JSONDecoder()
    for log in sorted(log_dir.glob("*.log")):
        text = log.read_text(errors="replace")
        at = 0
        while (start := text.find('{\n    "name"', at)) >= 0:
            try:
                span, at = decoder.raw_decode(text, start)
            except json.JSONDecodeError:
                at = start + 1
                continue
            span["service"] = log.stem
            found.append(span)
    return found


def _at(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _label(span: dict[str, Any]) -> str:
    """`service: name`, with a statement's first words (asyncpg names a span by its first keyword only)."""
    statement = (span.get("attributes") or {}).get("db.statement", "")
    words = " ".join(statement.split()[:4])
    return f"{span['service']}: {span['name']}" + (f" ({words}…)" if words and words != span["name"] else "")


def timeline(turns: list[Turn], spans: list[dict[str, Any]]) -> list[tuple[str, float, float, int]]:
    """Per span label (its first occurrence in each turn's trace, up to the first text_delta): the median
    start and the median duration, in ms from the gateway's server span, and in how many turns it was seen."""
    by_trace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for span in spans:
        by_trace[span["context"]["trace_id"].removeprefix("0x")].append(span)
    starts: dict[str, list[float]] = defaultdict(list)
    lengths: dict[str, list[float]] = defaultdict(list)
    for t in turns:
        trace = sorted(by_trace.get(t.trace_id, ()), key=lambda s: _at(s["start_time"]))
        server = next((s for s in trace if s["service"] == "gateway" and s["kind"] == "SpanKind.SERVER"), None)
        if server is None:
            continue
        zero = _at(server["start_time"])
        seen: set[str] = set()
        for span in trace:
            begin, label = _at(span["start_time"]), _label(span)
            if label in seen or begin > t.first_delta:
                continue
            seen.add(label)
            starts[label].append(1000 * (begin - zero))
            lengths[label].append(1000 * (_at(span["end_time"]) - begin))
        starts[FIRST_DELTA].append(1000 * (t.first_delta - zero))
        lengths[FIRST_DELTA].append(0.0)
    rows = [(label, statistics.median(starts[label]), statistics.median(lengths[label]), len(starts[label])) for label in starts]
    return sorted(rows, key=lambda row: row[1])


async def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", choices=tuple(WORKLOADS), default=PLAIN_FOLLOW_UP.key)
    ap.add_argument("--turns", type=int, default=40)
    ap.add_argument("--ttft-ms", type=int, default=200)
    ap.add_argument("--tps", type=float, default=200.0)
    ap.add_argument("--out", type=Path, default=None, help="the report (default bench/results/critical-path-<workload>.md)")
    ap.add_argument("--log-dir", type=Path, default=BENCH_DIR / "results" / "logs-critical-path",
                    help="the services' logs, with their spans")
    args = ap.parse_args(argv)
    if args.turns < 1:
        ap.error("--turns must be at least 1")
    workload = WORKLOADS[args.workload]
    # Platform passes its own environment on to every service it starts.
    os.environ.update({"OTEL_TRACES_EXPORTER": "console", "OTEL_BSP_SCHEDULE_DELAY": "200"})
    p = Platform(ttft_ms=args.ttft_ms, tokens_per_second=args.tps, log_dir=args.log_dir).start()
    turns: list[Turn] = []
    try:
        async with asyncpg.create_pool(p.env["DATABASE_URL"], min_size=1, max_size=1) as pool:
            await retrieval.wait_index_quiet(pool)  # rag's first index of the demo studio is not a turn's
        gw = Gateway(p.gateway_url, p.org_id, p.token)
        async with httpx.AsyncClient(timeout=httpx.Timeout(10, read=90)) as http:
            # As make bench's follow-up cells: conversations that stay well below compaction.
            opened = -(-args.turns // turns_per_conversation(workload))
            conversations = [(await turn(http, gw, workload, None))[1] for _ in range(opened)]
            for i in range(args.turns):
                done, _ = await turn(http, gw, workload, conversations[i % opened])
                turns.append(done)
                await asyncio.sleep(0.05)  # one at a time, with the exporters' work out of the way
    finally:
        p.close()  # the services flush their spans as they stop
    rows = timeline(turns, spans_in(args.log_dir))
    lines = [f"# Critical path: {len(turns)} {workload.title} turns, one at a time (simulator TTFT {args.ttft_ms} ms)", "",
             "Medians, in ms from the gateway's server span; each span's first occurrence in its turn's trace, up to the "
             "first text_delta.", "", "| starts at | lasts | span | turns |", "|---:|---:|---|---:|"]
    lines += [f"| {start:.2f} | {length:.2f} | `{label}` | {n} |" for label, start, length, n in rows]
    report = "\n".join(lines) + "\n"
    out = args.out or BENCH_DIR / "results" / f"critical-path-{workload.key}.md"
    out.write_text(report)
    print(report)
    if not any(label == FIRST_DELTA for label, *_ in rows):
        say("no turn's trace was found in the services' logs")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
