"""Test-only tools (router `test`) whose handlers report what happened to them through a Probe.

Probes are keyed by tool_use_id, which is unique per test, so tests never see each other's calls."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field

import asyncpg
from pydantic import Field

from spotter_tool_runner.context import ToolContext
from spotter_tool_runner.declaration import ToolFailure, ToolInput, ToolOutput, ToolRouter
from spotter_tool_runner.registry import Registry
from spotter_tool_runner.tools import read

router = ToolRouter("test", resource="program")


@dataclass
class Probe:
    calls: int = 0
    gated: bool = False
    crash_first: bool = False
    entered: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)


PROBES: dict[str, Probe] = {}


def probe(tool_use_id: str, **kwargs) -> Probe:
    PROBES[tool_use_id] = Probe(**kwargs)
    return PROBES[tool_use_id]


async def _visit(ctx: ToolContext) -> Probe:
    p = PROBES.setdefault(ctx.tool_use_id, Probe())
    p.calls += 1
    if p.gated:
        p.entered.set()
        await p.release.wait()
    return p


class CreateNoteInput(ToolInput):
    name: str = Field(min_length=1, description="Program name to create.")


class Created(ToolOutput):
    id: uuid.UUID
    name: str


class IdInput(ToolInput):
    id: str = Field(description="Program id.")


@router.write(
    "create_note",
    "Create a program (a real, org-scoped side effect).",
    inverse="delete_note",
    audit_label="program.created",
)
async def create_note(ctx: ToolContext, args: CreateNoteInput) -> Created:
    p = await _visit(ctx)
    new_id = await ctx.conn.fetchval(
        "INSERT INTO programs (organization_id, name) VALUES ($1, $2) RETURNING id", ctx.organization_id, args.name
    )
    if p.crash_first and p.calls == 1:
        # The database "goes away" after the write: an infrastructure failure, not a tool failure.
        raise asyncpg.exceptions.ConnectionDoesNotExistError("simulated connection loss")
    return Created(id=new_id, name=args.name)


@router.write("delete_note", "Soft-delete a program.", confirm="destructive", audit_label="program.deleted")
async def delete_note(ctx: ToolContext, args: IdInput) -> dict:
    await _visit(ctx)
    await ctx.conn.execute(
        "UPDATE programs SET deleted_at = now() WHERE id = $1 AND organization_id = $2", args.id, ctx.organization_id
    )
    return {"id": args.id, "deleted": True}


@router.read("explode", "Always raises an unexpected error.")
async def explode(ctx: ToolContext, args: CreateNoteInput) -> dict:
    await _visit(ctx)
    await ctx.conn.execute(
        "INSERT INTO programs (organization_id, name) VALUES ($1, $2)", ctx.organization_id, args.name
    )
    raise RuntimeError("secret internals: password=hunter2")


@router.read("refuse", "Always refuses with a typed failure.")
async def refuse(ctx: ToolContext, args: CreateNoteInput) -> dict:
    await _visit(ctx)
    raise ToolFailure("conflict", f"{args.name} already exists.", hint="Pick another name.")


@router.read("bad_query", "A statement fails (aborting the transaction); the handler turns it into a typed failure.")
async def bad_query(ctx: ToolContext, args: CreateNoteInput) -> dict:
    await _visit(ctx)
    try:
        await ctx.conn.fetchval("SELECT 1 / 0")
    except asyncpg.exceptions.DivisionByZeroError:
        raise ToolFailure("invalid_input", f"{args.name} cannot be computed.", hint="Ask for something else.") from None
    return {"ok": True}


@router.read("owner_only", "Only owners may call it.", roles={"owner"})
async def owner_only(ctx: ToolContext, args: CreateNoteInput) -> dict:
    await _visit(ctx)
    return {"ok": True}


pick = router.picker("pick", "Ask the user to pick.", input=IdInput)


def build_test_registry() -> Registry:
    registry = Registry()
    registry.register_module(read)
    for decl in (create_note, delete_note, explode, refuse, bad_query, owner_only, pick):
        registry.register(decl)
    registry.check()
    return registry
