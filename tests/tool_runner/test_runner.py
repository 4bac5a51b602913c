"""ToolRunner against a real Postgres: at-most-once execution, failures as data, RBAC, validation."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Callable

import asyncpg
from prometheus_client import REGISTRY
import pytest

from spotter_shared.db import create_pool
from spotter_shared.errors import ErrorCode, SpotterError
from spotter_tool_runner.runner import ToolRunner

from tests.factories import Studio

from .helpers import Conversation, actor_of, audit_rows, execution_rows, new_conversation
from .sample_tools import build_test_registry, probe


@pytest.fixture(scope="session")
def registry():
    return build_test_registry()


@pytest.fixture
def test_runner(pool: asyncpg.Pool, registry) -> ToolRunner:
    return ToolRunner(pool, registry)


@pytest.fixture
async def conv(pool: asyncpg.Pool, studio: Studio) -> Conversation:
    return await new_conversation(pool, studio, studio.coach)


def unique(prefix: str = "Prog") -> str:
    return f"{prefix} {uuid.uuid4().hex[:8]}"


async def programs_named(pool: asyncpg.Pool, name: str) -> int:
    return await pool.fetchval("SELECT count(*) FROM programs WHERE name = $1", name)


async def test_a_repeat_returns_the_stored_outcome_without_running_again(pool, test_runner, conv, studio) -> None:
    name = unique()
    cmd = conv.command("test", "create_note", {"name": name})
    p = probe(cmd.tool_use_id)

    first = await test_runner.execute(cmd)
    second = await test_runner.execute(cmd)

    assert (first.status, first.replayed, second.status, second.replayed) == ("succeeded", False, "succeeded", True)
    assert second.output == first.output and first.output["name"] == name
    assert first.inverse_available and second.inverse_available
    assert p.calls == 1
    assert await programs_named(pool, name) == 1
    [row] = await execution_rows(pool, conv.id, cmd.tool_use_id)
    assert row["status_text"] == "succeeded"
    assert row["output"] == first.output and row["resource_id"] == first.output["id"]
    assert row["input"] == {"name": name} and str(row["message_id"]) == conv.message_id

    [audit] = await audit_rows(pool, cmd.tool_use_id)
    assert row["audit_log_id"] == audit["id"]
    assert (audit["actor_clerk_id"], audit["action"], audit["resource"], audit["resource_id"]) == (
        studio.coach.user_id,
        "program.created",
        "program",
        first.output["id"],
    )
    assert str(audit["organization_id"]) == studio.org.id
    assert audit["metadata"] == {
        "agent": True,
        "conversationId": conv.id,
        "toolUseId": cmd.tool_use_id,
        "router": "test",
        "action": "create_note",
    }


async def test_concurrent_duplicates_run_the_handler_once(pool, test_runner, conv) -> None:
    name = unique()
    cmd = conv.command("test", "create_note", {"name": name})
    p = probe(cmd.tool_use_id, gated=True)

    first = asyncio.create_task(test_runner.execute(cmd))
    await asyncio.wait_for(p.entered.wait(), 5)  # the first now holds the row lock inside the handler
    second = asyncio.create_task(test_runner.execute(cmd))
    try:
        # Until the twin blocks on SELECT … FOR UPDATE — or, if it wrongly got past, enters the handler.
        await wait_until(pool, lambda: p.calls > 1)
    finally:
        p.release.set()
        results = await asyncio.wait_for(asyncio.gather(first, second, return_exceptions=True), 10)

    assert p.calls == 1
    a, b = results
    assert (a.replayed, b.replayed) == (False, True)
    assert a.output == b.output
    assert await programs_named(pool, name) == 1
    [row] = await execution_rows(pool, conv.id, cmd.tool_use_id)
    [audit] = await audit_rows(pool, cmd.tool_use_id)
    assert row["audit_log_id"] == audit["id"]


async def wait_until(pool: asyncpg.Pool, give_up: Callable[[], bool]) -> None:
    """Wait on the database's own state, not a timer: until a backend of our database waits on a
    lock, or `give_up()` says that can no longer happen."""

    async def poll() -> None:
        while not give_up():
            if await pool.fetchval(
                """SELECT count(*) > 0 FROM pg_stat_activity
                    WHERE datname = current_database() AND wait_event_type = 'Lock'"""
            ):
                return

    await asyncio.wait_for(poll(), 5)


async def test_a_crash_mid_way_leaves_no_side_effect_and_the_retry_runs_once(pool, test_runner, conv) -> None:
    name = unique()
    cmd = conv.command("test", "create_note", {"name": name})
    p = probe(cmd.tool_use_id, crash_first=True)

    with pytest.raises(asyncpg.exceptions.ConnectionDoesNotExistError):
        await test_runner.execute(cmd)  # infrastructure failures propagate
    [row] = await execution_rows(pool, conv.id, cmd.tool_use_id)
    assert row["status_text"] == "running"  # recorded before running, never completed
    assert await programs_named(pool, name) == 0 and await audit_rows(pool, cmd.tool_use_id) == []

    retry = await test_runner.execute(cmd)
    assert (retry.status, retry.replayed, p.calls) == ("succeeded", False, 2)
    assert await programs_named(pool, name) == 1
    assert len(await audit_rows(pool, cmd.tool_use_id)) == 1


async def test_an_unexpected_exception_becomes_a_typed_failure(pool, test_runner, conv) -> None:
    name = unique()
    cmd = conv.command("test", "explode", {"name": name})
    p = probe(cmd.tool_use_id)

    outcome = await test_runner.execute(cmd)

    assert outcome.status == "failed" and not outcome.inverse_available
    assert outcome.error.code == "tool_failed"
    assert "hunter2" not in outcome.error.message and "RuntimeError" not in outcome.error.message
    assert cmd.trace_id in outcome.error.message
    assert await programs_named(pool, name) == 0  # its write was rolled back
    [row] = await execution_rows(pool, conv.id, cmd.tool_use_id)
    assert (row["status_text"], row["error_code"]) == ("failed", "tool_failed")

    again = await test_runner.execute(cmd)
    assert (again.replayed, again.error, p.calls) == (True, outcome.error, 1)


async def test_a_tool_failure_keeps_its_code_and_hint_across_replays(pool, test_runner, conv) -> None:
    cmd = conv.command("test", "refuse", {"name": "Murph"})
    outcome = await test_runner.execute(cmd)
    assert outcome.error.model_dump() == {
        "code": "conflict",
        "message": "Murph already exists.",
        "hint": "Pick another name.",
    }
    again = await test_runner.execute(cmd)
    assert again.replayed and again.error == outcome.error
    [row] = await execution_rows(pool, conv.id, cmd.tool_use_id)
    assert (row["status_text"], row["error_code"], row["error_message"]) == (
        "failed",
        "conflict",
        "Murph already exists.",
    )


async def test_a_read_whose_statement_failed_records_its_typed_failure(pool, test_runner, conv) -> None:
    """A read runs without a savepoint: a failed statement aborts the call's transaction, which is rolled
    back, and the failure is recorded after it, under the row lock again."""
    cmd = conv.command("test", "bad_query", {"name": "Murph"})
    p = probe(cmd.tool_use_id)
    outcome = await test_runner.execute(cmd)
    assert (outcome.status, outcome.error.code, outcome.error.message) == ("failed", "invalid_input", "Murph cannot be computed.")
    [row] = await execution_rows(pool, conv.id, cmd.tool_use_id)
    assert (row["status_text"], row["error_code"]) == ("failed", "invalid_input")
    again = await test_runner.execute(cmd)
    assert (again.replayed, again.error, p.calls) == (True, outcome.error, 1)


async def test_a_read_call_is_claimed_locked_run_and_ended_with_no_savepoint_or_membership_query(db_url, registry, conv) -> None:
    """The membership check rides on the row lock and a read has no savepoint: the claim, BEGIN, the lock
    (with the check), the read's own statement, the terminal update, COMMIT."""
    sent: list[str] = []
    cmd = conv.command("read", "get_current_context", {})
    own = await create_pool(db_url, max_size=1)  # one connection, which logs what it is sent
    try:
        async with own.acquire() as conn:
            conn.add_query_logger(lambda record: sent.append(" ".join(record.query.split())))
        runner = ToolRunner(own, registry)
        await runner.execute(conv.command("read", "get_current_context", {}))  # the statements prepared
        sent.clear()
        outcome = await runner.execute(cmd)
    finally:
        await own.close()
    assert outcome.status == "succeeded", outcome
    kinds = [q.split()[0].upper() for q in sent]
    assert "SAVEPOINT" not in kinds and not any("FROM memberships WHERE id" in q for q in sent), sent
    # get_current_context reads the org and the caller in one statement.
    assert kinds == ["INSERT", "BEGIN;", "SELECT", "SELECT", "UPDATE", "COMMIT;"], sent


