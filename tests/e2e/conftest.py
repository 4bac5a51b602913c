"""End-to-end tests talk to the platform (tests/platform.py) over HTTP+SSE like the browser does."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.platform import Platform

from .client import Sim

__all__ = ["Platform"]  # tests import it from here; the `platform` fixture is tests/conftest.py's


@pytest.fixture
async def http(platform: Platform) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=platform.base_url, timeout=httpx.Timeout(10, read=60)) as client:
        yield client


@pytest.fixture
async def sim(platform: Platform) -> AsyncIterator[Sim]:
    async with httpx.AsyncClient(base_url=platform.sim_url, timeout=10) as client:
        s = Sim(client)
        yield s
