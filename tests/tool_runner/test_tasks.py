"""The `tasks` router over a real Postgres, through ToolRunner.execute."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from spotter_tool_runner.runner import ToolRunner

from tests.factories import Studio

from .helpers import Conversation, audit_rows, failed, new_conversation, succeeded


@pytest.fixture
async def conv(pool: asyncpg.Pool, studio: Studio) -> Conversation:
    return await new_conversation(pool, studio, studio.owner)


async def tasks(runner: ToolRunner, conv: Conversation, action: str, input: dict | None = None):
    return await runner.execute(conv.command("tasks", action, input))


async def test_create_and_audit(pool, runner, conv, studio) -> None:
    cmd = conv.command(
        "tasks",
        "create",
        {"title": "Order jump ropes", "dueDate": "2026-03-05", "assigneeMembershipId": studio.coach.membership_id},
    )
    outcome = await runner.execute(cmd)
    task = succeeded(outcome)
    assert outcome.inverse_available
    assert task == {
        "id": task["id"],
        "title": "Order jump ropes",
        "description": None,
        "status": "open",
        "dueDate": "2026-03-05",
        "assigneeMembershipId": studio.coach.membership_id,
        "assigneeName": studio.coach.full_name,
        "completedAt": None,
    }
    row = await pool.fetchrow("SELECT organization_id, created_by FROM tasks WHERE id = $1", uuid.UUID(task["id"]))
    assert (str(row["organization_id"]), str(row["created_by"])) == (studio.org.id, studio.owner.user_id)
    [audit] = await audit_rows(pool, cmd.tool_use_id)
    assert (audit["action"], audit["resource"], audit["resource_id"]) == ("task.created", "task", task["id"])


async def test_list_filters_and_stays_in_the_org(pool, runner, conv, studio, other_studio) -> None:
    coach = studio.coach.membership_id
    succeeded(await tasks(runner, conv, "create", {"title": "Early", "dueDate": "2026-03-01"}))
    succeeded(
        await tasks(runner, conv, "create", {"title": "Late", "dueDate": "2026-04-01", "assigneeMembershipId": coach})
    )
    succeeded(await tasks(runner, conv, "create", {"title": "Undated"}))
    done = succeeded(await tasks(runner, conv, "create", {"title": "Done", "dueDate": "2026-02-01"}))
    succeeded(await tasks(runner, conv, "complete", {"id": done["id"]}))
    gone = succeeded(await tasks(runner, conv, "create", {"title": "Gone"}))
    succeeded(await tasks(runner, conv, "delete", {"id": gone["id"]}))
    theirs = await new_conversation(pool, other_studio, other_studio.owner)
    succeeded(await tasks(runner, theirs, "create", {"title": "Early", "dueDate": "2026-03-01"}))

    async def titles(**filters) -> list[str]:
        out = succeeded(await tasks(runner, conv, "list", filters))
        assert out["total"] == len(out["tasks"])
        return [t["title"] for t in out["tasks"]]

    # Open tasks first (by due day, undated last), then done ones; deleted and foreign ones never.
    assert await titles() == ["Early", "Late", "Undated", "Done"]
    assert await titles(status="open") == ["Early", "Late", "Undated"]
    assert await titles(status="done") == ["Done"]
    assert await titles(assigneeMembershipId=coach) == ["Late"]
    assert await titles(status="open", dueBefore="2026-04-01") == ["Early"]
    limited = succeeded(await tasks(runner, conv, "list", {"limit": 2}))
    assert (len(limited["tasks"]), limited["total"]) == (2, 4)


async def test_update_complete_and_reopen(pool, runner, conv, studio) -> None:
    task = succeeded(await tasks(runner, conv, "create", {"title": "Fix rower", "description": "Monitor"}))

    patched = succeeded(
        await tasks(
            runner,
            conv,
            "update",
            {"id": task["id"], "description": None, "assigneeMembershipId": studio.admin.membership_id},
        )
    )
    assert (patched["title"], patched["description"], patched["assigneeName"]) == (
        "Fix rower",
        None,
        studio.admin.full_name,
    )

    cmd = conv.command("tasks", "complete", {"id": task["id"]})
    completed = succeeded(await runner.execute(cmd))
    assert completed["status"] == "done" and completed["completedAt"]
    [audit] = await audit_rows(pool, cmd.tool_use_id)
    assert audit["action"] == "task.completed"
    failed(await tasks(runner, conv, "complete", {"id": task["id"]}), "already_done")

    reopened = succeeded(await tasks(runner, conv, "update", {"id": task["id"], "status": "open"}))
    assert (reopened["status"], reopened["completedAt"]) == ("open", None)
    redone = succeeded(await tasks(runner, conv, "update", {"id": task["id"], "status": "done"}))
    assert redone["completedAt"]


async def test_delete_is_soft_and_org_scoped(pool, runner, conv, studio, other_studio) -> None:
    task = succeeded(await tasks(runner, conv, "create", {"title": "Renew insurance"}))
    theirs = await new_conversation(pool, other_studio, other_studio.owner)
    for action, input in [
        ("delete", {"id": task["id"]}),
        ("complete", {"id": task["id"]}),
        ("update", {"id": task["id"], "title": "Mine"}),
    ]:
        assert "tasks__list" in failed(await tasks(runner, theirs, action, input), "not_found").hint
    failed(
        await tasks(
            runner, conv, "create", {"title": "x", "assigneeMembershipId": other_studio.coach.membership_id}
        ),
        "not_found",
    )

    assert succeeded(await tasks(runner, conv, "delete", {"id": task["id"]})) == {
        "id": task["id"],
        "title": "Renew insurance",
        "deleted": True,
    }
    assert await pool.fetchval("SELECT deleted_at IS NOT NULL FROM tasks WHERE id = $1", uuid.UUID(task["id"]))
    for action, input in [("delete", {"id": task["id"]}), ("complete", {"id": task["id"]})]:
        failed(await tasks(runner, conv, action, input), "not_found")
