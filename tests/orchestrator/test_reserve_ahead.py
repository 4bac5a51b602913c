"""ModelLoop's reservation asked for ahead of a call (a new message's first call, whose reservation is
the message's budget verdict): the call takes that reservation instead of asking again, for the very
request it was estimated from, a refusal is answered before the call, and a turn that makes no call
gives a granted one back (released, not left to expire). Billing stands behind a recording fake here; the path through real billing is run by
every e2e turn."""

from __future__ import annotations

import uuid
from typing import Any

from spotter_orchestrator.loop import Failed, LoopContext, ModelLoop, estimate_tokens
from spotter_shared.contracts.billing import Reservation, Settlement, SettleUsage
from spotter_shared.contracts.commands import Actor
from spotter_shared.errors import ErrorCode


class Billing:
    """What the loop asks of billing, recorded; every reservation gets `answer`."""

    def __init__(self, answer: Reservation) -> None:
        self.answer = answer
        self.reserved: list[tuple[str, int | str, int]] = []
        self.fresh_tier: list[bool] = []
        self.settled: list[SettleUsage] = []

    async def reserve_call(self, turn_id: str, call: int | str, *, organization_id: str, model: str,
                           input_tokens: int, max_output_tokens: int, trace_id: str,
                           fresh_tier: bool = False) -> tuple[str, Reservation]:
        self.reserved.append((turn_id, call, input_tokens))
        self.fresh_tier.append(fresh_tier)
        return f"{turn_id}:{call}", self.answer

    async def settle(self, req: SettleUsage, trace_id: str) -> Settlement:
        self.settled.append(req)
        return Settlement(cost_usd_micros=0)


GRANTED = Reservation(ok=True, amount_usd_micros=1234)
REFUSED = Reservation(ok=False, amount_usd_micros=0, code=ErrorCode.AGENT_BUDGET_EXCEEDED.value, message="over the cap")
HISTORY: list[Any] = [{"role": "user", "content": [{"type": "text", "text": "how many members are overdue?"}]}]


def context() -> LoopContext:
    actor = Actor(user_id=str(uuid.uuid4()), organization_id=str(uuid.uuid4()), membership_id=str(uuid.uuid4()), role="owner")
    return LoopContext(
        conversation_id=str(uuid.uuid4()), turn_id=str(uuid.uuid4()), trace_id=uuid.uuid4().hex, actor=actor,
        model="claude-sonnet-4-5", max_tokens=1024, max_rounds=8,
        system=[{"type": "text", "text": "You are Spotter."}], tools=[], specs={},
        emitter=None,  # type: ignore[arg-type] — no call is streamed here
    )


def loop(billing: Billing) -> ModelLoop:
    return ModelLoop(store=None, peers=billing, model=None)  # type: ignore[arg-type]


async def test_the_call_takes_the_reservation_asked_ahead_for_the_request_it_was_estimated_from() -> None:
    billing, ctx = Billing(REFUSED), context()
    model_loop = loop(billing)
    model_loop.reserve_ahead(ctx, HISTORY)
    # Refused, so the call ends before the model; it must not have asked billing a second time.
    outcome = await model_loop.call_model(ctx, HISTORY)
    assert outcome == Failed(ErrorCode.AGENT_BUDGET_EXCEEDED, "over the cap")
    assert billing.reserved == [(ctx.turn_id, 0, estimate_tokens(model_loop._params(ctx, HISTORY)))]
    assert ctx.ahead is None and billing.settled == []


async def test_a_turn_that_makes_no_call_gives_a_granted_reservation_back() -> None:
    billing, ctx = Billing(GRANTED), context()
    model_loop = loop(billing)
    model_loop.reserve_ahead(ctx, HISTORY)
    await model_loop.give_back(ctx)
    assert [(s.reservation_id, s.usage, s.organization_id) for s in billing.settled] == [
        (f"{ctx.turn_id}:0", None, ctx.actor.organization_id)]
    assert ctx.ahead is None
    await model_loop.give_back(ctx)  # nothing left to give back
    assert len(billing.settled) == 1


