"""Execute one tool_use at most once per (conversation_id, tool_use_id) — SPEC decision 5.

The execution row is recorded ('running') before anything runs. The handler, its audit row and the
row's terminal status then commit in ONE transaction that holds the row lock, so:
  * a crash mid-way leaves no side effect, and the retry runs the tool once;
  * a concurrent duplicate waits on the lock, then finds the terminal status and replays it;
  * a repeat after completion replays the stored outcome without running anything.
A failing tool is data (a typed `ToolError`); only infrastructure failures propagate.

`hold` validates a call and records it 'pending' without running it (a confirmation or a user_picker
waits for the user); a later execute of the same key runs it, `resolve` answers it with the user's
rejection or pick, and `close` rejects every call still waiting. `undo` runs a succeeded write's declared
inverse through this same at-most-once path, under a key derived from the original's.

The runner is the only writer of ai_tool_executions and audit_logs: other services ask `calls` for them.

Rag indexes programs and workouts. Once a call's transaction has committed (never before, and never for a
call that failed or was rolled back), the runner announces the ones it created, changed or deleted — an undo
too — on rag's durable stream; a lost announcement only delays the index until rag's sweep. Read tools reach
rag's hybrid search through `ToolContext.search`.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any, Protocol, cast

import asyncpg
from opentelemetry import trace
from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from spotter_shared.contracts.events import ToolError
from spotter_shared.contracts.commands import Actor
from spotter_shared.contracts.rag import EntitiesChanged, Scope, SearchQuery, SearchResult
from spotter_shared.contracts.tools import (
    AppAction,
    AppActionResult,
    CallsQuery,
    CallState,
    CallStates,
    CatalogRequest,
    ClosedCalls,
    CloseCalls,
    ExecuteTool,
    ResolveCall,
    ToolCatalog,
    ToolGate,
    ToolName,
    ToolOutcome,
    UndoOutcome,
    UndoRequest,
)
from spotter_shared.errors import ErrorCode, SpotterError
from spotter_shared import metrics
from spotter_shared.observability import ToolExecuted
from spotter_shared.telemetry import event

from .context import Search, ToolContext
from .declaration import ToolDecl, ToolFailure, ToolInput
from .packs.registry import PackRegistry
from .packs.tool import PackTool
from .registry import Registry, spec_of

log = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)

TERMINAL = frozenset({"succeeded", "failed", "rejected_by_user"})

# Errors that say the database (not the tool) is in trouble: they propagate, and the execution row
# stays non-terminal so a retry runs the tool once it is reachable again.
INFRASTRUCTURE_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.exceptions.InterfaceError,
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
    asyncpg.exceptions.InsufficientResourcesError,
    asyncpg.exceptions.TransactionRollbackError,
    OSError,
)

_CLAIM = """
INSERT INTO ai_tool_executions (conversation_id, message_id, tool_use_id, router, action, input, status)
SELECT c.id, m.id, $3, $4, $5, $6, $8::ai_tool_status
  FROM ai_conversations c JOIN ai_messages m ON m.conversation_id = c.id
 WHERE c.id = $1 AND m.id = $2 AND c.organization_id = $7
ON CONFLICT (conversation_id, tool_use_id) DO NOTHING
"""

# The call's row, locked, and whether the actor still holds the role it states (the check `_admit` makes),
# in one statement.
_LOCK = """
SELECT e.id, e.status::text AS status, e.router, e.action, e.input, e.output, e.error_code, e.error_message, e.duration_ms,
       EXISTS (SELECT 1 FROM memberships m
                WHERE m.id = $4 AND m.organization_id = $3 AND m.user_id = $5 AND m.role::text = $6
                  AND m.status = 'active') AS member
  FROM ai_tool_executions e JOIN ai_conversations c ON c.id = e.conversation_id
 WHERE e.conversation_id = $1 AND e.tool_use_id = $2 AND c.organization_id = $3
   FOR UPDATE OF e
"""

_ORIGINAL = """
SELECT e.message_id, e.status::text AS status, e.router, e.action, e.output, e.audit_log_id
  FROM ai_tool_executions e JOIN ai_conversations c ON c.id = e.conversation_id
 WHERE e.conversation_id = $1 AND e.tool_use_id = $2 AND c.organization_id = $3
"""

_CALLS = """
SELECT e.tool_use_id, e.status::text AS status, e.router, e.action, e.input, e.output, e.error_code,
       e.error_message, e.duration_ms, e.gate
  FROM ai_tool_executions e JOIN ai_conversations c ON c.id = e.conversation_id
 WHERE e.conversation_id = $1 AND e.tool_use_id = ANY($2::text[]) AND c.organization_id = $3
