"""Spotter model simulator: an Anthropic Messages API stand-in for tests."""

from .app import create_app
from .clock import SimClock
from .config import SimConfig

__all__ = ["SimClock", "SimConfig", "create_app"]
