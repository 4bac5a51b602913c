"""The rag process: one request/reply subscriber over the ambient search core."""

from __future__ import annotations

from faststream import FastStream
from pydantic import Field

from spotter_shared.bus import create_broker
from spotter_shared.contracts.rag import AMBIENT_SEARCH, AmbientQuery, AmbientResult
from spotter_shared.service import Holder, Infra, run_app, service_app
from spotter_shared.settings import CommonSettings

from .core import AmbientSearch


class RagSettings(CommonSettings):
    # Below the orchestrator's 800 ms budget for the whole request, leaving room for the round trip.
    rag_search_budget_ms: int = Field(default=600, gt=0, lt=800)
    rag_statement_timeout_ms: int = Field(default=450, gt=0, lt=800)


def create_app(settings: RagSettings) -> FastStream:
    broker = create_broker(settings.nats_url, "spotter-rag")
    search: Holder[AmbientSearch] = Holder()

    # Core NATS with a queue group: replicas share the load and a late answer is useless anyway.
    @broker.subscriber(AMBIENT_SEARCH.subject, queue=AMBIENT_SEARCH.queue, description=AMBIENT_SEARCH.description)
    async def ambient_search(query: AmbientQuery) -> AmbientResult:
        return await search.get().find(query)

    async def on_ready(infra: Infra) -> None:
        search.set(
            AmbientSearch(
                infra.pool,
                budget_s=settings.rag_search_budget_ms / 1000,
                statement_timeout_ms=settings.rag_statement_timeout_ms,
            )
        )

    return service_app("rag", settings, broker, on_ready)


def run() -> None:
    run_app(create_app(RagSettings()))


if __name__ == "__main__":
    run()