"""

_LOCK_ANSWER = """
SELECT e.id, e.status::text AS status, e.router, e.action, e.input
  FROM ai_tool_executions e JOIN ai_conversations c ON c.id = e.conversation_id
 WHERE e.conversation_id = $1 AND e.tool_use_id = $2 AND c.organization_id = $3
   FOR UPDATE OF e
"""

_ANSWERED = """
UPDATE ai_tool_executions
   SET status = $2::ai_tool_status, output = $3, error_code = $4, error_message = $5, duration_ms = 0,
       updated_at = clock_timestamp()
 WHERE id = $1
"""

_CLOSE = """
WITH closed AS (
    UPDATE ai_tool_executions e
       SET status = 'rejected_by_user', output = $3, error_code = $4, error_message = $5, duration_ms = 0,
           updated_at = clock_timestamp()
      FROM ai_conversations c
     WHERE c.id = e.conversation_id AND e.conversation_id = $1 AND c.organization_id = $2 AND e.status = 'pending'
 RETURNING e.tool_use_id, e.created_at
)
SELECT tool_use_id FROM closed ORDER BY created_at, tool_use_id
"""

_MEMBERSHIP = """
SELECT 1 FROM memberships
 WHERE id = $1 AND organization_id = $2 AND user_id = $3 AND role = $4::membership_role AND status = 'active'
"""

_AUDIT = """
INSERT INTO audit_logs (organization_id, actor_clerk_id, action, resource, resource_id, metadata)
VALUES ($1, $2, $3, $4, $5, $6) RETURNING id
"""

_SUCCEEDED = """
UPDATE ai_tool_executions
   SET status = 'succeeded', output = $2, duration_ms = $3, resource_id = $4, audit_log_id = $5,
       error_code = NULL, error_message = NULL, updated_at = clock_timestamp()
 WHERE id = $1
"""

_HELD = """
UPDATE ai_tool_executions SET status = 'pending', gate = coalesce($2, gate), updated_at = clock_timestamp()
 WHERE id = $1
"""

_FAILED = """
UPDATE ai_tool_executions
   SET status = 'failed', output = $2, error_code = $3, error_message = $4, duration_ms = $5,
       updated_at = clock_timestamp()
 WHERE id = $1
"""


UNDO_PREFIX = "undo_"


class _ReadFailed(Exception):
    """A read tool's failure, raised out of the call's transaction so that it is rolled back."""

    def __init__(self, failure: ToolFailure, duration_ms: int) -> None:
        super().__init__(failure.code)
        self.failure = failure
        self.duration_ms = duration_ms

# What the model reads on every call a person turned down or that was closed unanswered.
NOT_RETRIED = "Do not retry it unless the user asks again."


# Scopes of rag's index that tools write, which are also the audit resources of their writes.
INDEXED: frozenset[Scope] = frozenset({"program", "workout"})
MAX_IDS = 1000  # per announcement (EntitiesChanged.ids)

# Each entity changed by a call: {scope: ids}.
Changes = dict[Scope, set[str]]

# A tool as the runner executes it: Spotter's own, or an operation of an organization's tool pack.
Tool = ToolDecl | PackTool


@dataclass(frozen=True)
class RuleOutcome:
    """What a pack's rules leave for a call they let through: a confirmation to ask, warnings to show."""

    gate: ToolGate | None
    warnings: list[str]


class RagPeer(Protocol):
    """What the runner asks of rag (peers.Rag over NATS)."""

    async def search(self, query: SearchQuery, *, trace_id: str) -> SearchResult: ...

    async def announce(self, changed: EntitiesChanged, *, msg_id: str, trace_id: str) -> None: ...


def utcnow() -> datetime:
    return datetime.now(UTC)


def undo_key(tool_use_id: str) -> str:
    """Execution key of the inverse of `tool_use_id`: one per original, so undo runs at most once.
    Anthropic ids are ~30 characters, far from the 64 at which two keys could collide."""
    return (UNDO_PREFIX + tool_use_id)[:64]


# What the app's own buttons may run through `app_action` (none is destructive: there is no
# confirmation step on that path).
APP_ACTIONS: frozenset[tuple[str, str]] = frozenset({("tasks", "create")})
_APP_ERRORS = {"forbidden": ErrorCode.FORBIDDEN, "not_found": ErrorCode.NOT_FOUND}


