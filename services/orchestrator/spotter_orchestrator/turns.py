"""Turns from command to `done`: the part of seed 000's state machine around the model loop.

Every command (send, confirm, pick, undo, cancel of a suspended conversation) is a turn with its
own id, lease and events. Redelivery (a replica died mid-turn) re-enters with the same turn id and
reuses whatever is stored: the user message is not written twice, completed tools are not run
again (the tool-runner returns their stored outcome), events already in the log are not re-emitted.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from spotter_shared import bus, metrics, telemetry
from spotter_shared.contracts.commands import (
    Actor, Admission, AdmitCommand, CancelSuspended, CancelTurn, ConfirmTool, ConversationFlags, OrganizeConversation,
    PickTool, SendMessage, TurnCommand, UndoTool,
)
from spotter_shared.contracts.events import ConversationStarted, Done, ErrorEvent, TurnUsage
from spotter_shared.contracts.rag import AmbientHit
from spotter_shared.contracts.tools import CallState, CloseCalls, ResolveCall, ToolName, ToolOutcome, ToolSpec, UndoRequest
from spotter_shared.errors import ErrorCode, RemoteError, SpotterError
from spotter_shared.observability import Endpoint, ReplayViolation, TurnCompleted, TurnFailed, TurnStarted
from spotter_shared.terms import searchable
from spotter_shared.turnlock import LeaseKeeper, Run, TurnLock

from .activity import session_activity
from .admission import Refused, Resolution, Verdict, admitted, command_turn_id, judge, resolution_of
from .calls import History, ToolCall, tool_calls
from .emitter import Emitter
from .loop import CallModel, Failed, Finished, LoopContext, ModelLoop, Outcome, RunTools, Suspended, Step
from .model import ModelClient
from .peers import Peers
from .prompt import AMBIENT_ROOM_TOKENS, TURN_CONTEXT_KEY, Layout, system_blocks, tool_params, turn_context
from .settings import OrchestratorSettings
from .store import OrgContext, StoredMessage, Store, TurnRecord, fallback_title
from .summaries import Summaries

log = logging.getLogger(__name__)

Keepalive = Callable[[], Awaitable[None]]
ABORTED_MESSAGE = "Stopped by the user."


@dataclass
class Delivery:
    """What the core needs to know about the JetStream delivery, without knowing NATS."""

    attempt: int
    keepalive: Keepalive


@dataclass(frozen=True)
class TurnMeta:
    conversation_id: str
    turn_id: str
    trace_id: str
    organization_id: str
    endpoint: Endpoint | None


@dataclass(frozen=True)
class BatchView:
    """A call's batch as the conversation stored it, with what the tool-runner recorded for it."""

    stored: list[StoredMessage]
    message: StoredMessage | None
    calls: tuple[ToolCall, ...]
    states: dict[str, CallState]

    def call(self, tool_use_id: str) -> ToolCall | None:
        return next((c for c in self.calls if c.id == tool_use_id), None)

    def verdict(self, command: Resolution, tool_use_id: str, picked_id: str | None = None, *,
                own_turn: str | None = None) -> Verdict:
        call = self.call(tool_use_id)
        earlier = self.calls[: self.calls.index(call)] if call is not None else ()
        waiting = any(c.waits_for_person(state) and state.status == "pending"
                      for c in earlier if (state := self.states.get(c.id)) is not None)
        return judge(command, call, self.states.get(tool_use_id), picked_id=picked_id,
                     earlier_pending=waiting, own_turn=own_turn)


Body = Callable[[Emitter, TurnRecord], Awaitable[Outcome]]


