"""What the orchestrator sends on the bus, declared at module level so the AsyncAPI document shows
every edge: the events it publishes and the requests it makes of the tool-runner, billing and rag."""

from __future__ import annotations

from faststream.nats import NatsRouter

from spotter_shared import bus
from spotter_shared.contracts.billing import BUDGET_CHECK, RESERVE, SETTLE
from spotter_shared.contracts.coach import COACH_TOOL_CATALOG, COACH_TOOL_EXECUTE, SESSION_EVENTS
from spotter_shared.contracts.commands import CANCEL_TURN
from spotter_shared.contracts.events import CONVERSATION_EVENTS
from spotter_shared.contracts.rag import AMBIENT_SEARCH, EMBED
from spotter_shared.contracts.tools import EXECUTE_TOOL, TOOL_CALLS, TOOL_CATALOG, TOOL_CLOSE, TOOL_RESOLVE, UNDO_TOOL

router = NatsRouter()

conversation_events = bus.publisher(router, CONVERSATION_EVENTS)
cancel_broadcast = bus.publisher(router, CANCEL_TURN)
session_events = bus.publisher(router, SESSION_EVENTS)

tool_catalog = bus.requester(router, TOOL_CATALOG)
execute_tool = bus.requester(router, EXECUTE_TOOL)
undo_tool = bus.requester(router, UNDO_TOOL)
tool_calls = bus.requester(router, TOOL_CALLS)
resolve_call = bus.requester(router, TOOL_RESOLVE)
close_calls = bus.requester(router, TOOL_CLOSE)
coach_catalog = bus.requester(router, COACH_TOOL_CATALOG)
coach_execute = bus.requester(router, COACH_TOOL_EXECUTE)

budget_check = bus.requester(router, BUDGET_CHECK)
reserve_budget = bus.requester(router, RESERVE)
settle_usage = bus.requester(router, SETTLE)

ambient_search = bus.requester(router, AMBIENT_SEARCH)
embed = bus.requester(router, EMBED)
