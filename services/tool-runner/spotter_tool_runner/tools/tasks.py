"""The `tasks` router (seed 000): the studio's to-do list. List, create, patch, complete, soft-delete."""

from __future__ import annotations

import uuid
from datetime import date, datetime
from typing import ClassVar, Literal

from pydantic import Field

from ..context import ToolContext
from ..declaration import ToolFailure, ToolInput, ToolOutput, ToolRouter
from .common import IdInput, Name, PatchInput, Table, Text, insert, patch, require, require_membership, soft_delete

router = ToolRouter("tasks", resource="task")
TASKS = Table("tasks", "task", "title", hint="Use tasks__list to find the task id.")

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
    REQUIRED: ClassVar = frozenset({"title", "status"})

    id: uuid.UUID = Field(description="Task id.")
    title: Name | None = Field(default=None, description="New title.")
    description: Text | None = Field(default=None, description="New description; null clears it.")
    due_date: date | None = Field(default=None, description="New due day; null clears it.")
    assignee_membership_id: uuid.UUID | None = Field(default=None, description="New assignee; null unassigns.")
    status: TaskStatus | None = Field(default=None, description="open reopens a task, done completes it.")


class Task(ToolOutput):
    id: uuid.UUID
    title: str
    description: str | None
    status: str
    due_date: date | None
    assignee_membership_id: uuid.UUID | None
    assignee_name: str | None
    completed_at: datetime | None


class TaskList(ToolOutput):
    tasks: list[Task]
    total: int = Field(description="Number of matches, which may exceed the tasks returned.")


class DeletedTask(ToolOutput):
    id: uuid.UUID
    title: str
    deleted: bool = True


_SELECT = """
SELECT t.id, t.title, t.description, t.status, t.due_date, t.assignee_membership_id,
       u.full_name AS assignee_name, t.completed_at, count(*) OVER () AS total
  FROM tasks t
  LEFT JOIN memberships m ON m.id = t.assignee_membership_id
  LEFT JOIN users u ON u.id = m.user_id
"""


@router.read(
    "list",
    "List the studio's tasks (to-dos), open ones first, then by due date. Filter by status, "
    "assignee (membershipId) or dueBefore — e.g. overdue tasks: status open, dueBefore today.",
)
async def list_tasks(ctx: ToolContext, args: TasksListInput) -> TaskList:
    rows = await ctx.conn.fetch(
        f"""{_SELECT}
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
    return TaskList(tasks=[Task.from_row(r) for r in rows], total=rows[0]["total"] if rows else 0)


@router.write(
    "create",
    "Create a task (a to-do for the studio's staff), optionally with a due day and an assignee. "
    "Returns the task with its id.",
    inverse="delete",
)
async def create(ctx: ToolContext, args: TasksCreateInput) -> Task:
    if args.assignee_membership_id is not None:
        await require_membership(ctx, args.assignee_membership_id)
    task = await insert(ctx, TASKS, args, created_by=ctx.actor.user_id)
    return await _load(ctx, task["id"])


@router.write(
    "update",
    "Change a task's title, description, due day, assignee or status (open/done). Send only the "
    "fields to change; null clears description, dueDate or assigneeMembershipId.",
)
async def update(ctx: ToolContext, args: TasksUpdateInput) -> Task:
    await require(ctx, TASKS, args.id)
    if args.assignee_membership_id is not None:
        await require_membership(ctx, args.assignee_membership_id)
    await patch(ctx, TASKS, args)
    # completed_at follows the new status (a SET expression would see the old one): set when a task
    # becomes done, cleared when it is reopened.
    await ctx.conn.execute(
        """UPDATE tasks SET completed_at = CASE WHEN status = 'open' THEN NULL ELSE coalesce(completed_at, now()) END
            WHERE id = $1""",
        args.id,
    )
    return await _load(ctx, args.id)


@router.write("complete", "Mark a task done.")
async def complete(ctx: ToolContext, args: IdInput) -> Task:
    if (await require(ctx, TASKS, args.id))["status"] == "done":
        raise ToolFailure("already_done", "That task is already done.", hint="Nothing to do; tell the user.")
    await ctx.conn.execute(
        "UPDATE tasks SET status = 'done', completed_at = now(), updated_at = now() WHERE id = $1", args.id
    )
    return await _load(ctx, args.id)


@router.write("delete", "Delete a task. The user is asked to confirm before it runs.", confirm="destructive")
async def delete(ctx: ToolContext, args: IdInput) -> DeletedTask:
    return DeletedTask.from_row(await soft_delete(ctx, TASKS, args.id))


async def _load(ctx: ToolContext, task_id: uuid.UUID) -> Task:
    row = await ctx.conn.fetchrow(f"{_SELECT} WHERE t.id = $1 AND t.organization_id = $2", task_id, ctx.organization_id)
    return Task.from_row(row)