class TurnRunner:
    def __init__(self, settings: OrchestratorSettings, store: Store, peers: Peers, model: ModelClient, lock: TurnLock,
                 *, events: bus.LivePublisher, cancels: bus.Publisher) -> None:
        self._settings = settings
        self._store = store
        self._peers = peers
        self._lock = lock
        self._events = events
        self._cancels = cancels
        self._loop = ModelLoop(store, peers, model)
        self._summaries = Summaries(settings, store, peers, model)
        self._running: dict[str, asyncio.Task[Outcome]] = {}
        # First deliveries between their lease's claim (which also read whether a stop was asked for) and
        # their task's start: a stop broadcast heard meanwhile is kept here (True) for the task to honour.
        self._starting: dict[str, bool] = {}
        # Turns run at once by this replica, whatever their command; deliveries beyond it wait here
        # with their in-progress heartbeat going, so JetStream does not hand them to another replica.
        self.slots = asyncio.Semaphore(settings.spotter_turn_concurrency)
        # How often a copy of a turn running elsewhere looks again (a dead runner's lease lapses in TTL).
        self._wait_s = min(1.0, settings.spotter_turn_lock_ttl_s / 6)

    @property
    def settings(self) -> OrchestratorSettings:
        return self._settings

    # Commands -------------------------------------------------------------------------------------
    async def send(self, cmd: SendMessage, delivery: Delivery) -> None:
        started = ConversationStarted(conversation_id=cmd.conversation_id) if cmd.is_new else None
        first = delivery.attempt == 1
        begun = asyncio.ensure_future(self._store.begin_turn(
            cmd, self._settings.spotter_model, started.model_dump(mode="json", exclude_none=True) if started else None,
            replay=first and not cmd.is_new))
        # A first delivery has not stored its message yet, so it will search for ambient context: that
        # starts now, beside the turn's set-up, as it is on the way to the model call.
        asked = FirstQuestions.ask(self._peers, cmd) if first else None
        # What the turn reads first comes with begin_turn's statement: the org and the caller, and the replay.
        # Only on a first delivery: the gateway claimed the conversation for this turn before publishing it,
        # so nothing else writes to it meanwhile (a redelivery reads once the lease is its own, after a dead
        # attempt's writes).
        reads = FirstReads.start(self._store, self._recent_activity, cmd, begun=begun) if first else None
        # And its lease: the gateway claimed it for this very turn, so taking it need not wait for begin_turn.
        early = None
        if first:
            # Listening for a stop before the claim reads whether one was asked for: none slips between.
            self._starting[cmd.turn_id] = False
            early = EarlyLease(self._lock, cmd.conversation_id, cmd.turn_id)
        try:
            turn = await begun
            outcome = await self._turn(_meta(cmd), turn, delivery,
                                       lambda emitter, t: self._run_send(cmd, t, emitter, delivery, asked, reads),
                                       early=early)
        finally:
            self._starting.pop(cmd.turn_id, None)
            if early is not None:
                await early.undo()
            if asked is not None:
                asked.drop()
            if reads is not None:
                reads.drop()
            await self._summaries.embedded(cmd.turn_id)
        # The title also when a replica died making it: the command comes back after the turn
        # finished, and the repeated call takes over the dead one's budget hold (`<turn>:title`).
        untitled = (turn.status == "completed"
                    and (await self._store.conversation(cmd.conversation_id)).title == fallback_title(cmd.message))
        if cmd.is_new and (isinstance(outcome, Finished) or untitled):
            # After `done` is out (the client never waits for it): best effort, its own budget.
            # A first delivery made every reply of the turn: their text is at hand, not read back.
            reply = outcome.text if first and isinstance(outcome, Finished) else None
            try:
                await self._summaries.title(cmd, reply)
            except Exception as exc:  # noqa: BLE001 — a title never fails a turn that already finished
                telemetry.event(log, "agent.title.failed", reason="internal", error=type(exc).__name__, traceId=cmd.trace_id)

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

    def tools_changed(self) -> None:
        """Tool packs were added, replaced or removed: ask for every organization's catalog again."""
        self._peers.forget_tools()

    def cancel_running(self, turn_id: str) -> bool:
        """Stop a turn this replica is running (the broadcast reaches every replica)."""
        task = self._running.get(turn_id)
        if task is None and turn_id in self._starting:
            self._starting[turn_id] = True  # its task is about to start: it stops at once
            return True
        if task is None or task.done():
            return False
        task.cancel()
        return True

    async def _begin(self, cmd: TurnCommand, kind: str, tool_use_id: str | None) -> TurnRecord:
        return await self._store.begin_command_turn(cmd.turn_id, cmd.conversation_id, cmd.command_id, kind, tool_use_id)

    # The frame every turn runs in ---------------------------------------------------------------------
    async def _turn(self, meta: TurnMeta, turn: TurnRecord, delivery: Delivery, body: Body, *,
                    early: EarlyLease | None = None) -> Outcome | None:
        """Run one turn to its last event; its outcome, or None when it was not run here. `early`: the
        lease, already asked for (a first delivery's)."""
        if turn.status != "running":
            log.info("turn %s already %s; duplicate command ignored", turn.id, turn.status)
            return None
        runner = early.runner if early is not None else uuid.uuid4().hex[:12]

        async def still_running() -> bool:
            return await self._store.turn_status(meta.turn_id) == "running"

        found = await early.result() if early is not None else None
        # The early claim also read whether a stop was asked for; any other way in asks once the task runs.
        stop_asked = early.cancelled if found is Run.OURS and early is not None else None
        # A second copy of a turn another runner holds (two runners would both write) waits in take().
        match found if found is Run.OURS else await self._lock.take(
                meta.conversation_id, meta.turn_id, runner, still_running=still_running, poll_s=self._wait_s):
            case None:
                log.info("turn %s finished on another replica; delivery %d acknowledged", meta.turn_id, delivery.attempt)
                return None
            case Run.OTHER_TURN:
                # Only possible when our lease expired and another turn started: never interleave.
                log.warning("conversation %s is held by another turn; dropping %s", meta.conversation_id, meta.turn_id)
                await self._store.finish_turn(meta.turn_id, "aborted", ErrorCode.CONVERSATION_BUSY)
                return None
        if delivery.attempt > 1:
            metrics.REDELIVERIES.labels(meta.endpoint or "other").inc()
        emitter = Emitter(self._store, self._events, meta.conversation_id, meta.turn_id,
                          self._settings.spotter_delta_flush_ms / 1000)
        lease = LeaseKeeper(lambda: self._renew(meta, runner), self._settings.spotter_turn_lock_ttl_s / 3)

        released = False

        async def let_go() -> None:
            # Once: `done` lets go before it is published, and the finally below is for every other way out.
            nonlocal released
            if released:
                return
            # Stop renewing before releasing, or a renewal in flight could take the lease back.
            await lease.stop()
            await self._lock.release(meta.conversation_id, meta.turn_id, runner)
            released = True

        try:
            outcome = await self._outcome(meta, turn, delivery, emitter, body, stop_asked)
            await self._finish(meta, emitter, outcome, let_go)
        finally:
            await let_go()
            # A `done` stored with the turn's last reply is heard of even if the turn failed after it.
            await emitter.publish_done()
        return outcome

    async def _outcome(self, meta: TurnMeta, turn: TurnRecord, delivery: Delivery, emitter: Emitter, body: Body,
                       stop_asked: bool | None = None) -> Outcome:
        """`stop_asked`: whether a stop was stored before this delivery listened for the broadcast (None: ask)."""
        if delivery.attempt > self._settings.spotter_max_deliveries:
            return Failed(ErrorCode.INTERNAL, "The turn could not be completed.")
        task = asyncio.create_task(body(emitter, turn))
        self._running[meta.turn_id] = task
        # Registered first, then checked: a cancel broadcast can't slip between the two. A first delivery
        # listened (`_starting`) before its claim read the stored request, so it need not ask again.
        if stop_asked is None:
            stop_asked = await self._lock.cancel_requested(meta.turn_id)
        if stop_asked or self._starting.pop(meta.turn_id, False):
            task.cancel()
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # this process is shutting down: JetStream redelivers the command
            if emitter.done_stored:
                # The stop came after the turn's last reply was stored with its `done`: it had ended.
                return Finished(stop_reason=None)
            return await self._aborted(meta, emitter)
        finally:
            self._running.pop(meta.turn_id, None)
            await emitter.close()

    async def _aborted(self, meta: TurnMeta, emitter: Emitter) -> Failed:
        """Cancel: the assistant message keeps what streamed before the stop."""
        await emitter.flush()
        partial = emitter.partial_text
        if partial:
            await self._store.append_message(meta.conversation_id, meta.turn_id, "assistant",
                                             [{"type": "text", "text": partial}], stop_reason="aborted")
        return Failed(ErrorCode.ABORTED, ABORTED_MESSAGE)

    async def _renew(self, meta: TurnMeta, runner: str) -> None:
        if await self._lock.run(meta.conversation_id, meta.turn_id, runner) is not Run.OURS:
            # Paused past the lease (a frozen VM, a partition): someone else has it now.
            log.error("turn %s lost its lease on conversation %s", meta.turn_id, meta.conversation_id)

    async def _finish(self, meta: TurnMeta, emitter: Emitter, outcome: Outcome, let_go: Callable[[], Awaitable[None]]) -> None:
        match outcome:
            case Finished():
                usage = outcome.usage if outcome.usage is not None else (await self._store.turn(meta.turn_id)).usage
                if emitter.done_stored:  # stored with the last reply (ModelLoop.call_model)
                    await emitter.publish_done(before_publish=let_go)
                else:
                    await emitter.finish(Done(conversation_id=meta.conversation_id, usage=usage), "completed", before_publish=let_go)
                metrics.TURNS.labels("completed").inc()
                # Both ratios: seed 000's read / (read + input) reads ~1.0 even when every call
                # re-writes the conversation; the honest one counts the writes too.
                TurnCompleted(
                    trace_id=meta.trace_id, org_id=meta.organization_id, endpoint=meta.endpoint,
                    input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                    cache_read_tokens=usage.cache_read_tokens, cache_creation_tokens=usage.cache_creation_tokens,
                    cost_usd_micros=usage.cost_usd_micros, cache_hit_ratio=usage.cache_hit_ratio,
                    cache_read_ratio=usage.cache_read_ratio,
                ).log(log)
            case Suspended():
                # Seed 000: the loop suspends and the controller emits `done` with usage 0.
                await emitter.finish(Done(conversation_id=meta.conversation_id, usage=TurnUsage()), "suspended", before_publish=let_go)
                metrics.TURNS.labels("suspended").inc()
            case Failed(code=code, message=message):
                usage = (await self._store.turn(meta.turn_id)).usage
                await emitter.emit(ErrorEvent(code=code, message=message, trace_id=meta.trace_id))
                status = "aborted" if code == ErrorCode.ABORTED else "failed"
                await emitter.finish(Done(conversation_id=meta.conversation_id, usage=usage), status, code, before_publish=let_go)
                metrics.TURNS.labels(status).inc()
                TurnFailed(trace_id=meta.trace_id, org_id=meta.organization_id, endpoint=meta.endpoint, code=code).log(log)

    # send -------------------------------------------------------------------------------------------
    async def _run_send(self, cmd: SendMessage, turn: TurnRecord, emitter: Emitter, delivery: Delivery,
                        asked: FirstQuestions | None = None, reads: FirstReads | None = None) -> Outcome:
        logged = await self._store.turn_events(cmd.conversation_id, cmd.turn_id) if turn.attempts > 1 else []
        if turn.started_seq is not None:
            # Stored with the conversation by begin_turn; listeners hear of it now that the turn runs here.
            await emitter.announce(ConversationStarted(conversation_id=cmd.conversation_id), turn.started_seq)
        elif cmd.is_new and not any(e["type"] == "conversation_started" for e in logged):
            await emitter.emit(ConversationStarted(conversation_id=cmd.conversation_id))
        TurnStarted(trace_id=cmd.trace_id, org_id=cmd.actor.organization_id, endpoint="messages",
                    attempt=delivery.attempt, prompt_length=len(cmd.message)).log(log)
        reads = reads or FirstReads.start(self._store, self._recent_activity, cmd, new=False)
        activity = reads.activity
        write: asyncio.Task[str] | None = None
        ctx: LoopContext | None = None
        try:
            org, stored = await asyncio.gather(reads.org, reads.stored)
            if not self._settings.model_configured or not org.agent_enabled:
                return Failed(ErrorCode.AGENT_DISABLED, "The AI assistant is not enabled for this workspace.")

            if not any(m.turn_id == cmd.turn_id and m.role == "user" for m in stored):
                # Ambient search runs once per user message (a redelivered turn replays the stored block).
                # It embeds the message (tens of ms for a new one), so it runs while the turn is set up
                # (and any open batch is closed), not after: it is on the way to the first token.
                asked = asked or FirstQuestions.ask(self._peers, cmd)
                message: StoredMessage | None = None
                try:
                    if not _open_batch(stored):
                        # Nothing to close first: the first request's reservation (the tier read fresh) is
                        # the message's budget verdict, one question to billing instead of a pre-check and
                        # then a reservation. It is asked while ambient search runs, for the request without
                        # its ambient block and with room for one; once the search has answered, the call
                        # takes it for the request as it is (a block past the room is reserved again,
                        # ModelLoop.retarget). A refused message does not wait for the search.
                        searching = not asked.ambient.done()
                        draft = self._user_message(cmd, org, [] if searching else await asked.ambient)
                        if not self._summaries.due([*stored, draft]):
                            ctx = await self._context(cmd, turn, emitter, logged, [*stored, draft], org=org,
                                                      activity=activity)
                            self._loop.reserve_ahead(ctx, history_of([*stored, draft], self._settings.spotter_prompt_layout),
                                                     fresh_tier=True, room=AMBIENT_ROOM_TOKENS if searching else 0)
                            if (refused := await self._loop.refused(ctx)) is not None:
                                return refused
                            message = draft
                            if searching:
                                message = self._user_message(cmd, org, await asked.ambient)
                                self._retarget(ctx, org, [*stored, message])
                    if ctx is None:
                        # A batch to close or a compaction first: the pre-check answers for the message.
                        verdict = await self._peers.precheck(cmd.actor.organization_id, cmd.trace_id)
                        if not verdict.ok:
                            return Failed(ErrorCode.AGENT_BUDGET_EXCEEDED, verdict.message or "Daily AI budget reached.")
                    stored = await self._close_open_batch(cmd, stored, "superseded_by_user",
                                                          "The user sent a new message instead of answering; this was not run.")
                    await delivery.keepalive()
                    message = message or self._user_message(cmd, org, await asked.ambient)
                finally:
                    asked.drop()
                # The user's message is written once the budget has said yes (a refused message is not
                # stored), while the model call is prepared and made: nothing the call yields is stored or
                # published before the message is (ModelLoop.call_model), so nothing comes before it.
                write = asyncio.create_task(self._store.append_message(
                    cmd.conversation_id, cmd.turn_id, "user", message.content, page_context=message.page_context,
                    message_id=message.id))
                stored = [*stored, message]
                # A reservation asked ahead was asked for this very replay, found not due then.
                if ctx is None and self._summaries.due(stored):
                    await write
                    await delivery.keepalive()
                    stored = await self._summaries.compact(cmd, await self._store.messages(cmd.conversation_id))

            ctx = ctx or await self._context(cmd, turn, emitter, logged, stored, org=org, activity=activity)
            ctx.pending_write = write
            step = resume_point(stored, cmd.turn_id, ctx.specs)
            if isinstance(step, CallModel):
                emitter.suppress_prefix(len(unfinished_text(logged)))
            return await self._loop.drive(ctx, history_of(stored, self._settings.spotter_prompt_layout), step)
        finally:
            reads.drop()
            if ctx is not None and ctx.ahead is not None:
                # Asked for ahead and not taken by a call (a refusal, a failure): given back, not left to expire.
                await asyncio.shield(self._loop.give_back(ctx))
            if write is not None:
                await write  # awaited by the model call once it has answered; here for the paths that made none

    @staticmethod
    def _user_message(cmd: SendMessage, org: OrgContext, ambient: list[AmbientHit]) -> StoredMessage:
        """The user's message as it is stored: their words, and the page and turn context it came with."""
        page = cmd.page_context.model_dump(mode="json") if cmd.page_context else {}
        page[TURN_CONTEXT_KEY] = turn_context(org, cmd.actor, cmd.page_context, ambient, datetime.now(UTC))
        return StoredMessage(id=str(uuid.uuid4()), role="user", content=[{"type": "text", "text": cmd.message}],
                             turn_id=cmd.turn_id, stop_reason=None, page_context=page)

    async def _close_open_batch(self, cmd: TurnCommand, stored: list[StoredMessage], code: str, message: str) -> list[StoredMessage]:
        """Replay-integrity guard (seed 000), applied when writing: an assistant tool batch left
        without results (the user typed instead of clicking, or a stop) gets one tool_result
        message — real results where a call finished, typed errors for the rest — so every later
        request to the model is valid. The tool-runner closes the calls: it owns their records."""
        calls = _open_batch(stored)
        if not calls:
            return stored
        last = stored[-1]
        closed = await self._peers.close(CloseCalls(conversation_id=cmd.conversation_id, actor=cmd.actor,
                                                    trace_id=cmd.trace_id, code=code, message=message))
        states = await self._peers.calls(cmd.conversation_id, [c.id for c in calls], cmd.actor)
        outcomes = {i: s.outcome for i, s in states.items()}
        results = [call.result_block(outcomes.get(call.id)) for call in calls]
        result_id = await self._store.append_message(cmd.conversation_id, cmd.turn_id, "tool_result", results)
        unresolved = [call.id for call in calls if call.id not in closed and outcomes.get(call.id) is None]
        ReplayViolation(
            trace_id=cmd.trace_id, org_id=cmd.actor.organization_id, endpoint="messages", code="orphaned_tool_use",
            violations=len(unresolved) + len(closed), reasons=["orphaned_tool_use"], repaired=True,
            blocks=[b.get("type") for b in last.content],
        ).log(log)
        return [*stored, StoredMessage(id=result_id, role="tool_result", content=results, turn_id=cmd.turn_id, stop_reason=None)]

    # admission --------------------------------------------------------------------------------------
    async def admit(self, cmd: AdmitCommand) -> Admission:
        """The one judge of confirm / pick / undo / cancel (see admission.py). A start holds the
        conversation's lease for the command's turn until that turn runs; refusals raise."""
        if cmd.command == "cancel":
            return await self._admit_cancel(cmd)
        command = resolution_of(cmd)
        assert cmd.tool_use_id is not None
        turn_id = command_turn_id(command, cmd.conversation_id, cmd.tool_use_id)
        specs = {spec.name: spec for spec in await self._peers.tools(cmd.actor, cmd.trace_id)}
        view = await self._batch(cmd, cmd.tool_use_id, specs)
        verdict = view.verdict(command, cmd.tool_use_id, cmd.picked_id, own_turn=await self._store.turn_status(turn_id))
        admission = admitted(verdict, turn_id)
        if admission.verdict == "start" and not await self._lock.claim(cmd.conversation_id, turn_id):
            raise SpotterError(ErrorCode.CONVERSATION_BUSY, "This conversation is still answering. Wait for it to finish or cancel it.")
        return admission

    async def _batch(self, cmd: TurnCommand | AdmitCommand, tool_use_id: str, specs: Mapping[str, ToolSpec]) -> BatchView:
        stored = await self._store.messages(cmd.conversation_id)
        # A call compaction summarized away is still the conversation's (an old write can be undone).
        found = find_batch(stored, tool_use_id, specs) or find_batch(await self._store.all_messages(cmd.conversation_id),
                                                                    tool_use_id, specs)
        if found is None:
            return BatchView(stored=stored, message=None, calls=(), states={})
        message, calls = found
        states = await self._peers.calls(cmd.conversation_id, [c.id for c in calls], cmd.actor)
        return BatchView(stored=stored, message=message, calls=calls, states=states)

    async def _admit_cancel(self, cmd: AdmitCommand) -> Admission:
        running = await self._lock.holder(cmd.conversation_id) or await self._store.running_turn(cmd.conversation_id)
        if running:
            # Stored first (a replica that picks the turn up later stops it too), then broadcast.
            await self._lock.request_cancel(running)
            await bus.publish(self._cancels, CancelTurn(conversation_id=cmd.conversation_id, turn_id=running, trace_id=cmd.trace_id))
            return Admission(verdict="cancelling", turn_id=running)
        stored = await self._store.messages(cmd.conversation_id)
        last = next((m for m in reversed(stored) if m.role == "assistant"), None)
        calls = tool_calls(last.content, {}) if last is not None else ()
        states = await self._peers.calls(cmd.conversation_id, [c.id for c in calls], cmd.actor) if calls else {}
        pending = next((c.id for c in calls if getattr(states.get(c.id), "status", None) == "pending"), None)
        if pending is None:
            return Admission(verdict="idle")
        turn_id = command_turn_id("cancel", cmd.conversation_id, pending)
        if not await self._lock.claim(cmd.conversation_id, turn_id):
            raise SpotterError(ErrorCode.CONVERSATION_BUSY, "This conversation is busy; try again.")
        return Admission(verdict="start", turn_id=turn_id)

    # pin / archive ----------------------------------------------------------------------------------
    async def organize(self, cmd: OrganizeConversation) -> ConversationFlags:
        """Pin or archive: flags only, so it needs no lease and never waits for a running turn."""
        row = await self._store.organize(cmd.conversation_id, cmd.actor.organization_id, cmd.actor.user_id,
                                         cmd.pinned, cmd.archived)
        if row is None:
            raise SpotterError(ErrorCode.NOT_FOUND, "Conversation not found.")
        archived_at = row["archived_at"]
        return ConversationFlags(conversation_id=str(row["id"]), pinned=row["pinned"],
                                 archived_at=archived_at.isoformat() if archived_at else None)

    # confirm / pick ---------------------------------------------------------------------------------
    async def _run_resolution(self, cmd: ConfirmTool | PickTool, turn: TurnRecord, emitter: Emitter) -> Outcome:
        logged = await self._store.turn_events(cmd.conversation_id, cmd.turn_id) if turn.attempts > 1 else []
        specs = await self._peers.tools(cmd.actor, cmd.trace_id)
        view = await self._batch(cmd, cmd.tool_use_id, {s.name: s for s in specs})
        # No new context: the prompt is the stored conversation, re-read from the cache.
        ctx = await self._context(cmd, turn, emitter, logged, view.stored)
        if turn.attempts == 1:
            # The gateway was told yes, but another click may have resolved the call since.
            command: Resolution = "pick" if isinstance(cmd, PickTool) else "confirm"
            verdict = view.verdict(command, cmd.tool_use_id, cmd.picked_id if isinstance(cmd, PickTool) else None)
            if isinstance(verdict, Refused):
                return Failed(verdict.code, verdict.message)
        target = view.call(cmd.tool_use_id)
        if view.message is None or target is None:
            return Failed(ErrorCode.TOOL_EXECUTION_NOT_FOUND, "There is no such pending action in this conversation.")
        state = view.states.get(target.id)
        known: dict[str, ToolOutcome] = {}
        if state is not None and state.status == "pending":
            try:
                known[target.id] = await self._resolve(cmd, ctx, view.message.id, target)
            except RemoteError as exc:
                error = exc.as_spotter()
                return Failed(error.code, error.message)
        history = history_of(view.stored, self._settings.spotter_prompt_layout)
        step = await self._loop.advance(ctx, history, RunTools(message_id=view.message.id, calls=view.calls), known)
        return await self._loop.drive(ctx, history, step)

    async def _resolve(self, cmd: ConfirmTool | PickTool, ctx: LoopContext, message_id: str, call: ToolCall) -> ToolOutcome:
        if isinstance(cmd, ConfirmTool) and cmd.approved:
            return await self._loop.run_approved(ctx, message_id, call)
        request = ResolveCall(
            conversation_id=cmd.conversation_id, tool_use_id=cmd.tool_use_id, actor=cmd.actor, trace_id=cmd.trace_id,
            decision="pick" if isinstance(cmd, PickTool) else "reject",
            picked_id=cmd.picked_id if isinstance(cmd, PickTool) else None,
        )
        try:
            outcome = await self._peers.resolve(request)
        except RemoteError as exc:
            if exc.code != ErrorCode.TOOL_ALREADY_RESOLVED:
                raise
            # Our own earlier attempt resolved it (its reply was lost): the record is the outcome.
            state = (await self._peers.calls(cmd.conversation_id, [call.id], cmd.actor)).get(call.id)
            if state is None or state.outcome is None:
                raise
            outcome = state.outcome
        await self._loop.report(ctx, call, outcome)
        return outcome

    # undo / cancel ----------------------------------------------------------------------------------
    async def _run_undo(self, cmd: UndoTool, turn: TurnRecord, emitter: Emitter) -> Outcome:
        if turn.attempts == 1:
            specs = {spec.name: spec for spec in await self._peers.tools(cmd.actor, cmd.trace_id)}
            verdict = (await self._batch(cmd, cmd.tool_use_id, specs)).verdict("undo", cmd.tool_use_id)
            if isinstance(verdict, Refused):
                return Failed(verdict.code, verdict.message)
        try:
            undone = await self._peers.undo(UndoRequest(conversation_id=cmd.conversation_id, tool_use_id=cmd.tool_use_id,
                                                        actor=cmd.actor, trace_id=cmd.trace_id))
        except RemoteError as exc:
            error = exc.as_spotter()
            return Failed(error.code, error.message)
        logged = await self._store.turn_events(cmd.conversation_id, cmd.turn_id) if turn.attempts > 1 else []
        seen = {(e["type"], e.get("toolUseId")) for e in logged}
        inverse = ToolCall(id=undone.tool_use_id, name=ToolName(undone.router, undone.action), input=undone.input, spec=None)
        if ("tool_started", inverse.id) not in seen:
            await emitter.emit(inverse.started())
        if ("tool_completed", inverse.id) not in seen:
            await emitter.emit(inverse.completed(undone.outcome))
        if not undone.outcome.ok:
            error = undone.outcome.error
            return Failed(ErrorCode.UNDO_UNAVAILABLE, error.message if error else "The undo did not succeed.")
        if not any(m.turn_id == cmd.turn_id for m in await self._store.messages(cmd.conversation_id)):
            # The model must know: without this its next answer would assume the write still stands.
            note = (f'<app_event kind="undo">The user pressed Undo on {cmd.tool_use_id}; the app ran '
                    f"{inverse.name.wire} {json.dumps(undone.input)} and it succeeded.</app_event>")
            await self._store.append_message(cmd.conversation_id, cmd.turn_id, "user", [{"type": "text", "text": note}],
                                             page_context={"appEvent": "undo", "toolUseId": cmd.tool_use_id})
        return Finished(stop_reason="undo")

    async def _run_cancel(self, cmd: CancelSuspended, emitter: Emitter) -> Outcome:
        stored = await self._store.messages(cmd.conversation_id)
        await self._close_open_batch(cmd, stored, "aborted", ABORTED_MESSAGE)
        return Failed(ErrorCode.ABORTED, ABORTED_MESSAGE)

    # helpers ----------------------------------------------------------------------------------------
    async def _context(self, cmd: TurnCommand, turn: TurnRecord, emitter: Emitter, logged: list[dict[str, Any]],
                       stored: list[StoredMessage], *, org: OrgContext | None = None,
                       activity: Awaitable[str | None] | None = None) -> LoopContext:
        org = org or await self._store.org_context(cmd.actor.organization_id, cmd.actor.user_id)
        specs = await self._peers.tools(cmd.actor, cmd.trace_id)
        seed = latest_turn_context(stored) if self._settings.spotter_prompt_layout == "seed" else None
        recent = await (activity if activity is not None else self._recent_activity(cmd.actor, org))
        return LoopContext(
            conversation_id=cmd.conversation_id, turn_id=cmd.turn_id, trace_id=cmd.trace_id, actor=cmd.actor,
            model=self._settings.spotter_model, max_tokens=self._settings.spotter_max_tokens,
            max_rounds=self._settings.spotter_max_turns,
            system=system_blocks(org, seed),
            tools=tool_params(specs), specs={s.name: s for s in specs}, emitter=emitter,
            activity=recent, rounds=turn.model_calls, turn_usage=turn.usage,
            already_announced={e["toolUseId"] for e in logged if e["type"] == "tool_started"},
            already_completed={e["toolUseId"] for e in logged if e["type"] == "tool_completed"},
            already_pending={e["toolUseId"] for e in logged if e["type"] in ("confirmation_pending", "disambiguation_pending")},
        )


    def _retarget(self, ctx: LoopContext, org: OrgContext, stored: list[StoredMessage]) -> None:
        """The first request as it is now that the message's ambient block has come (`ModelLoop.retarget`);
        in the seed layout that block is in the system prompt."""
        layout = self._settings.spotter_prompt_layout
        if layout == "seed":
            ctx.system = system_blocks(org, latest_turn_context(stored))
        self._loop.retarget(ctx, history_of(stored, layout))

    async def _recent_activity(self, actor: Actor, org: OrgContext | Awaitable[OrgContext]) -> str | None:
        """Context, not a precondition: a turn goes on without it if it cannot be read. The caller's session
        comes with the org (`org` may still be on its way: the turn reads it beside this)."""
        try:
            if not isinstance(org, OrgContext):
                org = await org
            return await session_activity(self._store.pool, actor.organization_id, org.caller_session, org.timezone,
                                          datetime.now(UTC))
        except Exception:  # noqa: BLE001
            log.exception("recent activity for the turn could not be read; going on without it")
            return None


