"""tool-runner process: the subjects of handlers.py, served by a queue group over the ToolRunner core."""

from __future__ import annotations

from faststream import FastStream

from spotter_shared.service import Infra, run_app, service_app, service_broker

from .handlers import build_router
from .registry import Registry
from .runner import ToolRunner
from .settings import ToolRunnerSettings
from .tools import REGISTRY

__all__ = ["SERVICE", "ToolRunnerSettings", "create_app", "run"]

SERVICE = "tool-runner"


def create_app(settings: ToolRunnerSettings, *, registry: Registry = REGISTRY) -> FastStream:
    broker = service_broker(SERVICE, settings, build_router(settings.tool_runner_max_workers))

    async def make_core(infra: Infra) -> ToolRunner:
        return ToolRunner(infra.pool, registry)

    return service_app(SERVICE, settings, broker, make_core)


def run() -> None:
    run_app(create_app(ToolRunnerSettings()))
