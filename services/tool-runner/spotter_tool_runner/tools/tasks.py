"""The `tasks` router (seed 000): the studio's to-do list. List, create, patch, complete, soft-delete."""

from __future__ import annotations

import uuid
from datetime import date, datetime
from typing import ClassVar, Literal

import asyncpg
from pydantic import Field

from ..context import ToolContext
from ..declaration import Audit, Inverse, ToolFailure, ToolInput, ToolOutput, agent_tool
from .common import IdInput, Name, PatchInput, Text, id_of, require_membership, soft_delete, str_or_none

TaskStatus = Literal["open", "done"]


class TasksListInput(ToolInput):
    status: TaskStatus | None = Field(default=None, description="Only open or only done tasks; omit for both.")
    assignee_membership_id: uuid.UUID | None = Field(default=None, description="Only tasks assigned to this member.")
    due_before: date | None = Field(
        default=None, description="Only tasks due before this day (exclusive), YYYY-MM-DD; undated tasks are left out."
    )
    limit: int = Field(default=20, ge=1, le=50, description="Maximum number of tasks returned.")


class TasksCreateInput(ToolInput):
    title: Name = Field(description="What needs doing.")
    description: Text | None = Field(default=None, description="Details.")
    due_date: date | None = Field(default=None, description="Due day, YYYY-MM-DD.")
    assignee_membership_id: uuid.UUID | None = Field(
        default=None, description="Who should do it (read__members_search); omit to leave it unassigned."
    )


class TasksUpdateInput(PatchInput):
    COLUMNS: ClassVar = {
        "title": "title",
        "description": "description",
        "due_date": "due_date",
        "assignee_membership_id": "assignee_membership_id",
        "status": "status",
    }
    REQUIRED: ClassVar = frozenset({"title", "status"})

    id: uuid.UUID = Field(description="Task id.")
    title: Name | None = Field(default=None, description="New title.")
    description: Text | None = Field(default=None, description="New description; null clears it.")
    due_date: date | None = Field(default=None, description="New due day; null clears it.")
    assignee_membership_id: uuid.UUID | None = Field(default=None, description="New assignee; null unassigns.")
    status: TaskStatus | None = Field(default=None, description="open reopens a task, done completes it.")


class Task(ToolOutput):
    id: str
    title: str
    description: str | None
    status: str
    due_date: date | None
    assignee_membership_id: str | None
    assignee_name: str | None
    completed_at: datetime | None


class TaskList(ToolOutput):
    tasks: list[Task]
    total: int = Field(description="Number of matches, which may exceed the tasks returned.")


class DeletedTask(ToolOutput):
    id: str
    title: str
    deleted: bool = True


AUDIT_RESOURCE = "task"

_COLUMNS = """
t.id, t.title, t.description, t.status::text AS status, t.due_date, t.assignee_membership_id,
u.full_name AS assignee_name, t.completed_at
"""

_FROM = """
  FROM tasks t
  LEFT JOIN memberships m ON m.id = t.assignee_membership_id
  LEFT JOIN users u ON u.id = m.user_id
"""


@agent_tool(
    router="tasks",
    action="list",
    summary="List the studio's tasks (to-dos), open ones first, then by due date. Filter by status, "
    "assignee (membershipId) or dueBefore — e.g. overdue tasks: status open, dueBefore today.",
    input=TasksListInput,
)
async def list_tasks(ctx: ToolContext, args: TasksListInput) -> TaskList:
    rows = await ctx.conn.fetch(
        f"""SELECT count(*) OVER () AS total, {_COLUMNS} {_FROM}
             WHERE t.organization_id = $1 AND t.deleted_at IS NULL
               AND ($2::text IS NULL OR t.status::text = $2)
               AND ($3::uuid IS NULL OR t.assignee_membership_id = $3)
               AND ($4::date IS NULL OR t.due_date < $4)
             ORDER BY t.status, t.due_date NULLS LAST, t.created_at, t.id
             LIMIT $5""",
        ctx.organization_id,
        args.status,
        args.assignee_membership_id,
        args.due_before,
        args.limit,
    )
    return TaskList(tasks=[_task(r) for r in rows], total=rows[0]["total"] if rows else 0)


