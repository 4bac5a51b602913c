"""The AsyncAPI document of the whole bus, generated from the services' own FastStream brokers:
each handler's pydantic parameter is the contract, and every publisher is declared."""

from __future__ import annotations

import json
from pathlib import Path

from faststream.specification import AsyncAPI


DOC_PATH = Path("deploy/asyncapi.json")
DOC_SERVER = "nats://nats:4222"


def build() -> dict:
    from spotter_billing.main import BillingSettings, create_app as billing_app
    from spotter_gateway.edges import create_broker as gateway_broker
    from spotter_gateway.settings import GatewaySettings
    from spotter_orchestrator.main import create_app as orchestrator_app
    from spotter_orchestrator.settings import OrchestratorSettings
    from spotter_rag.main import RagSettings, create_app as rag_app
    from spotter_tool_runner.main import ToolRunnerSettings, create_app as tool_runner_app

    # A fixed server URL: the document must not depend on the environment it is generated in.
    url = {"nats_url": DOC_SERVER}
    apps = [
        orchestrator_app(OrchestratorSettings(**url)),
        tool_runner_app(ToolRunnerSettings(**url)),
        billing_app(BillingSettings(**url)),
        rag_app(RagSettings(**url)),
    ]
    spec = AsyncAPI(gateway_broker(GatewaySettings(**url)), *(app.broker for app in apps), title="Spotter bus", version="0.1.0",
                    description="Every NATS subject of Spotter and its contract.")
    return json.loads(spec.to_specification().to_json())


def render() -> str:
    return json.dumps(build(), indent=2, sort_keys=True) + "\n"
