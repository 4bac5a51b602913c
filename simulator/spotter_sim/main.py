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
    uvicorn.run(create_app(config), host=config.host, port=config.port, log_level=config.log_level)


if __name__ == "__main__":
    run()