@agent_tool(
    router="tasks",
    action="create",
    summary="Create a task (a to-do for the studio's staff), optionally with a due day and an assignee. "
    "Returns the task with its id.",
    input=TasksCreateInput,
    side_effects="write",
    audit=Audit(resource=AUDIT_RESOURCE, action_label="task.created"),
    inverse=Inverse(router="tasks", action="delete", build_input=id_of),
)
async def create(ctx: ToolContext, args: TasksCreateInput) -> Task:
    if args.assignee_membership_id is not None:
        await require_membership(ctx.conn, ctx.organization_id, args.assignee_membership_id)
    task_id = await ctx.conn.fetchval(
        """INSERT INTO tasks (organization_id, title, description, due_date, assignee_membership_id, created_by)
           VALUES ($1, $2, $3, $4, $5, $6) RETURNING id""",
        ctx.organization_id,
        args.title,
        args.description,
        args.due_date,
        args.assignee_membership_id,
        ctx.actor.user_id,
    )
    return await _load(ctx, task_id)


@agent_tool(
    router="tasks",
    action="update",
    summary="Change a task's title, description, due day, assignee or status (open/done). Send only the "
    "fields to change; null clears description, dueDate or assigneeMembershipId.",
    input=TasksUpdateInput,
    side_effects="write",
    audit=Audit(resource=AUDIT_RESOURCE, action_label="task.updated"),
)
async def update(ctx: ToolContext, args: TasksUpdateInput) -> Task:
    await _require(ctx, args.id)
    if args.assignee_membership_id is not None:
        await require_membership(ctx.conn, ctx.organization_id, args.assignee_membership_id)
    assignments, values = args.assignments(first_param=3)
    await ctx.conn.execute(
        f"UPDATE tasks SET {assignments}, updated_at = now() WHERE id = $1 AND organization_id = $2",
        args.id,
        ctx.organization_id,
        *values,
    )
    # completed_at follows the new status (a SET expression would see the old one): set when a task
    # becomes done, cleared when it is reopened.
    await ctx.conn.execute(
        """UPDATE tasks SET completed_at = CASE WHEN status = 'open' THEN NULL ELSE coalesce(completed_at, now()) END
            WHERE id = $1""",
        args.id,
    )
    return await _load(ctx, args.id)


@agent_tool(
    router="tasks",
    action="complete",
    summary="Mark a task done.",
    input=IdInput,
    side_effects="write",
    audit=Audit(resource=AUDIT_RESOURCE, action_label="task.completed"),
)
async def complete(ctx: ToolContext, args: IdInput) -> Task:
    status = await _require(ctx, args.id)
    if status == "done":
        raise ToolFailure("already_done", "That task is already done.", hint="Nothing to do; tell the user.")
    await ctx.conn.execute(
        "UPDATE tasks SET status = 'done', completed_at = now(), updated_at = now() WHERE id = $1", args.id
    )
    return await _load(ctx, args.id)


@agent_tool(
    router="tasks",
    action="delete",
    summary="Delete a task. The user is asked to confirm before it runs.",
    input=IdInput,
    side_effects="write",
    confirm="destructive",
    audit=Audit(resource=AUDIT_RESOURCE, action_label="task.deleted"),
)
async def delete(ctx: ToolContext, args: IdInput) -> DeletedTask:
    deleted = await soft_delete(ctx.conn, "tasks", ctx.organization_id, args.id)
    if deleted is None:
        raise _not_found(args.id)
    return DeletedTask(id=deleted[0], title=deleted[1])


def _not_found(task_id: uuid.UUID) -> ToolFailure:
    return ToolFailure(
        "not_found",
        f"No task {task_id} in this organization (it may have been deleted).",
        hint="Use tasks__list to find the task id.",
    )


async def _require(ctx: ToolContext, task_id: uuid.UUID) -> str:
    """The task's status, with the row locked so concurrent changes apply one after the other."""
    status = await ctx.conn.fetchval(
        "SELECT status::text FROM tasks WHERE id = $1 AND organization_id = $2 AND deleted_at IS NULL FOR UPDATE",
        task_id,
        ctx.organization_id,
    )
    if status is None:
        raise _not_found(task_id)
    return status


async def _load(ctx: ToolContext, task_id: uuid.UUID) -> Task:
    row = await ctx.conn.fetchrow(
        f"SELECT {_COLUMNS} {_FROM} WHERE t.id = $1 AND t.organization_id = $2", task_id, ctx.organization_id
    )
    return _task(row)


def _task(r: asyncpg.Record) -> Task:
    return Task(
        id=str(r["id"]),
        title=r["title"],
        description=r["description"],
        status=r["status"],
        due_date=r["due_date"],
        assignee_membership_id=str_or_none(r["assignee_membership_id"]),
        assignee_name=r["assignee_name"],
        completed_at=r["completed_at"],
    )