class ToolRunner:
    """The tool-runner's core. `pool` must come from `spotter_shared.db.create_pool` (jsonb codecs). Without
    `rag`, read tools search by name alone and nothing is announced."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        registry: Registry,
        *,
        clock: Callable[[], datetime] = utcnow,
        rag: RagPeer | None = None,
        packs: PackRegistry | None = None,
    ) -> None:
        self._pool = pool
        self._registry = registry
        self._clock = clock
        self._rag = rag
        self._packs = packs

    async def catalog(self, request: CatalogRequest) -> ToolCatalog:
        """Spotter's own tools first, then the organization's packs: a stable order keeps the prompt cache warm."""
        tools = self._registry.for_role(request.role)
        if self._packs is not None and request.organization_id is not None:
            packs = await self._packs.tools(request.organization_id)
            tools += [spec_of(tool) for tool in packs.values() if request.role in tool.roles]
        return ToolCatalog(tools=tools)

    async def execute(self, cmd: ExecuteTool) -> ToolOutcome:
        return await self._execute(cmd)

    async def undo(self, req: UndoRequest) -> UndoOutcome:
        """Run the declared inverse of a succeeded call. Not gated by confirmation: the user asked for
        exactly this. A repeat replays the inverse's stored outcome, so nothing is undone twice."""
        _check_keys(_conversation_ids(req.conversation_id, req.actor), req.tool_use_id)
        with tracer.start_as_current_span("tool-runner.undo"):
            original = await self._pool.fetchrow(
                _ORIGINAL, req.conversation_id, req.tool_use_id, req.actor.organization_id
            )
            cmd = self._inverse_command(req, original)
            # Both audit rows stay; the inverse's points at the original's.
            audit_log_id = original["audit_log_id"]
            link = {"undoOf": audit_log_id and str(audit_log_id), "inverseOfToolUseId": req.tool_use_id}
            outcome = await self._execute(cmd, link=link)
        return UndoOutcome(
            router=cmd.router, action=cmd.action, tool_use_id=cmd.tool_use_id, input=cmd.input, outcome=outcome
        )

    async def app_action(self, req: AppAction) -> AppActionResult:
        """A person's own action from the app, through the same tool the agent would use: validated,
        role-checked and audited (as not the agent's), its changes announced to rag. There is no
        execution record to replay: the app's form is not retried by a model."""
        if (req.router, req.action) not in APP_ACTIONS:
            raise SpotterError(ErrorCode.FORBIDDEN, f"{req.router}.{req.action} is not an app action.")
        key = f"app_{uuid.uuid4().hex}"
        cmd = ExecuteTool(conversation_id=key, message_id=key, tool_use_id=key, router=req.router, action=req.action,
                          input=req.input, actor=req.actor, trace_id=req.trace_id)
        changes: Changes = {}
        with tracer.start_as_current_span("tool-runner.app_action", attributes={"router": req.router, "action": req.action}):
            async with self._pool.acquire() as conn, conn.transaction():
                try:
                    decl, args = await self._admit(conn, cmd)
                    ctx = ToolContext(conn=conn, actor=req.actor, conversation_id=key, tool_use_id=key,
                                      trace_id=req.trace_id, now=self._clock(), search=self._search(req.trace_id))
                    output = to_jsonable_python(await decl(ctx, args), by_alias=True)
                except ToolFailure as failure:
                    raise SpotterError(_APP_ERRORS.get(failure.code, ErrorCode.INVALID_REQUEST), failure.message) from None
                await self._audit(conn, cmd, decl, output, {"agent": False, "via": "app", "conversationId": None,
                                                            "toolUseId": None})
            _collect(changes, ctx.touched, decl, output)
            await self._announce(cmd, changes)
        metrics.TOOL_RUNS.labels(req.router, req.action, "succeeded").inc()
        return AppActionResult(output=output)

    async def calls(self, query: CallsQuery) -> CallStates:
        """The recorded calls among `query.tool_use_ids`, in the order asked; unknown ids are left out."""
        _check_keys(_conversation_ids(query.conversation_id, query.actor), *query.tool_use_ids)
        rows = await self._pool.fetch(_CALLS, query.conversation_id, query.tool_use_ids, query.actor.organization_id)
        by_id = {row["tool_use_id"]: row for row in rows}
        return CallStates(calls=[self._state(by_id[i], query.actor.role) for i in query.tool_use_ids if i in by_id])

    async def resolve(self, req: ResolveCall) -> ToolOutcome:
        """A person's answer to a pending call: a rejection, or a pick for a user_picker. Exactly once:
        the row lock makes a concurrent second answer wait, then find the call no longer pending."""
        _check_keys(_conversation_ids(req.conversation_id, req.actor), req.tool_use_id)
        with tracer.start_as_current_span("tool-runner.resolve", attributes={"decision": req.decision}):
            async with self._pool.acquire() as conn, conn.transaction():
                row = await conn.fetchrow(_LOCK_ANSWER, req.conversation_id, req.tool_use_id, req.actor.organization_id)
                outcome = self._answer(req, row)
                # A rejection keeps its whole error as the output, as `_fail` does, so replays show the hint.
                status, error = ("succeeded", None) if outcome.ok else ("rejected_by_user", outcome.error)
                await conn.execute(
                    _ANSWERED, row["id"], status, outcome.result(), error and error.code, error and error.message
                )
            event(log, "agent.tool.resolved", router=row["router"], action=row["action"], decision=req.decision)
        return outcome

    async def close(self, req: CloseCalls) -> ClosedCalls:
        """Reject every call of the conversation still waiting for a person: none of them will run.
        A call being executed holds its row lock; this waits for it and leaves it as it ended."""
        _check_keys(_conversation_ids(req.conversation_id, req.actor))
        error = ToolError(code=req.code, message=req.message, hint=NOT_RETRIED)
        closed = await self._pool.fetch(
            _CLOSE,
            req.conversation_id,
            req.actor.organization_id,
            error.model_dump(mode="json"),
            error.code,
            error.message,
        )
        return ClosedCalls(tool_use_ids=[row["tool_use_id"] for row in closed])

    def _answer(self, req: ResolveCall, row: asyncpg.Record | None) -> ToolOutcome:
        """The outcome `req` gives the locked call `row`, or the SpotterError that refuses it."""
        if row is None:
            raise SpotterError(ErrorCode.TOOL_EXECUTION_NOT_FOUND, "No such tool call in this conversation.")
        if row["status"] != "pending":
            raise SpotterError(ErrorCode.TOOL_ALREADY_RESOLVED, "This action was already resolved.")
        name = ToolName(row["router"], row["action"])
        decl = self._registry.get(row["router"], row["action"])
        is_picker = decl is not None and decl.kind == "user_picker"
        if req.decision == "reject":
            if is_picker:
                raise SpotterError(ErrorCode.INVALID_REQUEST, f"{name} is answered by a pick, not rejected.")
            error = ToolError(code="rejected_by_user", message="The user rejected this action.", hint=NOT_RETRIED)
            return ToolOutcome(
                tool_use_id=req.tool_use_id, status="failed", error=error, duration_ms=0, inverse_available=False
            )
        if not is_picker:
            raise SpotterError(ErrorCode.INVALID_REQUEST, f"{name} asks for no pick; approve or reject it.")
        output = _picked(row["input"], req.picked_id)
        return ToolOutcome(
            tool_use_id=req.tool_use_id, status="succeeded", output=output, duration_ms=0, inverse_available=False
        )

    def _state(self, row: asyncpg.Record, role: str) -> CallState:
        terminal = row["status"] in TERMINAL
        outcome = self._replay(row["tool_use_id"], role, row) if terminal else None
        return CallState(
            tool_use_id=row["tool_use_id"],
            router=row["router"],
            action=row["action"],
            status=row["status"],
            input=row["input"],
            outcome=outcome,
            inverse_available=outcome is not None and outcome.inverse_available,
            gate=ToolGate.model_validate(row["gate"]) if row["gate"] else None,
        )

    def _inverse_command(self, req: UndoRequest, original: asyncpg.Record | None) -> ExecuteTool:
        if original is None:
            raise SpotterError(
                ErrorCode.TOOL_EXECUTION_NOT_FOUND, f"no tool call {req.tool_use_id} in this conversation"
            )
        name = ToolName(original["router"], original["action"])
        if original["status"] != "succeeded":
            raise SpotterError(
                ErrorCode.UNDO_UNAVAILABLE, f"{name} is {original['status']}; only a succeeded call can be undone"
            )
        decl = self._registry.get(original["router"], original["action"])
        inverse = decl.inverse if decl is not None else None
        if inverse is None:
            raise SpotterError(ErrorCode.UNDO_UNAVAILABLE, f"{name} declares no inverse")
        if not _may_undo(self._registry, decl, req.actor.role):
            # Refused before anything is recorded: the undo key stays free for someone who may.
            raise SpotterError(ErrorCode.UNDO_UNAVAILABLE, f"the {req.actor.role} role may not use {inverse.name}")
        try:
            inverse_input = inverse.build_input(original["output"])
        except (KeyError, TypeError, ValueError):
            raise SpotterError(
                ErrorCode.UNDO_UNAVAILABLE, f"the stored output of {name} does not say what to undo"
            ) from None
        return ExecuteTool(
            conversation_id=req.conversation_id,
            message_id=str(original["message_id"]),
            tool_use_id=undo_key(req.tool_use_id),
            router=inverse.router,
            action=inverse.action,
            input=inverse_input,
            actor=req.actor,
            trace_id=req.trace_id,
        )

    async def _execute(self, cmd: ExecuteTool, *, link: dict[str, Any] | None = None) -> ToolOutcome:
        """`link` is extra audit metadata for the call's audit row (the undo's link to its original)."""
        _check_keys({**_conversation_ids(cmd.conversation_id, cmd.actor), "messageId": cmd.message_id}, cmd.tool_use_id)
        with tracer.start_as_current_span(
            "tool-runner.execute", attributes={"router": cmd.router, "action": cmd.action, "hold": cmd.hold}
        ) as span:
            changes: Changes = {}
            async with self._pool.acquire() as conn:
                await self._claim(conn, cmd)
                try:
                    outcome = await self._settle(conn, cmd, link, changes)
                except _ReadFailed as failed:
                    outcome = await self._record(conn, cmd, failed)
            # _settle has committed: what it changed is there for rag to read.
            await self._announce(cmd, changes)
            ToolExecuted(
                trace_id=cmd.trace_id, org_id=cmd.actor.organization_id, code=outcome.error.code if outcome.error else None,
                router=cmd.router, action=cmd.action, duration_ms=outcome.duration_ms, outcome=outcome.status,
                error_code=outcome.error.code if outcome.error else None, replayed=outcome.replayed,
            ).log(log)
            metrics.TOOL_RUNS.labels(cmd.router, cmd.action, outcome.status).inc()
            span.set_attribute("outcome", outcome.status)
        return outcome

    async def _settle(
        self, conn: asyncpg.Connection, cmd: ExecuteTool, link: dict[str, Any] | None, changes: Changes
    ) -> ToolOutcome:
        """Run (or hold, or replay) the call in one transaction; `changes` gets what a successful run wrote."""
        async with conn.transaction():
            # The row lock serialises duplicates: a twin waits here until this transaction commits.
            row, ended = await self._lock(conn, cmd)
            if ended is not None:
                return ended
            if cmd.hold:
                return await self._hold(conn, cmd, row)
            if row["status"] == "pending" and (row["router"], row["action"], row["input"]) != (cmd.router, cmd.action, cmd.input):
                # Approval binds to the arguments (SPEC 17): a held call runs exactly as it was held and
                # shown for approval, or not at all.
                failure = ToolFailure("approval_mismatch", "This call differs from the one that was approved; it was not run.",
                                      hint="Ask the user to approve the call again.")
                return await self._fail(conn, cmd, row["id"], failure, duration_ms=0)
            return await self._run(conn, cmd, row["id"], row["member"], link, changes)

    async def _lock(self, conn: asyncpg.Connection, cmd: ExecuteTool) -> tuple[asyncpg.Record, ToolOutcome | None]:
        """The call's row under its lock, and its stored outcome if it has ended already: a duplicate, a
        redelivery, or the twin that held the lock."""
        actor = cmd.actor
        row = await conn.fetchrow(_LOCK, cmd.conversation_id, cmd.tool_use_id, actor.organization_id,
                                  actor.membership_id, actor.user_id, actor.role)
        if row is None:
            raise SpotterError(ErrorCode.NOT_FOUND, "conversation or message not found in this organization")
        return row, self._replay(cmd.tool_use_id, actor.role, row) if row["status"] in TERMINAL else None

    async def _record(self, conn: asyncpg.Connection, cmd: ExecuteTool, failed: _ReadFailed) -> ToolOutcome:
        """A read's failure, recorded once its transaction is rolled back: under the row lock again, unless
        a twin that took the lock meanwhile has already ended the call (then its outcome is this one's)."""
        async with conn.transaction():
            row, ended = await self._lock(conn, cmd)
            if ended is not None:
                return ended
            return await self._fail(conn, cmd, row["id"], failed.failure, duration_ms=failed.duration_ms)

    async def _claim(self, conn: asyncpg.Connection, cmd: ExecuteTool) -> None:
        # Committed on its own, before anything runs: the record exists even if this process dies.
        # A held call starts 'pending', so a crash before it is validated still leaves it waiting for
        # the user rather than looking half-run. An existing row (e.g. one held earlier) is left as it is.
        await conn.execute(
            _CLAIM,
            cmd.conversation_id,
            cmd.message_id,
            cmd.tool_use_id,
            cmd.router[:64],
            cmd.action[:64],
            cmd.input,
            cmd.actor.organization_id,
            "pending" if cmd.hold else "running",
        )

    async def _hold(self, conn: asyncpg.Connection, cmd: ExecuteTool, row: asyncpg.Record) -> ToolOutcome:
        """Validate like a run, then leave the call 'pending' for the user, without running it."""
        try:
            decl, args = await self._admit(conn, cmd, member=row["member"])
            # A call a rule stops is refused now, rather than after a person approved it.
            gate = self._rules(cmd, decl, args).gate if isinstance(decl, PackTool) else None
        except ToolFailure as failure:
            return await self._fail(conn, cmd, row["id"], failure, duration_ms=0)
        await conn.execute(_HELD, row["id"], gate and gate.model_dump(mode="json"))
        return ToolOutcome(
            tool_use_id=cmd.tool_use_id,
            status="pending",
            duration_ms=0,
            inverse_available=_may_undo(self._registry, decl, cmd.actor.role),
            gate=gate,
        )

    async def _run(
        self,
        conn: asyncpg.Connection,
        cmd: ExecuteTool,
        execution_id: uuid.UUID,
        member: bool,
        link: dict[str, Any] | None,
        changes: Changes,
    ) -> ToolOutcome:
        warnings: list[str] = []
        try:
            decl, args = await self._admit(conn, cmd, member=member)
            if decl.kind == "user_picker":
                # Only ever held: the user's pick, recorded by `resolve`, is its result.
                raise ToolFailure(
                    "not_executable", f"{decl.name} is answered by the user's pick and is never executed."
                )
            if isinstance(decl, PackTool):
                rules = self._rules(cmd, decl, args)
                if rules.gate is not None and not cmd.approved and decl.confirm == "never":
                    # Like a declared gate: the call waits for a person, and runs only once approved.
                    await conn.execute(_HELD, execution_id, rules.gate.model_dump(mode="json"))
                    return ToolOutcome(tool_use_id=cmd.tool_use_id, status="pending", duration_ms=0,
                                       inverse_available=False, gate=rules.gate)
                warnings = rules.warnings
        except ToolFailure as failure:
            return await self._fail(conn, cmd, execution_id, failure, duration_ms=0)

        ctx = ToolContext(
            conn=conn,
            actor=cmd.actor,
            conversation_id=cmd.conversation_id,
            tool_use_id=cmd.tool_use_id,
            trace_id=cmd.trace_id,
            now=self._clock(),
            search=self._search(cmd.trace_id),
        )
        started = time.perf_counter()
        reads = decl.side_effects == "read"
        try:
            if reads:
                # No savepoint (two statements fewer): a read leaves nothing to undo. If it fails, its
                # transaction (which a failed statement may have aborted) is rolled back and the failure
                # recorded after it (`_record`); a twin taking the lock in between would only read again.
                result = await (decl(ctx, args, warnings) if isinstance(decl, PackTool) else decl(ctx, args))
                output = to_jsonable_python(result, by_alias=True)
                audit_log_id = None
            else:
                # A savepoint: a failing handler leaves nothing behind, while the row lock is kept until
                # the failure is recorded, so a concurrent duplicate cannot slip in and run it again.
                async with conn.transaction():
                    result = await (decl(ctx, args, warnings) if isinstance(decl, PackTool) else decl(ctx, args))
                    output = to_jsonable_python(result, by_alias=True)
                    audit_log_id = await self._audit(conn, cmd, decl, output, link)
        except INFRASTRUCTURE_ERRORS:
            raise
        except Exception as exc:
            if isinstance(exc, ToolFailure):
                failure = exc
            else:
                log.exception("tool %s raised (trace %s)", decl.name, cmd.trace_id)
                failure = ToolFailure(
                    "tool_failed",
                    f"{decl.name} failed unexpectedly (trace {cmd.trace_id}).",
                    hint="Retry once; if it fails again, tell the user and do not repeat the call.",
                )
            if reads:
                raise _ReadFailed(failure, _ms_since(started)) from None
            return await self._fail(conn, cmd, execution_id, failure, duration_ms=_ms_since(started))

        duration_ms = _ms_since(started)
        await conn.execute(_SUCCEEDED, execution_id, output, duration_ms, _resource_id(output), audit_log_id)
        # Only now, with the handler's savepoint released: a failed handler's notes are rolled back with it.
        _collect(changes, ctx.touched, decl, output)
        return ToolOutcome(
            tool_use_id=cmd.tool_use_id,
            status="succeeded",
            output=output,
            duration_ms=duration_ms,
            inverse_available=_may_undo(self._registry, decl, cmd.actor.role),
        )

    def _search(self, trace_id: str) -> Search | None:
        return None if self._rag is None else partial(self._rag.search, trace_id=trace_id)

    async def _announce(self, cmd: ExecuteTool, changes: Changes) -> None:
        """Tell rag's indexer what the committed call changed, one message per scope (and per MAX_IDS ids),
        deduplicated by the call's key. A failure is logged, never the call's: rag's sweep catches up."""
        if self._rag is None:
            return
        for scope, ids in sorted(changes.items()):
            ordered = sorted(ids)
            for start in range(0, len(ordered), MAX_IDS):
                changed = EntitiesChanged(
                    organization_id=cmd.actor.organization_id, scope=scope, ids=ordered[start : start + MAX_IDS]
                )
                msg_id = f"{cmd.conversation_id}:{cmd.tool_use_id}:{scope}:{start // MAX_IDS}"
                try:
                    await self._rag.announce(changed, msg_id=msg_id, trace_id=cmd.trace_id)
                except Exception as exc:  # noqa: BLE001 — the call has committed; only the index waits
                    log.warning(
                        "could not announce %d changed %s(s) of %s (trace %s): %s",
                        len(changed.ids), scope, ToolName(cmd.router, cmd.action), cmd.trace_id, repr(exc),
                    )

    async def _admit(self, conn: asyncpg.Connection, cmd: ExecuteTool, *, member: bool | None = None) -> tuple[Tool, Any]:
        """Resolve, authorise and validate, in that order; any refusal is a ToolFailure. `member` is whether
        the actor holds its role, when the caller has read it already (`_LOCK`)."""
        decl: Tool | None = self._registry.get(cmd.router, cmd.action)
        if decl is None and self._packs is not None:
            decl = await self._packs.get(cmd.actor.organization_id, cmd.router, cmd.action)
        if decl is None:
            raise _unknown_tool(self._registry, cmd)
        actor = cmd.actor
        if actor.role not in decl.roles:
            raise ToolFailure("forbidden", f"The {actor.role} role may not use {decl.name}.")
        # Defence in depth: the gateway resolved the actor, but never trust a role the caller states.
        if member is None:
            member = await conn.fetchval(_MEMBERSHIP, actor.membership_id, actor.organization_id, actor.user_id, actor.role)
        if not member:
            raise ToolFailure("forbidden", f"The caller is not an active {actor.role} of this organization.")
        if isinstance(decl, PackTool):
            return decl, decl.validate(cmd.input)
        try:
            args = decl.input.model_validate(cmd.input)
        except ValidationError as exc:
            raise _invalid_input(decl, exc) from None
        return decl, args

    def _rules(self, cmd: ExecuteTool, tool: PackTool, args: dict[str, Any]) -> RuleOutcome:
        """The pack's rules on this call: a block or a refused permission is a ToolFailure; a
        confirmation asked for, and the warnings (logged here, shown in the call's output), are returned."""
        verdict = tool.verdict(args, cmd.actor, cmd.conversation_id, cmd.conversation_cost_usd_micros)
        if verdict.blocked is not None:
            event(log, "agent.tool.rule_blocked", router=tool.router, action=tool.action, rule=verdict.blocked.name)
            raise ToolFailure("blocked_by_rule", verdict.blocked.message,
                              hint=f"The studio's rule {verdict.blocked.name} forbids this call; tell the user, do not retry it.")
        if verdict.denied is not None:
            event(log, "agent.tool.rule_denied", router=tool.router, action=tool.action, rule=verdict.denied.name)
            raise ToolFailure("forbidden", verdict.denied.message,
                              hint=f"Only {', '.join(verdict.denied.roles)} may make this call; tell the user.")
        for rule in verdict.warnings:
            event(log, "agent.tool.rule_warning", router=tool.router, action=tool.action, rule=rule.name)
        gate = ToolGate(rule=verdict.confirm.name, message=verdict.confirm.message) if verdict.confirm else None
        return RuleOutcome(gate=gate, warnings=[rule.message for rule in verdict.warnings])

    async def _audit(
        self, conn: asyncpg.Connection, cmd: ExecuteTool, decl: Tool, output: Any, link: dict[str, Any] | None
    ) -> uuid.UUID | None:
        if decl.audit is None or decl.side_effects != "write":
            return None
        metadata = {
            "agent": True,  # lets admin views tell agent actions from human ones
            "conversationId": cmd.conversation_id,
            "toolUseId": cmd.tool_use_id,
            "router": decl.router,
            "action": decl.action,
            **(link or {}),
        }
        if isinstance(decl, PackTool) and isinstance(output, dict):
            # What the external system answered, and how many attempts it took (seed 002: healing is visible).
            metadata |= {"pack": decl.router, "httpStatus": output.get("status"), "attempts": output.get("attempts"),
                         "healing": output.get("healing")}
        return await conn.fetchval(
            _AUDIT,
            cmd.actor.organization_id,
            cmd.actor.user_id,
            decl.audit.action_label,
            decl.audit.resource,
            _resource_id(output),
            metadata,
        )

    async def _fail(
        self,
        conn: asyncpg.Connection,
        cmd: ExecuteTool,
        execution_id: uuid.UUID,
        failure: ToolFailure,
        *,
        duration_ms: int,
    ) -> ToolOutcome:
        error = ToolError(code=failure.code, message=failure.message, hint=failure.hint)
        # The whole error (hint included) is kept as the output, as tool_completed shows it.
        await conn.execute(_FAILED, execution_id, error.model_dump(mode="json"), error.code, error.message, duration_ms)
        return ToolOutcome(
            tool_use_id=cmd.tool_use_id, status="failed", error=error, duration_ms=duration_ms, inverse_available=False
        )

    def _replay(self, tool_use_id: str, role: str, row: asyncpg.Record) -> ToolOutcome:
        """The stored outcome of a terminal row, as `role` sees it (whether it may undo it)."""
        duration_ms = row["duration_ms"] or 0
        if row["status"] == "succeeded":
            decl = self._registry.get(row["router"], row["action"])
            return ToolOutcome(
                tool_use_id=tool_use_id,
                status="succeeded",
                output=row["output"],
                duration_ms=duration_ms,
                inverse_available=decl is not None and _may_undo(self._registry, decl, role),
                replayed=True,
            )
        return ToolOutcome(
            tool_use_id=tool_use_id,
            status="failed",
            error=_stored_error(row),
            duration_ms=duration_ms,
            inverse_available=False,
            replayed=True,
        )


