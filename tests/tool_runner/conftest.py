from __future__ import annotations

import asyncpg
import pytest

from spotter_tool_runner.runner import ToolRunner
from spotter_tool_runner.tools import REGISTRY

from tests.factories import Studio, make_studio

SAARS = [
    {
        "full_name": "Saar Cohen",
        "plan": "Unlimited",
        "payment_status": "paid",
        "phone": "+972-50-1111111",
        "last_visit_days_ago": 3,
    },
    {"full_name": "Saar Levi", "plan": "8 per month", "payment_status": "overdue", "last_visit_days_ago": 40},
    {"full_name": "Dani Mizrahi", "plan": "Unlimited", "payment_status": "due", "status": "paused"},
]


@pytest.fixture
async def studio(pool: asyncpg.Pool) -> Studio:
    return await make_studio(pool, extra_members=SAARS)


@pytest.fixture
async def other_studio(pool: asyncpg.Pool) -> Studio:
    """A second organization with look-alike members that must never leak into the first."""
    return await make_studio(pool, extra_members=SAARS)


@pytest.fixture(scope="session")
def runner(pool: asyncpg.Pool) -> ToolRunner:
    return ToolRunner(pool, REGISTRY)
