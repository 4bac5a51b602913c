"""A user turn from command to `done`: the part of seed 000's state machine around the loop.

Redelivery (a replica died mid-turn) re-enters here with the same turn id. Whatever is already
stored is reused: the user message is not written twice, completed tools are not run again
(the tool-runner returns their stored outcome), events already in the log are not re-emitted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from faststream.nats import NatsBroker

from spotter_shared import telemetry
from spotter_shared.contracts.commands import SendMessage
from spotter_shared.contracts.events import ConversationStarted, Done, ErrorEvent
from spotter_shared.errors import ErrorCode
from spotter_shared.turnlock import TurnLock

from .emitter import Emitter
from .loop import CallModel, Failed, Finished, LoopContext, ModelLoop, RunTools, Step
from .model import ModelClient
from .peers import Peers
from .prompt import system_blocks, tool_params
from .settings import OrchestratorSettings
from .store import StoredMessage, Store

log = logging.getLogger(__name__)

Keepalive = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class Delivery:
    """What the core needs to know about the JetStream delivery, without knowing NATS."""

    attempt: int
    keepalive: Keepalive


class TurnRunner:
    def __init__(self, settings: OrchestratorSettings, store: Store, peers: Peers, model: ModelClient, broker: NatsBroker, lock: TurnLock) -> None:
        self._settings = settings
        self._store = store
        self._peers = peers
        self._broker = broker
        self._lock = lock
        self._loop = ModelLoop(store, peers, model)

    async def send(self, cmd: SendMessage, delivery: Delivery) -> None:
        turn = await self._store.begin_turn(cmd, self._settings.spotter_model)
        if turn.status != "running":
            log.info("turn %s already %s; duplicate command ignored", turn.id, turn.status)
            return
        if not await self._lock.claim(cmd.conversation_id, cmd.turn_id):
            # Only possible when our lease expired and another turn started: never interleave.
            log.warning("conversation %s is held by another turn; dropping %s", cmd.conversation_id, cmd.turn_id)
            await self._store.finish_turn(cmd.turn_id, "aborted", ErrorCode.CONVERSATION_BUSY)
            return
        emitter = Emitter(self._store, self._broker, cmd.conversation_id, cmd.turn_id)
        renew = asyncio.create_task(self._keep_lease(cmd.conversation_id, cmd.turn_id))
        try:
            if delivery.attempt > self._settings.spotter_max_deliveries:
                outcome: Finished | Failed = Failed(ErrorCode.INTERNAL, "The turn could not be completed.")
            else:
                outcome = await self._run(cmd, turn.attempts, emitter, delivery)
            await self._finish(cmd, emitter, outcome)
        finally:
            renew.cancel()
            await self._lock.release(cmd.conversation_id, cmd.turn_id)

    async def _keep_lease(self, conversation_id: str, turn_id: str) -> None:
        while True:
            await asyncio.sleep(self._settings.spotter_turn_lock_ttl_s / 3)
            with contextlib.suppress(Exception):
                await self._lock.claim(conversation_id, turn_id)

    async def _run(self, cmd: SendMessage, attempts: int, emitter: Emitter, delivery: Delivery) -> Finished | Failed:
        logged = await self._store.turn_events(cmd.conversation_id, cmd.turn_id) if attempts > 1 else []
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
            content = [{"type": "text", "text": cmd.message}]
            page = cmd.page_context.model_dump(mode="json") if cmd.page_context else None
            await self._store.append_message(cmd.conversation_id, cmd.turn_id, "user", content, page_context=page)
            stored = await self._store.messages(cmd.conversation_id)

        await delivery.keepalive()
        ambient = await self._peers.ambient(cmd.actor.organization_id, cmd.message, cmd.trace_id)
        specs = await self._peers.tools(cmd.actor.role, cmd.trace_id)
        turn = await self._store.turn(cmd.turn_id)
        ctx = LoopContext(
            conversation_id=cmd.conversation_id, turn_id=cmd.turn_id, trace_id=cmd.trace_id, actor=cmd.actor,
            model=self._settings.spotter_model, max_tokens=self._settings.spotter_max_tokens,
            max_rounds=self._settings.spotter_max_turns,
            system=system_blocks(org, cmd.actor, cmd.page_context, ambient, datetime.now(UTC)),
            tools=tool_params(specs), specs={s.name: s for s in specs}, emitter=emitter,
            rounds=turn.model_calls,
            already_announced={e["toolUseId"] for e in logged if e["type"] == "tool_started"},
            already_completed={e["toolUseId"] for e in logged if e["type"] == "tool_completed"},
        )
        step = resume_point(stored, cmd.turn_id)
        if isinstance(step, CallModel):
            emitter.suppress_prefix(len(unfinished_text(logged)))
        history = [api_message(m) for m in stored if m.role != "system_note"]
        return await self._loop.drive(ctx, history, step)

    async def _finish(self, cmd: SendMessage, emitter: Emitter, outcome: Finished | Failed) -> None:
        usage = (await self._store.turn(cmd.turn_id)).usage
        match outcome:
            case Finished():
                await emitter.emit(Done(conversation_id=cmd.conversation_id, usage=usage))
                await self._store.finish_turn(cmd.turn_id, "completed")
                total_in = usage.input_tokens + usage.cache_read_tokens
                telemetry.event(
                    log, "agent.turn.completed", inputTokens=usage.input_tokens, outputTokens=usage.output_tokens,
                    cacheReadTokens=usage.cache_read_tokens, cacheCreationTokens=usage.cache_creation_tokens,
                    costUsdMicros=usage.cost_usd_micros,
                    cacheHitRatio=round(usage.cache_read_tokens / total_in, 3) if total_in else 0.0,
                )
            case Failed(code=code, message=message):
                await emitter.emit(ErrorEvent(code=code, message=message, trace_id=cmd.trace_id))
                await emitter.emit(Done(conversation_id=cmd.conversation_id, usage=usage))
                await self._store.finish_turn(cmd.turn_id, "failed", code)
                telemetry.event(log, "agent.turn.failed", errorCode=code, traceId=cmd.trace_id)


def api_message(m: StoredMessage) -> dict[str, Any]:
    return {"role": "assistant" if m.role == "assistant" else "user", "content": m.content}


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