def _open_batch(stored: list[StoredMessage]) -> tuple[ToolCall, ...]:
    """The calls of the assistant tool batch the replay ends with; none when it does not end with one."""
    last = stored[-1] if stored else None
    return tool_calls(last.content, {}) if last is not None and last.role == "assistant" else ()


async def _org_of(begun: Awaitable[TurnRecord]) -> OrgContext:
    """The org and the caller begin_turn's statement read."""
    turn = await begun
    if turn.org is None:
        raise LookupError("the turn's organization or caller is not there")
    return turn.org


async def _replay_of(begun: Awaitable[TurnRecord]) -> list[StoredMessage]:
    """The replay begin_turn's statement read."""
    replay = (await begun).replay
    if replay is None:
        raise LookupError("begin_turn was not asked for the replay")
    return list(replay)


async def _nothing_stored() -> list[StoredMessage]:
    return []


@dataclass(frozen=True)
class FirstReads:
    """What a send reads before its model call, side by side: the org (with the caller), the replay
    (none for a conversation this very turn creates) and the caller's recent activity (from the running
    session the org's statement reads; more statements only when there is a session to describe)."""

    org: asyncio.Future[OrgContext]
    stored: asyncio.Future[list[StoredMessage]]
    activity: asyncio.Future[str | None]

    @classmethod
    def start(cls, store: Store, recent_activity: Callable[[Actor, Awaitable[OrgContext]], Awaitable[str | None]],
              cmd: SendMessage, *, new: bool | None = None, begun: asyncio.Future[TurnRecord] | None = None) -> FirstReads:
        """`new`: whether the conversation is known to have no messages (by default: the turn creates it);
        `begun`: begin_turn, whose statement reads the org, the caller and (unless new) the replay."""
        fresh = cmd.is_new if new is None else new
        if begun is not None:
            org = asyncio.ensure_future(_org_of(begun))
            stored = asyncio.ensure_future(_nothing_stored() if fresh else _replay_of(begun))
        else:
            org = asyncio.ensure_future(store.org_context(cmd.actor.organization_id, cmd.actor.user_id))
            stored = asyncio.ensure_future(_nothing_stored() if fresh else store.messages(cmd.conversation_id))
        activity = asyncio.ensure_future(recent_activity(cmd.actor, org))
        return cls(org=org, stored=stored, activity=activity)

    def drop(self) -> None:
        for task in (self.activity, self.stored, self.org):
            if not task.done():
                task.cancel()
            elif not task.cancelled():
                task.exception()