@pytest.mark.parametrize(
    ("person", "claimed_role", "action"),
    [
        ("member", None, "get_current_context"),  # members may use no staff tool
        ("coach", None, "owner_only"),  # role not in the tool's roles
        ("coach", "owner", "owner_only"),  # claims a role the membership does not hold
    ],
)
async def test_rbac_is_enforced_again_in_the_runner(pool, test_runner, studio, person, claimed_role, action) -> None:
    who = getattr(studio, person)
    conv = await new_conversation(pool, studio, who)
    router = "read" if action == "get_current_context" else "test"
    cmd = conv.command(
        router, action, {} if router == "read" else {"name": "x"}, actor=actor_of(studio, who, role=claimed_role)
    )
    p = probe(cmd.tool_use_id)

    outcome = await test_runner.execute(cmd)

    assert outcome.status == "failed" and outcome.error.code == "forbidden"
    assert p.calls == 0
    [row] = await execution_rows(pool, conv.id, cmd.tool_use_id)
    assert (row["status_text"], row["error_code"]) == ("failed", "forbidden")


async def test_the_owner_passes_the_same_check(test_runner, pool, studio) -> None:
    conv = await new_conversation(pool, studio, studio.owner)
    outcome = await test_runner.execute(conv.command("test", "owner_only", {"name": "x"}))
    assert outcome.status == "succeeded" and outcome.output == {"ok": True}


