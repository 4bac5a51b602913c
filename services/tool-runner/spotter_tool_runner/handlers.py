"""The tool-runner's subjects: each handler takes one typed request and hands it to the core.

They answer on the bare NATS connection (`bus.Responders`: no FastStream middleware per message; a
turn asks for the catalog and runs its tools here); the router declares them for the AsyncAPI
document and is never subscribed by FastStream."""

from __future__ import annotations

from dataclasses import dataclass

from faststream.nats import NatsBroker, NatsRouter

from spotter_shared import bus
from spotter_shared.contracts.tools import (
    APP_ACTION,
    EXECUTE_TOOL,
    TOOL_CALLS,
    TOOL_CATALOG,
    TOOL_CLOSE,
    TOOL_RESOLVE,
    UNDO_TOOL,
    AppAction,
    AppActionResult,
    CallsQuery,
    CallStates,
    CatalogRequest,
    ClosedCalls,
    CloseCalls,
    ExecuteTool,
    ResolveCall,
    ToolCatalog,
    ToolOutcome,
    UndoOutcome,
    UndoRequest,
)
from spotter_shared.contracts.coach import (
    COACH_TOOL_CATALOG, COACH_TOOL_EXECUTE, CoachCatalog, CoachCatalogRequest, CoachToolCall, CoachToolResult,
)
from spotter_shared.service import CORE, FromContext

from .coach.tools import CoachTools
from .runner import ToolRunner

COACH = "coach"


async def tool_catalog(request: CatalogRequest, core: ToolRunner = FromContext(CORE)) -> ToolCatalog:
    return await core.catalog(request)


async def execute_tool(command: ExecuteTool, core: ToolRunner = FromContext(CORE)) -> ToolOutcome:
    return await core.execute(command)


async def undo_tool(request: UndoRequest, core: ToolRunner = FromContext(CORE)) -> UndoOutcome:
    return await core.undo(request)


async def tool_calls(query: CallsQuery, core: ToolRunner = FromContext(CORE)) -> CallStates:
    return await core.calls(query)


async def resolve_call(request: ResolveCall, core: ToolRunner = FromContext(CORE)) -> ToolOutcome:
    return await core.resolve(request)


async def close_calls(request: CloseCalls, core: ToolRunner = FromContext(CORE)) -> ClosedCalls:
    return await core.close(request)


async def app_action(request: AppAction, core: ToolRunner = FromContext(CORE)) -> AppActionResult:
    return await core.app_action(request)


async def coach_catalog(request: CoachCatalogRequest, coach: CoachTools = FromContext(COACH)) -> CoachCatalog:
    return coach.catalog()


async def coach_execute(call: CoachToolCall, coach: CoachTools = FromContext(COACH)) -> CoachToolResult:
    return await coach.execute(call)


@dataclass(frozen=True)
class ResponderGroups:
    """The endpoints above on one router, answered in groups of their own so that a pile of slow tool
    runs (one waiting on a row lock, or on rag) never holds up a turn's catalog or the coach."""

    router: NatsRouter
    tools: bus.Responders  # runs a tool: at most `max_workers` at once
    reads: bus.Responders  # the catalog (from memory), call states, closing pending calls
    coach: bus.Responders  # the member coach's tools, over their own context

    async def start(self, broker: NatsBroker, runner: ToolRunner, coach: CoachTools) -> list[bus.Serving]:
        return [await self.tools.start(broker, runner), await self.reads.start(broker, runner),
                await self.coach.start(broker, coach)]


def build_responders(max_workers: int) -> ResponderGroups:
    """Built per app rather than at import, because how many tool calls run at once is a setting:
    they run concurrently so that one slow tool does not hold up the others."""
    router = NatsRouter()
    group = ResponderGroups(router, tools=bus.Responders(router, max_in_flight=max_workers),
                            reads=bus.Responders(router, max_in_flight=max_workers),
                            coach=bus.Responders(router, max_in_flight=max_workers))
    group.reads(TOOL_CATALOG)(tool_catalog)
    for endpoint, handler in (
        (EXECUTE_TOOL, execute_tool),
        (UNDO_TOOL, undo_tool),
        (TOOL_RESOLVE, resolve_call),
        (APP_ACTION, app_action),
    ):
        group.tools(endpoint)(handler)
    group.reads(TOOL_CALLS)(tool_calls)
    group.reads(TOOL_CLOSE)(close_calls)
    group.coach(COACH_TOOL_EXECUTE)(coach_execute)
    group.coach(COACH_TOOL_CATALOG)(coach_catalog)
    return group
