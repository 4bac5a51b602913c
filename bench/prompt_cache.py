"""Prompt caching, seed 000's layout versus ours (issue 8): one scripted 10-turn conversation with
tools, through the whole stack and the model simulator (which bills prompt caching like the API,
the 20-block lookback included), once with the orchestrator's SPOTTER_PROMPT_LAYOUT=seed (the
per-turn block as the third system block, before the history) and once with =cached (that block
in the newest user turn, after the history). Per turn: cost, tokens, the honest cache ratio
read / (read + write + uncached input) and seed 000's read / (read + input).

    .venv/bin/python bench/prompt_cache.py              # prints the table, writes results/prompt_cache.{md,json}
    .venv/bin/python bench/prompt_cache.py --no-write   # prints only

From other bench code, on a platform that is already up (bench_platform.Platform):

    from prompt_cache import measure_prompt_cache, markdown_table
    result = asyncio.run(measure_prompt_cache(platform))   # restarts the orchestrator once per layout
    print("\\n".join(markdown_table(result)))

Exit status: 0 when every turn of both layouts finished, 1 when one did not, 2 when the platform
could not be started.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

import httpx  # noqa: E402
from httpx_sse import aconnect_sse  # noqa: E402

from bench_platform import Platform, say  # noqa: E402

LAYOUTS = ("seed", "cached")
ORCHESTRATOR = "spotter-orchestrator"
# Ten turns of one conversation, each answered by the simulator's demo policy with at least one read
# tool and no human step (no picker, no confirmation), so both layouts run exactly the same turns.
# Each is sent from the page a user would ask it on, as the web client does: the page is part of
# the per-turn context, which is what changes between turns.
TURNS = (
    ("who am I?", "/"),
    ("what programs do we run?", "/programs"),
    ("which class types do we have?", "/schedule/class-types"),
    ("what's on the schedule today?", "/schedule"),
    ("which members are at risk?", "/members"),
    ("how is revenue?", "/analytics/revenue"),
    ("how was attendance this month?", "/analytics/attendance"),
    ("find a squat variation", "/exercises"),
    ("any new comments in coaching?", "/programs/coaching"),
    ("who hasn't filled their forms?", "/forms"),
)
TURN_TIMEOUT_S = 90.0


@dataclass
class TurnFigures:
    turn: int
    message: str
    model_calls: int
    tools: int
    input_tokens: int
    cache_read_tokens: int
    cache_creation_tokens: int
    output_tokens: int
    cost_usd_micros: int
    cache_read_ratio: float  # honest: read / (read + write + uncached input)
    cache_hit_ratio: float  # seed 000: read / (read + input)
    error: Optional[str] = None


async def _turn(http: httpx.AsyncClient, p: Platform, message: str, page: str,
                conversation_id: Optional[str]) -> dict[str, Any]:
    events: list[dict[str, Any]] = []
    headers = {"Authorization": f"Bearer {p.token}"}
    async with asyncio.timeout(TURN_TIMEOUT_S):
        async with aconnect_sse(http, "POST", f"{p.gateway_url}/organizations/{p.org_id}/agent/messages",
                                json={"conversationId": conversation_id, "message": message,
                                      "pageContext": {"pathname": page}}, headers=headers) as source:
            if source.response.status_code != 200:
                await source.response.aread()
                raise RuntimeError(f"HTTP {source.response.status_code}: {source.response.text[:300]}")
            async for event in source.aiter_sse():
                data = json.loads(event.data)
                events.append(data)
                if data["type"] == "done":
                    break
    return {"events": events}


async def _requests(sim: httpx.AsyncClient) -> list[dict[str, Any]]:
    r = await sim.get("/_sim/requests")
    r.raise_for_status()
    return r.json()["requests"]


async def run_layout(p: Platform, layout: str, turns: tuple[tuple[str, str], ...] = TURNS) -> dict[str, Any]:
    """Restart the orchestrator with this layout, start cold (the simulator forgets its cache) and
    run the conversation; per-turn figures from each turn's `done.usage`."""
    proc = p.procs[ORCHESTRATOR]
    proc.terminate()
    proc.env["SPOTTER_PROMPT_LAYOUT"] = layout
    proc.start()
    figures: list[TurnFigures] = []
    async with httpx.AsyncClient(timeout=httpx.Timeout(10.0, read=TURN_TIMEOUT_S)) as http, \
            httpx.AsyncClient(base_url=p.sim_url, timeout=10.0) as sim:
        (await sim.delete("/_sim/cache")).raise_for_status()
        (await sim.delete("/_sim/requests")).raise_for_status()
        conversation_id: Optional[str] = None
        for n, (message, page) in enumerate(turns, start=1):
            seen = len(await _requests(sim))
            try:
                events = (await _turn(http, p, message, page, conversation_id))["events"]
            except Exception as exc:  # noqa: BLE001 — a benchmark reports every failure
                figures.append(_failed(n, message, f"{type(exc).__name__}: {exc}"))
                continue
            done = next((e for e in events if e["type"] == "done"), None)
            errors = [e for e in events if e["type"] == "error"]
            conversation_id = conversation_id or (done or {}).get("conversationId")
            calls = len(await _requests(sim)) - seen
            if done is None or errors:
                figures.append(_failed(n, message, (errors[0]["code"] if errors else "no done"), calls))
                continue
            u = done["usage"]
            seed_total = u["cacheReadTokens"] + u["inputTokens"]
            figures.append(TurnFigures(
                turn=n, message=message, model_calls=calls, tools=sum(e["type"] == "tool_completed" for e in events),
                input_tokens=u["inputTokens"], cache_read_tokens=u["cacheReadTokens"],
                cache_creation_tokens=u["cacheCreationTokens"], output_tokens=u["outputTokens"],
                cost_usd_micros=u["costUsdMicros"], cache_read_ratio=u["cacheReadRatio"],
                cache_hit_ratio=round(u["cacheReadTokens"] / seed_total, 4) if seed_total else 0.0,
            ))
        system_blocks = [len(r["body"]["system"]) for r in await _requests(sim) if r.get("body")]
        side = (await sim.get("/_sim/requests", params={"kind": "summary"})).json()["requests"]
        lifetime = await _lifetime_cost(http, p, conversation_id) if conversation_id else None
    return {"layout": layout, "system_blocks": sorted(set(system_blocks)), "turns": [asdict(f) for f in figures],
            "compactions": len(side), "conversation_cost_usd_micros": lifetime}