async def test_an_actor_of_another_org_cannot_use_the_conversation(pool, test_runner, conv, other_studio) -> None:
    cmd = conv.command("read", "get_current_context", actor=actor_of(other_studio, other_studio.owner))
    with pytest.raises(SpotterError) as info:
        await test_runner.execute(cmd)
    assert info.value.code == ErrorCode.NOT_FOUND
    assert await execution_rows(pool, conv.id, cmd.tool_use_id) == []


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("conversation_id", "not-a-uuid", "conversationId"),
        ("message_id", "42", "messageId"),
        ("tool_use_id", "t" * 65, "toolUseId"),
    ],
)
async def test_malformed_keys_are_a_request_error(pool, test_runner, conv, field, value, named) -> None:
    cmd = conv.command("read", "get_current_context").model_copy(update={field: value})
    with pytest.raises(SpotterError) as info:
        await test_runner.execute(cmd)
    assert info.value.code == ErrorCode.INVALID_REQUEST and named in info.value.message
    assert await pool.fetchval("SELECT count(*) FROM ai_tool_executions WHERE conversation_id = $1", conv.id) == 0


async def test_each_execution_emits_the_observability_event_without_user_text(test_runner, conv, caplog) -> None:
    caplog.set_level(logging.INFO, logger="spotter_tool_runner.runner")
    runs = {"router": "test", "action": "refuse", "outcome": "failed"}
    before = REGISTRY.get_sample_value("spotter_tool_runs_total", runs) or 0.0
    await test_runner.execute(conv.command("test", "refuse", {"name": "Fran"}))
    assert REGISTRY.get_sample_value("spotter_tool_runs_total", runs) == before + 1
    [line] = [r.getMessage() for r in caplog.records if '"event": "agent.tool.executed"' in r.getMessage()]
    event = json.loads(line)
    assert (event["router"], event["action"], event["outcome"], event["errorCode"], event["replayed"]) == (
        "test", "refuse", "failed", "conflict", False)
    assert isinstance(event["durationMs"], int) and event["traceId"] and event["orgId"]
    assert "Fran" not in line


