"""The AsyncAPI document of the whole bus, generated from the services' own FastStream brokers
(each handler's pydantic parameter is the contract) plus the subjects only published."""

from __future__ import annotations

import json
from pathlib import Path

from faststream.specification import AsyncAPI

from spotter_shared.bus import create_broker
from spotter_shared.contracts.commands import SEND_MESSAGE
from spotter_shared.contracts.events import CONVERSATION_EVENTS

DOC_PATH = Path("deploy/asyncapi.json")
DOC_SERVER = "nats://nats:4222"


def build() -> dict:
    from spotter_billing.main import BillingSettings, create_app as billing_app
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
    # Subjects that are published but not consumed by a FastStream handler.
    published = create_broker(DOC_SERVER, "docs")
    published.publisher(SEND_MESSAGE.subject, schema=SEND_MESSAGE.payload, description="Published by the gateway. " + SEND_MESSAGE.description)
    published.publisher(CONVERSATION_EVENTS.subject, schema=CONVERSATION_EVENTS.payload, description="Published by the orchestrator. " + CONVERSATION_EVENTS.description)
    spec = AsyncAPI(*(app.broker for app in apps), published, title="Spotter bus", version="0.1.0",
                    description="Every NATS subject of Spotter and its contract.")
    return json.loads(spec.to_specification().to_json())


def render() -> str:
    return json.dumps(build(), indent=2, sort_keys=True) + "\n"
