"""driveModelLoop as an explicit state machine: each step is a small function returning the only
steps that may follow it (CallModel → RunTools | Finished | Failed; RunTools → CallModel)."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from spotter_shared import telemetry
from spotter_shared.contracts.billing import ReserveBudget, SettleUsage
from spotter_shared.contracts.commands import Actor
from spotter_shared.contracts.events import (
    ConfirmationPending, DisambiguationPending, MessageDone, PickCandidate, ToolCompleted, ToolError, ToolStarted, TurnUsage,
)
from spotter_shared.contracts.tools import ExecuteTool, ToolOutcome, ToolSpec
from spotter_shared.errors import ErrorCode, RemoteError

from .emitter import Emitter
from .model import ModelClient, ModelReply, ProviderError
from .peers import Peers
from .prompt import merge_consecutive, orphan_result, repair_replay, validate_replay, with_cached_tail
from .store import Store

log = logging.getLogger(__name__)


# Steps ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CallModel:
    pass


@dataclass(frozen=True)
class RunTools:
    message_id: str
    tool_uses: list[dict[str, Any]]


@dataclass(frozen=True)
class Finished:
    stop_reason: str | None


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
    system: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    specs: dict[str, ToolSpec]
    emitter: Emitter
    rounds: int = 0
    already_announced: set[str] = field(default_factory=set)  # tool ids whose tool_started was logged
    already_completed: set[str] = field(default_factory=set)
    already_pending: set[str] = field(default_factory=set)  # ids whose *_pending event was logged


class ModelLoop:
    def __init__(self, store: Store, peers: Peers, model: ModelClient) -> None:
        self._store = store
        self._peers = peers
        self._model = model

    async def drive(self, ctx: LoopContext, history: list[dict[str, Any]], step: Step) -> Outcome:
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
    async def call_model(self, ctx: LoopContext, history: list[dict[str, Any]]) -> RunTools | Finished | Failed:
        messages = self._replayable(ctx, history)
        params = {
            "model": ctx.model,
            "max_tokens": ctx.max_tokens,
            "system": ctx.system,
            "tools": ctx.tools,
            "messages": with_cached_tail(messages),
        }
        reservation_id = str(uuid.uuid4())
        held = await self._peers.reserve(
            ReserveBudget(
                reservation_id=reservation_id, organization_id=ctx.actor.organization_id, model=ctx.model,
                input_tokens=estimate_tokens(params), max_output_tokens=ctx.max_tokens,
            ),
            ctx.trace_id,
        )
        if not held.ok:
            return Failed(ErrorCode.AGENT_BUDGET_EXCEEDED, held.message or "Daily AI budget reached.")
        ctx.rounds += 1
        ctx.emitter.mark()
        try:
            reply = await self._model.stream(params, ctx.emitter.text)
        except ProviderError as exc:
            await self._settle(ctx, reservation_id, None)
            return Failed(exc.code, exc.message)
        except asyncio.CancelledError:
            # Stopped by the user: release the hold rather than leave it until it expires.
            await asyncio.shield(self._settle(ctx, reservation_id, None))
            raise
        await ctx.emitter.flush()
        usage = await self._settle(ctx, reservation_id, reply)
        message_id = await self._store.append_message(
            ctx.conversation_id, ctx.turn_id, "assistant", reply.content,
            stop_reason=reply.stop_reason, usage=usage, model=ctx.model,
        )
        history.append({"role": "assistant", "content": reply.content})
        ctx.emitter.mark()
        await ctx.emitter.emit(MessageDone(message_id=message_id, stop_reason=reply.stop_reason))
        tool_uses = [b for b in reply.content if b.get("type") == "tool_use"]
        # Any tool_use must be answered, whatever the stop reason, or the next request is invalid.
        if tool_uses:
            return RunTools(message_id=message_id, tool_uses=tool_uses)
        return Finished(stop_reason=reply.stop_reason)

    def _replayable(self, ctx: LoopContext, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
        messages = merge_consecutive(history)
        violations = validate_replay(messages)
        if not violations:
            return messages
        telemetry.event(
            log, "agent.replay.violation", violations=len(violations),
            reasons=sorted({v.reason for v in violations}), repaired=True,
            blocks=[[b.get("type") for b in m["content"]] for m in messages],
        )
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
        u = reply.usage
        usage = TurnUsage(
            input_tokens=u.input_tokens, output_tokens=u.output_tokens, cache_read_tokens=u.cache_read_tokens,
            cache_creation_tokens=u.cache_write_5m_tokens + u.cache_write_1h_tokens,
            cost_usd_micros=settlement.cost_usd_micros,
        )
        await self._store.add_turn_usage(ctx.turn_id, usage)
        return usage

    # RunTools ---------------------------------------------------------------------------------
    async def run_tools(self, ctx: LoopContext, history: list[dict[str, Any]], step: RunTools) -> CallModel | Suspended:
        """Run the batch in order until the first tool that needs a human; that one and every later
        one are recorded `pending` (seed 000: they can't be partially fed back)."""
        for index, tool_use in enumerate(step.tool_uses):
            if self.gated(ctx, tool_use):
                for later in step.tool_uses[index:]:
                    await self._hold(ctx, step.message_id, later)
                break
            await self._run_one(ctx, step.message_id, tool_use)
        return await self.advance(ctx, history, step)

    async def advance(self, ctx: LoopContext, history: list[dict[str, Any]], step: RunTools) -> CallModel | Suspended:
        """Resolve the batch in order: a pending normal tool runs once everything before it is
        resolved, a pending gated tool suspends the turn. When all are resolved, one merged
        tool_result message goes back to the model."""
        ids = [t["id"] for t in step.tool_uses]
        for tool_use in step.tool_uses:
            state = await self._status(ctx, tool_use["id"])
            if self.gated(ctx, tool_use) and state is None:
                # Never run a gated tool that was not held (a crash between holds): hold it now.
                await self._hold(ctx, step.message_id, tool_use)
                state = await self._status(ctx, tool_use["id"])
            if state in TERMINAL_TOOL:
                continue
            if state == "pending" and self.gated(ctx, tool_use):
                await self._announce_pending(ctx, tool_use)
                return Suspended(tool_use_id=tool_use["id"])
            # A normal tool, or a gated one already approved ('running' after a crash): run it.
            await self._run_one(ctx, step.message_id, tool_use)
        statuses = await self._store.tool_statuses(ctx.conversation_id, ids)
        results = [result_from_status(t["id"], statuses.get(t["id"])) for t in step.tool_uses]
        await self._store.append_message(ctx.conversation_id, ctx.turn_id, "tool_result", results)
        history.append({"role": "user", "content": results})
        return CallModel()

    async def _status(self, ctx: LoopContext, tool_use_id: str) -> str | None:
        row = (await self._store.tool_statuses(ctx.conversation_id, [tool_use_id])).get(tool_use_id)
        return row["status"] if row else None

    def gated(self, ctx: LoopContext, tool_use: dict[str, Any]) -> bool:
        spec = ctx.specs.get(tool_use["name"])
        return spec is not None and (spec.kind == "user_picker" or spec.confirm != "never")

    async def _hold(self, ctx: LoopContext, message_id: str, tool_use: dict[str, Any]) -> None:
        router, action = split_tool_name(tool_use["name"])
        await self._execute(ctx, message_id, tool_use["id"], router, action, tool_input_of(tool_use), hold=True)

    async def _announce_pending(self, ctx: LoopContext, tool_use: dict[str, Any]) -> None:
        router, action = split_tool_name(tool_use["name"])
        spec = ctx.specs[tool_use["name"]]
        tool_input = tool_input_of(tool_use)
        if spec.kind == "user_picker":
            event = DisambiguationPending(
                tool_use_id=tool_use["id"], kind=str(tool_input.get("kind", "item")),
                prompt=str(tool_input.get("prompt", "Which one?")),
                candidates=[PickCandidate.model_validate(c) for c in tool_input.get("candidates", [])],
            )
            telemetry.event(log, "agent.tool.disambiguation_pending", router=router, action=action)
        else:
            event = ConfirmationPending(
                tool_use_id=tool_use["id"], router=router, action=action, input=tool_input,
                confirm="always" if spec.confirm == "always" else "destructive",
            )
            telemetry.event(log, "agent.tool.confirmation_pending", router=router, action=action)
        if tool_use["id"] not in ctx.already_pending:
            await ctx.emitter.emit(event)

    async def run_approved(self, ctx: LoopContext, message_id: str, tool_use: dict[str, Any]) -> ToolOutcome:
        """The human approved: pending → running → succeeded | failed (at most once, by the runner)."""
        return await self._run_one(ctx, message_id, tool_use)

    async def _run_one(self, ctx: LoopContext, message_id: str, tool_use: dict[str, Any]) -> ToolOutcome:
        router, action = split_tool_name(tool_use["name"])
        tool_input = tool_input_of(tool_use)
        if tool_use["id"] not in ctx.already_announced:
            await ctx.emitter.emit(ToolStarted(tool_use_id=tool_use["id"], router=router, action=action, input=tool_input))
        outcome = await self._execute(ctx, message_id, tool_use["id"], router, action, tool_input)
        if tool_use["id"] not in ctx.already_completed:
            await ctx.emitter.emit(completed_event(tool_use["id"], router, action, outcome))
        return outcome

    async def _execute(
        self, ctx: LoopContext, message_id: str, tool_use_id: str, router: str, action: str, tool_input: dict, *, hold: bool = False,
    ) -> ToolOutcome:
        cmd = ExecuteTool(
            conversation_id=ctx.conversation_id, message_id=message_id, tool_use_id=tool_use_id,
            router=router, action=action, input=tool_input, actor=ctx.actor, trace_id=ctx.trace_id, hold=hold,
        )
        try:
            return await self._peers.execute(cmd)
        except (TimeoutError, RemoteError) as exc:
            # A failed tool call is data for the model, never a crashed turn.
            error = ToolError(code="tool_unavailable", message=f"The tool could not be run ({type(exc).__name__}).",
                              hint="Try again later or tell the user it is unavailable.")
            await self._store.fail_tool(ctx.conversation_id, message_id, tool_use_id, router, action, tool_input, error)
            return ToolOutcome(tool_use_id=tool_use_id, status="failed", duration_ms=0, inverse_available=False, error=error)


TERMINAL_TOOL = frozenset({"succeeded", "failed", "rejected_by_user"})


def tool_input_of(tool_use: dict[str, Any]) -> dict[str, Any]:
    return tool_use["input"] if isinstance(tool_use.get("input"), dict) else {}


def completed_event(tool_use_id: str, router: str, action: str, outcome: ToolOutcome) -> ToolCompleted:
    ok = outcome.status == "succeeded"
    payload = outcome.output if ok else (outcome.error.model_dump(mode="json") if outcome.error else None)
    return ToolCompleted(tool_use_id=tool_use_id, router=router, action=action, ok=ok, output=payload,
                         inverse_available=outcome.inverse_available)


def result_from_status(tool_use_id: str, status: dict[str, Any] | None) -> dict[str, Any]:
    """The tool_result block for a resolved call, from its stored execution."""
    if status is None or status["status"] not in TERMINAL_TOOL:
        return orphan_result(tool_use_id)
    if status["status"] == "succeeded":
        return tool_result_block(tool_use_id, status["output"], is_error=False)
    if status["status"] == "rejected_by_user":
        error = {"code": status["error_code"] or "rejected_by_user",
                 "message": status["error_message"] or "The user rejected this action.",
                 "hint": "Do not retry it unless the user asks again."}
        return tool_result_block(tool_use_id, error, is_error=True)
    output = status["output"] if isinstance(status["output"], dict) else {"code": status["error_code"], "message": status["error_message"]}
    return tool_result_block(tool_use_id, output, is_error=True)


def split_tool_name(name: str) -> tuple[str, str]:
    router, sep, action = name.partition("__")
    return (router, action) if sep else ("", name)


def tool_result_block(tool_use_id: str, payload: Any, *, is_error: bool) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": tool_use_id,
        # Tool output is data, wrapped so it is never read as instructions (SPEC decision 11).
        "content": json.dumps(payload, ensure_ascii=False, default=str),
    }
    if is_error:
        block["is_error"] = True
    return block


def estimate_tokens(params: dict[str, Any]) -> int:
    # Upper-ish bound for the reservation: ~3 characters per token over the whole request.
    return len(json.dumps(params, ensure_ascii=False)) // 3 + 1
