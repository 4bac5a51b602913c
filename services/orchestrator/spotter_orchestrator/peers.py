"""Typed request/reply calls to tool-runner, billing and rag, each with its own deadline, through
the orchestrator's declared requesters (edges.py)."""

from __future__ import annotations

import asyncio
import logging
import time

from spotter_shared.bus import Requester
from spotter_shared.contracts.base import P, R
from spotter_shared.contracts.coach import CoachCatalogRequest, CoachToolCall, CoachToolResult, CoachToolSpec
from spotter_shared.contracts.billing import (
    BudgetCheck, BudgetVerdict, ReserveBudget, Reservation, SettleUsage, Settlement, call_reservation_id,
)
from spotter_shared.contracts.commands import Actor, Role
from spotter_shared.contracts.rag import AmbientHit, AmbientQuery, EmbedRequest, EmbedResult
from spotter_shared.contracts.tools import (
    CallsQuery, CallState, CatalogRequest, CloseCalls, ExecuteTool, ResolveCall, ToolOutcome, ToolSpec, UndoOutcome,
    UndoRequest,
)

from . import edges

log = logging.getLogger(__name__)

BILLING_TIMEOUT_S = 5.0
CATALOG_TIMEOUT_S = 5.0
TOOL_ATTEMPTS = 5
CATALOG_TTL_S = 60.0


class Peers:
    def __init__(self, *, rag_budget_s: float, tool_timeout_s: float) -> None:
        self._rag_budget_s = rag_budget_s
        self._tool_timeout_s = tool_timeout_s
        self._catalogs: dict[tuple[str, str], tuple[float, list[ToolSpec]]] = {}
        self._coach_catalog: tuple[float, list[CoachToolSpec]] | None = None

    async def tools(self, actor: Actor, trace_id: str) -> list[ToolSpec]:
        """The tools `actor` may use: Spotter's own for its role, then its organization's packs. Cached
        per (role, organization) until the TTL or a `spotter.tools.changed` (`forget_tools`)."""
        key = (actor.role, actor.organization_id)
        cached = self._catalogs.get(key)
        if cached and time.monotonic() - cached[0] < CATALOG_TTL_S:
            return cached[1]
        request = CatalogRequest(role=actor.role, organization_id=actor.organization_id)
        catalog = await edges.tool_catalog(request, timeout=CATALOG_TIMEOUT_S, trace_id=trace_id)
        self._catalogs[key] = (time.monotonic(), catalog.tools)
        return catalog.tools

    def forget_tools(self) -> None:
        """Tool packs changed: the next turn of every organization asks for its catalog again."""
        self._catalogs.clear()

    async def coach_tools(self, trace_id: str) -> list[CoachToolSpec]:
        """The member coach's tools (never the studio's), cached like the studio's catalogs."""
        if self._coach_catalog and time.monotonic() - self._coach_catalog[0] < CATALOG_TTL_S:
            return self._coach_catalog[1]
        catalog = await self._tool_runner(edges.coach_catalog, CoachCatalogRequest(), trace_id)
        self._coach_catalog = (time.monotonic(), catalog.tools)
        return catalog.tools

    async def coach_execute(self, call: CoachToolCall) -> CoachToolResult:
        """Idempotent on the tool-runner's side (a call's result is kept), so asking again is safe."""
        return await self._tool_runner(edges.coach_execute, call, call.trace_id)

    async def execute(self, cmd: ExecuteTool) -> ToolOutcome:
        return await self._tool_runner(edges.execute_tool, cmd, cmd.trace_id)

    async def undo(self, req: UndoRequest) -> UndoOutcome:
        return await self._tool_runner(edges.undo_tool, req, req.trace_id)

    async def calls(self, conversation_id: str, tool_use_ids: list[str], actor: Actor) -> dict[str, CallState]:
        """What the tool-runner recorded for these calls (it owns the records), by tool_use id."""
        query = CallsQuery(conversation_id=conversation_id, tool_use_ids=tool_use_ids, actor=actor)
        states = await self._tool_runner(edges.tool_calls, query, None)
        return {state.tool_use_id: state for state in states.calls}

    async def resolve(self, req: ResolveCall) -> ToolOutcome:
        """A person's reject or pick, recorded once by the runner (a repeat is `tool_already_resolved`)."""
        return await self._tool_runner(edges.resolve_call, req, req.trace_id)

    async def close(self, req: CloseCalls) -> list[str]:
        closed = await self._tool_runner(edges.close_calls, req, req.trace_id)
        return closed.tool_use_ids

    async def _tool_runner(self, ask: Requester[P, R], payload: P, trace_id: str | None) -> R:
        # Every tool-runner request is idempotent on its side (executions and undos are keyed by
        # call), so asking again after a timeout never runs anything twice.
        return await ask.patiently(payload, timeout=self._tool_timeout_s, attempts=TOOL_ATTEMPTS, trace_id=trace_id)

    async def precheck(self, organization_id: str, trace_id: str) -> BudgetVerdict:
        return await edges.budget_check(BudgetCheck(organization_id=organization_id), timeout=BILLING_TIMEOUT_S, trace_id=trace_id)

    async def reserve(self, req: ReserveBudget, trace_id: str) -> Reservation:
        return await edges.reserve_budget(req, timeout=BILLING_TIMEOUT_S, trace_id=trace_id)

    async def reserve_call(self, turn_id: str, call: int | str, *, organization_id: str, model: str,
                           input_tokens: int, max_output_tokens: int, trace_id: str,
                           fresh_tier: bool = False) -> tuple[str, Reservation]:
        """Reserve for the model call `call` of a turn under its derived id (see call_reservation_id):
        a redelivered attempt finds its dead predecessor's hold. When that predecessor had already
        settled the call, the call is being made again: it is reserved under the next repeat's id."""
        repeat = 0
        while True:
            reservation_id = call_reservation_id(turn_id, call, repeat)
            held = await self.reserve(ReserveBudget(
                reservation_id=reservation_id, organization_id=organization_id, model=model,
                input_tokens=input_tokens, max_output_tokens=max_output_tokens, fresh_tier=fresh_tier,
            ), trace_id)
            if not held.settled:
                return reservation_id, held
            repeat += 1  # bounded by the command's deliveries: each settled repeat was a dead attempt

    async def settle(self, req: SettleUsage, trace_id: str) -> Settlement:
        return await edges.settle_usage(req, timeout=BILLING_TIMEOUT_S, trace_id=trace_id)

    async def ambient(self, organization_id: str, query: str, trace_id: str) -> list[AmbientHit]:
        """Seed 000: 800 ms budget, never fails the turn."""
        try:
            async with asyncio.timeout(self._rag_budget_s):
                res = await edges.ambient_search(AmbientQuery(organization_id=organization_id, query=query),
                                                 timeout=self._rag_budget_s, trace_id=trace_id)
        except Exception as exc:  # noqa: BLE001 — ambient context is optional by design
            log.info("ambient search skipped: %s", type(exc).__name__)
            return []
        return res.hits

    async def embed_passage(self, text: str, trace_id: str, timeout_s: float) -> EmbedResult | None:
        """A summary's embedding from rag, or None: it is best effort, the summary text stands alone."""
        try:
            async with asyncio.timeout(timeout_s):
                return await edges.embed(EmbedRequest(texts=[text[:8000]], kind="passage"), timeout=timeout_s, trace_id=trace_id)
        except Exception as exc:  # noqa: BLE001 — conversation search falls back to lexical
            log.info("summary embedding skipped: %s", type(exc).__name__)
            return None
