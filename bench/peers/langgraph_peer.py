"""Issue 14, "Against the peers": LangGraph's agent server (`langgraph dev`, the in-memory server of
langgraph-cli[inmem]) running an equivalent one-tool agent against the same model simulator, on the
same workloads as Spotter's benchmark, measured by the same kind of client.

    .venv/bin/python bench/peers/langgraph_peer.py            # own simulator, Spotter's turn counts
    .venv/bin/python bench/peers/langgraph_peer.py --quick    # smoke run

From bench/run.py (the simulator is the one Spotter's run uses):

    from peers import langgraph_peer
    peer = await langgraph_peer.measure(p.sim_url, [PLAIN, ONE_TOOL], [1, 20],
                                        turns={(c.workload.key, c.concurrency): c.turns_per_round for c in cells},
                                        rounds=4, answers=...)      # or: measure_cells(p.sim_url, cells)
    print(langgraph_peer.comparison_table(cells, peer))

What is compared. The peer is a ReAct graph (langgraph_app/peer_agent.py): ChatAnthropic with one read
tool, `who_am_i`, returning a fixed profile, asked like Spotter's orchestrator asks (same model,
max_tokens, thinking between tools, streaming, no retries). Each turn is a new thread:
`POST /threads/{new uuid}/runs/stream` with `if_not_exists: "create"` and `stream_mode: messages-tuple`,
read as SSE with httpx (the measuring client is the one Spotter's gateway path uses); TTFT is the first
text token of the model's reply, a turn ends when the run's stream closes. Closed loop, the same
concurrency, rounds and turns as Spotter's cells (bench/run.py `plan_cells`).

The simulator answers the peer with what it answers Spotter: while a peer round runs, a `/_sim/script`
for the workload's message replays Spotter's model turns (same text, same thinking, the tool call
renamed to `who_am_i`), so both stream the same tokens at the same pace. Those turns come from the
simulator's own demo policy, computed in process for a request offering Spotter's tools (the default),
or exactly from Spotter's capture turn (`answers_from_requests`). Scripts are global to the simulator:
do not run Spotter turns while a peer round runs (the rounds here restore any earlier scripts after).

The peer is installed by the bench into its own virtual environment (.bench-peers/langgraph/, pinned
by requirements-langgraph.txt, stamped with that file's hash), never into .venv.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import fcntl
import hashlib
import json
import os
import platform as pyplatform
import resource
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable, Mapping, Optional, Sequence, Union

PEERS_DIR = Path(__file__).resolve().parent
BENCH_DIR = PEERS_DIR.parent
REPO = BENCH_DIR.parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

import httpx  # noqa: E402

from bench_clients import DRAIN_S, TURN_TIMEOUT_S, Workload, run_closed_loop, sample_round  # noqa: E402
from bench_stats import Samples, TurnResult, cpu_delta, cpu_snapshot, ratio  # noqa: E402

NAME = "langgraph"
REQUIREMENTS = PEERS_DIR / "requirements-langgraph.txt"
APP_DIR = PEERS_DIR / "langgraph_app"
CONFIG = APP_DIR / "langgraph.json"
PROFILE_FILE = APP_DIR / "who_am_i.json"
PEERS_HOME = Path(os.environ.get("SPOTTER_BENCH_PEERS_DIR") or (REPO / ".bench-peers"))
VENV = PEERS_HOME / NAME
ASSISTANT_ID = "agent"  # the graph's id in langgraph.json
TOOL_NAME = "who_am_i"
SPOTTER_TOOL = "read__get_current_context"  # what Spotter's agent calls for the same question
MODEL = "claude-sonnet-5-5"  # Spotter's agent model (orchestrator settings), its max_tokens below
MAX_TOKENS = 4096
# `langgraph dev` runs N_JOBS_PER_WORKER runs at once and queues the rest; left unset, the dev server
# sets it to 1 (langgraph_api.cli.run_server). 20 = the bench's highest concurrency, so no run queues.
N_JOBS_PER_WORKER = 20
TOP_LEVEL = ("langgraph-cli", "langgraph-api", "langgraph-runtime-inmem", "langgraph", "langchain-core",
             "langchain-anthropic", "anthropic")

COMPARISON = (
    "Spotter stores every conversation event in Postgres before it publishes it, replays a stream from "
    "`Last-Event-ID`, and runs each turn from a durable NATS command, so a turn survives the death of any of "
    "its processes; it reserves the organization's daily AI budget before each model call and stops a write "
    "that needs approval at `confirmation_pending`. LangGraph's dev server (`langgraph dev`, "
    "langgraph-runtime-inmem) keeps threads, runs and checkpoints in one process's memory and pickles them to "
    "`.langgraph_api/` in its working directory every 10 s and at a clean shutdown (a crash loses up to the "
    "last 10 s; runs saved as running are re-queued on the next start); the streamed events are never "
    "written to disk. Its streams can be rejoined with `Last-Event-ID` only when the run asked for it "
    "(`stream_resumable: true`), from an in-memory buffer that a restart loses, and a run goes on when its "
    "client disconnects (`on_disconnect: continue`). In exchange LangGraph checkpoints every step of a "
    "thread, so its history can be read, forked or resumed, and `interrupt()` pauses a graph for human "
    "approval; this one-tool graph uses neither and has no budget or confirmation step of its own."
)

# What dominates the peer's time to first token (langgraph_runtime_inmem 0.36.7, ops.Runs.next / queue.py).
QUEUE_NOTE = (
    "The in-memory runtime starts runs from a queue that, when idle, sleeps 0.5 s and then takes only the runs "
    "created before that sleep began, so every new run waits 0.5–1.0 s before it starts (`run_queue_ms` in its "
    "log; `Run started`: the run's first SSE event, `metadata`). That is the in-memory dev server; LangGraph's "
    "deployed server runs on another runtime, not measured here."
)


def say(msg: str) -> None:
    print(f"[bench:{NAME}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------- install


def _stamp_value() -> str:
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    return f"{digest} python {pyplatform.python_version()}"


def _base_python() -> str:
    return getattr(sys, "_base_executable", None) or sys.executable


def ensure_installed(*, quiet: bool = False) -> Path:
    """Create (or re-create, when requirements-langgraph.txt changed) the peer's virtual environment and
    install the pinned packages into it; a no-op when the stamp matches. Returns the environment's path."""
    want = _stamp_value()
    stamp = VENV / ".installed"
    VENV.parent.mkdir(parents=True, exist_ok=True)
    ignore = VENV.parent / ".gitignore"  # the whole folder is generated: keep it out of git
    if not ignore.exists():
        ignore.write_text("*\n")
    with open(VENV.parent / f".{NAME}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one installer at a time
        if stamp.exists() and stamp.read_text().strip() == want and (VENV / "bin" / "langgraph").exists():
            return VENV
        t0 = time.perf_counter()
        if not quiet:
            say(f"installing the LangGraph peer into {_rel(VENV)} (pinned: {_rel(REQUIREMENTS)}) ...")
        if VENV.exists():
            shutil.rmtree(VENV)
        _run([_base_python(), "-m", "venv", str(VENV)], "create the peer's venv")
        env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        env.pop("PIP_REQUIRE_VIRTUALENV", None)
        _run([str(VENV / "bin" / "python"), "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS)],
             "pip install -r requirements-langgraph.txt", env=env, timeout=1200)
        _run([str(VENV / "bin" / "python"), "-c",
              "import langgraph_api, langgraph_runtime_inmem, langchain_anthropic, langgraph.prebuilt"],
             "import the installed peer")
        stamp.write_text(want + "\n")
        if not quiet:
            say(f"installed in {time.perf_counter() - t0:.1f}s")
        return VENV


def _run(argv: list[str], what: str, *, env: Optional[Mapping[str, str]] = None, timeout: float = 300) -> None:
    p = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=timeout)
    if p.returncode != 0:
        out = p.stdout.decode(errors="replace")
        raise RuntimeError(f"could not {what} (exit {p.returncode}):\n{out[-3000:]}")


def installed_versions() -> dict[str, str]:
    """The pinned versions of the packages that matter (from the requirements file the venv is stamped with)."""
    pins: dict[str, str] = {}
    for line in REQUIREMENTS.read_text().splitlines():
        name, sep, version = line.strip().partition("==")
        if sep and not name.startswith("#"):
            pins[name.lower().replace("_", "-")] = version
    return {k: pins[k] for k in TOP_LEVEL if k in pins}


def _rel(p: Path) -> str:
    return str(p.relative_to(REPO)) if p.is_relative_to(REPO) else str(p)


# --------------------------------------------------------------------------------------------- server


class LangGraphServer:
    """`langgraph dev` for the peer graph, its model pointed at `sim_url`. Use as a (sync or async)
    context manager; `url` is its base URL once started. It runs in a fresh working directory
    (.bench-peers/langgraph/run/), so no state of an earlier run is loaded."""

    def __init__(self, sim_url: str, *, port: Optional[int] = None, n_jobs_per_worker: int = N_JOBS_PER_WORKER,
                 log_dir: Optional[Path] = None, start_timeout: float = 120.0) -> None:
        self.sim_url = sim_url.rstrip("/")
        self.port = port
        self.n_jobs_per_worker = n_jobs_per_worker
        self.log_path = (Path(log_dir) / f"{NAME}.log") if log_dir else (VENV / "server.log")
        self.start_timeout = start_timeout
        self.proc: Any = None  # spotter_cli.supervisor.ServiceProcess
        self.url = ""
        self.start_s: Optional[float] = None

    def env(self) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items()
                if not k.startswith(("LANGSMITH_", "LANGCHAIN_", "LANGGRAPH_", "ANTHROPIC_", "OTEL_", "PYTHON",
                                     "VIRTUAL_ENV", "PIP_"))}
        return {
            **keep,
            "PATH": f"{VENV / 'bin'}{os.pathsep}{keep.get('PATH', '')}",
            "VIRTUAL_ENV": str(VENV),
            "PYTHONPATH": str(APP_DIR),  # langgraph.json names the graph as module:variable
            "PYTHONDONTWRITEBYTECODE": "1",  # no __pycache__ in the source tree
            "PYTHONUNBUFFERED": "1",
            "ANTHROPIC_BASE_URL": self.sim_url,
            "ANTHROPIC_API_KEY": "sk-ant-simulator",
            "PEER_MODEL": MODEL,
            "PEER_MAX_TOKENS": str(MAX_TOKENS),
            # Nothing leaves the machine: no LangSmith tracing, no CLI analytics, no PyPI version check,
            # and no LangSmith key or license key, so the server's metadata loop stays off.
            "LANGSMITH_TRACING": "false",
            "LANGSMITH_TRACING_V2": "false",
            "LANGCHAIN_TRACING_V2": "false",
            "LANGCHAIN_TRACING": "false",
            "LANGGRAPH_CLI_NO_ANALYTICS": "1",
            "LANGGRAPH_NO_VERSION_CHECK": "true",
            "DO_NOT_TRACK": "1",
            "LOG_COLOR": "false",  # a readable log file; the level stays the dev server's default (INFO)
        }

    def start(self) -> "LangGraphServer":
        from spotter_cli.devstack import find_free_port
        from spotter_cli.supervisor import ServiceProcess, wait_http_ok

        ensure_installed()
        run_dir = VENV / "run"
        if run_dir.exists():
            shutil.rmtree(run_dir)  # `.langgraph_api/` of an earlier run would be loaded at start
        run_dir.mkdir(parents=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.log_path.exists():
            self.log_path.unlink()
        port = self.port or find_free_port()
        self.url = f"http://127.0.0.1:{port}"
        argv = [str(VENV / "bin" / "langgraph"), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1",
                "--port", str(port), "--config", str(CONFIG), "--n-jobs-per-worker", str(self.n_jobs_per_worker),
                "--server-log-level", "WARNING"]
        t0 = time.perf_counter()
        self.proc = ServiceProcess(f"{NAME}-dev", argv, env=self.env(), cwd=run_dir, output=False,
                                   log_path=self.log_path, label=NAME).start()
        try:
            wait_http_ok(f"{self.url}/ok", timeout=self.start_timeout, watch=[self.proc])
        except BaseException:
            tail = self.output()[-3000:]
            self.stop()
            raise RuntimeError(f"`langgraph dev` did not come up; its output:\n{tail}") from None
        self.start_s = round(time.perf_counter() - t0, 1)
        return self

    def stop(self) -> Optional[int]:
        if self.proc is None:
            return None
        rc = self.proc.terminate(15)
        self.proc = None
        return rc

    def output(self) -> str:
        return self.proc.output_text() if self.proc is not None else ""

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc is not None else None

    def dead(self) -> bool:
        return self.proc is not None and self.proc.died_unexpectedly()

    def __enter__(self) -> "LangGraphServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    async def __aenter__(self) -> "LangGraphServer":
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *exc: Any) -> None:
        await asyncio.to_thread(self.stop)


