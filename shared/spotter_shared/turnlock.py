"""One running turn per conversation (SPEC decision 6), as a Redis lease owned by a turn id.

The gateway claims the lease before publishing a command; the orchestrator that runs the turn
keeps it alive and releases it at the end. A crashed orchestrator's lease expires by itself,
and the replica that receives the redelivered command takes it over because the owner matches.
"""

from __future__ import annotations

from redis.asyncio import Redis

_CLAIM = """
local owner = redis.call('GET', KEYS[1])
if owner == false or owner == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
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


def _key(conversation_id: str) -> str:
    return f"spotter:turn-lock:{conversation_id}"


class TurnLock:
    def __init__(self, redis: Redis, ttl_s: float) -> None:
        self._redis = redis
        self._ttl_ms = int(ttl_s * 1000)
        self._claim = redis.register_script(_CLAIM)
        self._release = redis.register_script(_RELEASE)

    async def claim(self, conversation_id: str, turn_id: str) -> bool:
        """Take (or renew) the lease for this turn; False when another turn holds it."""
        return bool(await self._claim(keys=[_key(conversation_id)], args=[turn_id, self._ttl_ms]))

    async def release(self, conversation_id: str, turn_id: str) -> None:
        await self._release(keys=[_key(conversation_id)], args=[turn_id])

    async def holder(self, conversation_id: str) -> str | None:
        return await self._redis.get(_key(conversation_id))

    async def request_cancel(self, turn_id: str) -> None:
        """Remembered for an hour, so a replica that picks the turn up later (after a crash, or
        a command still queued in JetStream) stops it too."""
        await self._redis.set(f"spotter:turn-cancel:{turn_id}", "1", ex=3600)

    async def cancel_requested(self, turn_id: str) -> bool:
        return bool(await self._redis.exists(f"spotter:turn-cancel:{turn_id}"))