class EarlyLease:
    """A first delivery's lease, asked for beside `begin_turn`. The turn takes the answer (`result`); a turn
    that does not run here (begin_turn failed, was stopped, or found the turn not running) hands a lease it
    got back to the gateway's admission (`undo`, a no-op once the answer was taken): the lease is then as it
    would have been without the early take, and a redelivery takes it at once. The same round trip reads
    whether the turn was asked to stop (`cancelled`); the turn listened for the stop broadcast before it."""

    def __init__(self, lock: TurnLock, conversation_id: str, turn_id: str) -> None:
        self.runner = uuid.uuid4().hex[:12]
        self._lock = lock
        self._conversation_id = conversation_id
        self._turn_id = turn_id
        self._task = asyncio.create_task(lock.run_checking_cancel(conversation_id, turn_id, self.runner))
        self._taken = False
        # Whether the turn had been asked to stop when the claim ran (known once `result` answered).
        self.cancelled = False

    async def result(self) -> Run | None:
        """The claim's answer; None when it failed (the turn then asks again)."""
        self._taken = True
        try:
            found, self.cancelled = await self._task
        except Exception:  # noqa: BLE001 — Redis hiccup: take() asks again and reports its own failure
            log.warning("early lease for turn %s failed", self._turn_id, exc_info=True)
            return None
        return found

    async def undo(self) -> None:
        if self._taken:
            return
        if await self.result() is Run.OURS:
            await self._lock.hand_back(self._conversation_id, self._turn_id, self.runner)


