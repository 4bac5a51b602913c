"""The conversation lease against real Redis: one turn per conversation, one runner per turn."""

from __future__ import annotations

import asyncio
import uuid

from redis.asyncio import Redis

from spotter_shared.turnlock import Run, TurnLock


async def test_one_runner_per_turn_and_one_turn_per_conversation(redis: Redis) -> None:
    lock = TurnLock(redis, ttl_s=0.3)
    conversation, turn, other = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())

    assert await lock.claim(conversation, turn)  # the gateway admits the turn
    assert not await lock.claim(conversation, other)
    assert await lock.run(conversation, turn, "a") is Run.OURS  # a runner takes the admission over
    assert await lock.holder(conversation) == turn
    # A second delivery of the same turn stays out while the first runner renews.
    assert await lock.run(conversation, turn, "b") is Run.RUNNING_ELSEWHERE
    assert await lock.run(conversation, turn, "a") is Run.OURS
    assert await lock.run(conversation, other, "c") is Run.OTHER_TURN
    assert not await lock.claim(conversation, turn), "admitting the running turn again is refused too"

    # The first runner dies: its lease lapses, and the redelivered command's runner claims it.
    await asyncio.sleep(0.4)
    assert await lock.run(conversation, turn, "b") is Run.OURS
    await lock.release(conversation, turn, "a")  # a late release by the dead runner changes nothing
    assert await lock.holder(conversation) == turn
    await lock.release(conversation, turn, "b")
    assert await lock.holder(conversation) is None
    assert await lock.claim(conversation, other)


async def test_a_runners_claim_also_reads_whether_its_turn_was_asked_to_stop(redis: Redis) -> None:
    lock = TurnLock(redis, ttl_s=5)
    conversation, turn, other = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())
    assert await lock.claim(conversation, turn)
    assert await lock.run_checking_cancel(conversation, turn, "a") == (Run.OURS, False)
    assert await lock.run_checking_cancel(conversation, turn, "b") == (Run.RUNNING_ELSEWHERE, False)
    await lock.request_cancel(turn)
    assert await lock.run_checking_cancel(conversation, turn, "a") == (Run.OURS, True)
    assert await lock.run_checking_cancel(conversation, other, "c") == (Run.OTHER_TURN, False)
    assert await lock.holder(conversation) == turn  # the same lease as `run` leaves it