# --------------------------------------------------------------------------------------------- model answers

Turns = list[dict[str, Any]]  # the simulator's Turn: {"text", "tool_uses": [{"name", "input"}], "thinking"}


def profile() -> dict[str, Any]:
    return json.loads(PROFILE_FILE.read_text(encoding="utf-8"))


def default_answers(workloads: Iterable[Workload]) -> dict[str, Turns]:
    """What the simulator's demo policy answers Spotter for each workload's message, computed in process:
    a request offering Spotter's tools (every tool a demo intent needs), its get_current_context answered
    with the peer's profile. Tool calls are renamed to the peer's `who_am_i`, each tool turn carrying the
    thinking the simulator writes for Spotter's call, so both paths stream the same number of tokens."""
    from spotter_sim import demo, demo_intents

    names = sorted({n for intent in demo_intents.INTENTS for n in intent.needs})
    tools = [{"name": n, "description": n, "input_schema": {"type": "object", "properties": {}}} for n in names]
    out: dict[str, Turns] = {}
    for w in workloads:
        messages: list[dict[str, Any]] = [{"role": "user", "content": w.message}]
        turns: Turns = []
        for step in range(8):
            turn = demo.respond({"model": MODEL, "max_tokens": MAX_TOKENS, "messages": messages, "tools": tools})
            if not turn.tool_uses:
                turns.append({"text": turn.text, "tool_uses": []})
                break
            uses, results = [], []
            for i, use in enumerate(turn.tool_uses):
                if use.name.split("__")[-1] != SPOTTER_TOOL.split("__")[-1]:
                    raise ValueError(f"{w.key}: Spotter's turn calls {use.name}; the peer only has {TOOL_NAME}")
                tid = f"toolu_peer_{step}_{i}"
                uses.append({"type": "tool_use", "id": tid, "name": use.name, "input": use.input})
                results.append({"type": "tool_result", "tool_use_id": tid, "content": json.dumps(profile())})
            turns.append({
                "text": turn.text,
                "tool_uses": [{"name": TOOL_NAME, "input": {}} for _ in turn.tool_uses],
                "thinking": turn.thinking or f"The user needs {', '.join(u.name for u in turn.tool_uses)}; calling it now.",
            })
            messages += [{"role": "assistant", "content": ([{"type": "text", "text": turn.text}] if turn.text else []) + uses},
                         {"role": "user", "content": results}]
        else:
            raise ValueError(f"{w.key}: the demo policy did not finish in 8 model calls")
        if len(turns) != w.model_calls:
            raise ValueError(f"{w.key}: the demo policy answers in {len(turns)} model call(s), the workload says {w.model_calls}")
        out[w.key] = turns
    return out