def _collect(changes: Changes, touched: Changes, decl: Tool, output: Any) -> None:
    """What a successful call changed: the entities its handler noted (common.py's writes note theirs), and,
    should a tool write one by hand without noting it, the one its audit row names."""
    for scope, ids in touched.items():
        changes.setdefault(scope, set()).update(ids)
    resource_id = _resource_id(output)
    if decl.audit is not None and decl.audit.resource in INDEXED and resource_id is not None:
        changes.setdefault(cast(Scope, decl.audit.resource), set()).add(resource_id)


def _may_undo(registry: Registry, decl: Tool, role: str) -> bool:
    """Whether `role` could undo a call of `decl`: it declares an inverse the role may use."""
    if decl.inverse is None:
        return False
    inverse = registry.get(decl.inverse.router, decl.inverse.action)
    return inverse is not None and role in inverse.roles


def _conversation_ids(conversation_id: str, actor: Actor) -> dict[str, str]:
    return {
        "conversationId": conversation_id,
        "actor.organizationId": actor.organization_id,
        "actor.membershipId": actor.membership_id,
        "actor.userId": actor.user_id,
    }


def _check_keys(uuids: dict[str, str], *tool_use_ids: str) -> None:
    """Malformed keys are the caller's bug, answered as invalid_request rather than as a tool result."""
    if not all(0 < len(tool_use_id) <= 64 for tool_use_id in tool_use_ids):
        raise SpotterError(ErrorCode.INVALID_REQUEST, "toolUseId must have 1 to 64 characters")
    for name, value in uuids.items():
        try:
            uuid.UUID(value)
        except ValueError:
            raise SpotterError(ErrorCode.INVALID_REQUEST, f"{name} is not a UUID") from None


