"""Tables for the terminal, bench/results/latest.{md,json}, and the README section between
`<!-- bench:start -->` and `<!-- bench:end -->`."""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Optional

START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def _x(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.2f}×"


def _ms(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.0f} ms"


def _tps(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.2f}/s"


def ratio_table(cells: list[dict[str, Any]]) -> str:
    """Gateway figures as ratios to the direct baseline of the same run; the baseline's absolute
    values in the reference rows, for scale only."""
    rows = [
        "| Workload | Concurrent conversations | Path | TTFT p50 | TTFT p95 | Turn latency p50 | Turns/s |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for c in cells:
        d, r = c["direct"], c["ratios"]
        rows.append(
            f"| {c['title']} | {c['concurrency']} | direct (baseline) | 1.00× ({_ms(d['ttft_p50_ms'])}) "
            f"| 1.00× ({_ms(d['ttft_p95_ms'])}) | 1.00× ({_ms(d['turn_p50_ms'])}) | 1.00× ({_tps(d['turns_per_s'])}) |"
        )
        rows.append(
            f"| {c['title']} | {c['concurrency']} | **gateway** | **{_x(r['ttft_p50'])}** | **{_x(r['ttft_p95'])}** "
            f"| **{_x(r['turn_p50'])}** | **{_x(r['throughput'])}** |"
        )
    return "\n".join(rows)


def detail_table(cells: list[dict[str, Any]]) -> str:
    rows = [
        "| Workload | Conc. | Path | Turns | Errors | TTFT p50 | TTFT p95 | Turn p50 | Turn p95 | Turns/s | Turns/s by the rounds' wall | Added TTFT p50 | First SSE event p50 |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in cells:
        for path in ("direct", "gateway"):
            s = c[path]
            added = c["added_ttft_p50_ms"] if path == "gateway" else None
            rows.append(
                f"| {c['title']} | {c['concurrency']} | {path} | {s['turns']} | {s['errors']} | {_ms(s['ttft_p50_ms'])} "
                f"| {_ms(s['ttft_p95_ms'])} | {_ms(s['turn_p50_ms'])} | {_ms(s['turn_p95_ms'])} | {_tps(s['turns_per_s'])} "
                f"| {_tps(s.get('turns_per_s_by_round_wall'))} "
                f"| {'' if added is None else f'+{added:.0f} ms'} "
                f"| {'' if path == 'direct' else _ms(s.get('first_event_p50_ms'))} |"
            )
    return "\n".join(rows)


def cpu_table(cells: list[dict[str, Any]]) -> str:
    names: list[str] = []
    for c in cells:
        for n in c["cpu_ms_per_turn"]["gateway"]:
            if n not in names:
                names.append(n)
    rows = ["| Workload | Conc. | Path | " + " | ".join(names) + " |", "|---|---:|---|" + "---:|" * len(names)]
    for c in cells:
        for path in ("direct", "gateway"):
            per = c["cpu_ms_per_turn"][path]
            rows.append(f"| {c['title']} | {c['concurrency']} | {path} | "
                        + " | ".join(f"{per.get(n, 0):.1f}" for n in names) + " |")
    return "\n".join(rows)


def environment_line(meta: dict[str, Any]) -> str:
    return (
        f"Measured {meta['date']} on {meta['nproc']} CPU core(s) ({meta['machine']}), Python {meta['python']}; "
        f"simulator TTFT {meta['sim_ttft_ms']} ms, {meta['sim_tokens_per_second']:g} tokens/s; "
        f"org tier during the run: {meta['tier']}; the whole run (stack start included) took {meta['runtime_s']:.0f} s."
    )


def method_lines(meta: dict[str, Any]) -> list[str]:
    return [
        "Ratios are gateway ÷ direct, both measured in the same run (TTFT and latency: above 1 is slower; "
        "turns/s: below 1 is less throughput). The direct baseline streams the *same request bodies* the "
        "orchestrator sent (captured from the simulator's request log) with the `anthropic` SDK; the gateway "
        "path is `POST /organizations/{orgId}/agent/messages` over SSE. "
        f"Rounds alternate direct/gateway (AB, BA, …) so drift on this shared machine hits both. "
        "Turns/s at a concurrency is each conversation's own pace summed (its turns over its time from its first "
        "start to its last completion), averaged over the rounds; a round's turns over its wall time, which waits "
        "for its slowest conversation, is shown beside it in the absolute figures (`bench_stats.Samples`). "
        f"{meta['workloads_note']}",
    ]


def tools_table(tools: dict[str, Any], *, handler: bool = False) -> str:
    """One row per read tool: absolute wall time per call (a target, not a ratio)."""
    target = f"p95 < {tools['target_p95_ms']:g} ms"
    head = ["Tool", "p50", "p95", "Calls", target] + (["Handler p50", "Output", "Errors"] if handler else [])
    rows = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * 3 + "---|" + ("---:|" * 3 if handler else "")]
    for t in tools["tools"]:
        ok = "yes" if t["under_target"] else "**no**"
        cells = [f"`{t['tool']}`", _ms(t["p50_ms"]), _ms(t["p95_ms"]), str(t["calls"]), ok]
        if handler:
            size = t.get("output_bytes")
            cells += [_ms(t["handler_p50_ms"]), "n/a" if size is None else f"{size / 1000:.1f} kB", str(t["errors"])]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def tools_summary(tools: dict[str, Any]) -> str:
    measured = [t for t in tools["tools"] if t["p95_ms"] is not None]
    under = sum(t["under_target"] for t in tools["tools"])
    line = f"{under} of {len(tools['tools'])} read tools under the target (p95 < {tools['target_p95_ms']:g} ms)"
    if measured:
        worst = max(measured, key=lambda t: t["p95_ms"])
        line += f"; slowest: `{worst['tool']}` at p95 {_ms(worst['p95_ms'])} (p50 {_ms(worst['p50_ms'])})"
    return line + "."


def tools_section(tools: dict[str, Any], meta: dict[str, Any], *, handler: bool = False) -> list[str]:
    y = tools["demo_year"]
    columns = (" Handler p50 is the runner's own `duration_ms` (the handler and the JSON form of its output, whole ms); Output is the size of "
               "one result as JSON.") if handler else ""
    return [
        "### Read tools over the demo year", "", tools_summary(tools), "", tools_table(tools, handler=handler), "",
        f"Measured {meta['date']} on {meta['nproc']} CPU core(s) ({meta['machine']}), Python {meta['python']}, "
        f"PostgreSQL {tools['postgres']}, in the same ephemeral stack, after the platform runs. Demo Gym's year "
        f"ending {tools['today']}: {y['members']} memberships, {y['bookings']} bookings, {y['payments']} payments, "
        f"{y['workouts']} workouts.",
        "",
        f"Wall time of `ToolRunner.execute` per call, as the {tools['actor_role']}: the at-most-once bookkeeping "
        "(claim, row lock with the membership check, terminal update) and the handler, each call under a new tool_use id; "
        "no NATS, no model. The database is `ANALYZE`d first, as autovacuum would have done to a live one "
        "(straight after the bulk seed some tools are several times slower). "
        f"{tools['calls_per_tool']} calls per tool after {tools['warmups_per_tool']} warm-ups, "
        "one at a time, rounds rotating through the tools; inputs are what the agent would send "
        "(`bench/bench_tools.py`: search “Murph”, resolve four movement names, last Monday's classes, "
        "the Coaching program's comments, analytics over their default windows, …). "
        f"A p95 of {tools['calls_per_tool']} calls moves with whatever else this shared machine is running." + columns,
    ]


def markdown(cells: list[dict[str, Any]], meta: dict[str, Any], *, for_readme: bool = False,
             tools: Optional[dict[str, Any]] = None, extra: Optional[dict[str, Any]] = None) -> str:
    parts = ["### Platform overhead (gateway vs. calling the model directly)", "", ratio_table(cells), "",
             environment_line(meta), "", *method_lines(meta)]
    if not for_readme:
        parts += ["", "#### Absolute figures", "", detail_table(cells), "",
                  "#### CPU time per turn (ms, summed over the process and its children)", "", cpu_table(cells)]
        if meta.get("notes"):
            parts += ["", "#### Notes", ""] + [f"- {n}" for n in meta["notes"]]
    else:
        parts += ["", "Full figures (absolute latencies, CPU per service): `bench/results/latest.md`."]
    if extra:
        parts += ["", *targets_section(cells, extra)]
    if extra and extra.get("at_rest"):
        parts += ["", *at_rest_section(extra["at_rest"])]
    if extra and extra.get("floor"):
        parts += ["", *floor_section(extra["floor"])]
    if extra and extra.get("peer"):
        parts += ["", *peer_section(cells, extra["peer"])]
    if extra and extra.get("fanout"):
        import bench_fanout

        parts += ["", "### One gateway, many SSE streams (`bench/bench_fanout.py`)", "",
                  bench_fanout.markdown(extra["fanout"]), ""]
    if extra and extra.get("settle"):
        import bench_settle

        parts += ["", "### Budget settlements on one hot organization (`bench/bench_settle.py`)", "",
                  "Against this run's billing service; the load generator runs in a process of its own on uvloop "
                  "(`measure_apart`), as `bench_settle.py` alone runs it.", "",
                  bench_settle.markdown(extra["settle"]), ""]
    if tools is not None:
        parts += ["", *tools_section(tools, meta, handler=not for_readme)]
    if extra:
        parts += ["", *context_section(extra)]
    return "\n".join(parts) + "\n"


PLATFORM = ("gateway", "orchestrator", "tool-runner", "billing", "rag", "nats", "postgres", "redis")


def platform_cpu(cell: dict[str, Any]) -> float:
    """CPU per turn of every Spotter process and its servers (not the simulator, not the bench's client)."""
    return sum(v for k, v in cell["cpu_ms_per_turn"]["gateway"].items() if k in PLATFORM)


def targets_section(cells: list[dict[str, Any]], extra: dict[str, Any]) -> list[str]:
    """Issue 14's targets beside what this run measured."""
    by = {(c["workload"], c["concurrency"]): c for c in cells}
    rows = ["### Performance and scale: the targets and this run", "",
            "| Figure | Target | Measured | Met |", "|---|---|---:|---|"]

    def row(name: str, target: str, value: Optional[float], fmt: str, ok: Optional[bool]) -> None:
        shown = "n/a" if value is None else fmt.format(value)
        rows.append(f"| {name} | {target} | {shown} | {'n/a' if ok is None else ('yes' if ok else '**no**')} |")

    # Each latency and CPU target, judged on both readings of "a plain turn": one that opens its
    # conversation (its model work is the answer and, after `done`, the title call) and a follow-up
    # (one streamed call, as the issue describes a plain turn).
    # The third: a follow-up whose message is long enough for ambient search to embed it, as a real staff
    # message is (the bench's other messages never reach the embedding).
    for plain, label in (("plain", "plain, new conversation"), ("plain_follow_up", "plain, follow-up"),
                         ("plain_fresh", "plain, follow-up, a new message rag embeds")):
        one = by.get((plain, 1))
        if one:
            added = one["gateway"]["ttft_p50_ms"] - one["direct"]["ttft_p50_ms"]
            row(f"Added TTFT p50, 1 conversation ({label})", "≤ 10 ms", added, "+{:.0f} ms", added <= 10)
        twenty = by.get((plain, 20))
        if twenty:
            r = twenty["ratios"]
            row(f"TTFT p50, 20 conversations ({label}), ÷ direct", "≤ 1.10×", r["ttft_p50"], "{:.2f}×", r["ttft_p50"] <= 1.10)
            walled = r.get("throughput_by_round_wall")
            row(f"Turns/s, 20 conversations ({label}), ÷ direct", "≥ 0.95×", r["throughput"],
                "{:.2f}×" + ("" if walled is None else f" ({walled:.2f}× by the rounds' wall)"), r["throughput"] >= 0.95)
    for key, target, label in (("plain", 15, "plain turn, new conversation"), ("plain_follow_up", 15, "plain turn, follow-up"),
                               ("plain_fresh", 15, "plain follow-up, a new message rag embeds"),
                               ("one_tool", 25, "one-tool turn, new conversation"),
                               ("one_tool_follow_up", 25, "one-tool turn, follow-up")):
        cell = by.get((key, 20))
        if cell:
            cpu = platform_cpu(cell)
            row(f"Platform CPU per {label} (20 conversations)", f"≤ {target} ms", cpu, "{:.1f} ms", cpu <= target)
    fan = extra.get("fanout")
    if fan:
        f, t, mem, c = fan["fanout"], fan["tokens"], fan["memory"], fan["connect"]
        row("SSE streams held by one gateway", "5,000", c["open"], "{:,.0f}", c["open"] >= 5000)
        row("Delivery lag p99 at 1 event/s per stream", "≤ 100 ms", f["p99_ms"], "{:,.0f} ms",
            None if f["p99_ms"] is None else f["p99_ms"] <= 100)
        kb = max(mem["kb_per_stream_after_events"] or 0, mem["kb_per_stream_open"] or 0) or None
        row("Gateway memory per stream", "≤ 64 KB", kb, "{:.1f} KB", None if kb is None else kb <= 64)
        row("Token deltas delivered, aggregate", "≥ 10,000 tokens/s", t["delivered_tokens_per_s"], "{:,.0f}/s",
            None if t["delivered_tokens_per_s"] is None else t["delivered_tokens_per_s"] >= 10_000)
    for s in extra.get("settle") or []:
        import bench_settle

        m = s["main"]
        row("Settlements/s on one hot organization (closed loop, best concurrency)", "≥ 2,000/s", m["settlements_per_s"],
            "{:,.0f}/s", m["settlements_per_s"] >= 2000)
        # The closed loop's best operating point that sustains the rate: its p99 is its own queue's.
        sustained = [c for c in [*s.get("sweep", []), m] if c["settlements_per_s"] >= 2000 and c["settle_p99_ms"] is not None]
        if sustained:
            best = min(sustained, key=lambda c: c["settle_p99_ms"])
            row(f"Settle p99 while sustaining ≥ 2,000/s (closed loop, {best['concurrency']} in flight, "
                f"{best['settlements_per_s']:,.0f}/s)", "≤ 20 ms", best["settle_p99_ms"], "{:,.0f} ms", best["settle_p99_ms"] <= 20)
        # And at an offered load (open loop, Poisson arrivals): the stricter test, bursts included.
        o = bench_settle.at_target(s)
        if o is not None:
            row(f"Settle p99 at {o['offered_per_s']:,.0f}/s offered (open loop; {o['settlements_per_s'] or 0:,.0f}/s answered)",
                "≤ 20 ms", o["settle_p99_ms"], "{:,.0f} ms", bench_settle.target_met(o))
        else:  # a run from before the open loop
            row(f"Settle p99 (closed loop, {m['concurrency']} in flight)", "≤ 20 ms", m["settle_p99_ms"], "{:,.0f} ms",
                None if m["settle_p99_ms"] is None else m["settle_p99_ms"] <= 20)
        rows.append(f"| Spend exact (billing's answers = rate card = Postgres = Redis) | yes | "
                    f"{'yes' if s['spend']['exact'] else '**no**'} | {'yes' if s['spend']['exact'] else '**no**'} |")
    return rows + [""]


def at_rest_section(at_rest: dict[str, Any]) -> list[str]:
    """What the platform spends with nothing to do (bench_stats.cpu_at_rest, before the first cell)."""
    spent, seconds = at_rest["ms_per_s"], at_rest["seconds"]
    rows = ["### The platform at rest", "", "| process | CPU ms per second |", "|---|---:|"]
    rows += [f"| {name} | {spent[name]:.1f} |" for name in PLATFORM if name in spent]
    total = sum(v for k, v in spent.items() if k in PLATFORM)
    rows += [f"| **Spotter's processes and servers** | **{total:.1f}** |", "",
             f"Measured once rag has indexed the demo studio and before the first cell, {seconds:g} s with no request; "
             f"/proc counts CPU in 10 ms ticks, so each figure is ±{10 / seconds:.1f} ms/s. Seven durable consumers (the orchestrator's six command "
             "consumers, rag's indexer) each ask JetStream for a message once a second while none comes.", ""]
    return rows


def floor_section(result: dict[str, Any]) -> list[str]:
    """Spotter against the floor (bench/floor.py): its guarantees with nothing else, on the same servers."""
    import floor

    return ["### Against the floor: the same guarantees and nothing else (`bench/floor.py`)", "",
            floor.markdown(result), "",
            f"Plain follow-ups at {result['concurrency']} conversations, {result['turns_per_path']} turns per path, rounds "
            "alternating, every conversation opened by Spotter; CPU of each path's processes and of the servers they share "
            "(the simulator left out). The floor is three bare processes (a bare ASGI app on uvicorn, a JetStream pull loop, "
            "a NATS responder) on the same Postgres tables, NATS, Redis, simulator, libraries and event loop, doing only what "
            "the guarantees need: the caller's membership and the conversation read, a rate-limit counter and the lease, the "
            "command through JetStream, the turn row, the history, the user's message, a budget reservation, the model call, "
            "every event stored before it is published (text on Spotter's 100 ms windows, which end at the same moments for every turn, appends batched across conversations), "
            "the reply, the settlement, `done` with the turn's status, the lease let go, the ack. It leaves out ambient search, the "
            "pre-check, the org and session reads, recent activity, the lease's fence, redelivery bookkeeping, typed "
            "errors, idempotency keys, the stream watchdog, logs, metrics and traces: a floor, not something to ship.", ""]


def peer_section(cells: list[dict[str, Any]], peer: dict[str, Any]) -> list[str]:
    """Issue 14: a peer agent server on the same simulator, workloads and turn counts, in the same run."""
    from peers import langgraph_peer

    versions = ", ".join(f"{k} {v}" for k, v in sorted(peer.get("versions", {}).items()) if k.startswith("langgraph"))
    return ["### Against a peer: LangGraph's agent server (in-memory dev mode)", "",
            langgraph_peer.comparison_table(cells, peer), "",
            f"The peer's own figures, {versions}:", "", langgraph_peer.peer_table(peer), "",
            langgraph_peer.QUEUE_NOTE, "", langgraph_peer.COMPARISON, ""]


def context_section(extra: dict[str, Any]) -> list[str]:
    """Issue 8's figures: retrieval (bench/retrieval.py) and prompt caching (bench/prompt_cache.py)."""
    import prompt_cache
    import retrieval

    lines: list[str] = []
    if extra.get("retrieval"):
        lines += [retrieval.markdown(extra["retrieval"]), ""]
    if extra.get("prompt_cache"):
        lines += ["### Prompt caching: seed 000's layout versus ours", "",
                  "One scripted 10-turn conversation with tools and page context through the whole stack and the "
                  "simulator (which bills caching like the API, 20-block lookback included), run once with the "
                  "per-turn block before the history (seed) and once after it, in the newest user turn (ours).", "",
                  *prompt_cache.markdown_table(extra["prompt_cache"]), ""]
    return lines


def write_results(results_dir: Path, cells: list[dict[str, Any]], meta: dict[str, Any], *,
                  stem: str = "latest", tools: Optional[dict[str, Any]] = None,
                  extra: Optional[dict[str, Any]] = None) -> tuple[Path, Path]:
    results_dir.mkdir(parents=True, exist_ok=True)
    md = results_dir / f"{stem}.md"
    js = results_dir / f"{stem}.json"
    _atomic_write(md, markdown(cells, meta, tools=tools, extra=extra))
    document = {"meta": meta, "cells": cells, "readTools": tools, **(extra or {})}
    _atomic_write(js, json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    return md, js


def update_readme(readme: Path, section: str) -> str:
    """Replace what is between the markers (re-reading the file just before writing); append the
    markers at the end of the file when they are missing. Returns what was done."""
    block = f"{START}\n{section.rstrip()}\n{END}"
    text = readme.read_text(encoding="utf-8") if readme.exists() else ""
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    if pattern.search(text):
        new = pattern.sub(lambda _m: block, text, count=1)
        action = "updated the section between the bench markers"
    else:
        sep = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
        new = f"{text}{sep}## Benchmark\n\n{block}\n"
        action = "appended a Benchmark section with the bench markers"
    if new != text:
        _atomic_write(readme, new)
    return action


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        else:
            os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
