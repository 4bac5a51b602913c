"""Typed request/reply calls to tool-runner, billing and rag, each with its own deadline."""

from __future__ import annotations

import asyncio
import logging
import time

from faststream.nats import NatsBroker
from nats.errors import NoRespondersError

from spotter_shared import bus
from spotter_shared.contracts.billing import (
    BUDGET_CHECK, RESERVE, SETTLE, BudgetCheck, BudgetVerdict, ReserveBudget, Reservation, SettleUsage,
    Settlement,
)
from spotter_shared.contracts.commands import Role
from spotter_shared.contracts.rag import AMBIENT_SEARCH, AmbientHit, AmbientQuery, AmbientResult
from spotter_shared.contracts.tools import (
    EXECUTE_TOOL, TOOL_CATALOG, UNDO_TOOL, CatalogRequest, ExecuteTool, ToolCatalog, ToolOutcome, ToolSpec, UndoOutcome,
    UndoRequest,
)

log = logging.getLogger(__name__)

BILLING_TIMEOUT_S = 5.0
TOOL_ATTEMPTS = 5
NO_RESPONDERS_BACKOFF_S = 0.3
CATALOG_TTL_S = 60.0


class Peers:
    def __init__(self, broker: NatsBroker, *, rag_budget_s: float, tool_timeout_s: float) -> None:
        self._broker = broker
        self._rag_budget_s = rag_budget_s
        self._tool_timeout_s = tool_timeout_s
        self._catalogs: dict[str, tuple[float, list[ToolSpec]]] = {}

    async def tools(self, role: Role, trace_id: str) -> list[ToolSpec]:
        cached = self._catalogs.get(role)
        if cached and time.monotonic() - cached[0] < CATALOG_TTL_S:
            return cached[1]
        catalog = await bus.request(self._broker, TOOL_CATALOG, CatalogRequest(role=role), timeout=5.0, trace_id=trace_id)
        assert isinstance(catalog, ToolCatalog)
        self._catalogs[role] = (time.monotonic(), catalog.tools)
        return catalog.tools

    async def execute(self, cmd: ExecuteTool) -> ToolOutcome:
        # The runner keys executions by (conversation, tool_use_id), so asking again after a
        # timeout returns the first run's outcome instead of running the tool twice.
        for attempt in range(TOOL_ATTEMPTS):
            try:
                outcome = await bus.request(self._broker, EXECUTE_TOOL, cmd, timeout=self._tool_timeout_s, trace_id=cmd.trace_id)
                assert isinstance(outcome, ToolOutcome)
                return outcome
            except TimeoutError:
                log.warning("tool %s.%s timed out (attempt %d)", cmd.router, cmd.action, attempt + 1)
            except NoRespondersError:
                # No tool-runner connected right now (e.g. restarting): wait a little and ask again.
                log.warning("no tool-runner for %s.%s (attempt %d)", cmd.router, cmd.action, attempt + 1)
                await asyncio.sleep(NO_RESPONDERS_BACKOFF_S * (attempt + 1))
        raise TimeoutError(f"tool-runner did not answer for {cmd.tool_use_id}")

    async def undo(self, req: UndoRequest) -> UndoOutcome:
        # Keyed by the original call on the runner's side, so asking again never undoes twice.
        res = await bus.request(self._broker, UNDO_TOOL, req, timeout=self._tool_timeout_s, trace_id=req.trace_id)
        assert isinstance(res, UndoOutcome)
        return res

    async def precheck(self, organization_id: str, trace_id: str) -> BudgetVerdict:
        verdict = await bus.request(self._broker, BUDGET_CHECK, BudgetCheck(organization_id=organization_id), timeout=BILLING_TIMEOUT_S, trace_id=trace_id)
        assert isinstance(verdict, BudgetVerdict)
        return verdict

    async def reserve(self, req: ReserveBudget, trace_id: str) -> Reservation:
        res = await bus.request(self._broker, RESERVE, req, timeout=BILLING_TIMEOUT_S, trace_id=trace_id)
        assert isinstance(res, Reservation)
        return res

    async def settle(self, req: SettleUsage, trace_id: str) -> Settlement:
        res = await bus.request(self._broker, SETTLE, req, timeout=BILLING_TIMEOUT_S, trace_id=trace_id)
        assert isinstance(res, Settlement)
        return res

    async def ambient(self, organization_id: str, query: str, trace_id: str) -> list[AmbientHit]:
        """Seed 000: 800 ms budget, never fails the turn."""
        try:
            async with asyncio.timeout(self._rag_budget_s):
                res = await bus.request(
                    self._broker, AMBIENT_SEARCH, AmbientQuery(organization_id=organization_id, query=query),
                    timeout=self._rag_budget_s, trace_id=trace_id,
                )
        except Exception as exc:  # noqa: BLE001 — ambient context is optional by design
            log.info("ambient search skipped: %s", type(exc).__name__)
            return []
        assert isinstance(res, AmbientResult)
        return res.hits
