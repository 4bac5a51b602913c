"""Request rate limits on the turn-starting endpoints (send, confirm, pick, undo): per user and per
organization, sliding-window counters in Redis, checked before any work — before the turn lease,
before anything is published. A refusal is HTTP 429 `rate_limited` with `Retry-After`: a stream has
not started, so, as for every other refusal before a turn, the answer is an HTTP status a client, a
proxy and a retry policy all understand (the web app shows the code's localized message).

The counters are the `limits` library's sliding window counter, kept key for key and rule for rule
(its `acquire_sliding_window.lua`, its `get_window_stats` for Retry-After), but run as one script of
ours: both limits in one round trip, and for a send the conversation's turn lease too (turnlock's
claim, taken only once both limits let the request through) — one Redis round trip where there were
three, and no second connection pool."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from limits import RateLimitItem, parse
from redis.asyncio import Redis

from spotter_shared.contracts.commands import Actor
from spotter_shared.errors import ErrorCode, SpotterError
from spotter_shared.turnlock import CLAIM_FUNCTION, lease_key

from .deps import Staff

NAMESPACE = "spotter-turns"
# The `limits` library's Redis key prefix: the counters are the keys it used, so a gateway running this
# and one running the library (a rolling deploy) count together.
KEY_PREFIX = "LIMITS"


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


# KEYS: the user's previous and current window, the organization's, then (optional) the lease.
# ARGV: user limit, user window (s), organization limit, organization window (s), then (with the lease)
# the turn id and the lease's TTL (ms).
# Answers {0, claimed} (claimed: 1 taken, 0 held by another turn, -1 not asked), or, refused,
# {1 (user) | 2 (organization), previous count, previous TTL ms, current count, current TTL ms}.
# `window` and `take` are limits' acquire_sliding_window.lua (amount 1), split in two so that a refusal
# answers with the window as limits' get_window_stats reads it (sliding_window.lua) — no second script.
_ADMIT = CLAIM_FUNCTION + """
local function window(prev, cur, expiry)
  local current_ttl = tonumber(redis.call('pttl', cur))
  if current_ttl > 0 and current_ttl < expiry then
    -- Current window expired, shift it to the previous window
    redis.call('rename', cur, prev)
    redis.call('set', cur, 0, 'PX', current_ttl + expiry)
  end
  local previous_count = tonumber(redis.call('get', prev)) or 0
  local previous_ttl = tonumber(redis.call('pttl', prev)) or 0
  local current_count = tonumber(redis.call('get', cur)) or 0
  current_ttl = tonumber(redis.call('pttl', cur)) or 0
  if previous_ttl <= 0 then previous_ttl = 0 end
  if current_ttl <= 0 then current_ttl = 0 end
  return previous_count, previous_ttl, current_count, current_ttl
end

local function take(prev, cur, limit, expiry_s)
  local expiry = expiry_s * 1000
  local pc, pt, cc, ct = window(prev, cur, expiry)
  if 1 > limit or math.floor(pc * pt / expiry) + cc + 1 > limit then
    return {pc, pt, cc, ct}
  end
  if redis.call('exists', cur) == 1 then
    redis.call('incrby', cur, 1)
  else
    redis.call('set', cur, 1, 'PX', expiry * 2)
  end
  return nil
end

local refused = take(KEYS[1], KEYS[2], tonumber(ARGV[1]), tonumber(ARGV[2]))
if refused then return {1, refused[1], refused[2], refused[3], refused[4]} end
refused = take(KEYS[3], KEYS[4], tonumber(ARGV[3]), tonumber(ARGV[4]))
if refused then return {2, refused[1], refused[2], refused[3], refused[4]} end
if KEYS[5] then return {0, claim_lease(KEYS[5], ARGV[5], ARGV[6])} end
return {0, -1}
"""

_SCOPES = {1: "user", 2: "organization"}


def _keys(item: RateLimitItem, scope: str, key: str) -> tuple[str, str]:
    """limits' keys for one counter: the previous window's, then the current one's."""
    current = f"{KEY_PREFIX}:{{{item.key_for(NAMESPACE, scope, key)}}}"
    return f"{current}/-1", current


def retry_after(item: RateLimitItem, previous_count: int, previous_ttl_ms: int, current_count: int, current_ttl_ms: int) -> int:
    """Seconds until the window lets a request through again, as limits' get_window_stats computes it."""
    expiry = item.get_expiry()
    previous_reset_in = current_reset_in = math.inf
    if previous_count:
        previous_reset_in = (max(0, previous_ttl_ms) / 1000) % (expiry / previous_count)
    if current_count:
        current_reset_in = (max(0, current_ttl_ms) / 1000) % expiry
    reset_in = min(previous_reset_in, current_reset_in)
    return max(1, math.ceil(reset_in if reset_in != math.inf else 0))


@dataclass(frozen=True)
class Lease:
    """The turn lease to claim once the limits let the request through."""

    conversation_id: str
    turn_id: str
    ttl_ms: int


class RateLimits:
    def __init__(self, per_user: str, per_org: str) -> None:
        self._user = parse_limit(per_user, "SPOTTER_RATE_LIMIT_USER")
        self._org = parse_limit(per_org, "SPOTTER_RATE_LIMIT_ORG")
        self._script = None

    def use(self, redis: Redis) -> None:
        """The Redis the counters (and the leases) live in: the service's client, once it is open."""
        self._script = redis.register_script(_ADMIT)

    async def check(self, actor: Actor) -> None:
        """Count a request against both limits; RateLimited when either refuses it."""
        await self.admit(actor, None)

    async def admit(self, actor: Actor, lease: Lease | None) -> bool | None:
        """Count a request against the user's limit, then the organization's (a request the user's limit
        refuses is not counted against the organization), and then, when both let it through, claim
        `lease` — all in one round trip. RateLimited when a limit refuses; otherwise whether the lease was
        claimed (None when none was asked for)."""
        assert self._script is not None, "RateLimits.use(redis) first"
        user_prev, user_cur = _keys(self._user, "user", actor.user_id)
        org_prev, org_cur = _keys(self._org, "organization", actor.organization_id)
        keys = [user_prev, user_cur, org_prev, org_cur]
        args: list[int | str] = [self._user.amount, self._user.get_expiry(), self._org.amount, self._org.get_expiry()]
        if lease is not None:
            keys.append(lease_key(lease.conversation_id))
            args += [lease.turn_id, lease.ttl_ms]
        answer = [int(v) for v in await self._script(keys=keys, args=args)]
        if answer[0]:
            item = self._user if answer[0] == 1 else self._org
            raise RateLimited(_SCOPES[answer[0]], retry_after(item, *answer[1:5]))
        return None if answer[1] < 0 else bool(answer[1])


async def within_limits(request: Request, actor: Staff) -> Actor:
    await request.app.state.rate_limits.check(actor)
    return actor


LimitedStaff = Annotated[Actor, Depends(within_limits)]
