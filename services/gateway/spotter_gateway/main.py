"""Gateway: HTTP + SSE in front of the bus. Stateless; any replica serves any conversation."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import FrameType

import uvicorn
from fastapi import FastAPI
from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from opentelemetry.trace import Span
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.types import ASGIApp
from uvicorn.config import STARTUP_FAILURE

from spotter_shared import telemetry
from spotter_shared.auth import TokenVerifier
from spotter_shared.service import infra
from spotter_shared.turnlock import TurnLock

from . import agent, coach, dev_auth, edges, errors, hitl, ops, sessions, studio, web
from .middleware import RequestGuard
from .ratelimit import RateLimits
from .settings import GatewaySettings
from .streams import LiveEvents


def create_app(settings: GatewaySettings) -> FastAPI:
    broker = edges.create_broker(settings)
    # Built here, not in the lifespan: a malformed limit stops the gateway before it serves anything.
    rate_limits = RateLimits(settings.spotter_rate_limit_user, settings.spotter_rate_limit_org)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        broker.context.set_global(edges.LIVE, live := LiveEvents())
        async with infra("gateway", settings, broker, start_broker=True) as opened:
            await live.subscribe(broker.connection)
            app.state.settings, app.state.broker, app.state.pool, app.state.live = settings, broker, opened.pool, live
            app.state.redis, app.state.turn_lock = opened.redis, TurnLock(opened.redis, settings.spotter_turn_lock_ttl_s)
            app.state.verifier = TokenVerifier(settings)
            rate_limits.use(opened.redis)
            app.state.rate_limits = rate_limits
            yield

    traced = telemetry.instrumented("fastapi")
    # The server spans are OpenTelemetry's instrumentor's (below). FastAPI's own telemetry steps aside for
    # it anyway (it finds the instrumentor's middleware in the stack, on every request): switched off
    # here, a request does not pass through it at all. Without the instrumentor it stays as it was.
    native = {"tracing": False, "metrics": False, "logs": False} if traced else None
    app = FastAPI(title="Spotter gateway", version="0.1.0", lifespan=lifespan, telemetry=native)
    errors.install(app)
    app.add_middleware(RequestGuard, max_body_bytes=settings.spotter_max_body_bytes, requests_total=ops.REQUESTS_TOTAL)
    for router in (ops.router, agent.router, hitl.router, hitl.audit_router, studio.router, sessions.router,
                   coach.router, dev_auth.router):
        app.include_router(router)
    web.install(app, settings)
    # One server span per request, continuing the caller's `traceparent`; the bus carries it on.
    # No span per SSE chunk (send/receive), none for probes and static files.
    if traced:
        FastAPIInstrumentor.instrument_app(app, server_request_hook=_without_query, exclude_spans=["receive", "send"],
                                           excluded_urls="/healthz,/readyz,/metrics,/assets/")
        _without_outer_error_middleware(app)
    return app


def _without_outer_error_middleware(app: FastAPI) -> None:
    """The instrumentor wraps its middleware in one more ServerErrorMiddleware, with no handler, in case
    the instrumentation itself raises; every response's `send` went through it. Without it such an error
    reaches uvicorn, which answers the same plain 500 and logs it. The inner ServerErrorMiddleware (our
    handler, inside the span) is untouched."""
    build = app.build_middleware_stack

    def build_middleware_stack() -> ASGIApp:
        stack = build()
        if isinstance(stack, ServerErrorMiddleware) and stack.handler is None and isinstance(stack.app, OpenTelemetryMiddleware):
            return stack.app
        return stack

    app.build_middleware_stack = build_middleware_stack  # type: ignore[method-assign]


def _without_query(span: Span, scope: dict) -> None:
    # A query string holds what people search for (?q=…): user text stays out of spans.
    if span.is_recording() and scope.get("query_string"):
        for key in ("http.url", "url.full", "url.query", "http.target"):
            span.set_attribute(key, "REDACTED" if key == "url.query" else scope.get("path", ""))


class Server(uvicorn.Server):
    """uvicorn's server, waking once a second instead of ten times. Its main loop sleeps 100 ms at a
    time to look at `should_exit` and, every tenth time, to refresh the Date header: on this VM a wake
    from idle costs a few hundred µs, so the gateway spent ~2 ms of CPU a second doing that at rest.
    Here each round of `on_tick` is a tenth-round one (the header refreshed every time, once a second,
    as before) and a stop signal wakes the loop at once."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._wake: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None

    async def main_loop(self) -> None:
        wake = asyncio.Event()
        self._wake = (asyncio.get_running_loop(), wake)
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 10) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), 1.0)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        if self._wake is not None:  # called by a signal handler, between two steps of the loop's thread
            loop, wake = self._wake
            loop.call_soon_threadsafe(wake.set)


def run() -> None:
    settings = GatewaySettings()
    config = uvicorn.Config(create_app(settings), host=settings.spotter_http_host, port=settings.spotter_http_port,
                            log_level="warning", timeout_graceful_shutdown=5)
    server = Server(config)
    with contextlib.suppress(KeyboardInterrupt):
        server.run()
    if not server.started:
        sys.exit(STARTUP_FAILURE)  # as uvicorn.run: the lifespan failed, nothing was served
