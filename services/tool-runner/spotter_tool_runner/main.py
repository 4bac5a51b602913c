"""tool-runner process: the subjects of handlers.py, answered by its responders (a queue group) over the
ToolRunner core, which asks rag through the edges of edges.py."""

from __future__ import annotations

import httpx
from faststream import FastStream

from spotter_shared import bus
from spotter_shared.contracts.tools import ToolsChanged
from spotter_shared.service import Infra, run_app, service_app, service_broker

from . import edges
from .coach.tools import CoachTools
from .handlers import build_responders
from .packs.registry import PackRegistry
from .peers import Rag
from .registry import Registry
from .runner import ToolRunner
from .settings import ToolRunnerSettings
from .tools import REGISTRY

__all__ = ["SERVICE", "ToolRunnerSettings", "create_app", "run"]

SERVICE = "tool-runner"


def create_app(settings: ToolRunnerSettings, *, registry: Registry = REGISTRY) -> FastStream:
    responders = build_responders(settings.tool_runner_max_workers)
    broker = service_broker(SERVICE, settings, responders.router, edges.router)
    rag = Rag(
        search_timeout_s=settings.tool_runner_search_timeout_s,
        announce_timeout_s=settings.tool_runner_announce_timeout_s,
    )

    client = httpx.AsyncClient(timeout=httpx.Timeout(settings.tool_runner_pack_timeout_s, connect=3.0),
                               follow_redirects=False)
    packs: list[PackRegistry] = []
    serving: list[bus.Serving] = []

    async def tools_changed(names: list[str]) -> None:
        await bus.publish(edges.tools_changed, ToolsChanged(packs=names))

    async def make_core(infra: Infra) -> ToolRunner:
        coach = CoachTools(infra.pool, infra.redis)
        registry_of_packs = PackRegistry(infra.pool, client, reserved={d.router for d in registry},
                                         ttl_s=settings.tool_runner_pack_reload_s, on_change=tools_changed)
        await registry_of_packs.start()
        packs.append(registry_of_packs)
        runner = ToolRunner(infra.pool, registry, rag=rag, packs=registry_of_packs)
        serving.extend(await responders.start(infra.broker, runner, coach))
        return runner

    async def on_stop() -> None:
        for registry_of_packs in packs:
            await registry_of_packs.stop()
        await client.aclose()

    return service_app(SERVICE, settings, broker, make_core, on_stop, serving=serving)


def run() -> None:
    run_app(create_app(ToolRunnerSettings()))
