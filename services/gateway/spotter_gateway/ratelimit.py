"""Request rate limits on the turn-starting endpoints (send, confirm, pick, undo): per user and per
organization, sliding-window counters in Redis (the `limits` library), checked before any work —
before the turn lease, before anything is published. A refusal is HTTP 429 `rate_limited` with
`Retry-After`: a stream has not started, so, as for every other refusal before a turn, the answer is
an HTTP status a client, a proxy and a retry policy all understand (the web app shows the code's
localized message)."""

from __future__ import annotations

import math
import time
from typing import Annotated

from fastapi import Depends, Request
from limits import RateLimitItem, parse
from limits.aio.storage import RedisStorage
from limits.aio.strategies import SlidingWindowCounterRateLimiter

from spotter_shared.contracts.commands import Actor
from spotter_shared.errors import ErrorCode, SpotterError

from .deps import Staff


class RateLimited(SpotterError):
    def __init__(self, scope: str, retry_after_s: int) -> None:
        super().__init__(ErrorCode.RATE_LIMITED, f"Too many requests for this {scope}; try again in {retry_after_s} s.")
        self.retry_after_s = retry_after_s


def parse_limit(value: str, setting: str) -> RateLimitItem:
    """"20/minute" → a limit; a malformed setting stops the gateway at start-up, not at a request."""
    try:
        return parse(value)
    except ValueError as exc:
        raise ValueError(f"{setting}={value!r} is not a rate limit such as '20/minute': {exc}") from None


class RateLimits:
    def __init__(self, redis_url: str, per_user: str, per_org: str) -> None:
        self._user = parse_limit(per_user, "SPOTTER_RATE_LIMIT_USER")
        self._org = parse_limit(per_org, "SPOTTER_RATE_LIMIT_ORG")
        # limits' own connection pool over redis-py's asyncio client (the project's Redis client).
        self._limiter = SlidingWindowCounterRateLimiter(RedisStorage(f"async+{redis_url}", implementation="redispy"))

    async def check(self, actor: Actor) -> None:
        for scope, item, key in (("user", self._user, actor.user_id), ("organization", self._org, actor.organization_id)):
            if not await self._limiter.hit(item, "spotter-turns", scope, key):
                stats = await self._limiter.get_window_stats(item, "spotter-turns", scope, key)
                raise RateLimited(scope, max(1, math.ceil(stats.reset_time - time.time())))


async def within_limits(request: Request, actor: Staff) -> Actor:
    await request.app.state.rate_limits.check(actor)
    return actor


LimitedStaff = Annotated[Actor, Depends(within_limits)]
