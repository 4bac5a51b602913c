"""Seed 003 §3: the member coach's loop, on the orchestrator's runtime — the same durable commands,
turn lease, model client, billing holds and session log as the operator, with its own prompt, tools
and rules.

One run answers one member message: the initializer loads data, then up to ten iterations of one
model call and one tool each, until `idle`, `message_ask_user`, a reply without a tool call or the
limit. Every reply must be a tool call: forced (`tool_choice: any`) on models that accept it, and on
the 5.x models (which refuse forced tool use with a 400) `auto` with parallel calls off plus one
corrective retry when a reply has no tool call — its text is never shown to anyone.

The session's event log is the run's state: a redelivered run (its replica died) finds its user
message, knowledge, calls and results there, re-asks the tool-runner for a call that was in flight
(results are kept per call) and carries on; a finished run is not run again."""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from collections.abc import Awaitable, Callable
from typing import Any, Final

import asyncpg

from spotter_shared import bus, coach_data
from spotter_shared.contracts.billing import SettleUsage
from spotter_shared.contracts.coach import (
    CoachRun, CoachToolCall, CoachToolResult, CoachToolSpec, CreateCoachSession, SessionEventOut,
    session_subject,
)
from spotter_shared.contracts.sessions import SessionView
from spotter_shared.errors import ErrorCode, RemoteError, SpotterError
from spotter_shared.sessions import SessionEvent
from spotter_shared.turnlock import LeaseKeeper, Run, TurnLock

from .. import edges
from ..model import ModelClient, ModelReply, ProviderError, is_gen5
from ..peers import Peers
from ..sessions import NewEvent, Sessions
from . import context, initializer

log = logging.getLogger(__name__)

SOURCE: Final = "coach"
MAX_ITERATIONS: Final = 10
ARTIFACT_TOOLS: Final = frozenset({"generate_workout", "swap_exercise", "adjust_exercise", "remove_exercise"})


@dataclass
class RunState:
    cmd: CoachRun
    sessions: Sessions
    model: str
    specs: list[CoachToolSpec]
    calls: int = 0  # model calls made in this run (their reservation ids)
    actions: list[dict[str, Any]] = field(default_factory=list)
    # Lets go of the session's lease; run once the last event is stored and before it is published,
    # so a member who answers at once never finds the session busy (as a turn's `done` does).
    let_go: Callable[[], Awaitable[None]] | None = None


