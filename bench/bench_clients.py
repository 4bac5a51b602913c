"""The two ways of running one turn: straight at the simulator with the real `anthropic` SDK, or
through the gateway's SSE endpoint (gateway → NATS → orchestrator → billing/rag/tool-runner → model)."""

from __future__ import annotations

import asyncio
import collections
import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Optional

import anthropic
import httpx

from bench_stats import Samples, TurnResult

TURN_TIMEOUT_S = 60.0
DRAIN_S = 1.0  # after `done`, how long the end of the response is waited for (it comes at once)

# Arguments `messages.stream()` takes by name; anything else in a captured body goes in extra_body.
_SDK_KEYS = {
    "max_tokens", "messages", "model", "metadata", "output_config", "service_tier", "stop_sequences",
    "system", "thinking", "tool_choice", "tools",
}


@dataclass(frozen=True)
class Workload:
    key: str
    title: str
    message: str
    model_calls: int  # model requests one turn makes (the direct baseline replays them in sequence)
    tools: tuple[str, ...] = ()  # tool actions the gateway turn must have run (succeeded)
    expect_text: Optional[str] = None  # substring of the final answer (a sanity check)
    # A turn in a conversation the bench opened earlier (one model call, no title), rather than a turn
    # that opens its own conversation (which then also makes the title call after `done`).
    follow_up: bool = False
    # Each turn's message ends in three words drawn at random (FRESH_WORDS), so ambient search embeds its
    # terms (not memoised), as it does a real staff message's; the bench's other messages never reach it.
    fresh: bool = False

    def text(self) -> str:
        if not self.fresh:
            return self.message
        return f"{self.message} {' '.join(secrets.choice(FRESH_WORDS) for _ in range(3))}"


# Everyday words a staff message might end with; three drawn per turn (64,000 orders), so the
# message's terms are new to the embedding memo, as a real message's are. Some name things in the demo
# studio (core, mobility), most do not (and go through the lexical half's fuzzy search).
FRESH_WORDS = (
    "morning", "evening", "crew", "team", "beginners", "advanced", "friday", "monday", "outdoor", "indoor",
    "coach", "studio", "weekend", "holiday", "summer", "winter", "family", "seniors", "teens", "newcomers",
    "regulars", "partners", "pairs", "circuit", "tempo", "ladder", "finisher", "warmup", "cooldown", "stretch",
    "core", "grip", "balance", "power", "speed", "endurance", "recovery", "mobility", "posture", "breathing",
)


@dataclass
class DirectPlan:
    """The exact request bodies the orchestrator sent for one turn (from the simulator's request
    log), replayed in sequence."""

    calls: list[dict[str, Any]] = field(default_factory=list)


def sdk_kwargs(body: dict[str, Any]) -> dict[str, Any]:
    kwargs = {k: v for k, v in body.items() if k in _SDK_KEYS}
    extra = {k: v for k, v in body.items() if k not in _SDK_KEYS and k != "stream"}
    if extra:
        kwargs["extra_body"] = extra
    return kwargs


async def direct_turn(client: anthropic.AsyncAnthropic, plan: DirectPlan, workload: Workload) -> TurnResult:
    t0 = time.perf_counter()
    ttft: Optional[float] = None
    try:
        async with asyncio.timeout(TURN_TIMEOUT_S):
            final = None
            for i, body in enumerate(plan.calls):
                async with client.messages.stream(**sdk_kwargs(body)) as stream:
                    async for event in stream:
                        if event.type == "text" and ttft is None and event.text:
                            ttft = time.perf_counter() - t0
                    final = await stream.get_final_message()
                last = i == len(plan.calls) - 1
                if not last and final.stop_reason != "tool_use":
                    return TurnResult(False, error=f"direct call {i + 1}: stop_reason {final.stop_reason}, expected tool_use")
            total = time.perf_counter() - t0
    except TimeoutError:
        return TurnResult(False, error=f"direct turn timed out after {TURN_TIMEOUT_S:.0f}s")
    except anthropic.APIError as exc:
        return TurnResult(False, error=f"direct: {type(exc).__name__}: {exc}")
    except Exception as exc:  # noqa: BLE001 — a benchmark counts every failure
        return TurnResult(False, error=f"direct: {type(exc).__name__}: {exc}")
    if final is None or final.stop_reason != "end_turn":
        return TurnResult(False, error=f"direct: final stop_reason {getattr(final, 'stop_reason', None)}")
    if ttft is None:
        return TurnResult(False, error="direct: no text delta")
    return TurnResult(True, ttft=ttft, total=total)


@dataclass
class Gateway:
    base_url: str
    org_id: str
    token: str

    @property
    def url(self) -> str:
        return f"{self.base_url}/organizations/{self.org_id}/agent/messages"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", "Accept": "text/event-stream"}


class Conversations:
    """Conversations for follow-up turns. A turn takes the longest idle one and gives it back once its
    `done` came, so no two turns of a closed loop share a conversation and each grows about evenly."""

    def __init__(self) -> None:
        self._idle: collections.deque[str] = collections.deque()

    def __len__(self) -> int:
        return len(self._idle)

    async def open(self, client: httpx.AsyncClient, gw: Gateway, workload: Workload) -> TurnResult:
        """A turn that opens a conversation (and makes its title call), kept for later turns."""
        return self._keep(await gateway_turn(client, gw, workload))

    async def turn(self, client: httpx.AsyncClient, gw: Gateway, workload: Workload) -> TurnResult:
        """A follow-up turn (a new conversation only when none is idle)."""
        conversation_id = self._idle.popleft() if self._idle else None
        return self._keep(await gateway_turn(client, gw, workload, conversation_id))

    def _keep(self, result: TurnResult) -> TurnResult:
        if result.conversation_id:
            self._idle.append(result.conversation_id)
        return result