def answers_from_requests(log: Sequence[Mapping[str, Any]]) -> Turns:
    """Script turns from the simulator's request log of one Spotter turn (`GET /_sim/requests`, oldest
    first, agent requests only): the exact text and thinking Spotter's model calls got, tool calls renamed
    to the peer's `who_am_i`. bench/run.py has this log in hand when it captures a workload's requests."""
    turns: Turns = []
    for entry in log:
        response = entry.get("response") or {}
        blocks = response.get("content") or []
        text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text") or None
        thinking = "".join(b.get("thinking", "") for b in blocks if b.get("type") == "thinking") or None
        uses = [b for b in blocks if b.get("type") == "tool_use"]
        for u in uses:
            if str(u.get("name", "")).split("__")[-1] != SPOTTER_TOOL.split("__")[-1]:
                raise ValueError(f"Spotter's turn calls {u.get('name')}; the peer only has {TOOL_NAME}")
        turn: dict[str, Any] = {"text": text, "tool_uses": [{"name": TOOL_NAME, "input": {}} for _ in uses]}
        if thinking:
            turn["thinking"] = thinking
        turns.append(turn)
    return turns


@contextlib.asynccontextmanager
async def scripted(sim: httpx.AsyncClient, match: str, responses: Turns):
    """Register a `/_sim/script` for `match` for the duration; afterwards clear the scripts and put back
    those that were there before (the simulator can only clear them all)."""
    before = (await sim.get("/_sim/script")).json().get("scripts", [])
    r = await sim.post("/_sim/script", json={"match": match, "responses": responses})
    r.raise_for_status()
    try:
        yield r.json()["id"]
    finally:
        await sim.delete("/_sim/script")
        for s in before:
            await sim.post("/_sim/script", json={k: s[k] for k in ("match", "responses", "times")})


