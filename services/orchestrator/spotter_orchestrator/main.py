"""Orchestrator entrypoint: consumes durable turn commands and drives the agent loop."""

from __future__ import annotations

from datetime import timedelta

from faststream import FastStream

from spotter_shared import bus
from spotter_shared.bus import LivePublisher, consumer_lag, prune_consumers
from spotter_shared.contracts.commands import COMMANDS_STREAM
from spotter_shared.service import Infra, run_app, service_app, service_broker
from spotter_shared.turnlock import TurnLock

from . import edges
from .coach.runner import CoachRunner
from .handlers import COACH, COMMAND_ENDPOINTS, HUMAN, build_router, command_pullers, durable_name, responders, router
from .human import HumanBridge, IdleSweep
from .model import ModelClient
from .peers import Peers
from .settings import OrchestratorSettings
from .store import Store
from .turns import TurnRunner


def create_app(settings: OrchestratorSettings) -> FastStream:
    commands = command_pullers(settings)
    broker = service_broker("orchestrator", settings, commands.router, build_router(), router, edges.router)
    model = ModelClient(settings)
    sweeps: list[IdleSweep] = []
    serving: list[bus.Serving | bus.Pulling] = []

    async def make_core(infra: Infra) -> TurnRunner:
        durables = [durable_name(ep) for ep in COMMAND_ENDPOINTS]
        await prune_consumers(broker, COMMANDS_STREAM, set(durables))
        infra.gauges.add(consumer_lag(broker, COMMANDS_STREAM, durables))
        peers = Peers(rag_budget_s=settings.spotter_rag_budget_ms / 1000, tool_timeout_s=settings.spotter_tool_timeout_s)
        lock = TurnLock(infra.redis, settings.spotter_turn_lock_ttl_s)
        broker.context.set_global(HUMAN, HumanBridge(infra.pool))
        broker.context.set_global(COACH, CoachRunner(
            infra.pool, peers, model, lock, coach_model=settings.spotter_coach_model,
            initializer_model=settings.spotter_coach_initializer_model, max_tokens=settings.spotter_coach_max_tokens,
            poll_s=min(1.0, settings.spotter_turn_lock_ttl_s / 6)))
        sweep = IdleSweep(infra.pool, idle_for=timedelta(seconds=settings.spotter_human_session_idle_s),
                          every_s=settings.spotter_human_session_sweep_s)
        sweep.start()
        sweeps.append(sweep)
        runner = TurnRunner(settings, Store(infra.pool), peers, model, lock, events=LivePublisher(broker, edges.conversation_events), cancels=edges.cancel_broadcast)
        serving.append(await responders.start(infra.broker, runner))
        serving.append(await commands.start(infra.broker, runner, infra.broker))
        return runner

    async def stop() -> None:
        for sweep in sweeps:
            await sweep.stop()
        await model.close()

    return service_app("orchestrator", settings, broker, make_core, on_stop=stop, serving=serving)


def run() -> None:
    run_app(create_app(OrchestratorSettings()))