class CoachRunner:
    def __init__(self, pool: asyncpg.Pool, peers: Peers, model: ModelClient, lock: TurnLock, *, coach_model: str,
                 initializer_model: str, max_tokens: int, poll_s: float) -> None:
        self._pool, self._peers, self._model, self._lock = pool, peers, model, lock
        self._coach_model, self._init_model, self._max_tokens = coach_model, initializer_model, max_tokens
        self._poll_s = poll_s

    # Sessions ---------------------------------------------------------------------------------------
    async def create_session(self, req: CreateCoachSession) -> SessionView:
        created = await Sessions(self._pool, req.actor.organization_id, "agent").create(
            source=SOURCE, user_id=req.actor.user_id, status="draft", metadata={"membershipId": req.actor.membership_id})
        return created.view()

    async def _session(self, cmd: CoachRun, sessions: Sessions) -> None:
        found = await sessions.get(cmd.session_id)
        if found is None and cmd.is_new:
            await sessions.create(source=SOURCE, user_id=cmd.actor.user_id, status="draft", session_id=cmd.session_id,
                                  metadata={"membershipId": cmd.actor.membership_id})
            return
        if found is None or found.source != SOURCE or found.user_id != cmd.actor.user_id:
            raise SpotterError(ErrorCode.NOT_FOUND, "Coach session not found.")

    # The run ------------------------------------------------------------------------------------------
    async def run(self, cmd: CoachRun) -> None:
        sessions = Sessions(self._pool, cmd.actor.organization_id, "agent")
        await self._session(cmd, sessions)
        runner = uuid.uuid4().hex[:12]

        async def unfinished() -> bool:
            return not await self._finished(sessions, cmd)

        if await self._finished(sessions, cmd):
            await self._lock.release(cmd.session_id, cmd.run_id)
            return
        match await self._lock.take(cmd.session_id, cmd.run_id, runner, still_running=unfinished, poll_s=self._poll_s):
            case None:
                return
            case Run.OTHER_TURN:
                # Only when the gateway's claim lapsed and another message started a run meanwhile:
                # this one ends at once (its stream sees an error and `done`), never interleaved.
                log.warning("coach session %s is held by another run; ending %s", cmd.session_id, cmd.run_id)
                state = RunState(cmd=cmd, sessions=sessions, model=cmd.model or self._coach_model, specs=[])
                await self._emit(state, NewEvent("session.error", "system", metadata={
                    "runId": cmd.run_id, "code": ErrorCode.CONVERSATION_BUSY.value, "context": "loop", "traceId": cmd.trace_id,
                    "message": "Your coach was answering another message; send this one again."}))
                await self._emit(state, NewEvent("coach.run_completed", "system", external_event_id=f"run:{cmd.run_id}:done",
                                                 metadata={"runId": cmd.run_id, "status": "error", "reason": "conversation_busy",
                                                           "iterations": 0}))
                return
        lease = LeaseKeeper(lambda: self._renew(cmd, runner), self._poll_s * 3)
        released = False

        async def let_go() -> None:
            nonlocal released
            if not released:
                released = True
                await lease.stop()
                await self._lock.release(cmd.session_id, cmd.run_id, runner)

        try:
            await self._run(cmd, sessions, let_go)
        finally:
            await let_go()

    async def _run(self, cmd: CoachRun, sessions: Sessions, let_go: Callable[[], Awaitable[None]]) -> None:
        log_ = await self._run_events(sessions, cmd)
        state = RunState(cmd=cmd, sessions=sessions, model=cmd.model or self._coach_model, specs=await self._peers.coach_tools(cmd.trace_id),
                     calls=sum(1 for e in log_ if e.event_type == "coach.llm_response"), let_go=let_go)
        if not any(e.event_type == "user.message" for e in log_):
            await self._start(state)
            await self._initialize(state)
        try:
            status, reason = await self._loop(state)
        except ProviderError as exc:
            # Seed 003: an LLM error is fatal to the run; logged, and told to the member.
            await self._emit(state, NewEvent("session.error", "system", metadata={
                "runId": cmd.run_id, "code": exc.code.value, "message": exc.message, "context": "model", "traceId": cmd.trace_id}))
            status, reason = "error", exc.code.value
        except _Refused as exc:
            await self._emit(state, NewEvent("session.error", "system", metadata={
                "runId": cmd.run_id, "code": exc.code.value, "message": exc.message, "context": "budget", "traceId": cmd.trace_id}))
            status, reason = "error", exc.code.value
        await self._finish(state, status, reason)

    async def _start(self, state: RunState) -> None:
        cmd = state.cmd
        current = await state.sessions.get(cmd.session_id)
        if current is not None and current.status != "running":
            await state.sessions.transition(cmd.session_id, "running")
        events = [NewEvent("user.message", "user", content=[{"type": "text", "text": cmd.message}],
                           metadata={"runId": cmd.run_id}, external_event_id=f"run:{cmd.run_id}:message")]
        if cmd.current_workout:
            events.append(NewEvent("coach.knowledge", "system", external_event_id=f"run:{cmd.run_id}:current_workout",
                                   metadata={"runId": cmd.run_id, "source": "current_workout", "displayName": "Current workout",
                                             "data": context.current_workout_text(cmd.current_workout), "announce": False}))
        for event in events:
            await self._emit(state, event)

    async def _initialize(self, state: RunState) -> None:
        """Best effort: a failed or refused selection leaves the turn to run with what it has."""
        cmd = state.cmd
        try:
            loaded = initializer.loaded_sources(await state.sessions.events(cmd.session_id, limit=10_000))
            body = initializer.request_body(self._init_model, cmd.message, loaded)
            reply = await self._call(state, body, "init", count=False)
            text = "".join(b.get("text", "") for b in reply.content if b.get("type") == "text")
            selection = initializer.parse(text, loaded)
        except (ProviderError, _Refused, ValueError, KeyError, TypeError) as exc:
            await self._emit(state, NewEvent("session.error", "system", metadata={
                "runId": cmd.run_id, "context": "context_init", "message": f"initializer: {type(exc).__name__}"}))
            return
        if not selection.append:
            return
        sources = [s for s, _, _ in selection.append]
        fetched = await coach_data.fetch_sources(self._pool, cmd.actor.organization_id, cmd.actor.membership_id, sources,
                                                 initializer.params_of(selection))
        for source, reason, days in selection.append:
            data = fetched.get(source)
            if isinstance(data, Exception) or data is None:
                await self._emit(state, NewEvent("session.error", "system", metadata={
                    "runId": cmd.run_id, "context": "context_init", "message": f"{source}: {type(data).__name__}"}))
                continue
            await self._emit(state, NewEvent("coach.knowledge", "system", external_event_id=f"run:{cmd.run_id}:{source}",
                                             metadata={"runId": cmd.run_id, "source": source, "reason": reason,
                                                       "daysBack": days, "displayName": coach_data.SOURCES[source],
                                                       "data": data, "announce": True}))

    async def _loop(self, state: RunState) -> tuple[str, str]:
        cmd = state.cmd
        while True:
            events = await state.sessions.events(cmd.session_id, limit=10_000)
            mine = [e for e in events if e.metadata.get("runId") == cmd.run_id]
            calls = [e for e in mine if e.event_type == "agent.tool_call"]
            answered = {e.metadata.get("callId") for e in mine if e.event_type == "agent.tool_result"}
            open_call = next((e for e in calls if e.metadata.get("callId") not in answered), None)
            if open_call is not None:  # in flight when a replica died: the tool-runner keeps its result
                if await self._execute(state, open_call.metadata):
                    return "completed", open_call.metadata["toolName"]
                continue
            if len(calls) >= MAX_ITERATIONS:
                await self._emit(state, NewEvent("session.error", "system", metadata={
                    "runId": cmd.run_id, "context": "loop", "message": f"stopped after {MAX_ITERATIONS} iterations"}))
                return "error", "max_iterations"
            reply = await self._reply(state, events)
            if reply is None:
                await self._emit(state, NewEvent("session.error", "system", metadata={
                    "runId": cmd.run_id, "context": "loop", "message": "no tool call in the model's reply"}))
                return "error", "no_tool_call"
            use = next(b for b in reply.content if b.get("type") == "tool_use")
            # The assistant turn as replayed: its thinking (tied to it) and this one call; its text never.
            kept = [b for b in reply.content if b.get("type") in ("thinking", "redacted_thinking")] + [use]
            call = {"callId": use["id"], "toolName": use["name"], "arguments": use.get("input") or {},
                    "assistantContent": kept, "runId": cmd.run_id, "iteration": len(calls) + 1,
                    "statusStart": self._spec(state, use["name"]).status_start if self._spec(state, use["name"]) else None}
            await self._emit(state, NewEvent("agent.tool_call", "agent", metadata=call, external_event_id=f"call:{use['id']}",
                                             content=[{"type": "tool-call", "toolCallId": use["id"], "toolName": use["name"],
                                                       "input": use.get("input") or {}}]))
            if await self._execute(state, call):
                return ("asked" if use["name"] == "message_ask_user" else "completed"), use["name"]

    async def _reply(self, state: RunState, events: list[SessionEvent]) -> ModelReply | None:
        """One iteration's model reply with a tool call, or None when even the corrective retry has none."""
        cmd = state.cmd
        user_data = await coach_data.user_data_xml(self._pool, cmd.actor.organization_id, cmd.actor.membership_id)
        messages = context.messages_of(events)
        forced = not is_gen5(state.model)
        body = {
            "model": state.model, "max_tokens": self._max_tokens,
            "system": context.system_blocks(user_data),
            "tools": context.tool_params([{"name": s.name, "description": s.description, "input_schema": s.input_schema}
                                          for s in state.specs]),
            "tool_choice": {"type": "any", "disable_parallel_tool_use": True} if forced
            else {"type": "auto", "disable_parallel_tool_use": True},
            "messages": context.with_cached_tail(messages),
        }
        reply = await self._call(state, body, state.calls)
        if _has_tool_use(reply) or forced:
            return reply if _has_tool_use(reply) else None
        # One corrective retry: the reply's text stays between the model and us.
        spoken = [b for b in reply.content if b.get("type") in ("text", "thinking", "redacted_thinking")] or \
            [{"type": "text", "text": "(no reply)"}]
        retry = {**body, "messages": [*messages, {"role": "assistant", "content": spoken},
                                      {"role": "user", "content": [{"type": "text", "text": context.CORRECTION}]}]}
        retry["messages"] = context.with_cached_tail(retry["messages"])
        reply = await self._call(state, retry, state.calls)
        return reply if _has_tool_use(reply) else None

    async def _call(self, state: RunState, body: dict[str, Any], call: int | str, *, count: bool = True) -> ModelReply:
        """A model call under a billing hold (reservation `<run>:<call>`), logged before and after."""
        cmd = state.cmd
        estimate = sum(len(str(v)) for v in (body.get("system"), body.get("tools"), body.get("messages"))) // 4
        try:
            reservation_id, held = await self._peers.reserve_call(
                cmd.run_id, call, organization_id=cmd.actor.organization_id, model=body["model"],
                input_tokens=estimate, max_output_tokens=body["max_tokens"], trace_id=cmd.trace_id)
        except RemoteError as exc:
            raise _Refused(ErrorCode.INVALID_REQUEST if exc.code == ErrorCode.INVALID_REQUEST else ErrorCode.INTERNAL,
                           exc.message) from exc
        if not held.ok:
            raise _Refused(ErrorCode.AGENT_BUDGET_EXCEEDED, held.message or "Daily AI budget reached.")
        if count:
            state.calls += 1
        await self._emit(state, NewEvent("coach.llm_request", "system", metadata={
            "runId": cmd.run_id, "model": body["model"], "estimatedTokens": estimate, "call": str(call)}))
        started = datetime.now(UTC)
        try:
            reply = await self._model.create(body)
        except (ProviderError, asyncio.CancelledError):
            await asyncio.shield(self._settle(state, reservation_id, body["model"], None))
            raise
        settled = await self._settle(state, reservation_id, body["model"], reply)
        u = reply.usage
        await self._emit(state, NewEvent("coach.llm_response", "system", metadata={
            "runId": cmd.run_id, "model": body["model"], "call": str(call), "stopReason": reply.stop_reason,
            "durationMs": int((datetime.now(UTC) - started).total_seconds() * 1000), "costUsdMicros": settled,
            "tokens": {"prompt": u.input_tokens, "completion": u.output_tokens, "cached": u.cache_read_tokens,
                       "cacheWrite": u.cache_write_5m_tokens + u.cache_write_1h_tokens,
                       "total": u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_5m_tokens
                       + u.cache_write_1h_tokens},
            "toolCall": _has_tool_use(reply)}))
        await state.sessions.add_usage(cmd.session_id, u.model_dump(), settled)
        return reply

    async def _settle(self, state: RunState, reservation_id: str, model: str, reply: ModelReply | None) -> int:
        cmd = state.cmd
        settlement = await self._peers.settle(SettleUsage(
            reservation_id=reservation_id, organization_id=cmd.actor.organization_id, user_id=cmd.actor.user_id,
            model=model, usage=reply.usage if reply else None, count_message=False), cmd.trace_id)
        return settlement.cost_usd_micros

    async def _execute(self, state: RunState, call: dict[str, Any]) -> bool:
        """Run one tool call through the tool-runner and log its result; True when it ends the run. A tool
        that fails (or cannot be reached) is a result the model reads, never the end of the loop."""
        cmd = state.cmd
        ask = CoachToolCall(session_id=cmd.session_id, call_id=call["callId"], name=call["toolName"],
                            input=call.get("arguments") or {}, actor=cmd.actor, trace_id=cmd.trace_id)
        try:
            result = await self._peers.coach_execute(ask)
        except (TimeoutError, RemoteError) as exc:
            text = f"The tool could not be run ({type(exc).__name__}); try again or tell the member."
            result = CoachToolResult(name=call["toolName"], success=False, result={"success": False, "error": text},
                                     formatted=f'<tool_result tool="{call["toolName"]}" status="error">\n{text}\n</tool_result>')
        spec = self._spec(state, call["toolName"])
        await self._emit(state, NewEvent("agent.tool_result", "system", external_event_id=f"result:{call['callId']}", metadata={
            "runId": cmd.run_id, "callId": call["callId"], "toolName": call["toolName"], "success": result.success,
            "result": result.result, "formatted": result.formatted, "durationMs": result.duration_ms,
            "statusDone": spec.status_done if spec else None,
            # The workout as it now stands, for the client's card (generate, swap, adjust, remove).
            "artifact": result.artifact if call["toolName"] in ARTIFACT_TOOLS else None}))
        if result.artifact is not None and call["toolName"] in ARTIFACT_TOOLS:
            await self._emit(state, NewEvent("coach.artifact", "system", metadata={
                "runId": cmd.run_id, "callId": call["callId"], "artifact": result.artifact}))
        state.actions.append({"tool": call["toolName"], "args": call.get("arguments") or {}, "result": result.result})
        return bool(spec and spec.ends_run) or call["toolName"] in ("idle", "message_ask_user")

    async def _finish(self, state: RunState, status: str, reason: str) -> None:
        cmd = state.cmd
        iterations = sum(1 for e in await state.sessions.events(cmd.session_id, event_types=["agent.tool_call"], limit=10_000)
                         if e.metadata.get("runId") == cmd.run_id)
        # Seed 003's run status (completed / error) is the run's; the session rests on seed 004's
        # machine: waiting for the member's answer, or idle until their next message.
        to = "waiting_human" if status == "asked" else "idle"
        current = await state.sessions.get(cmd.session_id)
        if current is not None and current.status != to:
            await state.sessions.transition(cmd.session_id, to)
        await self._emit(state, NewEvent("coach.run_completed", "system", external_event_id=f"run:{cmd.run_id}:done", metadata={
            "runId": cmd.run_id, "status": "error" if status == "error" else "completed", "reason": reason,
            "iterations": iterations}), before_publish=state.let_go)

    # helpers ------------------------------------------------------------------------------------------
    async def _run_events(self, sessions: Sessions, cmd: CoachRun) -> list[SessionEvent]:
        return [e for e in await sessions.events(cmd.session_id, limit=10_000) if e.metadata.get("runId") == cmd.run_id]

    async def _finished(self, sessions: Sessions, cmd: CoachRun) -> bool:
        return any(e.event_type == "coach.run_completed" for e in await self._run_events(sessions, cmd))

    @staticmethod
    def _spec(state: RunState, name: str) -> CoachToolSpec | None:
        return next((s for s in state.specs if s.name == name), None)

    async def _emit(self, state: RunState, event: NewEvent, *,
                    before_publish: Callable[[], Awaitable[None]] | None = None) -> None:
        """Stored first, then fanned out: a listener that misses the publish re-reads the log."""
        stored_events = await state.sessions.append(state.cmd.session_id, [event])
        if before_publish is not None:
            await before_publish()
        for stored in stored_events:
            out = SessionEventOut(session_id=stored.session_id, sequence=stored.sequence, event_type=stored.event_type,
                                  role=stored.role, content=stored.content, metadata=stored.metadata)
            try:
                await bus.publish(edges.session_events, out, subject=session_subject(stored.session_id))
            except Exception as exc:  # noqa: BLE001 — the log has it; the stream re-reads it
                log.warning("could not publish session event %s/%d: %s", stored.session_id, stored.sequence, exc)

    async def _renew(self, cmd: CoachRun, runner: str) -> None:
        await self._lock.run(cmd.session_id, cmd.run_id, runner)


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def _has_tool_use(reply: ModelReply) -> bool:
    return any(b.get("type") == "tool_use" for b in reply.content)

