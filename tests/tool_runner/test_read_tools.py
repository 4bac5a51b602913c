"""The `read` router over a real Postgres, through ToolRunner.execute as the orchestrator calls it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import asyncpg

from spotter_tool_runner.runner import ToolRunner
from spotter_tool_runner.tools import REGISTRY

from tests.factories import Studio

from .helpers import Conversation, actor_of, new_conversation


async def run(runner: ToolRunner, conv: Conversation, action: str, input: dict | None = None, **kwargs):
    return await runner.execute(conv.command("read", action, input, **kwargs))


async def test_get_current_context_in_the_org_timezone(pool: asyncpg.Pool, studio: Studio) -> None:
    await pool.execute(
        "UPDATE organizations SET timezone = 'Asia/Jerusalem', locale = 'he' WHERE id = $1", studio.org.id
    )
    runner = ToolRunner(pool, REGISTRY, clock=lambda: datetime(2026, 3, 1, 22, 30, tzinfo=UTC))
    conv = await new_conversation(pool, studio, studio.coach)
    outcome = await runner.execute(
        conv.command("read", "get_current_context", actor=actor_of(studio, studio.coach, locale="ru"))
    )

    assert outcome.status == "succeeded", outcome.error
    out = outcome.output
    assert out["organization"] == {
        "id": studio.org.id,
        "name": studio.org.name,
        "tier": "pro",
        "locale": "he",
        "timezone": "Asia/Jerusalem",
    }
    assert out["caller"] == {
        "userId": studio.coach.user_id,
        "membershipId": studio.coach.membership_id,
        "name": studio.coach.full_name,
        "email": studio.coach.email,
        "role": "coach",
    }
    assert out["locale"] == "ru"
    # 22:30 UTC on Sunday is already Monday 00:30 in Jerusalem (UTC+2 in March).
    assert out["now"] == "2026-03-02T00:30:00+02:00"
    assert out["weekday"] == "Monday"


async def test_programs_list_is_org_scoped_and_skips_deleted(
    pool: asyncpg.Pool, runner: ToolRunner, studio: Studio, other_studio: Studio
) -> None:
    await pool.execute(
        """INSERT INTO programs (organization_id, name, is_active, deleted_at) VALUES
           ($1, 'Archived Yoga', false, NULL), ($1, 'Deleted Spin', true, now())""",
        studio.org.id,
    )
    conv = await new_conversation(pool, studio)

    active = await run(runner, conv, "programs_list")
    assert [p["name"] for p in active.output["programs"]] == ["CrossFit", "Olympic Lifting"]
    first = active.output["programs"][0]
    assert first == {
        "id": studio.programs["CrossFit"],
        "name": "CrossFit",
        "kind": "group",
        "description": "CrossFit classes",
        "isActive": True,
    }

    everything = await run(runner, conv, "programs_list", {"includeInactive": True})
    assert [p["name"] for p in everything.output["programs"]] == ["Archived Yoga", "CrossFit", "Olympic Lifting"]
    other_ids = set(other_studio.programs.values())
    assert not other_ids & {p["id"] for p in everything.output["programs"]}


async def test_members_search_finds_both_saars_and_nobody_from_another_org(
    pool: asyncpg.Pool, runner: ToolRunner, studio: Studio, other_studio: Studio
) -> None:
    conv = await new_conversation(pool, studio)
    ours = {p.membership_id for p in studio.people.values()}
    theirs = {p.membership_id for p in other_studio.people.values()}

    outcome = await run(runner, conv, "members_search", {"query": "saar"})
    assert outcome.status == "succeeded"
    found = outcome.output["members"]
    assert [m["name"] for m in found] == ["Saar Cohen", "Saar Levi"]
    assert outcome.output["total"] == 2
    assert {m["membershipId"] for m in found} <= ours
    assert found[0] == {
        "membershipId": studio.people["Saar Cohen"].membership_id,
        "name": "Saar Cohen",
        "email": studio.people["Saar Cohen"].email,
        "role": "member",
        "status": "active",
        "plan": "Unlimited",
        "paymentStatus": "paid",
    }

    everyone = await run(runner, conv, "members_search", {"query": "*", "limit": 25})
    assert everyone.output["total"] == 7  # 4 staff + 3 members
    assert not {m["membershipId"] for m in everyone.output["members"]} & theirs


async def test_members_search_tokens_filters_limit_and_escaping(
    pool: asyncpg.Pool, runner: ToolRunner, studio: Studio
) -> None:
    conv = await new_conversation(pool, studio)

    async def names(**input) -> list[str]:
        outcome = await run(runner, conv, "members_search", input)
        assert outcome.status == "succeeded", outcome.error
        return [m["name"] for m in outcome.output["members"]]

    assert await names(query="  COHEN   saar ") == ["Saar Cohen"]  # every token, any order, any case
    assert await names(query="saar", paymentStatus="overdue") == ["Saar Levi"]
    assert await names(query="*", status="paused") == ["Dani Mizrahi"]
    assert await names(query="*", role="coach") == [studio.coach.full_name]
    assert await names(query=studio.admin.email.upper()) == [studio.admin.full_name]  # email matches too
    assert await names(query="%") == []  # LIKE wildcards are literal
    assert await names(query="_") == []

    limited = await run(runner, conv, "members_search", {"query": "saar", "limit": 1})
    assert len(limited.output["members"]) == 1 and limited.output["total"] == 2


async def test_members_get_detail_and_not_found_across_orgs(
    pool: asyncpg.Pool, runner: ToolRunner, studio: Studio, other_studio: Studio
) -> None:
    conv = await new_conversation(pool, studio)
    saar = studio.people["Saar Cohen"]

    outcome = await run(runner, conv, "members_get", {"membershipId": saar.membership_id})
    assert outcome.status == "succeeded", outcome.error
    detail = outcome.output
    assert detail["membershipId"] == saar.membership_id and detail["userId"] == saar.user_id
    assert (detail["name"], detail["phone"], detail["plan"], detail["paymentStatus"]) == (
        "Saar Cohen",
        "+972-50-1111111",
        "Unlimited",
        "paid",
    )
    assert detail["daysSinceLastVisit"] == 3
    assert detail["joinedAt"] == (await pool.fetchval("SELECT current_date")).isoformat()
    assert datetime.fromisoformat(detail["lastVisitAt"]).tzinfo is not None

    for missing in (other_studio.people["Saar Cohen"].membership_id, str(uuid.uuid4())):
        outcome = await run(runner, conv, "members_get", {"membershipId": missing})
        assert outcome.status == "failed"
        assert outcome.error.code == "not_found"
        assert outcome.error.hint == "Use read__members_search to find the membershipId"
        assert "Saar" not in outcome.error.message
