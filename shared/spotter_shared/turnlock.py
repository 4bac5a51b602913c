"""One running turn per conversation (SPEC decision 6), as a Redis lease owned by a turn id, and
one runner per turn.

The gateway claims the lease for a turn before publishing its command. The orchestrator that runs
the turn takes it over under its own runner token (`<turn>|<runner>`, one token per delivery),
keeps it alive and releases it at the end. A crashed runner's lease expires by itself, and the
replica that receives the redelivered command claims it then. A second delivery of a turn that is
still running elsewhere (JetStream redelivers a command that waited too long for a worker, a
runner paused past its ack deadline) finds the lease held by another runner and stays out: two
runners of one turn would both write.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable

from redis.asyncio import Redis

log = logging.getLogger(__name__)

_CLAIM = """
local owner = redis.call('GET', KEYS[1])
if owner == false or owner == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""

# ARGV: turn id, ttl ms, runner token. Takes over the gateway's admission claim (the bare turn id),
# renews our own, or claims a lapsed lease; 0 for another turn, 2 for this turn under another runner.
_RUN = """
local owner = redis.call('GET', KEYS[1])
local mine = ARGV[1] .. '|' .. ARGV[3]
if owner == false or owner == ARGV[1] or owner == mine then
  redis.call('SET', KEYS[1], mine, 'PX', ARGV[2])
  return 1
end
if string.sub(owner, 1, string.len(ARGV[1]) + 1) == ARGV[1] .. '|' then
  return 2
end
return 0
"""

# `_RUN` and whether the turn was asked to stop (KEYS[2], `request_cancel`'s key), in one round trip: a
# first delivery takes its lease and learns of a cancel that came before it at once (`run_unless_cancelled`).
_RUN_CHECKING_CANCEL = "local found = (function()" + _RUN + "end)()\nreturn {found, redis.call('EXISTS', KEYS[2])}\n"

# A runner gives the lease back to the admission it took over (the bare turn id, its expiry kept), so a turn
# that did not run here is redelivered to a lease as the gateway left it.
_HAND_BACK = """
if redis.call('GET', KEYS[1]) == ARGV[1] .. '|' .. ARGV[2] then
  redis.call('SET', KEYS[1], ARGV[1], 'KEEPTTL')
  return 1
end
return 0
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class Run(enum.Enum):
    """What a runner's claim found."""

    OURS = 1
    OTHER_TURN = 0
    RUNNING_ELSEWHERE = 2


# The gateway's claim (`_CLAIM`) as a Lua function, for a script that claims the lease together with other
# work in one round trip (the gateway admits a send: its rate limits, then the lease). Same key, same value
# (the bare turn id), same TTL and the same answer: 1 when taken or renewed for this turn, 0 when another holds it.
CLAIM_FUNCTION = """
local function claim_lease(key, turn_id, ttl_ms)
  local owner = redis.call('GET', key)
  if owner == false or owner == turn_id then
    redis.call('SET', key, turn_id, 'PX', ttl_ms)
    return 1
  end
  return 0
end
"""


def lease_key(conversation_id: str) -> str:
    """The Redis key of a conversation's turn lease (the gateway's watchdog reads thousands at once)."""
    return f"spotter:turn-lock:{conversation_id}"


def cancel_key(turn_id: str) -> str:
    """Where a turn's stop request is remembered (`request_cancel`)."""
    return f"spotter:turn-cancel:{turn_id}"