# --------------------------------------------------------------------------------------------- one turn


async def langgraph_turn(client: httpx.AsyncClient, base_url: str, workload: Workload) -> TurnResult:
    """One turn in a new thread: `POST /threads/{id}/runs/stream` (the thread created on the fly), read
    the SSE stream until it closes. TTFT = the first text token of the model's reply."""
    t0 = time.perf_counter()
    ttft: Optional[float] = None
    first: Optional[float] = None
    text: list[str] = []
    tools_ok: list[str] = []
    problems: list[str] = []
    body = {
        "assistant_id": ASSISTANT_ID,
        "input": {"messages": [{"role": "user", "content": workload.message}]},
        "stream_mode": ["messages-tuple"],
        "if_not_exists": "create",
    }
    url = f"{base_url}/threads/{uuid.uuid4()}/runs/stream"
    total: float | None = None
    try:
        async with asyncio.timeout(TURN_TIMEOUT_S) as deadline:
            async with client.stream("POST", url, json=body, headers={"Accept": "text/event-stream"}) as r:
                if r.status_code != 200:
                    detail = (await r.aread()).decode(errors="replace")[:300]
                    return TurnResult(False, error=f"{NAME} HTTP {r.status_code}: {detail}")
                event, data = None, []
                async for line in r.aiter_lines():
                    if line.startswith(":"):
                        continue
                    if line:
                        name, _, value = line.partition(":")
                        value = value[1:] if value.startswith(" ") else value
                        if name == "event":
                            event = value
                        elif name == "data":
                            data.append(value)
                        continue
                    if event is None and not data:
                        continue
                    kind, raw = event, "\n".join(data)
                    event, data = None, []
                    if total is not None:
                        continue  # after `end`: read on to the end of the response (the connection is kept)
                    if first is None:
                        first = time.perf_counter() - t0
                    if kind == "messages":
                        chunk = _loads(raw)
                        chunk = chunk[0] if isinstance(chunk, list) and chunk else chunk
                        if not isinstance(chunk, dict):
                            continue
                        ctype = chunk.get("type")
                        if ctype in ("AIMessageChunk", "ai"):
                            delta = _text_of(chunk.get("content"))
                            if delta:
                                if ttft is None:
                                    ttft = time.perf_counter() - t0
                                text.append(delta)
                        elif ctype == "tool":
                            if chunk.get("status", "success") == "success":
                                tools_ok.append(str(chunk.get("name")))
                            else:
                                problems.append(f"tool {chunk.get('name')} failed: {str(chunk.get('content'))[:200]}")
                    elif kind == "error":
                        problems.append(f"error event: {raw[:300]}")
                    elif kind == "end":
                        total = time.perf_counter() - t0
                        deadline.reschedule(asyncio.get_running_loop().time() + DRAIN_S)
                if total is None:
                    total = time.perf_counter() - t0
    except TimeoutError:
        if total is None:
            return TurnResult(False, error=f"{NAME} turn stalled: not done after {TURN_TIMEOUT_S:.0f}s (ttft {ttft})")
    except httpx.HTTPError as exc:
        if total is None:
            return TurnResult(False, error=f"{NAME}: {type(exc).__name__}: {exc}")
    if problems:
        return TurnResult(False, error=f"{NAME}: " + "; ".join(problems))
    expected = [TOOL_NAME for _ in workload.tools]
    if sorted(tools_ok) != sorted(expected):
        return TurnResult(False, error=f"{NAME}: tools run {tools_ok}, expected {expected}")
    answer = "".join(text)
    if ttft is None:
        return TurnResult(False, error=f"{NAME}: no text token before the stream ended")
    if workload.expect_text and workload.expect_text not in answer:
        return TurnResult(False, error=f"{NAME}: answer {answer[-160:]!r} lacks {workload.expect_text!r}")
    return TurnResult(True, ttft=ttft, total=total, first_event=first)