@dataclass(frozen=True)
class FirstQuestions:
    """What a new user message asks before its model call that needs nothing the turn reads (ambient
    search), asked at once, beside the turn's set-up; awaited where the turn needs it."""

    ambient: asyncio.Future[list[AmbientHit]]

    @classmethod
    def ask(cls, peers: Peers, cmd: SendMessage) -> FirstQuestions:
        if not searchable(cmd.message):
            # Rag would answer `too_short` or `no_terms` (the same code decides): no hits, no round trip.
            nothing: asyncio.Future[list[AmbientHit]] = asyncio.get_running_loop().create_future()
            nothing.set_result([])
            return cls(ambient=nothing)
        return cls(ambient=asyncio.create_task(peers.ambient(cmd.actor.organization_id, cmd.message, cmd.trace_id)))

    def drop(self) -> None:
        """Cancel what is still asked (a refused, failed or duplicate turn has no use for it); a
        failure nobody awaited is taken here, so it is not reported as never retrieved."""
        if not self.ambient.done():
            self.ambient.cancel()
        elif not self.ambient.cancelled():
            self.ambient.exception()


_ENDPOINTS: dict[type, Endpoint] = {SendMessage: "messages", ConfirmTool: "confirm", PickTool: "pick", UndoTool: "undo",
                                    CancelSuspended: "cancel"}


