"""`hold`: validate a call and record it pending without running it; a later execute runs it once."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from spotter_tool_runner.runner import ToolRunner

from tests.factories import Studio

from .helpers import Conversation, audit_rows, execution_rows, failed, new_conversation, succeeded
from .sample_tools import build_test_registry, probe

SAARS = [
    {"id": str(uuid.uuid4()), "label": "Saar Cohen", "sublabel": "Unlimited"},
    {"id": str(uuid.uuid4()), "label": "Saar Levi", "sublabel": "8 per month", "detail": "Last visit 40 days ago"},
]


@pytest.fixture
async def conv(pool: asyncpg.Pool, studio: Studio) -> Conversation:
    return await new_conversation(pool, studio, studio.admin)


async def test_a_held_call_is_pending_until_executed(pool, runner, conv) -> None:
    workout = succeeded(
        await runner.execute(conv.command("workouts", "create", {"title": "Murph", "description": "For time"}))
    )
    cmd = conv.command("workouts", "delete", {"id": workout["id"]}, hold=True)

    held = await runner.execute(cmd)
    again = await runner.execute(cmd)  # e.g. a redelivered request: still pending, still one row

    assert (held.status, held.output, held.error, held.replayed) == ("pending", None, None, False)
    assert again.status == "pending"
    [row] = await execution_rows(pool, conv.id, cmd.tool_use_id)
    assert (row["status_text"], row["input"], row["output"]) == ("pending", {"id": workout["id"]}, None)
    assert await pool.fetchval("SELECT deleted_at FROM workouts WHERE id = $1", uuid.UUID(workout["id"])) is None
    assert await audit_rows(pool, cmd.tool_use_id) == []

    # Approved: the same key, without hold, runs it exactly once.
    approved = await runner.execute(cmd.model_copy(update={"hold": False}))
    assert (approved.status, approved.replayed) == ("succeeded", False)
    assert await pool.fetchval("SELECT deleted_at IS NOT NULL FROM workouts WHERE id = $1", uuid.UUID(workout["id"]))
    assert len(await audit_rows(pool, cmd.tool_use_id)) == 1
    # A late hold of a resolved call replays its outcome instead of re-opening it.
    late = await runner.execute(cmd)
    assert (late.status, late.replayed) == ("succeeded", True)


async def test_the_handler_never_runs_while_held(pool, studio) -> None:
    runner = ToolRunner(pool, build_test_registry())
    conv = await new_conversation(pool, studio, studio.coach)
    cmd = conv.command("test", "create_note", {"name": f"Held {uuid.uuid4().hex[:6]}"}, hold=True)
    p = probe(cmd.tool_use_id)

    held = await runner.execute(cmd)

    assert held.status == "pending" and held.inverse_available
    assert p.calls == 0
    assert await pool.fetchval("SELECT count(*) FROM programs WHERE name = $1", cmd.input["name"]) == 0


@pytest.mark.parametrize(
    ("router", "action", "input", "code"),
    [
        ("workouts", "delete", {"id": "not-a-uuid"}, "invalid_input"),
        ("workouts", "drop", {"id": str(uuid.uuid4())}, "unknown_tool"),
        ("programs", "delete", {"id": str(uuid.uuid4())}, "forbidden"),  # coaches may not delete programs
    ],
)
async def test_a_refused_hold_is_recorded_failed(pool, runner, studio, router, action, input, code) -> None:
    conv = await new_conversation(pool, studio, studio.coach)
    cmd = conv.command(router, action, input, hold=True)

    failed(await runner.execute(cmd), code)

    [row] = await execution_rows(pool, conv.id, cmd.tool_use_id)
    assert (row["status_text"], row["error_code"]) == ("failed", code)
    # The refusal is final: approving it later replays the failure.
    again = await runner.execute(cmd.model_copy(update={"hold": False}))
    assert (again.status, again.replayed, again.error.code) == ("failed", True, code)


async def test_a_picker_is_held_with_valid_candidates(pool, runner, conv) -> None:
    cmd = conv.command(
        "read", "ask_user_to_pick", {"kind": "member", "prompt": "Which Saar?", "candidates": SAARS}, hold=True
    )
    held = await runner.execute(cmd)
    assert (held.status, held.inverse_available) == ("pending", False)
    [row] = await execution_rows(pool, conv.id, cmd.tool_use_id)
    assert row["status_text"] == "pending" and row["input"]["candidates"] == SAARS


def candidates(n: int) -> list[dict]:
    return [{"id": f"m{i}", "label": f"Saar {i}"} for i in range(n)]


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        (candidates(1), "candidates: List should have at least 2 items"),
        (candidates(9), "candidates: List should have at most 8 items"),
        ([{"id": "m1", "label": "Saar"}, {"id": "m1", "label": "Saar again"}], "candidate ids must be unique"),
        ([{"id": "m1", "label": "Saar"}, {"id": "m2"}], "candidates.1.label: Field required"),
    ],
)
async def test_a_picker_with_bad_candidates_fails(pool, runner, conv, given, problem) -> None:
    cmd = conv.command("read", "ask_user_to_pick", {"kind": "member", "prompt": "Which?", "candidates": given}, hold=True)
    error = failed(await runner.execute(cmd), "invalid_input")
    assert problem in error.message
    [row] = await execution_rows(pool, conv.id, cmd.tool_use_id)
    assert row["status_text"] == "failed"


async def test_a_picker_is_never_executed(runner, conv) -> None:
    cmd = conv.command("read", "ask_user_to_pick", {"kind": "member", "prompt": "Which Saar?", "candidates": SAARS})
    failed(await runner.execute(cmd), "not_executable")
    # Even once held: the user's pick, not the runner, resolves it.
    held = conv.command(
        "read", "ask_user_to_pick", {"kind": "member", "prompt": "Which Saar?", "candidates": SAARS}, hold=True
    )
    assert (await runner.execute(held)).status == "pending"
    failed(await runner.execute(held.model_copy(update={"hold": False})), "not_executable")


async def test_an_approved_call_runs_exactly_as_it_was_held(pool, runner, conv) -> None:
    """SPEC decision 17: what a person approves is what runs. A call executed after its hold with
    different arguments (or another tool under the same key) is refused and changes nothing."""
    keep = succeeded(await runner.execute(conv.command("workouts", "create", {"title": "Keep", "description": "x"})))
    other = succeeded(await runner.execute(conv.command("workouts", "create", {"title": "Other", "description": "y"})))
    cmd = conv.command("workouts", "delete", {"id": keep["id"]}, hold=True)
    assert (await runner.execute(cmd)).status == "pending"

    swapped = await runner.execute(cmd.model_copy(update={"hold": False, "input": {"id": other["id"]}}))

    failed(swapped, "approval_mismatch")
    for workout in (keep, other):
        assert await pool.fetchval("SELECT deleted_at FROM workouts WHERE id = $1", uuid.UUID(workout["id"])) is None
    assert await audit_rows(pool, cmd.tool_use_id) == []
