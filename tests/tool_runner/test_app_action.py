"""The app's own actions: the same typed tool as the agent's, with its validation, roles and audit,
and only the actions listed as app actions (nothing destructive runs without a confirmation)."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from spotter_shared.contracts.tools import AppAction
from spotter_shared.errors import ErrorCode, SpotterError
from spotter_tool_runner.runner import APP_ACTIONS, ToolRunner
from tests.factories import Studio, actor_of


def _act(studio: Studio, person, router: str, action: str, **tool_input) -> AppAction:
    return AppAction(router=router, action=action, input=tool_input, actor=actor_of(studio, person), trace_id="t")


async def test_an_app_action_runs_the_tool_and_is_audited_as_the_persons(pool: asyncpg.Pool, runner: ToolRunner, studio: Studio) -> None:
    result = await runner.app_action(_act(studio, studio.coach, "tasks", "create", title="Mop the floor", dueDate="2026-12-01"))
    task = result.output
    assert (task["title"], task["dueDate"], task["status"]) == ("Mop the floor", "2026-12-01", "open")
    audit = await pool.fetchrow("SELECT actor_clerk_id, metadata FROM audit_logs WHERE resource_id = $1", task["id"])
    assert audit["actor_clerk_id"] == studio.coach.user_id
    assert audit["metadata"]["agent"] is False and audit["metadata"]["via"] == "app"


async def test_only_listed_valid_allowed_actions_run(pool: asyncpg.Pool, runner: ToolRunner, studio: Studio) -> None:
    before = await pool.fetchval("SELECT count(*) FROM tasks WHERE organization_id = $1", uuid.UUID(studio.org.id))
    assert ("workouts", "delete") not in APP_ACTIONS
    with pytest.raises(SpotterError) as not_app:
        await runner.app_action(_act(studio, studio.owner, "workouts", "delete", id=str(uuid.uuid4())))
    assert not_app.value.code == ErrorCode.FORBIDDEN
    with pytest.raises(SpotterError) as invalid:
        await runner.app_action(_act(studio, studio.coach, "tasks", "create", title="x", colour="red"))
    assert invalid.value.code == ErrorCode.INVALID_REQUEST
    with pytest.raises(SpotterError) as member:
        await runner.app_action(_act(studio, studio.member, "tasks", "create", title="x"))
    assert member.value.code == ErrorCode.FORBIDDEN
    assert await pool.fetchval("SELECT count(*) FROM tasks WHERE organization_id = $1", uuid.UUID(studio.org.id)) == before
