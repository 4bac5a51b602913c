"""Undo: the declared inverse of a succeeded write, run at most once, with both audit rows linked."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from spotter_shared.contracts.commands import Actor
from spotter_shared.contracts.tools import UndoRequest
from spotter_shared.errors import ErrorCode, SpotterError
from spotter_tool_runner.runner import ToolRunner, undo_key

from tests.factories import Studio

from .helpers import Conversation, actor_of, audit_rows, execution_rows, new_conversation, succeeded


@pytest.fixture
async def conv(pool: asyncpg.Pool, studio: Studio) -> Conversation:
    return await new_conversation(pool, studio, studio.coach)


def undo_request(conv: Conversation, tool_use_id: str, *, actor: Actor | None = None) -> UndoRequest:
    return UndoRequest(
        conversation_id=conv.id, tool_use_id=tool_use_id, actor=actor or conv.actor, trace_id=uuid.uuid4().hex
    )


async def test_undo_of_a_created_workout_soft_deletes_it(pool, runner: ToolRunner, conv) -> None:
    create = conv.command("workouts", "create", {"title": "Fran", "description": "21-15-9"})
    workout = succeeded(await runner.execute(create))

    undone = await runner.undo(undo_request(conv, create.tool_use_id))

    assert (undone.router, undone.action, undone.input) == ("workouts", "delete", {"id": workout["id"]})
    assert undone.tool_use_id == undo_key(create.tool_use_id) == f"undo_{create.tool_use_id}"
    assert succeeded(undone.outcome) == {"id": workout["id"], "title": "Fran", "deleted": True}
    assert not undone.outcome.replayed
    deleted_at = await pool.fetchval("SELECT deleted_at FROM workouts WHERE id = $1", uuid.UUID(workout["id"]))
    assert deleted_at is not None

    # Both events are audited and linked; the original's row is left as it was.
    [original] = await audit_rows(pool, create.tool_use_id)
    [inverse] = await audit_rows(pool, undone.tool_use_id)
    assert (original["action"], inverse["action"]) == ("workout.created", "workout.deleted")
    assert original["resource_id"] == inverse["resource_id"] == workout["id"]
    assert "undoOf" not in original["metadata"]
    assert inverse["metadata"] == {
        "agent": True,
        "conversationId": conv.id,
        "toolUseId": undone.tool_use_id,
        "router": "workouts",
        "action": "delete",
        "undoOf": str(original["id"]),
        "inverseOfToolUseId": create.tool_use_id,
    }
    [original_row] = await execution_rows(pool, conv.id, create.tool_use_id)
    [inverse_row] = await execution_rows(pool, conv.id, undone.tool_use_id)
    assert original_row["status_text"] == "succeeded" and original_row["audit_log_id"] == original["id"]
    assert (inverse_row["status_text"], inverse_row["message_id"]) == ("succeeded", original_row["message_id"])
    assert inverse_row["audit_log_id"] == inverse["id"]

    # A second undo replays the stored result: nothing is deleted twice.
    again = await runner.undo(undo_request(conv, create.tool_use_id))
    assert again.outcome.replayed and again.outcome.output == undone.outcome.output
    assert len(await audit_rows(pool, undone.tool_use_id)) == 1
    assert await pool.fetchval("SELECT deleted_at FROM workouts WHERE id = $1", uuid.UUID(workout["id"])) == deleted_at


async def test_undo_of_a_created_task(pool, runner, conv) -> None:
    create = conv.command("tasks", "create", {"title": "Call Saar"})
    task = succeeded(await runner.execute(create))
    undone = await runner.undo(undo_request(conv, create.tool_use_id))
    assert succeeded(undone.outcome)["id"] == task["id"]
    listed = succeeded(await runner.execute(conv.command("tasks", "list")))
    assert task["id"] not in [t["id"] for t in listed["tasks"]]


async def test_undo_of_a_program_needs_a_role_that_may_delete_programs(pool, runner, studio) -> None:
    coach = await new_conversation(pool, studio, studio.coach)
    create = coach.command("programs", "create", {"name": f"Oops {uuid.uuid4().hex[:6]}"})
    outcome = await runner.execute(create)
    assert outcome.status == "succeeded" and not outcome.inverse_available  # no undo button for a coach

    with pytest.raises(SpotterError) as info:
        await runner.undo(undo_request(coach, create.tool_use_id))
    assert info.value.code == ErrorCode.UNDO_UNAVAILABLE and "programs__delete" in info.value.message
    assert await execution_rows(pool, coach.id, undo_key(create.tool_use_id)) == []  # the key stays free

    # The same call undone by the studio's admin.
    admin = undo_request(coach, create.tool_use_id, actor=actor_of(studio, studio.admin))
    undone = await runner.undo(admin)
    assert succeeded(undone.outcome)["deleted"] is True


async def unavailable(runner: ToolRunner, request: UndoRequest) -> SpotterError:
    with pytest.raises(SpotterError) as info:
        await runner.undo(request)
    return info.value


async def test_only_a_succeeded_call_with_an_inverse_can_be_undone(pool, runner, conv) -> None:
    read = conv.command("read", "programs_list")
    succeeded(await runner.execute(read))
    workout = succeeded(await runner.execute(conv.command("workouts", "create", {"title": "A", "description": "B"})))
    update = conv.command("workouts", "update", {"id": workout["id"], "title": "C"})
    succeeded(await runner.execute(update))
    refused = conv.command("workouts", "delete", {"id": str(uuid.uuid4())})
    assert (await runner.execute(refused)).status == "failed"
    held = conv.command("tasks", "create", {"title": "Later"}, hold=True)
    assert (await runner.execute(held)).status == "pending"

    for cmd, says in [
        (read, "read__programs_list declares no inverse"),
        (update, "workouts__update declares no inverse"),
        (refused, "workouts__delete is failed"),
        (held, "tasks__create is pending"),
    ]:
        error = await unavailable(runner, undo_request(conv, cmd.tool_use_id))
        assert (error.code, error.http_status) == (ErrorCode.UNDO_UNAVAILABLE, 422)
        assert says in error.message
        assert await execution_rows(pool, conv.id, undo_key(cmd.tool_use_id)) == []


async def test_an_unknown_or_foreign_call_is_not_found(pool, runner, conv, other_studio) -> None:
    error = await unavailable(runner, undo_request(conv, "toolu_never_called"))
    assert error.code == ErrorCode.TOOL_EXECUTION_NOT_FOUND

    create = conv.command("workouts", "create", {"title": "Mine", "description": "x"})
    workout = succeeded(await runner.execute(create))
    stranger = undo_request(conv, create.tool_use_id, actor=actor_of(other_studio, other_studio.owner))
    assert (await unavailable(runner, stranger)).code == ErrorCode.TOOL_EXECUTION_NOT_FOUND
    assert await pool.fetchval("SELECT deleted_at FROM workouts WHERE id = $1", uuid.UUID(workout["id"])) is None


async def test_malformed_keys_are_a_request_error(runner, conv) -> None:
    for request in (
        undo_request(conv, "t" * 65),
        undo_request(conv, "toolu_x").model_copy(update={"conversation_id": "nope"}),
    ):
        assert (await unavailable(runner, request)).code == ErrorCode.INVALID_REQUEST
