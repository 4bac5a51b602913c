"""Ambient retrieval for the page-context block."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Contract, request_endpoint

RAG_QUEUE = "rag"


class AmbientQuery(Contract):
    organization_id: str = Field(description="Organization whose data is searched.")
    query: str = Field(max_length=16000, description="The user's message.")


class AmbientHit(Contract):
    scope: Literal["program", "workout", "exercise", "member"] = Field(description="Entity kind.")
    id: str = Field(description="Entity id.")
    label: str = Field(description="Display name.")
    detail: str | None = Field(default=None, description="Short extra detail.")
    score: float = Field(description="Blended relevance score.")


class AmbientResult(Contract):
    hits: list[AmbientHit] = Field(description="At most 3 per scope, 5 in all.")
    skipped: str | None = Field(default=None, description="Why the search was skipped, e.g. too_short.")


AMBIENT_SEARCH = request_endpoint(
    "spotter.rag.ambient", AmbientQuery, AmbientResult, queue=RAG_QUEUE,
    description="Ambient search over members and programs.",
)
