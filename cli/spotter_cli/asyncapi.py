"""The AsyncAPI document of the whole bus, generated from the services' own FastStream brokers:
each handler's pydantic parameter is the contract, and every publisher and requester is declared.
The README's table of who sends and who receives each subject is generated from the same brokers."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from faststream.nats import NatsBroker
from faststream.specification import AsyncAPI

from spotter_shared.contracts import CATALOG

DOC_PATH = Path("deploy/asyncapi.json")
DOC_SERVER = "nats://nats:4222"


def brokers() -> dict[str, NatsBroker]:
    """Each service's broker with its declared edges, by service name (nothing is connected)."""
    from spotter_billing.main import BillingSettings, create_app as billing_app
    from spotter_gateway.edges import documented_broker as gateway_broker
    from spotter_gateway.settings import GatewaySettings
    from spotter_orchestrator.main import create_app as orchestrator_app
    from spotter_orchestrator.settings import OrchestratorSettings
    from spotter_rag.main import RagSettings, create_app as rag_app
    from spotter_tool_runner.main import ToolRunnerSettings, create_app as tool_runner_app

    from spotter_cli.reindex import create_broker as cli_broker

    # A fixed server URL: the document must not depend on the environment it is generated in.
    url = {"nats_url": DOC_SERVER}
    return {
        "gateway": gateway_broker(GatewaySettings(**url)),
        "orchestrator": orchestrator_app(OrchestratorSettings(**url)).broker,
        "tool-runner": tool_runner_app(ToolRunnerSettings(**url)).broker,
        "billing": billing_app(BillingSettings(**url)).broker,
        "rag": rag_app(RagSettings(**url)).broker,
        "cli": cli_broker(DOC_SERVER)[0],
    }


def build() -> dict:
    spec = AsyncAPI(*brokers().values(), title="Spotter bus", version="0.1.0",
                    description="Every NATS subject of Spotter and its contract.")
    return json.loads(spec.to_specification().to_json())


def render() -> str:
    return json.dumps(build(), indent=2, sort_keys=True) + "\n"


@dataclass(frozen=True)
class Edges:
    subject: str
    pattern: str
    contract: str
    senders: tuple[str, ...]
    receivers: tuple[str, ...]


def edges() -> list[Edges]:
    """Who sends (publishes, or asks) and who receives (subscribes, or answers) each subject."""
    senders: dict[str, set[str]] = {}
    receivers: dict[str, set[str]] = {}
    for service, broker in brokers().items():
        for pub in broker.publishers:
            senders.setdefault(pub.subject.template, set()).add(service)
        for sub in broker.subscribers:
            receivers.setdefault(sub.subject.template, set()).add(service)
    return [
        Edges(ep.subject, ep.pattern, ep.payload.__name__ + (f" → {ep.reply.__name__}" if ep.reply else ""),
              tuple(sorted(senders.get(ep.subject, ()))), tuple(sorted(receivers.get(ep.subject, ()))))
        for ep in CATALOG
    ]
