"""tool-runner process: three request/reply subjects on core NATS, served by a queue group."""

from __future__ import annotations

from faststream import FastStream
from faststream.nats import NatsBroker

from spotter_shared.bus import create_broker
from spotter_shared.contracts.tools import (
    EXECUTE_TOOL,
    TOOL_CATALOG,
    UNDO_TOOL,
    CatalogRequest,
    ExecuteTool,
    ToolCatalog,
    ToolOutcome,
    UndoOutcome,
    UndoRequest,
)
from spotter_shared.service import Holder, Infra, run_app, service_app
from spotter_shared.settings import CommonSettings

from .registry import Registry
from .runner import ToolRunner
from .tools import REGISTRY

SERVICE = "tool-runner"


class ToolRunnerSettings(CommonSettings):
    # Executions run concurrently so one slow tool does not hold up the others.
    tool_runner_max_workers: int = 16


def build_broker(nats_url: str, runner: Holder[ToolRunner], registry: Registry, *, max_workers: int = 16) -> NatsBroker:
    """The broker with its subscribers; usable without connecting (AsyncAPI generation, tests)."""
    broker = create_broker(nats_url, SERVICE)

    @broker.subscriber(TOOL_CATALOG.subject, queue=TOOL_CATALOG.queue, description=TOOL_CATALOG.description)
    async def tool_catalog(request: CatalogRequest) -> ToolCatalog:
        return ToolCatalog(tools=registry.for_role(request.role))

    @broker.subscriber(
        EXECUTE_TOOL.subject, queue=EXECUTE_TOOL.queue, max_workers=max_workers, description=EXECUTE_TOOL.description
    )
    async def execute_tool(command: ExecuteTool) -> ToolOutcome:
        return await runner.get().execute(command)

    @broker.subscriber(
        UNDO_TOOL.subject, queue=UNDO_TOOL.queue, max_workers=max_workers, description=UNDO_TOOL.description
    )
    async def undo_tool(request: UndoRequest) -> UndoOutcome:
        return await runner.get().undo(request)

    return broker


def create_app(settings: ToolRunnerSettings, *, registry: Registry = REGISTRY) -> FastStream:
    runner: Holder[ToolRunner] = Holder()
    broker = build_broker(settings.nats_url, runner, registry, max_workers=settings.tool_runner_max_workers)

    async def on_ready(infra: Infra) -> None:
        runner.set(ToolRunner(infra.pool, registry))

    return service_app(SERVICE, settings, broker, on_ready)


def broker_for_docs() -> NatsBroker:
    """For the AsyncAPI generator: the subscribers and their contracts, no connection."""
    return build_broker(CommonSettings.model_fields["nats_url"].default, Holder(), REGISTRY)


def run() -> None:
    run_app(create_app(ToolRunnerSettings()))
