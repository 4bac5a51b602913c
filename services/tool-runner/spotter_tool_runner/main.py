"""tool-runner process: the subjects of handlers.py, served by a queue group over the ToolRunner core, which
asks rag through the edges of edges.py."""

from __future__ import annotations

from faststream import FastStream

from spotter_shared.service import Infra, run_app, service_app, service_broker

from . import edges
from .coach.tools import CoachTools
from .handlers import COACH, build_router
from .peers import Rag
from .registry import Registry
from .runner import ToolRunner
from .settings import ToolRunnerSettings
from .tools import REGISTRY

__all__ = ["SERVICE", "ToolRunnerSettings", "create_app", "run"]

SERVICE = "tool-runner"


def create_app(settings: ToolRunnerSettings, *, registry: Registry = REGISTRY) -> FastStream:
    broker = service_broker(SERVICE, settings, build_router(settings.tool_runner_max_workers), edges.router)
    rag = Rag(
        search_timeout_s=settings.tool_runner_search_timeout_s,
        announce_timeout_s=settings.tool_runner_announce_timeout_s,
    )

    async def make_core(infra: Infra) -> ToolRunner:
        broker.context.set_global(COACH, CoachTools(infra.pool, infra.redis))
        return ToolRunner(infra.pool, registry, rag=rag)

    return service_app(SERVICE, settings, broker, make_core)


def run() -> None:
    run_app(create_app(ToolRunnerSettings()))
