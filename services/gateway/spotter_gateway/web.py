"""The studio web app, as `web/` builds it (`npm run build` → index.html + assets/).

index.html is read on each request and never cached, so a rebuild shows at the next reload; the
assets carry a content hash in their names, so they are cached for good. A gateway without a build
still starts, and says how to make one instead of failing."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from starlette.responses import Response

from .settings import GatewaySettings

# The client-side routes (web/src/router.tsx): a reload or a shared link lands on the app.
APP_ROUTES = (
    "/", "/sign-in", "/members", "/members/{membershipId}", "/schedule", "/programs", "/programs/{programId}",
    "/tasks", "/analytics", "/coach",
)

NOT_BUILT = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Spotter — web app not built</title></head>
<body style="font-family: system-ui, sans-serif; max-width: 40rem; margin: 4rem auto; padding: 0 1rem">
<h1>The web app is not built</h1>
<p>The gateway is running, but it found no <code>index.html</code> in <code>{dist}</code>.</p>
<p>Run <code>make bootstrap</code> (or <code>cd web &amp;&amp; npm run build</code>), then reload this page.</p>
</body></html>
"""


def dist_dir(settings: GatewaySettings) -> Path:
    if settings.spotter_web_dist is not None:
        return settings.spotter_web_dist
    # The package is installed editable, so this is the source tree's web/dist.
    return Path(str(resources.files("spotter_gateway").joinpath("web", "dist")))


class Assets(StaticFiles):
    async def check_config(self) -> None:
        # Not built (yet): each asset is then a 404, and a build made later is served without a restart.
        if self.directory is not None and Path(self.directory).is_dir():
            await super().check_config()

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers["Cache-Control"] = "public, max-age=31536000, immutable"
        return response


def install(app: FastAPI, settings: GatewaySettings) -> None:
    dist = dist_dir(settings)

    async def index() -> HTMLResponse:
        try:
            html = (dist / "index.html").read_text(encoding="utf-8")
        except FileNotFoundError:
            return HTMLResponse(NOT_BUILT.format(dist=dist), status_code=503, headers={"Cache-Control": "no-cache"})
        return HTMLResponse(html, headers={"Cache-Control": "no-cache"})

    for path in APP_ROUTES:
        app.add_api_route(path, index, methods=["GET"], include_in_schema=False, response_class=HTMLResponse)
    # check_dir=False: without a build the gateway still starts; /assets/* are then JSON 404s.
    app.mount("/assets", Assets(directory=dist / "assets", check_dir=False), name="assets")
