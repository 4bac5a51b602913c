"""Latency of every read tool over Demo Gym's studio year (issue 7: p95 under 50 ms each).

Each call goes through the tool-runner's core, `ToolRunner.execute`, in this process against the
bench stack's Postgres: the at-most-once bookkeeping (claim, row lock, membership check, terminal
update) is timed with the handler, as the agent pays for it on every call. The model and NATS are
not on the path. Calls are sequential, one at a time, as the agent makes them within a turn.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any, Optional

import asyncpg

from spotter_shared.contracts.commands import Actor
from spotter_shared.contracts.tools import ExecuteTool
from spotter_shared.db import create_pool
from spotter_tool_runner.declaration import ToolDecl
from spotter_tool_runner.registry import Registry
from spotter_tool_runner.runner import ToolRunner
from spotter_tool_runner.tools import REGISTRY

from bench_stats import ms, percentile

TARGET_P95_MS = 50.0
OWNER_EMAIL = "owner@demo.gym"  # owner: the only role that may use every read tool (revenue, plans)
MEMBER = "Dani Rubin"  # demo-year member with a plan, bookings, forms and personal assignments with comments


@dataclass(frozen=True)
class DemoYear:
    """What realistic inputs refer to: ids picked from the seeded year, and the studio's today."""

    actor: Actor
    today: date
    coaching_program_id: str
    member_id: str
    assignment_id: str  # the member's assignment with the most comments
    murph_id: str  # the latest Murph


@dataclass
class ToolSamples:
    name: str
    seconds: list[float] = field(default_factory=list)
    handler_ms: list[int] = field(default_factory=list)  # the runner's own duration_ms (handler + audit)
    errors: list[str] = field(default_factory=list)
    output_bytes: Optional[int] = None  # size of one output as JSON: shows the input found real data

    def summary(self) -> dict[str, Any]:
        p95 = ms(percentile(self.seconds, 95))
        return {
            "tool": self.name,
            "calls": len(self.seconds),
            "errors": len(self.errors),
            "p50_ms": ms(percentile(self.seconds, 50)),
            "p95_ms": p95,
            "max_ms": ms(max(self.seconds, default=None)),
            "handler_p50_ms": percentile(self.handler_ms, 50),
            "output_bytes": self.output_bytes,
            "under_target": p95 is not None and p95 < TARGET_P95_MS and not self.errors,
        }


def inputs(y: DemoYear) -> dict[str, dict[str, Any]]:
    """One realistic input per read tool, as the agent would send it over the demo year."""
    last_monday = y.today - timedelta(days=y.today.weekday() or 7)
    return {
        "read__get_current_context": {},
        "read__programs_list": {},
        "read__members_search": {"query": "Saar"},
        "read__members_get": {"membershipId": y.member_id},
        "read__exercises_search": {"query": "squat"},
        "read__exercises_resolve_batch": {"names": ["200m run", "double unders", "KB swing", "pull-ups"]},
        "read__search_anything": {"query": "Murph"},
        "read__lookup_by_id": {"type": "workout", "id": y.murph_id},
        "read__workout_comments_in_program": {"programId": y.coaching_program_id},
        "read__workout_comments_for_assignment": {"assignmentId": y.assignment_id},
        "assignments__bulk_preview": {"fromDate": str(y.today - timedelta(days=28)), "toDate": str(y.today)},
        "bookings__list_mine": {"membershipId": y.member_id},
        "bookings__attendance_summary": {},
        "bookings__attendance_trend": {"interval": "week"},
        "class_sessions__list_for_date": {"date": str(last_monday)},
        "class_sessions__bulk_preview": {"dateFrom": str(y.today), "dateTo": str(y.today + timedelta(days=13))},
        "class_types__list_for_program": {},
        "analytics__revenue_summary": {},
        "analytics__revenue_trend": {},
        "analytics__members_summary": {},
        "analytics__members_growth": {},
        "analytics__at_risk_members": {},
        "analytics__popular_classes": {},
        "analytics__class_utilization": {},
        "analytics__coach_overview": {},
        "analytics__plan_distribution": {},
        "analytics__members_activation": {},
        "analytics__workouts_summary": {},
        "analytics__org_insights": {},
        "tasks__list": {"status": "open"},
        "program_templates__list": {},
        "forms__list_pending_for_org": {},
        "forms__compliance_status_for_member": {"membershipId": y.member_id},
    }


def read_tools(registry: Registry) -> list[ToolDecl]:
    """Every read tool that runs (a user_picker is only ever held for a person), in catalog order."""
    return [d for d in registry if d.side_effects == "read" and d.kind == "normal"]