def _unknown_tool(registry: Registry, cmd: ExecuteTool) -> ToolFailure:
    close = registry.close_names(cmd.router, cmd.action, role=cmd.actor.role)
    if close:
        hint = "Did you mean " + " or ".join(close) + "?"
    else:
        hint = "Use only the tools listed in this conversation's tool definitions."
    return ToolFailure("unknown_tool", f"There is no tool {ToolName(cmd.router, cmd.action)}.", hint=hint)


def _invalid_input(decl: ToolDecl, exc: ValidationError) -> ToolFailure:
    problems = [
        f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}" for e in exc.errors(include_url=False)[:5]
    ]
    accepted = ", ".join(decl.input_schema.get("properties", {})) or "none"
    return ToolFailure(
        "invalid_input",
        f"Invalid input for {decl.name}: " + "; ".join(problems),
        hint=f"Fix these fields and call {decl.name} again. Accepted fields: {accepted}.",
    )


def _picked(tool_input: Mapping[str, Any], picked_id: str | None) -> dict[str, Any]:
    """A picker's result: the chosen candidate of those it offered (ids compared as text)."""
    candidates = tool_input.get("candidates")
    offered = candidates if isinstance(candidates, list) else []
    chosen = next((c for c in offered if isinstance(c, dict) and str(c.get("id")) == picked_id), None)
    if chosen is None:
        raise SpotterError(ErrorCode.INVALID_PICK, "That choice is not one of the offered candidates.")
    return {"pickedId": picked_id, "pickedLabel": chosen.get("label"), "kind": tool_input.get("kind")}


def _stored_error(row: asyncpg.Record) -> ToolError:
    output = row["output"]
    if isinstance(output, dict) and "code" in output and "message" in output:
        return ToolError.model_validate(output)
    # Rows recorded before the whole error was kept as the output carry only the columns.
    return ToolError(code=row["error_code"] or row["status"], message=row["error_message"] or row["status"])


def _resource_id(output: Any) -> str | None:
    if isinstance(output, dict) and output.get("id") is not None:
        return str(output["id"])
    return None


def _ms_since(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)
