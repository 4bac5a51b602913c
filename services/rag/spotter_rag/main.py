"""The rag process: the broker with rag's subscriber, over the ambient search core."""

from __future__ import annotations

from faststream import FastStream

from spotter_shared.service import Infra, run_app, service_app, service_broker

from .core import AmbientSearch
from .handlers import router
from .settings import RagSettings

__all__ = ["RagSettings", "create_app", "run"]


def create_app(settings: RagSettings) -> FastStream:
    async def make_core(infra: Infra) -> AmbientSearch:
        return AmbientSearch(
            infra.pool,
            budget_s=settings.rag_search_budget_ms / 1000,
            statement_timeout_ms=settings.rag_statement_timeout_ms,
        )

    broker = service_broker("spotter-rag", settings, router)
    return service_app("rag", settings, broker, make_core)


def run() -> None:
    run_app(create_app(RagSettings()))


if __name__ == "__main__":
    run()
