"""driveModelLoop as an explicit state machine: each step is a small function returning the only
steps that may follow it (CallModel → RunTools | Finished | Failed; RunTools → CallModel)."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from spotter_shared import metrics, observability
from spotter_shared.contracts.billing import Reservation, SettleUsage
from spotter_shared.contracts.commands import Actor
from spotter_shared.contracts.events import (
    ConfirmationPending, DisambiguationPending, Done, MessageDone, PickCandidate, TextDelta, ToolError, TurnUsage,
)
from spotter_shared.contracts.tools import ExecuteTool, ToolGate, ToolOutcome, ToolSpec
from anthropic.types import TextBlockParam, ToolParam

from spotter_shared.errors import ErrorCode, RemoteError

from .calls import History, ToolCall, text_of, tool_calls
from .emitter import Emitter
from .messages_http import BodyEncoder
from .model import ModelClient, ModelReply, ProviderError
from .peers import Peers
from .prompt import merge_consecutive, repair_replay, validate_replay, with_cached_tail, with_recent_activity
from .store import Store

log = logging.getLogger(__name__)


# Steps ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CallModel:
    pass


@dataclass(frozen=True)
class RunTools:
    message_id: str
    calls: tuple[ToolCall, ...]


@dataclass(frozen=True)
class Finished:
    stop_reason: str | None
    # The turn's usage as its last reply's statement left it (StoredReply); None when this attempt
    # made no call, and the turn's `done` reads it.
    usage: TurnUsage | None = None
    # The text of the replies this attempt's calls made, joined: the title's input (Summaries.title).
    # None when this attempt did not end the turn on a reply of its own.
    text: str | None = None


@dataclass(frozen=True)
class Failed:
    code: ErrorCode
    message: str


@dataclass(frozen=True)
class Suspended:
    """A tool of the batch waits for a human (confirmation or pick)."""

    tool_use_id: str


Step = CallModel | RunTools | Finished | Failed | Suspended
Outcome = Finished | Failed | Suspended


@dataclass
class LoopContext:
    """Everything fixed for the duration of one turn."""

    conversation_id: str
    turn_id: str
    trace_id: str
    actor: Actor
    model: str
    max_tokens: int
    max_rounds: int
    system: list[TextBlockParam]
    tools: list[ToolParam]
    specs: dict[str, ToolSpec]
    emitter: Emitter
    # The caller's <recent-activity> block (seed 004), rendered when the turn starts; None when they
    # are not working on a task.
    activity: str | None = None
    rounds: int = 0
    # The turn's usage as its row has it after `rounds` calls (begin_turn's row, then each reply's
    # statement): the usage of the `done` stored with the turn's last reply. None when not known.
    turn_usage: TurnUsage | None = None
    replies: list[str] = field(default_factory=list)  # the text of each reply of this attempt's calls
    already_announced: set[str] = field(default_factory=set)  # tool ids whose tool_started was logged
    already_completed: set[str] = field(default_factory=set)
    already_pending: set[str] = field(default_factory=set)  # ids whose *_pending event was logged
    # A write the turn started beside its preparation (the user's message): done before the model is called.
    pending_write: asyncio.Task[Any] | None = None
    # The next call's request and its reservation, asked for ahead of the call (ModelLoop.reserve_ahead).
    ahead: Ahead | None = None

    async def written(self) -> None:
        if self.pending_write is not None:
            pending, self.pending_write = self.pending_write, None
            await pending


@dataclass(frozen=True)
class Ahead:
    params: dict[str, Any]
    reservation: asyncio.Future[tuple[str, Reservation]]
    input_tokens: int  # the prompt estimate the reservation holds for (params' own, or more: `room`)
    fresh_tier: bool = False


class ModelLoop:
    def __init__(self, store: Store, peers: Peers, model: ModelClient) -> None:
        self._store = store
        self._peers = peers
        self._model = model

    async def drive(self, ctx: LoopContext, history: History, step: Step) -> Outcome:
        while True:
            match step:
                case CallModel():
                    if ctx.rounds >= ctx.max_rounds:
                        # MAX_TURNS: the assistant's last message stands.
                        return Finished(stop_reason="max_turns")
                    step = await self.call_model(ctx, history)
                case RunTools():
                    step = await self.run_tools(ctx, history, step)
                case Finished() | Failed() | Suspended():
                    return step

    # CallModel ----------------------------------------------------------------------------------
    def reserve_ahead(self, ctx: LoopContext, history: History, *, fresh_tier: bool = False, room: int = 0) -> None:
        """Ask for the next call's reservation now, before the turn gets to the call (a new message's
        first call: its reservation is the message's budget verdict, `refused`). For a request that
        cannot change before the call, or that can grow by at most `room` tokens of estimate before it
        (`retarget`): the call takes it (`call_model`); a turn that makes no call gives it back
        (`give_back`)."""
        params = self._params(ctx, history)
        tokens = estimate_tokens(params) + room
        ctx.ahead = Ahead(params, asyncio.ensure_future(self._reserve(ctx, params, fresh_tier=fresh_tier, input_tokens=tokens)),
                          tokens, fresh_tier)

    def retarget(self, ctx: LoopContext, history: History) -> None:
        """The request the call will make, now that it is known, under the reservation asked ahead for a
        draft of it (`reserve_ahead`'s `room`): kept when it holds for this request's estimate; given back
        and asked for again, for this request, when it does not (a draft that grew past its room)."""
        ahead = ctx.ahead
        assert ahead is not None
        params = self._params(ctx, history)
        tokens = estimate_tokens(params)
        if tokens <= ahead.input_tokens:
            ctx.ahead = Ahead(params, ahead.reservation, ahead.input_tokens, ahead.fresh_tier)
        else:
            ctx.ahead = Ahead(params, asyncio.ensure_future(self._reserve_again(ctx, ahead, params, tokens)), tokens,
                              ahead.fresh_tier)

    async def _reserve_again(self, ctx: LoopContext, ahead: Ahead, params: dict[str, Any],
                             tokens: int) -> tuple[str, Reservation]:
        reservation_id, held = await ahead.reservation
        if held.ok:
            # Released, the id is forgotten (billing), so the same call is held again under it, for more.
            await self._settle(ctx, reservation_id, None)
        return await self._reserve(ctx, params, fresh_tier=ahead.fresh_tier, input_tokens=tokens)

    async def refused(self, ctx: LoopContext) -> Failed | None:
        """The reservation asked for ahead, awaited: why the call may not be made, or None when it was
        granted (and stays asked for, for the call to take). A refusal holds nothing to give back."""
        assert ctx.ahead is not None
        try:
            _, held = await ctx.ahead.reservation
        except RemoteError as exc:
            ctx.ahead = None
            return _invalid(exc)
        failed = _refusal(held)
        if failed is not None:
            ctx.ahead = None
        return failed

    async def give_back(self, ctx: LoopContext) -> None:
        """Release a reservation asked for ahead of a call that will not be made."""
        ahead, ctx.ahead = ctx.ahead, None
        if ahead is None:
            return
        try:
            reservation_id, held = await ahead.reservation
        except Exception:  # noqa: BLE001 — nothing was held (or billing cannot say): nothing to give back
            return
        if held.ok:
            await self._settle(ctx, reservation_id, None)

    def _params(self, ctx: LoopContext, history: History) -> dict[str, Any]:
        messages = self._replayable(ctx, history)
        return {
            "model": ctx.model,
            "max_tokens": ctx.max_tokens,
            "system": ctx.system,
            "tools": ctx.tools,
            "messages": with_recent_activity(with_cached_tail(messages), ctx.activity),
        }

    async def _reserve(self, ctx: LoopContext, params: dict[str, Any], *, fresh_tier: bool = False,
                       input_tokens: int | None = None) -> tuple[str, Reservation]:
        # ctx.rounds starts at the turn's recorded model calls, so a redelivered attempt repeats the
        # id of the call its dead predecessor had in flight and takes over that call's hold.
        return await self._peers.reserve_call(
            ctx.turn_id, ctx.rounds, organization_id=ctx.actor.organization_id, model=ctx.model,
            input_tokens=estimate_tokens(params) if input_tokens is None else input_tokens,
            max_output_tokens=ctx.max_tokens, trace_id=ctx.trace_id, fresh_tier=fresh_tier,
        )

    async def call_model(self, ctx: LoopContext, history: History) -> RunTools | Finished | Failed:
        ahead, ctx.ahead = ctx.ahead, None
        params = ahead.params if ahead is not None else self._params(ctx, history)
        try:
            reservation_id, held = await (ahead.reservation if ahead is not None else self._reserve(ctx, params))
        except RemoteError as exc:
            await ctx.written()
            return _invalid(exc)
        if (failed := _refusal(held)) is not None:
            await ctx.written()
            return failed
        ctx.rounds += 1
        ctx.emitter.mark()
        # The model is called while the turn's pending write (the user's message) lands: the call's
        # first token is a model's time-to-first-token away. Nothing the call yields is stored or
        # published before that write is done: not its text (the emitter waits for it), not its reply.
        if ctx.pending_write is not None:
            ctx.emitter.after(ctx.pending_write)
        try:
            reply = await self._model.stream(params, ctx.emitter.text)
        except ProviderError as exc:
            await self._settle(ctx, reservation_id, None)
            return Failed(exc.code, exc.message)
        except asyncio.CancelledError:
            # Stopped by the user: release the hold rather than leave it until it expires.
            await asyncio.shield(self._settle(ctx, reservation_id, None))
            raise
        await ctx.written()
        tail = await ctx.emitter.take_text()
        usage = await self._settle(ctx, reservation_id, reply)
        calls = tool_calls(reply.content, ctx.specs)
        # The message, the call's usage on the turn and its message_done: one statement, then published,
        # with the text the emitter still held before message_done. A reply that ends the turn (no tool to
        # run) takes the turn's `done` and status with it; one whose first call runs next (no person to ask
        # first), that call's tool_started (run_tools would emit it next).
        message_id = str(uuid.uuid4())
        done = MessageDone(message_id=message_id, stop_reason=reply.stop_reason)
        last = None
        if not calls and ctx.turn_usage is not None:
            turn_done = Done(conversation_id=ctx.conversation_id, usage=_plus(ctx.turn_usage, usage))
            last = (ctx.rounds - 1, turn_done.model_dump(mode="json", exclude_none=True))
        first = calls[0] if calls else None
        started = first.started() if first is not None and not first.needs_human and first.id not in ctx.already_announced else None
        text = TextDelta(delta=tail) if tail else None
        stored = await self._store.append_reply(
            ctx.conversation_id, ctx.turn_id, reply.content, stop_reason=reply.stop_reason, usage=usage,
            model=ctx.model, message_id=message_id, done=done.model_dump(mode="json", exclude_none=True),
            done_event=last, started_event=started.model_dump(mode="json", exclude_none=True) if started else None,
            text_event=text.model_dump(mode="json", exclude_none=True) if text else None,
        )
        ctx.turn_usage = stored.turn_usage
        if stored.done_seq is not None:
            assert last is not None
            ctx.emitter.ended(stored.done_seq, last[1])
        history.append({"role": "assistant", "content": reply.content})
        ctx.replies.append(text_of(reply.content))
        ctx.emitter.mark()
        if text is not None and stored.text_seq is not None:
            await ctx.emitter.announce(text, stored.text_seq)
        await ctx.emitter.announce(done, stored.seq)
        if started is not None and stored.started_seq is not None:
            ctx.already_announced.add(started.tool_use_id)
            await ctx.emitter.announce(started, stored.started_seq)
        # Any tool_use must be answered, whatever the stop reason, or the next request is invalid.
        if calls:
            return RunTools(message_id=message_id, calls=calls)
        return Finished(stop_reason=reply.stop_reason, usage=stored.turn_usage, text=" ".join(ctx.replies).strip())

    def _replayable(self, ctx: LoopContext, history: History) -> History:
        messages = merge_consecutive(history)
        violations = validate_replay(messages)
        if not violations:
            return messages
        observability.ReplayViolation(
            trace_id=ctx.trace_id, org_id=ctx.actor.organization_id, code="replay_integrity_violation",
            violations=len(violations), reasons=sorted({v.reason for v in violations}), repaired=True,
            blocks=[[b.get("type") for b in m["content"]] for m in messages],
        ).log(log)
        return repair_replay(messages, violations)

    async def _settle(self, ctx: LoopContext, reservation_id: str, reply: ModelReply | None) -> TurnUsage:
        settlement = await self._peers.settle(
            SettleUsage(
                reservation_id=reservation_id, organization_id=ctx.actor.organization_id, user_id=ctx.actor.user_id,
                conversation_id=ctx.conversation_id, model=ctx.model, usage=reply.usage if reply else None,
                count_message=ctx.rounds == 1 and reply is not None,
            ),
            ctx.trace_id,
        )
        if reply is None:
            return TurnUsage()
        metrics.MODEL_COST.labels(ctx.model).inc(settlement.cost_usd_micros)
        u = reply.usage
        # Added to the turn with the reply's message (Store.append_reply).
        return TurnUsage(
            input_tokens=u.input_tokens, output_tokens=u.output_tokens, cache_read_tokens=u.cache_read_tokens,
            cache_creation_tokens=u.cache_write_5m_tokens + u.cache_write_1h_tokens,
            cost_usd_micros=settlement.cost_usd_micros,
        )

    # RunTools ---------------------------------------------------------------------------------
    async def run_tools(self, ctx: LoopContext, history: History, step: RunTools) -> CallModel | Suspended:
        """Run the batch in order until the first tool that needs a human; that one and every later
        one are recorded `pending` (seed 000: they can't be partially fed back)."""
        known: dict[str, ToolOutcome] = {}
        last: ToolCall | None = None
        for index, call in enumerate(step.calls):
            if call.needs_human:
                await self._hold_all(ctx, step, step.calls[index:], known)
                break
            # The batch's last call reports its tool_completed with the batch's tool_result (advance).
            last = call if index == len(step.calls) - 1 else None
            outcome = await self._run_one(ctx, step.message_id, call, report=last is None)
            if outcome.status == "pending":
                # A pack's rule asked a person to confirm this call: it waits like a declared gate.
                await self._hold_all(ctx, step, step.calls[index + 1:], known)
                last = None
                break
            known[call.id] = outcome
        return await self.advance(ctx, history, step, known, unreported=last)

    async def _hold_all(self, ctx: LoopContext, step: RunTools, calls: Sequence[ToolCall],
                        known: dict[str, ToolOutcome]) -> None:
        for later in calls:
            held = await self._execute(ctx, step.message_id, later, hold=True)
            if held.status != "pending":
                known[later.id] = held  # refused before it could wait (e.g. invalid input)

    async def advance(self, ctx: LoopContext, history: History, step: RunTools,
                      known: dict[str, ToolOutcome] | None = None, unreported: ToolCall | None = None) -> CallModel | Suspended:
        """Resolve the batch in order: a pending normal tool runs once everything before it is
        resolved, a pending gated tool suspends the turn. When all are resolved, one merged
        tool_result message goes back to the model. `known` are outcomes this turn already has;
        the rest are asked of the tool-runner, which owns the calls' records. `unreported`: a call of
        `known` (the batch's last) whose tool_completed is stored with the tool_result message."""
        outcomes = dict(known or {})
        missing = [call.id for call in step.calls if call.id not in outcomes]
        states = await self._peers.calls(ctx.conversation_id, missing, ctx.actor) if missing else {}
        for call in step.calls:
            if call.id in outcomes:
                continue
            state = states.get(call.id)
            gate = state.gate if state is not None else None
            if call.needs_human and state is None:
                # Never run a gated tool that was not held (a crash between holds): hold it now.
                held = await self._execute(ctx, step.message_id, call, hold=True)
                if held.status != "pending":
                    outcomes[call.id] = held
                    continue
                gate = held.gate
            elif state is not None and state.outcome is not None:
                outcomes[call.id] = state.outcome
                continue
            if call.waits_for_person(state) and (state is None or state.status == "pending"):
                await self._announce_pending(ctx, call, gate)
                return Suspended(tool_use_id=call.id)
            # A normal tool, or a gated one already approved ('running' after a crash): run it.
            outcome = await self._run_one(ctx, step.message_id, call)
            if outcome.status == "pending":  # a pack's rule asks a person first
                await self._announce_pending(ctx, call, outcome.gate)
                return Suspended(tool_use_id=call.id)
            outcomes[call.id] = outcome
        results = [call.result_block(outcomes.get(call.id)) for call in step.calls]
        if unreported is not None and unreported.id not in ctx.already_completed:
            # One statement for both (nothing comes between them): the event, then the message the model reads.
            completed = unreported.completed(outcomes[unreported.id])
            await ctx.emitter.emit_with(completed, lambda data: self._store.append_results(
                ctx.conversation_id, ctx.turn_id, results, event=(completed.type, data)))
        else:
            await self._store.append_message(ctx.conversation_id, ctx.turn_id, "tool_result", results)
        history.append({"role": "user", "content": results})
        return CallModel()

    async def _announce_pending(self, ctx: LoopContext, call: ToolCall, gate: ToolGate | None = None) -> None:
        assert call.spec is not None  # only gated calls wait, and a gated call has a spec
        if call.is_picker:
            event: ConfirmationPending | DisambiguationPending = DisambiguationPending(
                tool_use_id=call.id, kind=str(call.input.get("kind", "item")),
                prompt=str(call.input.get("prompt", "Which one?")),
                candidates=[PickCandidate.model_validate(c) for c in call.input.get("candidates", [])],
            )
            observability.DisambiguationPending(trace_id=ctx.trace_id, org_id=ctx.actor.organization_id,
                                                router=call.name.router, action=call.name.action).log(log)
        else:
            event = ConfirmationPending(
                tool_use_id=call.id, router=call.name.router, action=call.name.action, input=call.input,
                # A rule's confirmation of an otherwise ungated call is "always": nothing destructive about it.
                confirm="destructive" if call.spec.confirm == "destructive" or (call.spec.confirm == "never" and gate is None)
                else "always",
                reason=gate.message if gate is not None else None,
            )
            observability.ConfirmationPending(trace_id=ctx.trace_id, org_id=ctx.actor.organization_id,
                                              router=call.name.router, action=call.name.action).log(log)
        if call.id not in ctx.already_pending:
            await ctx.emitter.emit(event)

    async def run_approved(self, ctx: LoopContext, message_id: str, call: ToolCall) -> ToolOutcome:
        """The human approved: pending → running → succeeded | failed (at most once, by the runner)."""
        return await self._run_one(ctx, message_id, call, approved=True)

    async def _run_one(self, ctx: LoopContext, message_id: str, call: ToolCall, *, approved: bool = False,
                       report: bool = True) -> ToolOutcome:
        """Run a call and report it (unless `report` is False: the caller reports it); a call a pack's rule
        holds for a person comes back pending, unreported."""
        if call.id not in ctx.already_announced:
            await ctx.emitter.emit(call.started())
        outcome = await self._execute(ctx, message_id, call, approved=approved)
        if outcome.status != "pending" and report:
            await self.report(ctx, call, outcome)
        return outcome

    async def report(self, ctx: LoopContext, call: ToolCall, outcome: ToolOutcome) -> None:
        """tool_completed for the client, from the same outcome the model's tool_result comes from."""
        if call.id not in ctx.already_completed:
            await ctx.emitter.emit(call.completed(outcome))

    async def _execute(self, ctx: LoopContext, message_id: str, call: ToolCall, *, hold: bool = False,
                       approved: bool = False) -> ToolOutcome:
        # A pack's rules may weigh what the conversation has cost so far (seed 002's cost guards).
        cost = await self._store.conversation_cost(ctx.conversation_id) if call.spec and call.spec.pack else None
        cmd = ExecuteTool(
            conversation_id=ctx.conversation_id, message_id=message_id, tool_use_id=call.id,
            router=call.name.router, action=call.name.action, input=call.input, actor=ctx.actor,
            trace_id=ctx.trace_id, hold=hold, approved=approved, conversation_cost_usd_micros=cost,
        )
        try:
            return await self._peers.execute(cmd)
        except (TimeoutError, RemoteError) as exc:
            # A failed tool call is data for the model, never a crashed turn. Nothing is recorded
            # on our side: the runner owns the call's record, and whatever it did not commit never
            # happened (its writes and its status commit together).
            error = ToolError(code="tool_unavailable", message=f"The tool could not be run ({type(exc).__name__}).",
                              hint="Try again later or tell the user it is unavailable.")
            return ToolOutcome(tool_use_id=call.id, status="failed", duration_ms=0, inverse_available=False, error=error)


def _plus(turn: TurnUsage, call: TurnUsage) -> TurnUsage:
    """The turn's usage with one more call's, as append_reply's statement adds them."""
    return TurnUsage(input_tokens=turn.input_tokens + call.input_tokens, output_tokens=turn.output_tokens + call.output_tokens,
                     cache_read_tokens=turn.cache_read_tokens + call.cache_read_tokens,
                     cache_creation_tokens=turn.cache_creation_tokens + call.cache_creation_tokens,
                     cost_usd_micros=turn.cost_usd_micros + call.cost_usd_micros)


def _invalid(exc: RemoteError) -> Failed:
    """A reservation billing refused as invalid, as the turn's failure; any other error is raised."""
    if exc.code != ErrorCode.INVALID_REQUEST:
        raise exc  # billing unavailable: the command is redelivered
    # Fail closed: a model the rate card cannot price today is never called (nor priced at $0).
    return Failed(ErrorCode.INVALID_REQUEST, exc.message)


def _refusal(held: Reservation) -> Failed | None:
    return None if held.ok else Failed(ErrorCode.AGENT_BUDGET_EXCEEDED, held.message or "Daily AI budget reached.")


def estimate_tokens(params: dict[str, Any]) -> int:
    """Upper-ish bound for the reservation: ~3 characters per token over the whole request. The tools
    and the system prompt are rebuilt per turn around the same catalog objects and strings, and their
    JSON is the largest part: it is encoded once per distinct content (the client's own cache key)."""
    chars = sum(len(_CATALOG_JSON.json_of(value)) if key in BodyEncoder.CACHED else len(json.dumps(value, ensure_ascii=False))
                for key, value in params.items())
    return (chars + 16 * len(params)) // 3 + 1


_CATALOG_JSON = BodyEncoder()