def _loads(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _text_of(content: Any) -> str:
    """Text of a message chunk's content: a string, or (Anthropic with tools) a list of blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content
                       if isinstance(b, dict) and b.get("type") in ("text", "text_delta") and isinstance(b.get("text"), str))
    return ""


# --------------------------------------------------------------------------------------------- the peer


class LangGraphPeer:
    """The server, an HTTP client like Spotter's gateway client, and the simulator's control client.

        async with LangGraphPeer(sim_url) as peer:
            results, wall = await peer.run_round(ONE_TOOL, n=30, concurrency=20)

    `run_round` scripts the simulator for the workload only while the round runs, so bench/run.py can
    interleave peer rounds with its direct/gateway rounds."""

    def __init__(self, sim_url: str, *, answers: Optional[Mapping[str, Turns]] = None,
                 n_jobs_per_worker: int = N_JOBS_PER_WORKER, log_dir: Optional[Path] = None) -> None:
        self.sim_url = sim_url.rstrip("/")
        self.answers: dict[str, Turns] = dict(answers or {})
        self.server = LangGraphServer(self.sim_url, n_jobs_per_worker=n_jobs_per_worker, log_dir=log_dir)
        self.http: Optional[httpx.AsyncClient] = None
        self.sim: Optional[httpx.AsyncClient] = None

    async def __aenter__(self) -> "LangGraphPeer":
        await self.server.__aenter__()
        self.http = httpx.AsyncClient(
            timeout=httpx.Timeout(10.0, read=90.0),
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=100),
        )
        self.sim = httpx.AsyncClient(base_url=self.sim_url, timeout=10.0)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        for c in (self.http, self.sim):
            if c is not None:
                await c.aclose()
        await self.server.__aexit__(*exc)

    def responses_for(self, w: Workload) -> Turns:
        if w.key not in self.answers:
            self.answers.update(default_answers([w]))
        return self.answers[w.key]

    async def turn(self, w: Workload) -> TurnResult:
        assert self.http is not None
        return await langgraph_turn(self.http, self.server.url, w)

    async def run_round(self, w: Workload, n: int, concurrency: int,
                        samples: Optional[Samples] = None) -> tuple[list[TurnResult], float]:
        """One round of `w`; a measured one is added to `samples`."""
        assert self.sim is not None
        async with scripted(self.sim, w.message, self.responses_for(w)):
            if samples is None:
                return await run_closed_loop(lambda: self.turn(w), n, concurrency)
            return await sample_round(samples, lambda: self.turn(w), n, concurrency)

    def pids(self) -> dict[str, Optional[int]]:
        return {NAME: self.server.pid}

    def dead(self) -> list[str]:
        return [f"{NAME} server (exit {self.server.proc.returncode})"] if self.server.dead() else []


def _self_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


TurnsSpec = Union[int, Mapping[tuple[str, int], int]]


async def measure(
    sim_url: str,
    workloads: Sequence[Workload],
    concurrency: Union[int, Sequence[int]],
    turns: TurnsSpec,
    *,
    rounds: TurnsSpec = 1,
    answers: Optional[Mapping[str, Turns]] = None,
    warm_up: bool = True,
    n_jobs_per_worker: int = N_JOBS_PER_WORKER,
    log_dir: Optional[Path] = None,
    extra_pids: Optional[Mapping[str, Optional[int]]] = None,
    progress: Callable[[str], None] = say,
) -> dict[str, Any]:
    """Install (once) and start the peer against `sim_url`, run every (workload, concurrency) cell closed
    loop, stop it. `turns` / `rounds`: per cell, an int or {(workload.key, concurrency): int}; turns/s is
    the completed turns over the rounds' summed wall time, as in bench/run.py. Returns {"peer", "versions",
    "simulator_latency", "n_jobs_per_worker", "install_s", "server_start_s", "cells": [...], "errors"};
    each cell has the keys of bench/run.py's cells (workload, title, message, model_calls_per_turn,
    concurrency) and `"langgraph"`: a `Samples.summary()` (ttft_p50_ms, ttft_p95_ms, turn_p50_ms,
    turns_per_s, …), plus `cpu_ms_per_turn` (the server and its children, this client, and `extra_pids`,
    e.g. {"simulator": pid})."""
    levels = [concurrency] if isinstance(concurrency, int) else list(concurrency)
    t0 = time.perf_counter()
    await asyncio.to_thread(ensure_installed)
    install_s = round(time.perf_counter() - t0, 1)
    out: dict[str, Any] = {"peer": NAME, "versions": installed_versions(), "n_jobs_per_worker": n_jobs_per_worker,
                           "install_s": install_s, "cells": [], "errors": []}
    async with LangGraphPeer(sim_url, answers=answers, n_jobs_per_worker=n_jobs_per_worker, log_dir=log_dir) as peer:
        assert peer.sim is not None
        out["server_start_s"] = peer.server.start_s
        out["simulator_latency"] = (await peer.sim.get("/_sim/latency")).json()
        progress(f"`langgraph dev` up at {peer.server.url} in {peer.server.start_s}s "
                 f"(n-jobs-per-worker {n_jobs_per_worker}); simulator {out['simulator_latency']}")
        if warm_up:
            for w in workloads:
                for c in sorted(set(levels)):
                    results, _ = await peer.run_round(w, max(2, c), c)
                    errs = [r.error for r in results if not r.ok]
                    if errs:
                        raise RuntimeError(f"{NAME} warm-up {w.key} c={c}: {len(errs)} error(s), first: {errs[0]}")
        for w in workloads:
            for c in levels:
                n, k = _spec(turns, w, c), _spec(rounds, w, c)
                samples, cpu = Samples(), Counter()
                for rnd in range(k):
                    roots = {**peer.pids(), **(extra_pids or {})}
                    before, self_before = cpu_snapshot(roots), _self_cpu()
                    results, wall = await peer.run_round(w, n, c, samples)
                    delta = cpu_delta(before, cpu_snapshot(roots))
                    delta["bench-client"] = _self_cpu() - self_before
                    cpu.update(delta)
                    out["errors"] += [(f"{NAME} {w.key} c={c} round {rnd + 1}", r.error or "?") for r in results if not r.ok]
                    s = samples.summary()
                    progress(f"{w.key:>8} c={c:<2} round {rnd + 1}/{k} {NAME}: {len(results)} turns in {wall:.2f}s, "
                             f"ttft p50 {s['ttft_p50_ms']} ms, errors {len(samples.errors)}")
                    if peer.dead():
                        raise RuntimeError(f"process died during the benchmark: {', '.join(peer.dead())}")
                n_ok = max(1, len(samples.ok))
                out["cells"].append({
                    "workload": w.key, "title": w.title, "message": w.message, "model_calls_per_turn": w.model_calls,
                    "concurrency": c, NAME: samples.summary(),
                    "cpu_ms_per_turn": {k2: round(v * 1000 / n_ok, 1) for k2, v in sorted(cpu.items(), key=lambda kv: -kv[1])},
                })
    return out


async def measure_cells(sim_url: str, cells: Sequence[Any], **kwargs: Any) -> dict[str, Any]:
    """`measure` over bench/run.py's cells (objects with .workload, .concurrency, .rounds, .turns_per_round)."""
    workloads = list({c.workload.key: c.workload for c in cells}.values())
    levels = sorted({c.concurrency for c in cells})
    res = await measure(sim_url, workloads, levels,
                        {(c.workload.key, c.concurrency): c.turns_per_round for c in cells},
                        rounds={(c.workload.key, c.concurrency): c.rounds for c in cells}, **kwargs)
    wanted = {(c.workload.key, c.concurrency) for c in cells}
    res["cells"] = [c for c in res["cells"] if (c["workload"], c["concurrency"]) in wanted]
    return res


