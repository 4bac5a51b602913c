"""The runner owns every answer to a held call: `resolve` (a rejection or a pick, exactly once), `close`
(every call still waiting), and `calls`, the recorded state other services read instead of the table."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import asyncpg
import pytest

from spotter_shared.contracts.commands import Actor
from spotter_shared.contracts.tools import CallsQuery, CloseCalls, ExecuteTool, ResolveCall
from spotter_shared.errors import ErrorCode, SpotterError
from spotter_tool_runner.runner import ToolRunner

from tests.factories import Studio

from .helpers import Conversation, actor_of, execution_rows, failed, new_conversation, succeeded

# Exactly what the orchestrator used to build from the rows, so the model reads the same JSON as before.
REJECTED_JSON = (
    '{"code": "rejected_by_user", "message": "The user rejected this action.", '
    '"hint": "Do not retry it unless the user asks again."}'
)


@pytest.fixture
async def conv(pool: asyncpg.Pool, studio: Studio) -> Conversation:
    return await new_conversation(pool, studio, studio.admin)


def candidates(n: int) -> list[dict[str, Any]]:
    return [{"id": str(uuid.uuid4()), "label": f"Saar {i}", "sublabel": f"Plan {i}"} for i in range(n)]


def picker(conv: Conversation, offered: list[dict[str, Any]]) -> ExecuteTool:
    return conv.command("read", "ask_user_to_pick", {"kind": "member", "prompt": "Which Saar?", "candidates": offered}, hold=True)


def gated(conv: Conversation, title: str = "Call Saar") -> ExecuteTool:
    return conv.command("tasks", "create", {"title": title}, hold=True)


def answer(
    conv: Conversation, cmd: ExecuteTool, decision: str, picked_id: str | None = None, *, actor: Actor | None = None
) -> ResolveCall:
    return ResolveCall(
        conversation_id=conv.id,
        tool_use_id=cmd.tool_use_id,
        actor=actor or conv.actor,
        trace_id=uuid.uuid4().hex,
        decision=decision,
        picked_id=picked_id,
    )


def closing(conv: Conversation, *, actor: Actor | None = None, code: str = "superseded_by_user") -> CloseCalls:
    return CloseCalls(
        conversation_id=conv.id,
        actor=actor or conv.actor,
        trace_id=uuid.uuid4().hex,
        code=code,
        message="The user sent a new message instead of answering; this was not run.",
    )


async def held(runner: ToolRunner, cmd: ExecuteTool) -> ExecuteTool:
    assert (await runner.execute(cmd)).status == "pending"
    return cmd


async def refused(runner: ToolRunner, req: ResolveCall) -> ErrorCode:
    with pytest.raises(SpotterError) as info:
        await runner.resolve(req)
    return info.value.code


async def state_of(pool: asyncpg.Pool, conv: Conversation, cmd: ExecuteTool) -> tuple:
    [row] = await execution_rows(pool, conv.id, cmd.tool_use_id)
    return row["status_text"], row["output"], row["error_code"], row["error_message"], row["updated_at"]


async def tasks_titled(pool: asyncpg.Pool, title: str) -> int:
    return await pool.fetchval("SELECT count(*) FROM tasks WHERE title = $1", title)


# --- resolve -------------------------------------------------------------------------------------


async def test_a_rejection_is_recorded_once_and_the_call_never_runs(pool, runner, conv) -> None:
    title = f"Call Saar {uuid.uuid4().hex[:6]}"
    cmd = await held(runner, gated(conv, title))

    outcome = await runner.resolve(answer(conv, cmd, "reject"))

    error = failed(outcome, "rejected_by_user")
    assert (outcome.tool_use_id, outcome.duration_ms, outcome.inverse_available) == (cmd.tool_use_id, 0, False)
    assert outcome.result_text() == REJECTED_JSON
    status, output, code, message, _ = recorded = await state_of(pool, conv, cmd)
    assert (status, output, code, message) == (
        "rejected_by_user",
        error.model_dump(mode="json"),
        "rejected_by_user",
        "The user rejected this action.",
    )

    # A second answer changes nothing; an approval arriving late replays the rejection without running.
    assert await refused(runner, answer(conv, cmd, "reject")) == ErrorCode.TOOL_ALREADY_RESOLVED
    assert await state_of(pool, conv, cmd) == recorded
    late = await runner.execute(cmd.model_copy(update={"hold": False}))
    assert (late.replayed, late.result_text()) == (True, REJECTED_JSON)
    assert await tasks_titled(pool, title) == 0


async def test_a_pick_becomes_the_pickers_result(pool, runner, conv) -> None:
    offered = candidates(3)
    cmd = await held(runner, picker(conv, offered))

    outcome = await runner.resolve(answer(conv, cmd, "pick", offered[1]["id"]))

    expected = {"pickedId": offered[1]["id"], "pickedLabel": "Saar 1", "kind": "member"}
    assert succeeded(outcome) == expected and not outcome.inverse_available and not outcome.replayed
    status, output, code, message, _ = recorded = await state_of(pool, conv, cmd)
    assert (status, output, code, message) == ("succeeded", expected, None, None)

    again = answer(conv, cmd, "pick", offered[0]["id"])
    assert await refused(runner, again) == ErrorCode.TOOL_ALREADY_RESOLVED
    assert await state_of(pool, conv, cmd) == recorded
    replayed = await runner.execute(cmd)
    assert (replayed.replayed, replayed.output) == (True, expected)


async def test_a_pick_must_be_one_of_the_offered_candidates(pool, runner, conv) -> None:
    offered = candidates(2)
    cmd = await held(runner, picker(conv, offered))

    for picked_id in (str(uuid.uuid4()), None, "", offered[0]["label"]):
        with pytest.raises(SpotterError) as info:
            await runner.resolve(answer(conv, cmd, "pick", picked_id))
        assert (info.value.code, info.value.message) == (
            ErrorCode.INVALID_PICK,
            "That choice is not one of the offered candidates.",
        )
        assert (await state_of(pool, conv, cmd))[0] == "pending"

    # Still waiting for a valid answer.
    assert succeeded(await runner.resolve(answer(conv, cmd, "pick", offered[0]["id"])))["pickedLabel"] == "Saar 0"


async def test_the_decision_must_fit_the_kind_of_call(pool, runner, conv) -> None:
    pick = await held(runner, picker(conv, candidates(2)))
    gate = await held(runner, gated(conv))

    for req, says in [
        (answer(conv, pick, "reject"), "read__ask_user_to_pick is answered by a pick"),
        (answer(conv, gate, "pick", "anything"), "tasks__create asks for no pick"),
    ]:
        with pytest.raises(SpotterError) as info:
            await runner.resolve(req)
        assert info.value.code == ErrorCode.INVALID_REQUEST and says in info.value.message
    assert [(await state_of(pool, conv, c))[0] for c in (pick, gate)] == ["pending", "pending"]


async def test_only_a_pending_call_of_ones_own_organization_can_be_resolved(
    pool, runner, conv, studio, other_studio
) -> None:
    never = conv.command("tasks", "create", {"title": "x"})
    assert await refused(runner, answer(conv, never, "reject")) == ErrorCode.TOOL_EXECUTION_NOT_FOUND

    cmd = await held(runner, gated(conv))
    stranger = answer(conv, cmd, "reject", actor=actor_of(other_studio, other_studio.owner))
    with pytest.raises(SpotterError) as info:
        await runner.resolve(stranger)
    assert (info.value.code, info.value.message) == (
        ErrorCode.TOOL_EXECUTION_NOT_FOUND,
        "No such tool call in this conversation.",
    )
    assert (await state_of(pool, conv, cmd))[0] == "pending"

    ran = conv.command("read", "programs_list")
    succeeded(await runner.execute(ran))
    bad = conv.command("workouts", "delete", {"id": "not-a-uuid"})
    failed(await runner.execute(bad), "invalid_input")
    for cmd in (ran, bad):
        with pytest.raises(SpotterError) as info:
            await runner.resolve(answer(conv, cmd, "reject"))
        assert (info.value.code, info.value.message) == (
            ErrorCode.TOOL_ALREADY_RESOLVED,
            "This action was already resolved.",
        )


async def lock_waiters(pool: asyncpg.Pool, n: int) -> None:
    """Return once `n` sessions of this database wait on a lock (polls pg_stat_activity)."""
    async with asyncio.timeout(5):
        while await pool.fetchval(WAITING) < n:
            await asyncio.sleep(0.01)


WAITING = """
SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
"""


async def test_concurrent_answers_exactly_one_wins(pool, runner, conv) -> None:
    offered = candidates(3)
    cmd = await held(runner, picker(conv, offered))

    # Hold the row so that every answer is under way before any can finish: a real race.
    async with pool.acquire() as blocker, blocker.transaction():
        await blocker.execute(
            "SELECT 1 FROM ai_tool_executions WHERE conversation_id = $1 AND tool_use_id = $2 FOR UPDATE",
            uuid.UUID(conv.id),
            cmd.tool_use_id,
        )
        racing = [asyncio.create_task(runner.resolve(answer(conv, cmd, "pick", c["id"]))) for c in offered]
        await lock_waiters(pool, len(racing))
    results = await asyncio.gather(*racing, return_exceptions=True)

    [winner] = [r for r in results if not isinstance(r, BaseException)]
    losers = [r for r in results if isinstance(r, BaseException)]
    assert [getattr(e, "code", e) for e in losers] == [ErrorCode.TOOL_ALREADY_RESOLVED] * 2
    assert (await state_of(pool, conv, cmd))[1] == succeeded(winner)


async def test_a_rejection_racing_an_approval_leaves_one_answer(pool, runner, conv) -> None:
    title = f"Race {uuid.uuid4().hex[:6]}"
    cmd = await held(runner, gated(conv, title))

    ran, rejected = await asyncio.gather(
        runner.execute(cmd.model_copy(update={"hold": False})),
        runner.resolve(answer(conv, cmd, "reject")),
        return_exceptions=True,
    )

    if isinstance(rejected, SpotterError):  # the approval ran first
        assert rejected.code == ErrorCode.TOOL_ALREADY_RESOLVED
        assert (ran.status, ran.replayed, await tasks_titled(pool, title)) == ("succeeded", False, 1)
    else:  # the rejection came first: the approval replays it and nothing is created
        assert (ran.replayed, ran.result_text(), rejected.result_text()) == (True, REJECTED_JSON, REJECTED_JSON)
        assert await tasks_titled(pool, title) == 0


# --- close ---------------------------------------------------------------------------------------


async def test_close_rejects_every_waiting_call_of_the_conversation(pool, runner, conv, studio, other_studio) -> None:
    first = await held(runner, gated(conv, "first"))
    ran = conv.command("read", "programs_list")
    succeeded(await runner.execute(ran))
    second = await held(runner, picker(conv, candidates(2)))
    elsewhere = await new_conversation(pool, studio, studio.admin)
    untouched = await held(runner, gated(elsewhere))

    # Someone else's organization closes nothing.
    assert (await runner.close(closing(conv, actor=actor_of(other_studio, other_studio.owner)))).tool_use_ids == []
    closed = await runner.close(closing(conv))

    assert closed.tool_use_ids == [first.tool_use_id, second.tool_use_id]
    error = {
        "code": "superseded_by_user",
        "message": "The user sent a new message instead of answering; this was not run.",
        "hint": "Do not retry it unless the user asks again.",
    }
    for cmd in (first, second):
        status, output, code, message, _ = await state_of(pool, conv, cmd)
        assert (status, output, code, message) == ("rejected_by_user", error, error["code"], error["message"])
    assert (await state_of(pool, conv, ran))[0] == "succeeded"
    assert (await state_of(pool, elsewhere, untouched))[0] == "pending"

    # Closed for good: nothing left to close, no answer accepted, an approval replays the closing.
    assert (await runner.close(closing(conv))).tool_use_ids == []
    assert await refused(runner, answer(conv, first, "reject")) == ErrorCode.TOOL_ALREADY_RESOLVED
    late = await runner.execute(first.model_copy(update={"hold": False}))
    assert late.result_text() == json.dumps(error)


# --- calls ---------------------------------------------------------------------------------------


async def test_calls_report_each_recorded_call_in_the_order_asked(pool, runner, studio) -> None:
    coach = await new_conversation(pool, studio, studio.coach)
    workout = coach.command("workouts", "create", {"title": "Grace", "description": "30 clean and jerks"})
    program = coach.command("programs", "create", {"name": f"Prog {uuid.uuid4().hex[:6]}"})
    bad = coach.command("workouts", "delete", {"id": "nope"})
    for cmd in (workout, program):
        succeeded(await runner.execute(cmd))
    failed(await runner.execute(bad), "invalid_input")
    waiting = await held(runner, gated(coach))
    rejected = await held(runner, gated(coach, "no"))
    await runner.resolve(answer(coach, rejected, "reject"))
    asked = [rejected, waiting, bad, program, workout]

    states = await runner.calls(
        CallsQuery(
            conversation_id=coach.id,
            tool_use_ids=[rejected.tool_use_id, "toolu_unknown", *(c.tool_use_id for c in asked[1:])],
            actor=coach.actor,
        )
    )

    assert [s.tool_use_id for s in states.calls] == [c.tool_use_id for c in asked]
    assert [(s.router, s.action, s.input) for s in states.calls] == [(c.router, c.action, c.input) for c in asked]
    assert [s.status for s in states.calls] == ["rejected_by_user", "pending", "failed", "succeeded", "succeeded"]
    assert [s.resolved for s in states.calls] == [True, False, True, True, True]
    # A coach may undo a workout but not a program (programs__delete is not theirs).
    assert [s.inverse_available for s in states.calls] == [False, False, False, False, True]
    by_id = {s.tool_use_id: s.outcome for s in states.calls}
    assert by_id[rejected.tool_use_id].result_text() == REJECTED_JSON
    assert by_id[bad.tool_use_id].error.code == "invalid_input"
    assert all(by_id[c.tool_use_id].replayed for c in (rejected, bad, program, workout))
    [row] = await execution_rows(pool, coach.id, workout.tool_use_id)
    assert by_id[workout.tool_use_id].output == row["output"] and by_id[workout.tool_use_id].ok

    # What may be undone depends on who asks: the admin may delete programs.
    admin = actor_of(studio, studio.admin)
    [as_admin] = (
        await runner.calls(CallsQuery(conversation_id=coach.id, tool_use_ids=[program.tool_use_id], actor=admin))
    ).calls
    assert as_admin.inverse_available and as_admin.outcome.inverse_available


async def test_calls_of_another_organization_are_not_visible(pool, runner, conv, other_studio) -> None:
    cmd = await held(runner, gated(conv))
    stranger = actor_of(other_studio, other_studio.owner)
    query = CallsQuery(conversation_id=conv.id, tool_use_ids=[cmd.tool_use_id], actor=stranger)
    assert (await runner.calls(query)).calls == []
    assert (await runner.calls(CallsQuery(conversation_id=conv.id, tool_use_ids=[], actor=conv.actor))).calls == []


async def test_malformed_keys_are_a_request_error(runner, conv) -> None:
    cmd = conv.command("tasks", "create", {"title": "x"})
    not_a_uuid = {"conversation_id": "nope"}
    for call in [
        lambda: runner.calls(CallsQuery(conversation_id=conv.id, tool_use_ids=["ok", "t" * 65], actor=conv.actor)),
        lambda: runner.calls(CallsQuery(conversation_id=conv.id, tool_use_ids=[""], actor=conv.actor)),
        lambda: runner.calls(CallsQuery(conversation_id="nope", tool_use_ids=["ok"], actor=conv.actor)),
        lambda: runner.resolve(answer(conv, cmd, "reject").model_copy(update=not_a_uuid)),
        lambda: runner.resolve(answer(conv, cmd, "reject").model_copy(update={"tool_use_id": ""})),
        lambda: runner.close(closing(conv).model_copy(update=not_a_uuid)),
        lambda: runner.close(closing(conv, actor=conv.actor.model_copy(update={"membership_id": "nope"}))),
    ]:
        with pytest.raises(SpotterError) as info:
            await call()
        assert info.value.code == ErrorCode.INVALID_REQUEST
