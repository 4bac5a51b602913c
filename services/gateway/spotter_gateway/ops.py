"""Operational endpoints (liveness, readiness, metrics), and the caller's own memberships."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest

from .deps import CurrentCaller, Pool

router = APIRouter()

REGISTRY = CollectorRegistry()
REQUESTS_TOTAL = Counter("spotter_http_requests_total", "HTTP requests", ["method", "status"], registry=REGISTRY)


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    state = request.app.state
    checks = {
        "postgres": await _check(lambda: state.pool.fetchval("SELECT 1")),
        "redis": await _check(state.redis.ping),
        "nats": "ok" if await state.broker.ping(timeout=1.0) else "disconnected",
    }
    ready = all(v == "ok" for v in checks.values())
    return JSONResponse(status_code=200 if ready else 503, content={"ready": ready, "checks": checks})


async def _check(probe: Any) -> str:
    try:
        await probe()
    except Exception as exc:  # noqa: BLE001 — readiness reports, it does not fail
        return type(exc).__name__
    return "ok"


@router.get("/metrics")
async def metrics() -> Response:
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)


@router.get("/me")
async def me(caller: CurrentCaller, db: Pool) -> dict[str, Any]:
    rows = await db.fetch(
        """SELECT m.id, m.organization_id, o.name, o.tier::text AS tier, m.role::text AS role, m.status::text AS status
           FROM memberships m JOIN organizations o ON o.id = m.organization_id
           WHERE m.user_id = $1 ORDER BY o.name""",
        uuid.UUID(caller.user_id),
    )
    return {
        "user": {"id": caller.user_id, "email": caller.email, "fullName": caller.full_name, "locale": caller.locale},
        "memberships": [
            {"membershipId": str(r["id"]), "organizationId": str(r["organization_id"]), "organizationName": r["name"],
             "tier": r["tier"], "role": r["role"], "status": r["status"]}
            for r in rows
        ],
    }

