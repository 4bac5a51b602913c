"""`spotter-sim` console entry point."""

from __future__ import annotations

import argparse

import uvicorn

from .app import create_app
from .config import SimConfig


def run() -> None:
    parser = argparse.ArgumentParser(description="Anthropic Messages API simulator for Spotter tests.")
    parser.add_argument("--host", help="overrides SPOTTER_SIM_HOST")
    parser.add_argument("--port", type=int, help="overrides SPOTTER_SIM_PORT")
    args = parser.parse_args()

    config = SimConfig()
    overrides = {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
    if overrides:
        config = config.model_copy(update=overrides)
    # Keep idle connections open like the real API does behind its load balancers; uvicorn's 5 s default
    # races pooled SDK clients (a request sent on a socket the server is closing fails to connect).
    uvicorn.run(create_app(config), host=config.host, port=config.port, log_level=config.log_level, timeout_keep_alive=75)


if __name__ == "__main__":
    run()
