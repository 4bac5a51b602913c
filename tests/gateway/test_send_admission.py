"""A send's admission in one Redis script: the `limits` library's sliding window counters (the same keys,
the same rule, the same Retry-After) for the user and the organization, then the turn lease, claimed as
turnlock claims it — against real Redis, no gateway."""

from __future__ import annotations

import math
import time
import uuid

import pytest
from limits import parse
from limits.aio.storage import RedisStorage
from limits.aio.strategies import SlidingWindowCounterRateLimiter
from redis.asyncio import Redis

from spotter_cli.devstack import StackUrls
from spotter_gateway.ratelimit import NAMESPACE, Lease, RateLimited, RateLimits
from spotter_shared.contracts.commands import Actor
from spotter_shared.turnlock import TurnLock


def actor(org: str | None = None) -> Actor:
    return Actor(user_id=str(uuid.uuid4()), organization_id=org or str(uuid.uuid4()), membership_id=str(uuid.uuid4()),
                 role="owner", locale="en")


def limits(redis: Redis, user: str, org: str) -> RateLimits:
    rate_limits = RateLimits(user, org)
    rate_limits.use(redis)
    return rate_limits


async def test_the_counters_are_the_limits_librarys(redis: Redis, stack: StackUrls) -> None:
    """Key for key and rule for rule: a request counted by either counts for both, and both refuse at
    the same request with the same Retry-After."""
    ours = limits(redis, "5/minute", "1000/minute")
    library = SlidingWindowCounterRateLimiter(RedisStorage(f"async+{stack.redis_url}", implementation="redispy"))
    item = parse("5/minute")
    person = actor()
    await ours.check(person)
    assert await library.hit(item, NAMESPACE, "user", person.user_id)
    await ours.check(person)
    assert await library.hit(item, NAMESPACE, "user", person.user_id)
    await ours.check(person)  # the fifth
    assert not await library.hit(item, NAMESPACE, "user", person.user_id)
    with pytest.raises(RateLimited) as refused:
        await ours.check(person)
    stats = await library.get_window_stats(item, NAMESPACE, "user", person.user_id)
    # Asked a moment later, the library's answer can have crossed a second.
    assert refused.value.retry_after_s - max(1, math.ceil(stats.reset_time - time.time())) in (0, 1)
    assert "user" in refused.value.message


async def test_a_refusal_by_the_user_limit_does_not_count_against_the_organization(redis: Redis) -> None:
    org = str(uuid.uuid4())
    rate_limits = limits(redis, "1/minute", "2/minute")
    first, second = actor(org), actor(org)
    await rate_limits.check(first)
    for _ in range(3):
        with pytest.raises(RateLimited):
            await rate_limits.check(first)
    await rate_limits.check(second)  # the organization's second request: the refused ones did not count
    with pytest.raises(RateLimited) as refused:
        await rate_limits.check(actor(org))
    assert "organization" in refused.value.message and 1 <= refused.value.retry_after_s <= 60


async def test_the_lease_is_claimed_as_turnlock_claims_it_and_only_when_admitted(redis: Redis) -> None:
    lock = TurnLock(redis, ttl_s=30)
    rate_limits = limits(redis, "2/minute", "100/minute")
    person, conversation, turn, other = actor(), str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())

    assert await rate_limits.admit(person, Lease(conversation, turn, lock.ttl_ms)) is True
    assert await lock.holder(conversation) == turn
    assert 29_000 < await redis.pttl(f"spotter:turn-lock:{conversation}") <= 30_000
    # Another turn of the same conversation: admitted by the limits, refused by the lease (busy).
    assert await rate_limits.admit(person, Lease(conversation, other, lock.ttl_ms)) is False
    assert await lock.holder(conversation) == turn
    # Over the limit: refused before the lease is looked at.
    free = str(uuid.uuid4())
    with pytest.raises(RateLimited):
        await rate_limits.admit(person, Lease(free, other, lock.ttl_ms))
    assert await lock.holder(free) is None
    # Nothing asked: nothing claimed.
    assert await limits(redis, "2/minute", "100/minute").admit(actor(), None) is None
    # The orchestrator takes the gateway's claim over as before.
    assert await lock.claim(conversation, turn)  # the same turn renews
    await lock.release(conversation, turn)
    assert await lock.holder(conversation) is None
