"""Gateway: HTTP + SSE in front of the bus. Stateless; any replica serves any conversation."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest
from redis.asyncio import Redis

from spotter_shared import telemetry
from spotter_shared.auth import TokenVerifier
from spotter_shared.bus import create_broker, ensure_streams
from spotter_shared.db import create_pool
from spotter_shared.turnlock import TurnLock

from . import agent, errors, hitl
from .deps import CurrentCaller, Pool
from .middleware import RequestGuard
from .settings import GatewaySettings

log = logging.getLogger(__name__)


def create_app(settings: GatewaySettings) -> FastAPI:
    registry = CollectorRegistry()
    requests_total = Counter("spotter_http_requests_total", "HTTP requests", ["method", "status"], registry=registry)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        telemetry.setup("gateway", settings)
        app.state.settings = settings
        app.state.pool = await create_pool(settings.database_url, max_size=settings.spotter_db_pool_max)
        app.state.redis = Redis.from_url(settings.redis_url, decode_responses=True)
        app.state.broker = create_broker(settings.nats_url, "gateway")
        await app.state.broker.connect()
        await ensure_streams(app.state.broker, settings.spotter_jetstream_replicas)
        app.state.nats = app.state.broker.config.connection_state.connection
        app.state.verifier = TokenVerifier(settings)
        app.state.turn_lock = TurnLock(app.state.redis, settings.spotter_turn_lock_ttl_s)
        try:
            yield
        finally:
            await app.state.broker.stop()
            await app.state.redis.aclose()
            await app.state.pool.close()

    app = FastAPI(title="Spotter gateway", version="0.1.0", lifespan=lifespan)
    errors.install(app)

    app.add_middleware(RequestGuard, max_body_bytes=settings.spotter_max_body_bytes, requests_total=requests_total)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz(request: Request) -> JSONResponse:
        checks = {}
        try:
            await request.app.state.pool.fetchval("SELECT 1")
            checks["postgres"] = "ok"
        except Exception as exc:  # noqa: BLE001
            checks["postgres"] = type(exc).__name__
        try:
            await request.app.state.redis.ping()
            checks["redis"] = "ok"
        except Exception as exc:  # noqa: BLE001
            checks["redis"] = type(exc).__name__
        checks["nats"] = "ok" if request.app.state.nats.is_connected else "disconnected"
        ready = all(v == "ok" for v in checks.values())
        return JSONResponse(status_code=200 if ready else 503, content={"ready": ready, "checks": checks})

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/me")
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

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def index() -> HTMLResponse:
        return HTMLResponse(resources.files("spotter_gateway").joinpath("web/index.html").read_text())

    app.include_router(agent.router)
    app.include_router(hitl.router)
    app.include_router(hitl.audit_router)
    return app


def run() -> None:
    settings = GatewaySettings()
    uvicorn.run(
        create_app(settings), host=settings.spotter_http_host, port=settings.spotter_http_port,
        log_level="warning", timeout_graceful_shutdown=5,
    )