async def _lifetime_cost(http: httpx.AsyncClient, p: Platform, conversation_id: str) -> int:
    """What billing charged the conversation: its turns plus the summary model's title and summaries."""
    r = await http.get(f"{p.gateway_url}/organizations/{p.org_id}/agent/conversations/{conversation_id}",
                       headers={"Authorization": f"Bearer {p.token}"})
    r.raise_for_status()
    return r.json()["usage"]["costUsdMicros"]


def _failed(n: int, message: str, error: str, calls: int = 0) -> TurnFigures:
    return TurnFigures(n, message, calls, 0, 0, 0, 0, 0, 0, 0.0, 0.0, error=error)


async def measure_prompt_cache(p: Platform, turns: tuple[tuple[str, str], ...] = TURNS) -> dict[str, Any]:
    """Both layouts on a running platform; the orchestrator is left on the default (cached) layout."""
    started = time.perf_counter()
    runs = {layout: await run_layout(p, layout, turns) for layout in LAYOUTS}
    proc = p.procs[ORCHESTRATOR]
    proc.terminate()
    proc.env.pop("SPOTTER_PROMPT_LAYOUT", None)
    proc.start()
    totals = {layout: sum(t["cost_usd_micros"] for t in run["turns"]) for layout, run in runs.items()}
    return {
        "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "turns": [{"message": m, "pathname": page} for m, page in turns],
        "runs": runs,
        "total_cost_usd_micros": totals,
        "saving": round(1 - totals["cached"] / totals["seed"], 4) if totals["seed"] else None,
        "errors": [f"{layout} turn {t['turn']}: {t['error']}" for layout, run in runs.items() for t in run["turns"]
                   if t["error"]],
        "runtime_s": round(time.perf_counter() - started, 1),
    }


def markdown_table(result: dict[str, Any]) -> list[str]:
    seed, ours = (result["runs"][layout]["turns"] for layout in LAYOUTS)
    lines = [
        "| turn | message | calls | seed: cost | seed: read ratio (honest) | seed: seed's ratio | ours: cost | "
        "ours: read ratio (honest) | ours: seed's ratio |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s, o in zip(seed, ours):
        lines.append(f"| {s['turn']} | {s['message']} | {o['model_calls']} | {_usd(s)} | {s['cache_read_ratio']:.3f} | "
                     f"{s['cache_hit_ratio']:.3f} | {_usd(o)} | {o['cache_read_ratio']:.3f} | {o['cache_hit_ratio']:.3f} |")
    totals = result["total_cost_usd_micros"]
    saving = f"{result['saving']:.0%}" if result["saving"] is not None else "n/a"
    runs = result["runs"]
    side = " ".join(
        f"{name}: ${(runs[layout]['conversation_cost_usd_micros'] or 0) / 1e6:.4f} billed in all, "
        f"{runs[layout]['compactions']} compaction(s)." for layout, name in (("seed", "Seed layout"), ("cached", "Ours")))
    lines += ["", f"The agent's turns: seed layout ${totals['seed'] / 1e6:.4f}, ours ${totals['cached'] / 1e6:.4f} "
                  f"({saving} less). {side} The billed totals add the summary model's title and compaction summary "
                  "(the conversation compacts at 24 messages, before turn 7). Honest ratio = cacheRead / (cacheRead "
                  "+ cacheWrite + uncached input); seed's = cacheRead / (cacheRead + input)."]
    return lines


def _usd(t: dict[str, Any]) -> str:
    return "error" if t["error"] else f"${t['cost_usd_micros'] / 1e6:.4f}"


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-write", action="store_true", help="print only; do not write results/prompt_cache.*")
    ap.add_argument("--results-dir", default=str(BENCH_DIR / "results"))
    args = ap.parse_args(argv)
    results_dir = Path(args.results_dir)
    p = Platform(ttft_ms=0, tokens_per_second=0.0, log_dir=results_dir / "logs" / "prompt_cache")
    try:
        try:
            p.start()
        except Exception as exc:  # noqa: BLE001
            say(f"could not start the platform: {type(exc).__name__}: {exc}")
            return 2
        result = asyncio.run(measure_prompt_cache(p))
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    finally:
        p.close()
    table = markdown_table(result)
    print("\n".join(table))
    say("system blocks per request: " + ", ".join(f"{k} {v['system_blocks']}" for k, v in result["runs"].items()))
    if not args.no_write:
        results_dir.mkdir(parents=True, exist_ok=True)
        (results_dir / "prompt_cache.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
        (results_dir / "prompt_cache.md").write_text("\n".join(["## Prompt caching: seed layout vs ours", "", *table]) + "\n")
        say(f"wrote {results_dir / 'prompt_cache.md'} and prompt_cache.json")
    for error in result["errors"]:
        say(f"FAILED {error}")
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
