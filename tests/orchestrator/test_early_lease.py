"""A first delivery's lease, asked for beside begin_turn (turns.EarlyLease), against real Redis."""

from __future__ import annotations

import uuid

from redis.asyncio import Redis

from spotter_orchestrator.turns import EarlyLease
from spotter_shared.turnlock import Run, TurnLock


async def test_a_turn_that_runs_keeps_the_lease_it_took_early(redis: Redis) -> None:
    lock = TurnLock(redis, ttl_s=5)
    conversation, turn = str(uuid.uuid4()), str(uuid.uuid4())
    assert await lock.claim(conversation, turn)  # the gateway admitted the turn
    early = EarlyLease(lock, conversation, turn)
    assert await early.result() is Run.OURS
    await early.undo()  # the turn took the answer: nothing to give back
    assert await lock.holder(conversation) == turn
    assert await lock.run(conversation, turn, "another-runner") is Run.RUNNING_ELSEWHERE
    await lock.release(conversation, turn, early.runner)
    assert await lock.holder(conversation) is None


async def test_a_turn_that_does_not_run_here_hands_the_lease_back_to_its_admission(redis: Redis) -> None:
    lock = TurnLock(redis, ttl_s=5)
    conversation, turn = str(uuid.uuid4()), str(uuid.uuid4())
    assert await lock.claim(conversation, turn)
    early = EarlyLease(lock, conversation, turn)
    await early.undo()  # e.g. begin_turn failed or was stopped: the command comes back
    # The lease is the gateway's admission again, expiry kept: no other turn gets in meanwhile, and the
    # redelivered command takes it at once instead of waiting for a dead runner's lease to lapse.
    assert await redis.get(f"spotter:turn-lock:{conversation}") in (turn, turn.encode())
    assert 0 < await redis.pttl(f"spotter:turn-lock:{conversation}") <= 5000
    assert not await lock.claim(conversation, str(uuid.uuid4()))
    assert await lock.run(conversation, turn, "redelivered") is Run.OURS


async def test_an_early_lease_never_takes_another_turns_conversation(redis: Redis) -> None:
    lock = TurnLock(redis, ttl_s=5)
    conversation, turn, other = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())
    assert await lock.claim(conversation, other)
    early = EarlyLease(lock, conversation, turn)
    assert await early.result() is Run.OTHER_TURN  # the turn then asks take(), which answers the same
    await early.undo()
    assert await lock.holder(conversation) == other


async def test_an_early_lease_tells_a_stop_asked_for_before_it(redis: Redis) -> None:
    lock = TurnLock(redis, ttl_s=5)
    conversation, turn = str(uuid.uuid4()), str(uuid.uuid4())
    assert await lock.claim(conversation, turn)
    await lock.request_cancel(turn)
    early = EarlyLease(lock, conversation, turn)
    assert await early.result() is Run.OURS and early.cancelled
    calm = EarlyLease(lock, other := str(uuid.uuid4()), str(uuid.uuid4()))
    assert await calm.result() is Run.OURS and not calm.cancelled
    await lock.release(other, "", None)
