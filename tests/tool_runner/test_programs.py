"""The `programs` router over a real Postgres, through ToolRunner.execute."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from spotter_tool_runner.runner import ToolRunner

from tests.factories import Studio, make_studio

from .helpers import Conversation, audit_rows, failed, new_conversation, succeeded


@pytest.fixture
async def conv(pool: asyncpg.Pool, studio: Studio) -> Conversation:
    return await new_conversation(pool, studio, studio.admin)


async def programs(runner: ToolRunner, conv: Conversation, action: str, input: dict):
    return await runner.execute(conv.command("programs", action, input))


def unique(prefix: str = "Program") -> str:
    return f"{prefix} {uuid.uuid4().hex[:6]}"


async def test_create_update_and_list(pool, runner, conv) -> None:
    name = unique("Barbell Club")
    cmd = conv.command("programs", "create", {"name": name, "kind": "coaching"})
    created = succeeded(await runner.execute(cmd))
    assert created == {"id": created["id"], "name": name, "description": None, "kind": "coaching", "isActive": True}
    [audit] = await audit_rows(pool, cmd.tool_use_id)
    assert (audit["action"], audit["resource"], audit["resource_id"]) == ("program.created", "program", created["id"])

    patched = succeeded(
        await programs(runner, conv, "update", {"id": created["id"], "description": "Heavy", "isActive": False})
    )
    assert patched == {**created, "description": "Heavy", "isActive": False}
    listed = succeeded(await runner.execute(conv.command("read", "programs_list", {"includeInactive": True})))
    assert name in [p["name"] for p in listed["programs"]]


async def test_names_are_unique_in_the_org_but_not_across_orgs(pool, runner, conv, studio, other_studio) -> None:
    error = failed(await programs(runner, conv, "create", {"name": "crossfit"}), "conflict")
    assert studio.programs["CrossFit"] in error.message
    failed(
        await programs(runner, conv, "update", {"id": studio.programs["Olympic Lifting"], "name": "CrossFit"}),
        "conflict",
    )
    # Renaming a program to its own name is no conflict.
    succeeded(await programs(runner, conv, "update", {"id": studio.programs["CrossFit"], "name": "CrossFit"}))
    theirs = await new_conversation(pool, other_studio, other_studio.owner)
    succeeded(await programs(runner, theirs, "create", {"name": "Barbell Club"}))
    succeeded(await programs(runner, conv, "create", {"name": "Barbell Club"}))


async def test_delete_is_soft_owner_or_admin_only(pool, runner, studio) -> None:
    program_id = studio.programs["Olympic Lifting"]
    coach = await new_conversation(pool, studio, studio.coach)
    failed(await programs(runner, coach, "delete", {"id": program_id}), "forbidden")

    admin = await new_conversation(pool, studio, studio.admin)
    cmd = admin.command("programs", "delete", {"id": program_id})
    assert succeeded(await runner.execute(cmd)) == {"id": program_id, "name": "Olympic Lifting", "deleted": True}
    assert await pool.fetchval("SELECT deleted_at IS NOT NULL FROM programs WHERE id = $1", uuid.UUID(program_id))
    [audit] = await audit_rows(pool, cmd.tool_use_id)
    assert (audit["action"], audit["resource_id"]) == ("program.deleted", program_id)

    listed = succeeded(await runner.execute(admin.command("read", "programs_list", {"includeInactive": True})))
    assert "Olympic Lifting" not in [p["name"] for p in listed["programs"]]
    failed(await programs(runner, admin, "delete", {"id": program_id}), "not_found")
    failed(await programs(runner, admin, "update", {"id": program_id, "name": "Back"}), "not_found")
    # Its name is free again.
    succeeded(await programs(runner, admin, "create", {"name": "Olympic Lifting"}))


async def test_another_orgs_program_is_not_found(pool, runner, conv, other_studio) -> None:
    theirs = other_studio.programs["CrossFit"]
    for action, input in [("update", {"id": theirs, "name": "Mine"}), ("delete", {"id": theirs})]:
        failed(await programs(runner, conv, action, input), "not_found")
    assert await pool.fetchval(
        "SELECT name = 'CrossFit' AND deleted_at IS NULL FROM programs WHERE id = $1", uuid.UUID(theirs)
    )


async def test_enroll_member(pool, runner) -> None:
    studio = await make_studio(pool, extra_members=[{"full_name": "Dani Mizrahi"}])
    other = await make_studio(pool, extra_members=[{"full_name": "Dani Mizrahi"}])
    conv = await new_conversation(pool, studio, studio.coach)
    coaching = succeeded(await programs(runner, conv, "create", {"name": "1-on-1", "kind": "coaching"}))
    dani = studio.people["Dani Mizrahi"].membership_id
    enroll = {"programId": coaching["id"], "membershipId": dani}

    cmd = conv.command("programs", "enroll_member", enroll)
    enrolled = succeeded(await runner.execute(cmd))

    assert {k: enrolled[k] for k in ("programId", "programName", "membershipId", "memberName")} == {
        "programId": coaching["id"],
        "programName": "1-on-1",
        "membershipId": dani,
        "memberName": "Dani Mizrahi",
    }
    [audit] = await audit_rows(pool, cmd.tool_use_id)
    assert (audit["action"], audit["resource"], audit["resource_id"]) == (
        "program.member_enrolled",
        "program_enrollment",
        enrolled["id"],
    )
    error = failed(await programs(runner, conv, "enroll_member", enroll), "already_enrolled")
    assert "Dani Mizrahi" in error.message
    assert await pool.fetchval(
        "SELECT count(*) FROM program_enrollments WHERE program_id = $1", uuid.UUID(coaching["id"])
    ) == 1

    group = {"programId": studio.programs["CrossFit"], "membershipId": dani}
    failed(await programs(runner, conv, "enroll_member", group), "not_enrollable")
    stranger = {"programId": coaching["id"], "membershipId": other.people["Dani Mizrahi"].membership_id}
    assert "read__members_search" in failed(await programs(runner, conv, "enroll_member", stranger), "not_found").hint
    foreign = {"programId": other.programs["CrossFit"], "membershipId": dani}
    failed(await programs(runner, conv, "enroll_member", foreign), "not_found")
