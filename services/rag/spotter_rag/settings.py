from __future__ import annotations

from pydantic import Field

from spotter_shared.settings import CommonSettings


class RagSettings(CommonSettings):
    # Below the orchestrator's 800 ms budget for the whole request, leaving room for the round trip.
    rag_search_budget_ms: int = Field(default=600, gt=0, lt=800)
    rag_statement_timeout_ms: int = Field(default=450, gt=0, lt=800)