async def demo_year(conn: asyncpg.Connection, org_id: str) -> DemoYear:
    org = uuid.UUID(org_id)
    owner = await conn.fetchrow(
        """SELECT m.id, m.user_id FROM memberships m JOIN users u ON u.id = m.user_id
            WHERE m.organization_id = $1 AND u.email = $2 AND m.role = 'owner'""",
        org, OWNER_EMAIL,
    )
    tz = await conn.fetchval("SELECT timezone FROM organizations WHERE id = $1", org)
    today = await conn.fetchval("SELECT (now() AT TIME ZONE $1)::date", tz)
    member = await conn.fetchval(
        """SELECT m.id FROM memberships m JOIN users u ON u.id = m.user_id
            WHERE m.organization_id = $1 AND u.full_name = $2""",
        org, MEMBER,
    )
    assignment = await conn.fetchval(
        """SELECT a.id FROM assignments a LEFT JOIN workout_comments c ON c.assignment_id = a.id
            WHERE a.membership_id = $1 AND a.deleted_at IS NULL
            GROUP BY a.id ORDER BY count(c.id) DESC, a.scheduled_for DESC LIMIT 1""",
        member,
    )
    coaching = await conn.fetchval(
        "SELECT id FROM programs WHERE organization_id = $1 AND name = 'Coaching' AND deleted_at IS NULL", org
    )
    murph = await conn.fetchval(
        """SELECT id FROM workouts WHERE organization_id = $1 AND title = 'Murph' AND deleted_at IS NULL
            ORDER BY scheduled_for DESC NULLS LAST LIMIT 1""",
        org,
    )
    missing = [k for k, v in {"owner": owner, "member": member, "assignment": assignment,
                              "Coaching program": coaching, "Murph": murph}.items() if v is None]
    if missing:
        raise RuntimeError(f"the demo year lacks: {', '.join(missing)} (was `spotter seed-demo` run?)")
    actor = Actor(user_id=str(owner["user_id"]), organization_id=org_id, membership_id=str(owner["id"]), role="owner")
    return DemoYear(actor=actor, today=today, coaching_program_id=str(coaching), member_id=str(member),
                    assignment_id=str(assignment), murph_id=str(murph))


async def _conversation(conn: asyncpg.Connection, actor: Actor) -> tuple[str, str]:
    """A conversation with one assistant message, as the orchestrator stores them before a tool call
    (the execution rows reference both)."""
    conversation_id, message_id = str(uuid.uuid4()), str(uuid.uuid4())
    async with conn.transaction():
        await conn.execute(
            """INSERT INTO ai_conversations (id, organization_id, user_id, membership_id, model)
               VALUES ($1, $2, $3, $4, 'bench')""",
            conversation_id, actor.organization_id, actor.user_id, actor.membership_id,
        )
        await conn.execute(
            """INSERT INTO ai_messages (id, conversation_id, role, content, position)
               VALUES ($1, $2, 'assistant', $3, 1)""",
            message_id, conversation_id, [{"type": "text", "text": "bench: read tools"}],
        )
    return conversation_id, message_id


async def measure_read_tools(dsn: str, org_id: str, *, calls: int = 30, warmups: int = 3) -> dict[str, Any]:
    """p50/p95 wall time of `calls` executions of every read tool, after `warmups` unmeasured ones.
    Rounds visit every tool once, starting one tool later each round, so drift hits all alike."""
    pool = await create_pool(dsn, max_size=2)
    try:
        async with pool.acquire() as conn:
            # The year was bulk-written moments ago: without statistics the planner picks plans a live
            # database (autovacuum analyzes within a minute or so) would not, and some tools run 3-5x slower.
            await conn.execute("ANALYZE")
            year = await demo_year(conn, org_id)
            conversation_id, message_id = await _conversation(conn, year.actor)
            server = await conn.fetchval("SHOW server_version")
            counts = await conn.fetchrow(
                """SELECT (SELECT count(*) FROM memberships WHERE organization_id = $1) AS members,
                          (SELECT count(*) FROM bookings b JOIN class_sessions s ON s.id = b.session_id
                            WHERE s.organization_id = $1) AS bookings,
                          (SELECT count(*) FROM payments WHERE organization_id = $1) AS payments,
                          (SELECT count(*) FROM workouts WHERE organization_id = $1) AS workouts""",
                uuid.UUID(org_id),
            )
        runner = ToolRunner(pool, REGISTRY)
        cases = inputs(year)
        decls = {d.name: d for d in read_tools(REGISTRY)}
        names = list(decls)
        samples = {n: ToolSamples(n) for n in names}
        runnable = [n for n in names if n in cases]
        for n in names:
            if n not in cases:
                samples[n].errors.append("no bench input: add one to bench_tools.inputs()")

        async def call(name: str) -> tuple[float, Any]:
            decl = decls[name]
            cmd = ExecuteTool(
                conversation_id=conversation_id, message_id=message_id,
                tool_use_id=f"toolu_bench_{uuid.uuid4().hex[:20]}",  # a fresh key: a real run, not a replay
                router=decl.router, action=decl.action, input=cases[name], actor=year.actor, trace_id=uuid.uuid4().hex,
            )
            started = time.perf_counter()
            outcome = await runner.execute(cmd)
            return time.perf_counter() - started, outcome

        for _ in range(warmups):
            for name in runnable:
                _, outcome = await call(name)
                if not outcome.ok:
                    samples[name].errors.append(f"warm-up: {outcome.error.code}: {outcome.error.message}")
        for rnd in range(calls):
            for name in runnable[rnd % len(runnable):] + runnable[:rnd % len(runnable)]:
                seconds, outcome = await call(name)
                if outcome.ok:
                    samples[name].seconds.append(seconds)
                    samples[name].handler_ms.append(outcome.duration_ms)
                    if samples[name].output_bytes is None:
                        samples[name].output_bytes = len(json.dumps(outcome.output, ensure_ascii=False).encode())
                else:
                    samples[name].errors.append(f"{outcome.error.code}: {outcome.error.message}")
    finally:
        await pool.close()
    return {
        "target_p95_ms": TARGET_P95_MS,
        "calls_per_tool": calls,
        "warmups_per_tool": warmups,
        "actor_role": year.actor.role,
        "today": str(year.today),
        "postgres": server,
        "demo_year": dict(counts),
        "tools": [samples[n].summary() for n in names],
        "errors": [(n, e) for n in names for e in samples[n].errors],
    }