async def gateway_turn(client: httpx.AsyncClient, gw: Gateway, workload: Workload,
                       conversation_id: Optional[str] = None, headers: Optional[dict[str, str]] = None) -> TurnResult:
    """One turn, in a new conversation or the one given: POST, read SSE until this turn's `done` (and on to the
    response's end, so the connection is kept).
    `headers` are sent besides the gateway's own (a `traceparent`, say)."""
    t0 = time.perf_counter()
    ttft: Optional[float] = None
    first: Optional[float] = None
    text: list[str] = []
    tools_ok: list[str] = []
    problems: list[str] = []
    total: Optional[float] = None
    try:
        async with asyncio.timeout(TURN_TIMEOUT_S) as deadline:
            async with client.stream("POST", gw.url, headers={**gw.headers, **(headers or {})},
                                     json={"conversationId": conversation_id, "message": workload.text()}) as r:
                if r.status_code != 200:
                    body = (await r.aread()).decode(errors="replace")[:300]
                    return TurnResult(False, error=f"gateway HTTP {r.status_code}: {body}")
                event, data = None, []
                async for line in r.aiter_lines():
                    if line.startswith(":"):
                        continue  # comment / keep-alive
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
                    payload = _json("\n".join(data))
                    kind = event or payload.get("type")
                    event, data = None, []
                    if total is not None:
                        continue  # after `done`: read on to the end of the response
                    if first is None:
                        first = time.perf_counter() - t0
                    if kind == "text_delta":
                        if ttft is None:
                            ttft = time.perf_counter() - t0
                        text.append(payload.get("delta", ""))
                    elif kind == "tool_completed":
                        if payload.get("ok"):
                            tools_ok.append(str(payload.get("action")))
                        else:
                            problems.append(f"tool {payload.get('action')} failed: {json.dumps(payload.get('output'))[:200]}")
                    elif kind in ("confirmation_pending", "disambiguation_pending"):
                        problems.append(f"unexpected {kind}")
                    elif kind == "error":
                        problems.append(f"error event {payload.get('code')}: {payload.get('message')}")
                    elif kind == "done":
                        # The turn ends here. The response ends right after it; reading on to its end,
                        # as a browser's reader and the SDK's stream do, keeps the connection for the next
                        # turn (closing a response midway closes its connection).
                        total = time.perf_counter() - t0
                        conversation_id = payload.get("conversationId") or payload.get("conversation_id")
                        deadline.reschedule(asyncio.get_running_loop().time() + DRAIN_S)
                if total is None:
                    return TurnResult(False, error="gateway: stream ended without `done`" + (f" ({'; '.join(problems)})" if problems else ""))
    except TimeoutError:
        if total is None:
            return TurnResult(False, error=f"gateway turn stalled: no `done` after {TURN_TIMEOUT_S:.0f}s (ttft {ttft})")
    except httpx.HTTPError as exc:
        if total is None:
            return TurnResult(False, error=f"gateway: {type(exc).__name__}: {exc}")
    if problems:
        return TurnResult(False, error="gateway: " + "; ".join(problems))
    missing = [t for t in workload.tools if t not in tools_ok]
    if missing or (not workload.tools and tools_ok):
        return TurnResult(False, error=f"gateway: tools run {tools_ok}, expected {list(workload.tools)}")
    answer = "".join(text)
    if ttft is None:
        return TurnResult(False, error="gateway: no text_delta before done")
    if workload.expect_text and workload.expect_text not in answer:
        return TurnResult(False, error=f"gateway: answer {answer[-160:]!r} lacks {workload.expect_text!r}")
    return TurnResult(True, ttft=ttft, total=total, first_event=first, conversation_id=conversation_id)


def _json(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        return {"raw": raw}
    return value if isinstance(value, dict) else {"value": value}


async def run_closed_loop(turn: Callable[[], Awaitable[TurnResult]], n: int, concurrency: int,
                          workers: Optional[list[tuple[int, float]]] = None) -> tuple[list[TurnResult], float]:
    """`concurrency` workers each run turns back to back until `n` have been started; returns the
    results and the wall time from the first start to the last completion. `workers`, if given, gets
    each worker's completed turns and the time from its first start to its last completion
    (`Samples`' turns/s: each conversation's own pace, summed)."""
    remaining = n
    results: list[TurnResult] = []

    async def worker() -> None:
        nonlocal remaining
        started, ok = time.perf_counter(), 0
        while remaining > 0:
            remaining -= 1
            result = await turn()
            results.append(result)
            ok += result.ok
        if workers is not None:
            workers.append((ok, time.perf_counter() - started))

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(min(concurrency, n))))
    return results, time.perf_counter() - t0


async def sample_round(samples: Samples, turn: Callable[[], Awaitable[TurnResult]], n: int,
                       concurrency: int) -> tuple[list[TurnResult], float]:
    """One measured round (`run_closed_loop`) added to `samples` with each conversation's pace."""
    workers: list[tuple[int, float]] = []
    results, wall = await run_closed_loop(turn, n, concurrency, workers)
    samples.add_round(results, wall, workers)
    return results, wall
