"""`/_sim/*`: endpoints tests use to script, break, slow down and inspect the model."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field, field_validator

from .errors import ERROR_TYPES
from .state import Latency, SimState
from .turns import Turn

router = APIRouter(prefix="/_sim")


def _state(request: Request) -> SimState:
    return request.app.state.sim


class ScriptIn(BaseModel):
    match: str | None = None  # case-insensitive substring of the latest user text; None = any
    responses: list[Turn]
    times: int | None = Field(default=None, ge=1)  # exchanges it may start; None = unlimited


class FaultIn(BaseModel):
    status: int
    count: int = Field(default=1, ge=1)
    retry_after: float | None = Field(default=None, ge=0)
    match: str | None = None
    after_tokens: int | None = Field(default=None, ge=0)
    message: str | None = None
    kind: Literal["agent", "title", "summary", "initializer"] = "agent"  # which requests it hits

    @field_validator("status")
    @classmethod
    def _known_status(cls, value: int) -> int:
        if value not in ERROR_TYPES:
            raise ValueError(f"status must be one of {sorted(ERROR_TYPES)}")
        return value


class LatencyIn(BaseModel):
    ttft_ms: int | None = Field(default=None, ge=0)
    tokens_per_second: float | None = Field(default=None, ge=0)


class ClockIn(BaseModel):
    advance_seconds: float = Field(ge=0)


@router.get("/health")
async def health(request: Request) -> dict[str, Any]:
    state = _state(request)
    return {"status": "ok", "requests_logged": len(state.log.list()), "cache_entries": len(state.cache)}


@router.post("/script")
async def add_script(body: ScriptIn, request: Request) -> dict[str, str]:
    script = _state(request).scripts.add(body.match, body.responses, body.times)
    return {"id": script.id}


@router.get("/script")
async def list_scripts(request: Request) -> dict[str, Any]:
    return {"scripts": _state(request).scripts.list()}


@router.delete("/script")
async def clear_scripts(request: Request) -> dict[str, bool]:
    _state(request).scripts.clear()
    return {"ok": True}


@router.post("/faults")
async def add_fault(body: FaultIn, request: Request) -> dict[str, str]:
    fault = _state(request).faults.add(
        body.status, body.count, body.retry_after, body.match, body.after_tokens, body.message, body.kind
    )
    return {"id": fault.id}


@router.get("/faults")
async def list_faults(request: Request) -> dict[str, Any]:
    return {"faults": _state(request).faults.list()}


@router.delete("/faults")
async def clear_faults(request: Request) -> dict[str, bool]:
    _state(request).faults.clear()
    return {"ok": True}


@router.get("/latency")
async def get_latency(request: Request) -> dict[str, Any]:
    latency = _state(request).latency
    return {"ttft_ms": latency.ttft_ms, "tokens_per_second": latency.tokens_per_second}


@router.post("/latency")
async def set_latency(body: LatencyIn, request: Request) -> dict[str, Any]:
    state = _state(request)
    current = state.latency
    state.latency = Latency(
        ttft_ms=current.ttft_ms if body.ttft_ms is None else body.ttft_ms,
        tokens_per_second=current.tokens_per_second if body.tokens_per_second is None else body.tokens_per_second,
    )
    return await get_latency(request)


RequestKind = Literal["agent", "title", "summary", "initializer", "all"]


@router.get("/requests")
async def list_requests(request: Request, limit: int | None = Query(default=None, ge=1),
                        kind: RequestKind = "agent") -> dict[str, Any]:
    """The agent's requests by default (a conversation's title and summary requests run beside its
    turns and would otherwise interleave with them); `kind=all` lists every request. A request
    rejected before its body was read counts as the agent's."""
    return {"requests": _state(request).log.list(limit, None if kind == "all" else kind)}


@router.delete("/requests")
async def clear_requests(request: Request) -> dict[str, bool]:
    _state(request).log.clear()
    return {"ok": True}


@router.delete("/cache")
async def clear_cache(request: Request) -> dict[str, bool]:
    _state(request).cache.clear()
    return {"ok": True}


@router.post("/clock")
async def advance_clock(body: ClockIn, request: Request) -> dict[str, float]:
    return {"now": _state(request).clock.advance(body.advance_seconds)}


@router.post("/reset")
async def reset(request: Request) -> dict[str, bool]:
    """Scripts, faults, request log, cache and latency back to a fresh start (the clock keeps its offset)."""
    _state(request).reset()
    return {"ok": True}
