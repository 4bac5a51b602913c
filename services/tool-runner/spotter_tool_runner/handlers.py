"""The tool-runner's subjects: each handler takes one typed request and hands it to the core."""

from __future__ import annotations

from faststream.nats import NatsRouter

from spotter_shared.bus import subscriber
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


def build_router(max_workers: int) -> NatsRouter:
    """The subscribers of every endpoint above. Built per app rather than at import, because how
    many requests a subject serves at once is a setting: calls run concurrently so that one slow
    tool (or one waiting on a row lock) does not hold up the others."""
    router = NatsRouter()
    # Answered from memory (a pack reload reads the database now and then).
    subscriber(router, TOOL_CATALOG, max_workers=4)(tool_catalog)
    for endpoint, handler in (
        (EXECUTE_TOOL, execute_tool),
        (UNDO_TOOL, undo_tool),
        (TOOL_CALLS, tool_calls),
        (TOOL_RESOLVE, resolve_call),
        (TOOL_CLOSE, close_calls),
        (APP_ACTION, app_action),
        (COACH_TOOL_EXECUTE, coach_execute),
    ):
        subscriber(router, endpoint, max_workers=max_workers)(handler)
    subscriber(router, COACH_TOOL_CATALOG)(coach_catalog)
    return router