async def test_invalid_input_is_a_typed_failure_naming_fields_by_alias(pool, test_runner, conv) -> None:
    outcome = await test_runner.execute(
        conv.command("read", "members_search", {"query": "", "paymentStatus": "maybe", "limt": 3})
    )
    assert outcome.status == "failed" and outcome.error.code == "invalid_input"
    message = outcome.error.message
    assert message.startswith("Invalid input for read__members_search:")
    for field in ("query:", "paymentStatus:", "limt: Extra inputs are not permitted"):
        assert field in message
    assert "paymentStatus" in outcome.error.hint and "limit" in outcome.error.hint

    bad_id = await test_runner.execute(conv.command("read", "members_get", {"membershipId": "nope"}))
    assert bad_id.error.code == "invalid_input" and "membershipId:" in bad_id.error.message


async def test_an_unknown_tool_fails_with_close_names(pool, test_runner, conv) -> None:
    cmd = conv.command("read", "members_find", {"query": "saar"})
    outcome = await test_runner.execute(cmd)
    assert outcome.status == "failed" and outcome.error.code == "unknown_tool"
    assert "read__members_search" in outcome.error.hint
    [row] = await execution_rows(pool, conv.id, cmd.tool_use_id)
    assert row["status_text"] == "failed"


async def test_a_user_picker_is_never_executed(test_runner, conv) -> None:
    cmd = conv.command("test", "pick", {"id": "x"})
    p = probe(cmd.tool_use_id)
    outcome = await test_runner.execute(cmd)
    assert outcome.error.code == "not_executable" and p.calls == 0


async def test_a_pending_confirmation_runs_on_approval(pool, test_runner, conv, studio) -> None:
    created = await test_runner.execute(conv.command("test", "create_note", {"name": unique()}))
    # The orchestrator stored the destructive call as pending while it waited for the user.
    cmd = conv.command("test", "delete_note", {"id": created.output["id"]})
    await pool.execute(
        """INSERT INTO ai_tool_executions (conversation_id, message_id, tool_use_id, router, action, input, status)
           VALUES ($1, $2, $3, 'test', 'delete_note', $4, 'pending')""",
        conv.id,
        conv.message_id,
        cmd.tool_use_id,
        cmd.input,
    )
    outcome = await test_runner.execute(cmd)
    assert (outcome.status, outcome.replayed) == ("succeeded", False)
    [row] = await execution_rows(pool, conv.id, cmd.tool_use_id)
    assert row["status_text"] == "succeeded" and row["resource_id"] == created.output["id"]
    assert await pool.fetchval("SELECT deleted_at IS NOT NULL FROM programs WHERE id = $1", created.output["id"])


async def test_a_rejected_call_replays_its_rejection(pool, test_runner, conv) -> None:
    cmd = conv.command("test", "delete_note", {"id": str(uuid.uuid4())})
    await pool.execute(
        """INSERT INTO ai_tool_executions (conversation_id, message_id, tool_use_id, router, action, input, status,
                                          error_code, error_message)
           VALUES ($1, $2, $3, 'test', 'delete_note', $4, 'rejected_by_user',
                   'rejected_by_user', 'The user rejected it.')""",
        conv.id,
        conv.message_id,
        cmd.tool_use_id,
        cmd.input,
    )
    p = probe(cmd.tool_use_id)
    outcome = await test_runner.execute(cmd)
    assert (outcome.status, outcome.replayed, outcome.error.code, p.calls) == ("failed", True, "rejected_by_user", 0)


async def test_the_declared_inverse_undoes_a_write_and_both_are_audited(pool, test_runner, registry, conv) -> None:
    original = await test_runner.execute(conv.command("test", "create_note", {"name": unique()}))
    [row] = await pool.fetch(
        "SELECT router, action, output FROM ai_tool_executions WHERE resource_id = $1", original.output["id"]
    )
    inverse = registry.get(row["router"], row["action"]).inverse
    undo = await test_runner.execute(conv.command(inverse.router, inverse.action, inverse.build_input(row["output"])))
    assert undo.status == "succeeded" and not undo.inverse_available
    actions = await pool.fetch(
        "SELECT action FROM audit_logs WHERE resource_id = $1 ORDER BY created_at", original.output["id"]
    )
    assert [a["action"] for a in actions] == ["program.created", "program.deleted"]
