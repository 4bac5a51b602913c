"""FastAPI application factory."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .clock import SimClock
from .config import SimConfig
from .errors import ERROR_TYPES, APIErrorResponse, error_response, new_request_id
from .routes_control import router as control_router
from .routes_messages import router as messages_router
from .state import SimState


def create_app(config: SimConfig | None = None, clock: SimClock | None = None) -> FastAPI:
    """Build the simulator; pass a `SimClock` to control cache expiry from tests."""
    app = FastAPI(title="Spotter model simulator", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.sim = SimState.create(config or SimConfig(), clock)
    app.include_router(messages_router)
    app.include_router(control_router)

    @app.exception_handler(APIErrorResponse)
    async def _api_error(_: Request, exc: APIErrorResponse) -> JSONResponse:
        return error_response(exc.status, exc.error_type, exc.message, new_request_id())

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        # Unknown routes and methods answer in the API's error shape, as the real one does.
        error_type = ERROR_TYPES.get(exc.status_code, "api_error")
        return error_response(exc.status_code, error_type, str(exc.detail), new_request_id())

    return app