def _meta(cmd: TurnCommand) -> TurnMeta:
    return TurnMeta(conversation_id=cmd.conversation_id, turn_id=cmd.turn_id, trace_id=cmd.trace_id,
                    organization_id=cmd.actor.organization_id, endpoint=_ENDPOINTS.get(type(cmd)))


def history_of(stored: list[StoredMessage], layout: Layout = "cached") -> History:
    """The model's messages from the stored replay, the same bytes every time: the summary note as a
    user-side text, and (layout "cached") each user message's stored turn context before its words."""
    history: History = []
    for m in stored:
        content = m.content
        if layout == "cached" and m.role == "user" and (context := turn_context_of(m)):
            content = [{"type": "text", "text": context}, *content]
        history.append({"role": "assistant" if m.role == "assistant" else "user", "content": content})
    return history


def turn_context_of(message: StoredMessage) -> str | None:
    value = (message.page_context or {}).get(TURN_CONTEXT_KEY)
    return value if isinstance(value, str) and value else None


def latest_turn_context(stored: list[StoredMessage]) -> str | None:
    """Seed layout only: the newest user message's context, as seed 000's third system block."""
    return next((c for m in reversed(stored) if m.role == "user" and (c := turn_context_of(m))), None)


def find_batch(stored: list[StoredMessage], tool_use_id: str,
               specs: Mapping[str, ToolSpec] | None = None) -> tuple[StoredMessage, tuple[ToolCall, ...]] | None:
    """The assistant message that asked for `tool_use_id`, and its calls in order."""
    for message in reversed(stored):
        if message.role != "assistant":
            continue
        calls = tool_calls(message.content, specs or {})
        if any(c.id == tool_use_id for c in calls):
            return message, calls
    return None


def resume_point(stored: list[StoredMessage], turn_id: str, specs: Mapping[str, ToolSpec] | None = None) -> Step:
    """Where a (re)started turn continues: ask the model, run an unanswered tool batch, or finish."""
    last = stored[-1] if stored else None
    if last is None or last.role != "assistant" or last.turn_id != turn_id:
        return CallModel()
    calls = tool_calls(last.content, specs or {})
    if calls:
        return RunTools(message_id=last.id, calls=calls)
    return Finished(stop_reason=last.stop_reason)


def unfinished_text(logged: list[dict[str, Any]]) -> str:
    """Text a crashed attempt streamed for a model call whose message was never stored."""
    text = ""
    for event in logged:
        text = text + event["delta"] if event["type"] == "text_delta" else ""
    return text