async def test_a_refused_reservation_is_not_given_back() -> None:
    billing, ctx = Billing(REFUSED), context()
    model_loop = loop(billing)
    model_loop.reserve_ahead(ctx, HISTORY)
    await model_loop.give_back(ctx)
    assert billing.settled == [] and ctx.ahead is None


async def test_a_new_messages_verdict_is_its_first_reservation_asked_with_the_tier_read_fresh() -> None:
    billing, ctx = Billing(REFUSED), context()
    model_loop = loop(billing)
    model_loop.reserve_ahead(ctx, HISTORY, fresh_tier=True)
    assert await model_loop.refused(ctx) == Failed(ErrorCode.AGENT_BUDGET_EXCEEDED, "over the cap")
    assert billing.fresh_tier == [True] and ctx.ahead is None  # nothing held: nothing to give back

    granted, ctx = Billing(GRANTED), context()
    model_loop = loop(granted)
    model_loop.reserve_ahead(ctx, HISTORY, fresh_tier=True)
    assert await model_loop.refused(ctx) is None
    assert ctx.ahead is not None  # still there for the call to take (or to be given back)
    await model_loop.give_back(ctx)
    assert [s.reservation_id for s in granted.settled] == [f"{ctx.turn_id}:0"] and granted.reserved == [
        (ctx.turn_id, 0, estimate_tokens(model_loop._params(ctx, HISTORY)))]


def with_ambient(chars: int) -> list[Any]:
    """HISTORY's message with an ambient block of about `chars` characters before its words, as a message
    rag found something for is sent."""
    block = "<ambient_context untrusted=\"true\">\n" + "- member Saar Cohen\n" * (chars // 20) + "</ambient_context>"
    return [{"role": "user", "content": [{"type": "text", "text": block}, *HISTORY[0]["content"]]}]


async def test_a_draft_reserved_with_room_for_its_ambient_block_is_taken_for_the_request_it_became() -> None:
    billing, ctx = Billing(GRANTED), context()
    model_loop = loop(billing)
    model_loop.reserve_ahead(ctx, HISTORY, fresh_tier=True, room=400)
    assert await model_loop.refused(ctx) is None
    reservation = ctx.ahead.reservation
    full = with_ambient(600)
    model_loop.retarget(ctx, full)
    held = estimate_tokens(model_loop._params(ctx, HISTORY)) + 400
    # One reservation, asked before the block was known, holding for more than the request the call makes.
    assert billing.reserved == [(ctx.turn_id, 0, held)] and billing.fresh_tier == [True]
    assert estimate_tokens(model_loop._params(ctx, full)) <= held
    assert ctx.ahead.reservation is reservation and ctx.ahead.params == model_loop._params(ctx, full)
    await model_loop.give_back(ctx)
    assert [s.reservation_id for s in billing.settled] == [f"{ctx.turn_id}:0"]


async def test_a_request_grown_past_its_room_is_given_back_and_reserved_again_for_itself() -> None:
    billing, ctx = Billing(GRANTED), context()
    model_loop = loop(billing)
    model_loop.reserve_ahead(ctx, HISTORY, fresh_tier=True, room=400)
    assert await model_loop.refused(ctx) is None
    full = with_ambient(4000)
    model_loop.retarget(ctx, full)
    reservation_id, held = await ctx.ahead.reservation
    needed = estimate_tokens(model_loop._params(ctx, full))
    assert needed > estimate_tokens(model_loop._params(ctx, HISTORY)) + 400
    # The draft's hold released (its id forgotten by billing), then the same call held again for this request.
    assert [(s.reservation_id, s.usage) for s in billing.settled] == [(f"{ctx.turn_id}:0", None)]
    assert billing.reserved[1:] == [(ctx.turn_id, 0, needed)] and billing.fresh_tier == [True, True]
    assert reservation_id == f"{ctx.turn_id}:0" and held.ok and ctx.ahead.params == model_loop._params(ctx, full)
