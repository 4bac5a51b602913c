"""Turns from command to `done`: the part of seed 000's state machine around the model loop.

Every command (send, confirm, pick, undo, cancel of a suspended conversation) is a turn with its
own id, lease and events. Redelivery (a replica died mid-turn) re-enters with the same turn id and
reuses whatever is stored: the user message is not written twice, completed tools are not run
again (the tool-runner returns their stored outcome), events already in the log are not re-emitted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from faststream.nats import NatsBroker

from spotter_shared import telemetry
from spotter_shared.contracts.commands import (
    CancelSuspended, ConfirmTool, PageContext, PickTool, SendMessage, TurnCommand, UndoTool,
)
from spotter_shared.contracts.events import ConversationStarted, Done, ErrorEvent, ToolCompleted, ToolStarted, TurnUsage
from spotter_shared.contracts.tools import UndoRequest
from spotter_shared.errors import ErrorCode, RemoteError
from spotter_shared.turnlock import TurnLock

from .emitter import Emitter
from .loop import (
    CallModel, Failed, Finished, LoopContext, ModelLoop, Outcome, RunTools, Suspended, Step, TERMINAL_TOOL,
    completed_event, result_from_status, tool_input_of,
)
from .model import ModelClient
from .peers import Peers
from .prompt import system_blocks, tool_params
from .settings import OrchestratorSettings
from .store import OrgContext, StoredMessage, Store, TurnRecord

log = logging.getLogger(__name__)

Keepalive = Callable[[], Awaitable[None]]
ABORTED_MESSAGE = "Stopped by the user."


@dataclass(frozen=True)
class Delivery:
    """What the core needs to know about the JetStream delivery, without knowing NATS."""

    attempt: int
    keepalive: Keepalive


@dataclass(frozen=True)
class TurnMeta:
    conversation_id: str
    turn_id: str
    trace_id: str


Body = Callable[[Emitter, TurnRecord], Awaitable[Outcome]]


class TurnRunner:
    def __init__(self, settings: OrchestratorSettings, store: Store, peers: Peers, model: ModelClient, broker: NatsBroker, lock: TurnLock) -> None:
        self._settings = settings
        self._store = store
        self._peers = peers
        self._broker = broker
        self._lock = lock
        self._loop = ModelLoop(store, peers, model)
        self._running: dict[str, asyncio.Task[Outcome]] = {}

    # Commands -------------------------------------------------------------------------------------
    async def send(self, cmd: SendMessage, delivery: Delivery) -> None:
        turn = await self._store.begin_turn(cmd, self._settings.spotter_model)
        await self._turn(_meta(cmd), turn, delivery, lambda emitter, t: self._run_send(cmd, t, emitter, delivery))

    async def confirm(self, cmd: ConfirmTool, delivery: Delivery) -> None:
        turn = await self._begin(cmd, "confirm", cmd.tool_use_id)
        await self._turn(_meta(cmd), turn, delivery, lambda emitter, t: self._run_resolution(cmd, t, emitter))

    async def pick(self, cmd: PickTool, delivery: Delivery) -> None:
        turn = await self._begin(cmd, "pick", cmd.tool_use_id)
        await self._turn(_meta(cmd), turn, delivery, lambda emitter, t: self._run_resolution(cmd, t, emitter))

    async def undo(self, cmd: UndoTool, delivery: Delivery) -> None:
        turn = await self._begin(cmd, "undo", cmd.tool_use_id)
        await self._turn(_meta(cmd), turn, delivery, lambda emitter, t: self._run_undo(cmd, t, emitter))

    async def cancel_suspended(self, cmd: CancelSuspended, delivery: Delivery) -> None:
        turn = await self._begin(cmd, "cancel", None)
        await self._turn(_meta(cmd), turn, delivery, lambda emitter, t: self._run_cancel(cmd, emitter))

    def cancel_running(self, turn_id: str) -> bool:
        """Stop a turn this replica is running (the broadcast reaches every replica)."""
        task = self._running.get(turn_id)
        if task is None or task.done():
            return False
        task.cancel()
        return True

    async def _begin(self, cmd: TurnCommand, kind: str, tool_use_id: str | None) -> TurnRecord:
        return await self._store.begin_command_turn(cmd.turn_id, cmd.conversation_id, cmd.command_id, kind, tool_use_id)

    # The frame every turn runs in ---------------------------------------------------------------------
    async def _turn(self, meta: TurnMeta, turn: TurnRecord, delivery: Delivery, body: Body) -> None:
        if turn.status != "running":
            log.info("turn %s already %s; duplicate command ignored", turn.id, turn.status)
            return
        if not await self._lock.claim(meta.conversation_id, meta.turn_id):
            # Only possible when our lease expired and another turn started: never interleave.
            log.warning("conversation %s is held by another turn; dropping %s", meta.conversation_id, meta.turn_id)
            await self._store.finish_turn(meta.turn_id, "aborted", ErrorCode.CONVERSATION_BUSY)
            return
        emitter = Emitter(self._store, self._broker, meta.conversation_id, meta.turn_id)
        renew = asyncio.create_task(self._keep_lease(meta))
        try:
            outcome = await self._outcome(meta, turn, delivery, emitter, body)
            await self._finish(meta, emitter, outcome)
        finally:
            renew.cancel()
            await self._lock.release(meta.conversation_id, meta.turn_id)

    async def _outcome(self, meta: TurnMeta, turn: TurnRecord, delivery: Delivery, emitter: Emitter, body: Body) -> Outcome:
        if delivery.attempt > self._settings.spotter_max_deliveries:
            return Failed(ErrorCode.INTERNAL, "The turn could not be completed.")
        task = asyncio.create_task(body(emitter, turn))
        self._running[meta.turn_id] = task
        # Registered first, then checked: a cancel broadcast can't slip between the two.
        if await self._lock.cancel_requested(meta.turn_id):
            task.cancel()
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # this process is shutting down: JetStream redelivers the command
            return await self._aborted(meta, emitter)
        finally:
            self._running.pop(meta.turn_id, None)

    async def _aborted(self, meta: TurnMeta, emitter: Emitter) -> Failed:
        """Cancel: the assistant message keeps what streamed before the stop."""
        await emitter.flush()
        partial = emitter.partial_text
        if partial:
            await self._store.append_message(meta.conversation_id, meta.turn_id, "assistant",
                                             [{"type": "text", "text": partial}], stop_reason="aborted")
        return Failed(ErrorCode.ABORTED, ABORTED_MESSAGE)

    async def _keep_lease(self, meta: TurnMeta) -> None:
        while True:
            await asyncio.sleep(self._settings.spotter_turn_lock_ttl_s / 3)
            with contextlib.suppress(Exception):
                await self._lock.claim(meta.conversation_id, meta.turn_id)

    async def _finish(self, meta: TurnMeta, emitter: Emitter, outcome: Outcome) -> None:
        usage = (await self._store.turn(meta.turn_id)).usage
        match outcome:
            case Finished():
                await emitter.finish(Done(conversation_id=meta.conversation_id, usage=usage), "completed")
                total_in = usage.input_tokens + usage.cache_read_tokens
                telemetry.event(
                    log, "agent.turn.completed", inputTokens=usage.input_tokens, outputTokens=usage.output_tokens,
                    cacheReadTokens=usage.cache_read_tokens, cacheCreationTokens=usage.cache_creation_tokens,
                    costUsdMicros=usage.cost_usd_micros,
                    cacheHitRatio=round(usage.cache_read_tokens / total_in, 3) if total_in else 0.0,
                )
            case Suspended():
                # Seed 000: the loop suspends and the controller emits `done` with usage 0.
                await emitter.finish(Done(conversation_id=meta.conversation_id, usage=TurnUsage()), "suspended")
            case Failed(code=code, message=message):
                await emitter.emit(ErrorEvent(code=code, message=message, trace_id=meta.trace_id))
                status = "aborted" if code == ErrorCode.ABORTED else "failed"
                await emitter.finish(Done(conversation_id=meta.conversation_id, usage=usage), status, code)
                telemetry.event(log, "agent.turn.failed", errorCode=code, traceId=meta.trace_id)

    # send -------------------------------------------------------------------------------------------
    async def _run_send(self, cmd: SendMessage, turn: TurnRecord, emitter: Emitter, delivery: Delivery) -> Outcome:
        logged = await self._store.turn_events(cmd.conversation_id, cmd.turn_id) if turn.attempts > 1 else []
        if cmd.is_new and not any(e["type"] == "conversation_started" for e in logged):
            await emitter.emit(ConversationStarted(conversation_id=cmd.conversation_id))
        telemetry.event(log, "agent.turn.started", endpoint="messages", promptLength=len(cmd.message),
                        orgId=cmd.actor.organization_id, traceId=cmd.trace_id, attempt=delivery.attempt)
        org = await self._store.org_context(cmd.actor.organization_id, cmd.actor.user_id)
        if not self._settings.model_configured or not org.agent_enabled:
            return Failed(ErrorCode.AGENT_DISABLED, "The AI assistant is not enabled for this workspace.")

        stored = await self._store.messages(cmd.conversation_id)
        if not any(m.turn_id == cmd.turn_id and m.role == "user" for m in stored):
            verdict = await self._peers.precheck(cmd.actor.organization_id, cmd.trace_id)
            if not verdict.ok:
                return Failed(ErrorCode.AGENT_BUDGET_EXCEEDED, verdict.message or "Daily AI budget reached.")
            await self._close_open_batch(cmd.conversation_id, cmd.turn_id, stored, "superseded_by_user",
                                         "The user sent a new message instead of answering; this was not run.")
            content = [{"type": "text", "text": cmd.message}]
            page = cmd.page_context.model_dump(mode="json") if cmd.page_context else None
            await self._store.append_message(cmd.conversation_id, cmd.turn_id, "user", content, page_context=page)
            stored = await self._store.messages(cmd.conversation_id)

        await delivery.keepalive()
        ambient = await self._peers.ambient(cmd.actor.organization_id, cmd.message, cmd.trace_id)
        ctx = await self._context(cmd, turn, emitter, logged, org_page=cmd.page_context, ambient=ambient, org=org)
        step = resume_point(stored, cmd.turn_id)
        if isinstance(step, CallModel):
            emitter.suppress_prefix(len(unfinished_text(logged)))
        return await self._loop.drive(ctx, history_of(stored), step)

    async def _close_open_batch(self, conversation_id: str, turn_id: str, stored: list[StoredMessage], code: str, message: str) -> None:
        """Replay-integrity guard (seed 000), applied when writing: an assistant tool batch left
        without results (the user typed instead of clicking, or a stop) gets one tool_result
        message — real results where a call finished, typed errors for the rest — so every later
        request to the model is valid."""
        last = stored[-1] if stored else None
        if last is None or last.role != "assistant":
            return
        ids = [b["id"] for b in last.content if b.get("type") == "tool_use"]
        if not ids:
            return
        closed = await self._store.close_pending(conversation_id, code, message)
        statuses = await self._store.tool_statuses(conversation_id, ids)
        results = [result_from_status(i, statuses.get(i)) for i in ids]
        await self._store.append_message(conversation_id, turn_id, "tool_result", results)
        telemetry.event(
            log, "agent.replay.violation", violations=len([i for i in ids if statuses.get(i, {}).get("status") not in TERMINAL_TOOL]) + len(closed),
            reasons=["orphaned_tool_use"], repaired=True, blocks=[b.get("type") for b in last.content],
        )

    # confirm / pick ---------------------------------------------------------------------------------
    async def _run_resolution(self, cmd: ConfirmTool | PickTool, turn: TurnRecord, emitter: Emitter) -> Outcome:
        stored = await self._store.messages(cmd.conversation_id)
        batch = find_batch(stored, cmd.tool_use_id)
        if batch is None:
            return Failed(ErrorCode.TOOL_EXECUTION_NOT_FOUND, "There is no such pending action in this conversation.")
        message, tool_uses = batch
        logged = await self._store.turn_events(cmd.conversation_id, cmd.turn_id) if turn.attempts > 1 else []
        page = await self._store.last_page_context(cmd.conversation_id)
        ctx = await self._context(cmd, turn, emitter, logged, org_page=PageContext.model_validate(page) if page else None, ambient=[])
        statuses = await self._store.tool_statuses(cmd.conversation_id, [t["id"] for t in tool_uses])
        target = next(t for t in tool_uses if t["id"] == cmd.tool_use_id)
        state = statuses.get(cmd.tool_use_id, {}).get("status")
        if state != "pending" and turn.attempts == 1:
            return Failed(ErrorCode.TOOL_ALREADY_RESOLVED, "This action was already resolved.")
        if state == "pending":
            earlier = [t for t in tool_uses[: tool_uses.index(target)]
                       if statuses.get(t["id"], {}).get("status") == "pending" and self._loop.gated(ctx, t)]
            if earlier:
                return Failed(ErrorCode.INVALID_REQUEST, "Resolve the earlier pending action first.")
            failure = await self._resolve(cmd, ctx, message.id, target)
            if failure is not None:
                return failure
        history = history_of(stored)
        step = await self._loop.advance(ctx, history, RunTools(message_id=message.id, tool_uses=tool_uses))
        return await self._loop.drive(ctx, history, step)

    async def _resolve(self, cmd: ConfirmTool | PickTool, ctx: LoopContext, message_id: str, tool_use: dict[str, Any]) -> Failed | None:
        router, action = tool_use["name"].partition("__")[::2]
        if isinstance(cmd, PickTool):
            return await self._pick(cmd, ctx, router, action, tool_use)
        if cmd.approved:
            await self._loop.run_approved(ctx, message_id, tool_use)
            return None
        error = {"code": "rejected_by_user", "message": "The user rejected this action.",
                 "hint": "Do not retry it unless the user asks again."}
        if not await self._store.resolve_pending(cmd.conversation_id, cmd.tool_use_id, "rejected_by_user",
                                                 error_code="rejected_by_user", error_message=error["message"]):
            return Failed(ErrorCode.TOOL_ALREADY_RESOLVED, "This action was already resolved.")
        await ctx.emitter.emit(ToolCompleted(tool_use_id=cmd.tool_use_id, router=router, action=action, ok=False,
                                             output=error, inverse_available=False))
        return None

    async def _pick(self, cmd: PickTool, ctx: LoopContext, router: str, action: str, tool_use: dict[str, Any]) -> Failed | None:
        tool_input = tool_input_of(tool_use)
        chosen = next((c for c in tool_input.get("candidates", []) if str(c.get("id")) == cmd.picked_id), None)
        if chosen is None:
            return Failed(ErrorCode.INVALID_PICK, "That choice is not one of the offered candidates.")
        output = {"pickedId": cmd.picked_id, "pickedLabel": chosen.get("label"), "kind": tool_input.get("kind")}
        if not await self._store.resolve_pending(cmd.conversation_id, cmd.tool_use_id, "succeeded", output=output):
            return Failed(ErrorCode.TOOL_ALREADY_RESOLVED, "This choice was already made.")
        await ctx.emitter.emit(ToolCompleted(tool_use_id=cmd.tool_use_id, router=router, action=action, ok=True,
                                             output=output, inverse_available=False))
        return None

    # undo / cancel ----------------------------------------------------------------------------------
    async def _run_undo(self, cmd: UndoTool, turn: TurnRecord, emitter: Emitter) -> Outcome:
        try:
            undone = await self._peers.undo(UndoRequest(conversation_id=cmd.conversation_id, tool_use_id=cmd.tool_use_id,
                                                        actor=cmd.actor, trace_id=cmd.trace_id))
        except RemoteError as exc:
            code = ErrorCode(exc.code) if exc.code in ErrorCode._value2member_map_ else ErrorCode.INTERNAL
            return Failed(code, exc.message)
        logged = await self._store.turn_events(cmd.conversation_id, cmd.turn_id) if turn.attempts > 1 else []
        seen = {(e["type"], e.get("toolUseId")) for e in logged}
        if ("tool_started", undone.tool_use_id) not in seen:
            await emitter.emit(ToolStarted(tool_use_id=undone.tool_use_id, router=undone.router, action=undone.action, input=undone.input))
        if ("tool_completed", undone.tool_use_id) not in seen:
            await emitter.emit(completed_event(undone.tool_use_id, undone.router, undone.action, undone.outcome))
        if undone.outcome.status != "succeeded":
            error = undone.outcome.error
            return Failed(ErrorCode.UNDO_UNAVAILABLE, error.message if error else "The undo did not succeed.")
        if not any(m.turn_id == cmd.turn_id for m in await self._store.messages(cmd.conversation_id)):
            # The model must know: without this its next answer would assume the write still stands.
            note = (f'<app_event kind="undo">The user pressed Undo on {cmd.tool_use_id}; the app ran '
                    f"{undone.router}__{undone.action} {json.dumps(undone.input)} and it succeeded.</app_event>")
            await self._store.append_message(cmd.conversation_id, cmd.turn_id, "user", [{"type": "text", "text": note}],
                                             page_context={"appEvent": "undo", "toolUseId": cmd.tool_use_id})
        return Finished(stop_reason="undo")

    async def _run_cancel(self, cmd: CancelSuspended, emitter: Emitter) -> Outcome:
        stored = await self._store.messages(cmd.conversation_id)
        await self._close_open_batch(cmd.conversation_id, cmd.turn_id, stored, "aborted", ABORTED_MESSAGE)
        return Failed(ErrorCode.ABORTED, ABORTED_MESSAGE)

    # helpers ----------------------------------------------------------------------------------------
    async def _context(self, cmd: TurnCommand, turn: TurnRecord, emitter: Emitter, logged: list[dict[str, Any]],
                       *, org_page: PageContext | None, ambient: list, org: OrgContext | None = None) -> LoopContext:
        org = org or await self._store.org_context(cmd.actor.organization_id, cmd.actor.user_id)
        specs = await self._peers.tools(cmd.actor.role, cmd.trace_id)
        return LoopContext(
            conversation_id=cmd.conversation_id, turn_id=cmd.turn_id, trace_id=cmd.trace_id, actor=cmd.actor,
            model=self._settings.spotter_model, max_tokens=self._settings.spotter_max_tokens,
            max_rounds=self._settings.spotter_max_turns,
            system=system_blocks(org, cmd.actor, org_page, ambient, datetime.now(UTC)),
            tools=tool_params(specs), specs={s.name: s for s in specs}, emitter=emitter,
            rounds=turn.model_calls,
            already_announced={e["toolUseId"] for e in logged if e["type"] == "tool_started"},
            already_completed={e["toolUseId"] for e in logged if e["type"] == "tool_completed"},
            already_pending={e["toolUseId"] for e in logged if e["type"] in ("confirmation_pending", "disambiguation_pending")},
        )


def _meta(cmd: TurnCommand) -> TurnMeta:
    return TurnMeta(conversation_id=cmd.conversation_id, turn_id=cmd.turn_id, trace_id=cmd.trace_id)


def history_of(stored: list[StoredMessage]) -> list[dict[str, Any]]:
    return [{"role": "assistant" if m.role == "assistant" else "user", "content": m.content}
            for m in stored if m.role != "system_note"]


def find_batch(stored: list[StoredMessage], tool_use_id: str) -> tuple[StoredMessage, list[dict[str, Any]]] | None:
    for message in reversed(stored):
        if message.role != "assistant":
            continue
        tool_uses = [b for b in message.content if b.get("type") == "tool_use"]
        if any(t["id"] == tool_use_id for t in tool_uses):
            return message, tool_uses
    return None


def resume_point(stored: list[StoredMessage], turn_id: str) -> Step:
    """Where a (re)started turn continues: ask the model, run an unanswered tool batch, or finish."""
    last = stored[-1] if stored else None
    if last is None or last.role != "assistant" or last.turn_id != turn_id:
        return CallModel()
    tool_uses = [b for b in last.content if b.get("type") == "tool_use"]
    if tool_uses:
        return RunTools(message_id=last.id, tool_uses=tool_uses)
    return Finished(stop_reason=last.stop_reason)


def unfinished_text(logged: list[dict[str, Any]]) -> str:
    """Text a crashed attempt streamed for a model call whose message was never stored."""
    text = ""
    for event in logged:
        text = text + event["delta"] if event["type"] == "text_delta" else ""
    return text
