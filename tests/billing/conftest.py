"""Billing fixtures: a Billing core over the session's real Postgres and Redis, a clock tests can
move, and a conversation row to settle against."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from redis.asyncio import Redis

from spotter_billing.core import Billing
from spotter_billing.pricing import RateCard
from tests.factories import Studio

HOLD_TTL = timedelta(minutes=10)


class FakeClock:
    """A clock that only moves when told: hold expiry is tested without sleeping."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


@pytest.fixture(scope="session")
def rates() -> RateCard:
    return RateCard.load()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(datetime.now(UTC))


@pytest.fixture
def billing(pool: asyncpg.Pool, redis: Redis, rates: RateCard, clock: FakeClock) -> Billing:
    return Billing(pool, redis, rates, clock, hold_ttl=HOLD_TTL)


@pytest.fixture
def new_conversation(pool: asyncpg.Pool) -> Callable:
    async def create(studio: Studio, model: str = "claude-sonnet-5-5") -> str:
        conversation_id = str(uuid.uuid4())
        await pool.execute(
            "INSERT INTO ai_conversations (id, organization_id, user_id, model) VALUES ($1, $2, $3, $4)",
            conversation_id, studio.org.id, studio.owner.user_id, model,
        )
        return conversation_id

    return create