class TurnLock:
    def __init__(self, redis: Redis, ttl_s: float) -> None:
        self._redis = redis
        self._ttl_ms = int(ttl_s * 1000)
        self._claim = redis.register_script(_CLAIM)
        self._run = redis.register_script(_RUN)
        self._run_checking_cancel = redis.register_script(_RUN_CHECKING_CANCEL)
        self._release = redis.register_script(_RELEASE)
        self._hand_back = redis.register_script(_HAND_BACK)

    @property
    def ttl_ms(self) -> int:
        """The lease's time to live, for a claim made by another script (`CLAIM_FUNCTION`)."""
        return self._ttl_ms

    async def claim(self, conversation_id: str, turn_id: str) -> bool:
        """Admit a turn: take (or renew) the lease for it; False when another turn holds it."""
        return bool(await self._claim(keys=[lease_key(conversation_id)], args=[turn_id, self._ttl_ms]))

    async def run(self, conversation_id: str, turn_id: str, runner: str) -> Run:
        """Take (or renew) the lease to run this turn as `runner`."""
        return Run(int(await self._run(keys=[lease_key(conversation_id)], args=[turn_id, self._ttl_ms, runner])))

    async def run_checking_cancel(self, conversation_id: str, turn_id: str, runner: str) -> tuple[Run, bool]:
        """`run`, and whether the turn was asked to stop (`request_cancel`) by the time it ran, in one
        round trip."""
        found, cancelled = await self._run_checking_cancel(keys=[lease_key(conversation_id), cancel_key(turn_id)],
                                                           args=[turn_id, self._ttl_ms, runner])
        return Run(int(found)), bool(cancelled)

    async def take(self, conversation_id: str, turn_id: str, runner: str, *, still_running: Callable[[], Awaitable[bool]],
                   poll_s: float) -> Run | None:
        """`run`, waiting while the turn runs under another runner: a live one finishes it (then None:
        nothing left to do), a dead one's lease lapses within its TTL (then OURS). A copy that waits
        here — its delivery's heartbeat going — instead of going back to JetStream keeps the delivery
        count equal to the crashes the turn lived through. OTHER_TURN is answered at once."""
        while True:
            found = await self.run(conversation_id, turn_id, runner)
            if found is not Run.RUNNING_ELSEWHERE:
                return found
            await asyncio.sleep(poll_s)
            if not await still_running():
                return None

    async def hand_back(self, conversation_id: str, turn_id: str, runner: str) -> None:
        """Undo `run`: the lease is the turn's admission again (as the gateway claimed it), if ours."""
        await self._hand_back(keys=[lease_key(conversation_id)], args=[turn_id, runner])

    async def release(self, conversation_id: str, turn_id: str, runner: str | None = None) -> None:
        owner = f"{turn_id}|{runner}" if runner else turn_id
        await self._release(keys=[lease_key(conversation_id)], args=[owner])

    async def holder(self, conversation_id: str) -> str | None:
        """The turn that holds the conversation, if any."""
        owner = await self._redis.get(lease_key(conversation_id))
        return owner.split("|", 1)[0] if owner else None

    async def request_cancel(self, turn_id: str) -> None:
        """Remembered for an hour, so a replica that picks the turn up later (after a crash, or
        a command still queued in JetStream) stops it too."""
        await self._redis.set(cancel_key(turn_id), "1", ex=3600)

    async def cancel_requested(self, turn_id: str) -> bool:
        return bool(await self._redis.exists(cancel_key(turn_id)))


class LeaseKeeper:
    """Keeps a running lease alive until `stop()`: renews every `every_s`, and is stopped by an event,
    never by cancelling it midway through a Redis call — a call cancelled while it waited for its
    reply could leave its connection to answer the next caller (the release) with nothing, so the
    release waited forever (tests/replicas: 2 of ~9 rolling restarts). A renewal in flight finishes
    before `stop()` returns, so it cannot take the lease back after the release."""

    def __init__(self, renew: Callable[[], Awaitable[None]], every_s: float) -> None:
        self._renew = renew
        self._every_s = every_s
        self._stopped = asyncio.Event()
        self._task = asyncio.create_task(self._keep())

    async def _keep(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._stopped.wait(), self._every_s)
                return
            except TimeoutError:
                pass
            try:
                await self._renew()
            except Exception as exc:  # noqa: BLE001 — Redis away for a moment: the next renewal may do
                log.warning("could not renew a lease: %r", exc)

    async def stop(self) -> None:
        self._stopped.set()
        await asyncio.shield(self._task)