def _spec(spec: TurnsSpec, w: Workload, c: int) -> int:
    return spec if isinstance(spec, int) else int(spec[(w.key, c)])


# --------------------------------------------------------------------------------------------- reporting


def peer_table(peer: Mapping[str, Any]) -> str:
    rows = ["| Workload | Concurrent conversations | Run started p50 | TTFT p50 | TTFT p95 | Turn latency p50 | Turns/s "
            "| Turns (errors) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for c in peer["cells"]:
        s = c[NAME]
        rows.append(f"| {c['title']} | {c['concurrency']} | {_ms(s['first_event_p50_ms'])} | {_ms(s['ttft_p50_ms'])} | "
                    f"{_ms(s['ttft_p95_ms'])} | {_ms(s['turn_p50_ms'])} | {_rate(s['turns_per_s'])} | "
                    f"{s['turns']} ({s['errors']}) |")
    return "\n".join(rows)


def compare(spotter_cells: Sequence[Mapping[str, Any]], peer: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Spotter's gateway ÷ the peer, per cell both measured (bench/run.py's cells: `gateway`, `direct`).
    TTFT and latency below 1: Spotter is faster; turns/s above 1: Spotter has more throughput. Where the
    Spotter cell has its direct baseline, the peer ÷ direct too (the peer's own overhead)."""
    by_key = {(c["workload"], c["concurrency"]): c for c in peer["cells"]}
    out = []
    for sc in spotter_cells:
        pc = by_key.get((sc["workload"], sc["concurrency"]))
        if pc is None:
            continue
        g, lg, d = sc["gateway"], pc[NAME], sc.get("direct")
        row = {
            "workload": sc["workload"], "title": sc["title"], "concurrency": sc["concurrency"],
            "spotter": {k: g[k] for k in ("ttft_p50_ms", "ttft_p95_ms", "turn_p50_ms", "turns_per_s")},
            NAME: {k: lg[k] for k in ("ttft_p50_ms", "ttft_p95_ms", "turn_p50_ms", "turns_per_s")},
            "spotter_vs_peer": {
                "ttft_p50": ratio(g["ttft_p50_ms"], lg["ttft_p50_ms"]),
                "ttft_p95": ratio(g["ttft_p95_ms"], lg["ttft_p95_ms"]),
                "turn_p50": ratio(g["turn_p50_ms"], lg["turn_p50_ms"]),
                "throughput": ratio(g["turns_per_s"], lg["turns_per_s"]),
            },
        }
        if d:
            row["peer_vs_direct"] = {
                "ttft_p50": ratio(lg["ttft_p50_ms"], d["ttft_p50_ms"]),
                "throughput": ratio(lg["turns_per_s"], d["turns_per_s"]),
            }
        out.append(row)
    return out


def comparison_table(spotter_cells: Sequence[Mapping[str, Any]], peer: Mapping[str, Any]) -> str:
    rows = ["| Workload | Concurrent conversations | TTFT p50: Spotter / LangGraph | **Spotter ÷ LangGraph** | "
            "Turns/s: Spotter / LangGraph | **Spotter ÷ LangGraph** |",
            "|---|---:|---:|---:|---:|---:|"]
    for r in compare(spotter_cells, peer):
        s, p, q = r["spotter"], r[NAME], r["spotter_vs_peer"]
        rows.append(f"| {r['title']} | {r['concurrency']} | {_ms(s['ttft_p50_ms'])} / {_ms(p['ttft_p50_ms'])} | "
                    f"**{_x(q['ttft_p50'])}** | {_rate(s['turns_per_s'])} / {_rate(p['turns_per_s'])} | "
                    f"**{_x(q['throughput'])}** |")
    return "\n".join(rows)


def _ms(v: Optional[float]) -> str:
    return "—" if v is None else f"{v:.0f} ms"


def _rate(v: Optional[float]) -> str:
    return "—" if v is None else f"{v:.2f}/s"


def _x(v: Optional[float]) -> str:
    return "—" if v is None else f"{v:.2f}×"


# --------------------------------------------------------------------------------------------- standalone


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="The LangGraph peer alone, against its own model simulator.")
    ap.add_argument("--quick", action="store_true", help="bench/run.py --quick's turn counts")
    ap.add_argument("--ttft-ms", type=int, default=200, help="simulator time to first token (default 200, as bench/run.py)")
    ap.add_argument("--tokens-per-second", type=float, default=200.0, help="simulator output pace (default 200)")
    ap.add_argument("--n-jobs-per-worker", type=int, default=N_JOBS_PER_WORKER)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--log-dir", type=Path, default=BENCH_DIR / "results" / "logs")
    args = ap.parse_args(argv)

    def on_term(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt()

    signal.signal(signal.SIGTERM, on_term)
    from run import ONE_TOOL, PLAIN, plan_cells  # Spotter's workloads and turn counts, not copies
    from spotter_cli.devstack import find_free_port
    from spotter_cli.supervisor import SIMULATOR, ServiceProcess, wait_http_ok

    started = time.perf_counter()
    load_before = os.getloadavg()
    t = time.perf_counter()
    ensure_installed()
    install_s = time.perf_counter() - t
    cells = plan_cells(args.quick)
    assert {c.workload.key for c in cells} == {PLAIN.key, ONE_TOOL.key}
    args.log_dir.mkdir(parents=True, exist_ok=True)
    sim_port = find_free_port()
    sim_url = f"http://127.0.0.1:{sim_port}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "SPOTTER_SIM_PORT": str(sim_port),
           "SPOTTER_SIM_TTFT_MS": str(args.ttft_ms), "SPOTTER_SIM_TOKENS_PER_SECOND": str(args.tokens_per_second)}
    sim = ServiceProcess(SIMULATOR, env=env, cwd=REPO, output=False, log_path=args.log_dir / "peer-simulator.log").start()
    try:
        wait_http_ok(f"{sim_url}/_sim/health", timeout=60, watch=[sim])
        say(f"simulator at {sim_url} (ttft {args.ttft_ms} ms, {args.tokens_per_second:g} tokens/s)")
        result = asyncio.run(measure_cells(sim_url, cells, n_jobs_per_worker=args.n_jobs_per_worker, log_dir=args.log_dir,
                                           extra_pids={"simulator": sim.pid}))
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    finally:
        sim.terminate(10)
    runtime = time.perf_counter() - started
    result["meta"] = {
        "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "nproc": len(os.sched_getaffinity(0)), "python": pyplatform.python_version(),
        "sim_ttft_ms": args.ttft_ms, "sim_tokens_per_second": args.tokens_per_second, "quick": args.quick,
        "install_s": round(install_s, 1), "runtime_s": round(runtime, 1),
        "loadavg_before": [round(x, 2) for x in load_before], "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    }
    versions = ", ".join(f"{k} {v}" for k, v in result["versions"].items())
    print(f"\n### LangGraph peer (`langgraph dev`, in-memory) against the model simulator\n")
    print(peer_table(result))
    print(f"\nMeasured {result['meta']['date']} on {result['meta']['nproc']} CPU core(s), Python "
          f"{result['meta']['python']}; simulator TTFT {args.ttft_ms} ms, {args.tokens_per_second:g} tokens/s; "
          f"{versions}; --n-jobs-per-worker {args.n_jobs_per_worker}; server start {result['server_start_s']}s; "
          f"install {'check ' if install_s < 5 else ''}{install_s:.1f}s; whole run {runtime:.0f}s; load average "
          f"(1/5/15 min) {result['meta']['loadavg_before']} before, {result['meta']['loadavg_after']} after.")
    cpu = "; ".join(f"{c['workload']} c={c['concurrency']}: " + ", ".join(f"{k} {v} ms" for k, v in c["cpu_ms_per_turn"].items())
                    for c in result["cells"])
    print(f"\nCPU per turn: {cpu}.\n\n{QUEUE_NOTE}\n\n{COMPARISON}\n")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str) + "\n")
        say(f"wrote {args.json}")
    for (where, err), n in Counter(map(tuple, result["errors"])).most_common(20):
        say(f"FAILED {n}x {where}: {err}")
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
