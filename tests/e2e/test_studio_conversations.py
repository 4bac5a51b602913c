"""Seed 000's example conversations over HTTP+SSE against a studio with a whole demo year: each
scripted model turn calls the real tools, and the SSE events and the rows they leave are checked.

One studio for the module (seeding a year takes seconds); each test touches its own rows: its own
class type or workout, and its own conversation."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import asyncpg
import httpx
import pytest

from tests.factories import Studio, make_demo_year_studio

from .client import Sim, Stream, auth, send, sse
from .helpers import assert_requests_valid, rows

# Not UTC, so that "13:00 at the studio" and the stored instant differ.
ZONE = "Asia/Jerusalem"


@dataclass(frozen=True)
class Year:
    studio: Studio
    tz: ZoneInfo
    today: date
    programs: dict[str, str]
    class_types: dict[str, str]

    @property
    def next_week(self) -> tuple[date, date]:
        monday = self.today + timedelta(days=7 - self.today.weekday())
        return monday, monday + timedelta(days=6)


@pytest.fixture(scope="module")
async def year(pool: asyncpg.Pool) -> Year:
    studio, tz, today = await make_demo_year_studio(pool, ZONE)
    org = uuid.UUID(studio.org.id)
    programs = {r["name"]: str(r["id"]) for r in await pool.fetch(
        "SELECT id, name FROM programs WHERE organization_id = $1 AND deleted_at IS NULL", org)}
    class_types = {r["name"]: str(r["id"]) for r in await pool.fetch(
        "SELECT id, name FROM class_types WHERE organization_id = $1 AND deleted_at IS NULL", org)}
    return Year(studio=studio, tz=tz, today=today, programs=programs, class_types=class_types)


def tool(name: str, **tool_input: Any) -> dict[str, Any]:
    return {"name": name, "input": tool_input}


def base(year: Year, cid: str) -> str:
    return f"/organizations/{year.studio.org.id}/agent/conversations/{cid}"


async def confirm(http: httpx.AsyncClient, year: Year, cid: str, tool_use_id: str) -> Stream:
    return await sse(http, "POST", f"{base(year, cid)}/confirm/{tool_use_id}", json={"approved": True},
                     headers=auth(year.studio.owner.user_id))


def completed(stream: Stream, action: str) -> dict[str, Any]:
    (event,) = [e for e in stream.of("tool_completed") if e["action"] == action]
    return event


def requests_with(requests: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """The model requests of the conversation that began with `text`."""
    def first_text(body: dict[str, Any]) -> str:
        content = body["messages"][0]["content"]
        return content if isinstance(content, str) else " ".join(b.get("text", "") for b in content)
    return [r["body"] for r in requests if text in first_text(r["body"])]


async def live_sessions(pool: asyncpg.Pool, year: Year, class_type: str, days: tuple[date, date]) -> list[dict[str, Any]]:
    start = datetime.combine(days[0], time(), tzinfo=year.tz)
    end = datetime.combine(days[1] + timedelta(days=1), time(), tzinfo=year.tz)
    return await rows(
        pool,
        """SELECT id, notes FROM class_sessions
            WHERE organization_id = $1 AND class_type_id = $2 AND starts_at >= $3 AND starts_at < $4
              AND deleted_at IS NULL AND cancelled_at IS NULL ORDER BY starts_at""",
        uuid.UUID(year.studio.org.id), uuid.UUID(year.class_types[class_type]), start, end,
    )


async def test_schedule_open_gym_tomorrow_then_undo(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim, year: Year) -> None:
    prompt = "schedule open gym tomorrow 13:00–14:00 published"
    tomorrow = year.today + timedelta(days=1)
    await sim.script(
        prompt,
        {"text": "Scheduling it.", "tool_uses": [tool(
            "class_sessions__create", className="Open Gym", date=tomorrow.isoformat(), startTime="13:00",
            endTime="14:00", published=True)]},
        {"text": "Open Gym is on tomorrow 13:00–14:00 and members can book it.", "tool_uses": []},
    )
    stream = await send(http, year.studio.org.id, year.studio.owner.user_id, prompt)
    assert stream.types()[-1] == "done" and not stream.of("error")
    created = completed(stream, "create")
    assert created["ok"] is True and created["inverseAvailable"] is True
    session_id = created["output"]["id"]
    assert created["output"]["className"] == "Open Gym" and created["output"]["published"] is True
    assert created["output"]["startsAt"] == datetime.combine(tomorrow, time(13), tzinfo=year.tz).isoformat()
    row = (await rows(pool, "SELECT starts_at, ends_at, published, cancelled_at, class_type_id FROM class_sessions WHERE id = $1",
                      uuid.UUID(session_id)))[0]
    assert row["starts_at"] == datetime.combine(tomorrow, time(13), tzinfo=year.tz)
    assert row["ends_at"] == datetime.combine(tomorrow, time(14), tzinfo=year.tz)
    assert row["published"] is True and row["cancelled_at"] is None
    assert str(row["class_type_id"]) == year.class_types["Open Gym"]

    cid = stream.conversation_id
    undone = await sse(http, "POST", f"{base(year, cid)}/undo/{created['toolUseId']}", headers=auth(year.studio.owner.user_id))
    assert undone.types() == ["tool_started", "tool_completed", "done"]
    assert (undone.of("tool_started")[0]["router"], undone.of("tool_started")[0]["action"]) == ("class_sessions", "cancel")
    assert undone.of("tool_completed")[0]["ok"] is True
    assert await pool.fetchval("SELECT cancelled_at IS NOT NULL FROM class_sessions WHERE id = $1", uuid.UUID(session_id))
    audit = await rows(pool, "SELECT id, action, metadata FROM audit_logs WHERE resource_id = $1 ORDER BY created_at", session_id)
    assert [a["action"] for a in audit] == ["class_session.created", "class_session.cancelled"]
    assert audit[1]["metadata"].get("undoOf") == str(audit[0]["id"])
    assert_requests_valid(await sim.requests())


async def test_which_members_are_at_risk(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim, year: Year) -> None:
    prompt = "which members are at risk?"
    await sim.script(prompt, {"text": None, "tool_uses": [tool("analytics__at_risk_members")]},
                     {"text": "These members stopped coming or owe money.", "tool_uses": []})
    stream = await send(http, year.studio.org.id, year.studio.owner.user_id, prompt)
    assert stream.types()[-1] == "done" and not stream.of("error")
    result = completed(stream, "at_risk_members")
    assert result["ok"] is True and result["router"] == "analytics"
    members = result["output"]["members"]
    assert members and result["output"]["total"] >= len(members) and result["output"]["attendanceDrops"] > 0
    assert all(m["reasons"] for m in members)
    active = {str(r["id"]) for r in await pool.fetch(
        "SELECT id FROM memberships WHERE organization_id = $1 AND status = 'active'", uuid.UUID(year.studio.org.id))}
    assert {m["membershipId"] for m in members} <= active
    assert_requests_valid(await sim.requests())


async def test_build_a_structured_workout(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim, year: Year) -> None:
    prompt = "build a workout: 3 rounds — 200m run, 30 double-unders"
    title = f"3 rounds: run and double-unders {uuid.uuid4().hex[:6]}"
    section = {"name": "Metcon", "format": "3 rounds", "movements": [
        {"name": "Run", "distanceM": 200}, {"name": "Double-under", "reps": 30}]}
    await sim.script(
        prompt,
        {"text": None, "tool_uses": [tool("read__exercises_resolve_batch", names=["200m run", "30 double-unders"])]},
        {"text": "Both movements are in the library.", "tool_uses": [tool("workouts__create", title=title, sections=[section])]},
        {"text": "Built it: 3 rounds of a 200 m run and 30 double-unders.", "tool_uses": []},
    )
    stream = await send(http, year.studio.org.id, year.studio.owner.user_id, prompt)
    assert stream.types()[-1] == "done" and not stream.of("error")
    resolved = completed(stream, "exercises_resolve_batch")
    assert resolved["ok"] is True and resolved["output"]["resolved"] == 2
    assert [r["exercise"]["name"] for r in resolved["output"]["results"]] == ["Run", "Double-under"]
    created = completed(stream, "create")
    assert created["ok"] is True and created["inverseAvailable"] is True
    workout_id = uuid.UUID(created["output"]["id"])

    workout = (await rows(pool, "SELECT title, kind, deleted_at FROM workouts WHERE id = $1", workout_id))[0]
    assert workout == {"title": title, "kind": "structured", "deleted_at": None}
    sections = await rows(pool, "SELECT id, position, name, format FROM workout_sections WHERE workout_id = $1", workout_id)
    assert [(s["position"], s["name"], s["format"]) for s in sections] == [(1, "Metcon", "3 rounds")]
    movements = await rows(
        pool, "SELECT position, name, reps, distance_m FROM workout_movements WHERE section_id = $1 ORDER BY position",
        sections[0]["id"])
    assert movements == [{"position": 1, "name": "Run", "reps": None, "distance_m": 200},
                         {"position": 2, "name": "Double-under", "reps": 30, "distance_m": None}]
    assert_requests_valid(await sim.requests())


async def test_new_comments_in_coaching_for_the_head_coach(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim, year: Year) -> None:
    prompt = "any new comments in coaching?"
    coaching = year.programs["Coaching"]
    await sim.script(prompt, {"text": None, "tool_uses": [tool("read__workout_comments_in_program", programId=coaching, unreadOnly=True)]},
                     {"text": "Yes, a few members wrote on the latest workout.", "tool_uses": []})
    # The demo year's head coach is the studio's first coach: the one make_studio created.
    stream = await send(http, year.studio.org.id, year.studio.coach.user_id, prompt)
    assert stream.types()[-1] == "done" and not stream.of("error")
    result = completed(stream, "workout_comments_in_program")
    assert result["ok"] is True
    output = result["output"]
    assert output["programName"] == "Coaching" and output["comments"]
    assert all(c["read"] is False for c in output["comments"]) and output["unread"] == output["total"] >= len(output["comments"])
    # What came back is the head coach's unread: none of these comments has a read row of theirs.
    ids = [uuid.UUID(c["id"]) for c in output["comments"]]
    assert await pool.fetchval("SELECT count(*) FROM workout_comments WHERE id = ANY($1) AND organization_id = $2",
                               ids, uuid.UUID(year.studio.org.id)) == len(ids)
    assert await pool.fetchval("SELECT count(*) FROM workout_comment_reads WHERE comment_id = ANY($1) AND coach_membership_id = $2",
                               ids, uuid.UUID(year.studio.coach.membership_id)) == 0
    # A coach is offered the comment tools, never the owner/admin bulk writes.
    (request, *_) = requests_with(await sim.requests(), prompt)
    offered = {t["name"] for t in request["tools"]}
    assert "read__workout_comments_in_program" in offered and "class_sessions__bulk_delete" not in offered
    assert_requests_valid(await sim.requests())


async def preview_then_ask_to_delete(
    http: httpx.AsyncClient, sim: Sim, year: Year, class_type: str, prompt: str, approval: str
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The first two turns of a bulk delete: a preview, then the delete held for confirmation.
    Returns the conversation, the preview's output and the confirmation_pending event."""
    first, last = year.next_week
    selection = {"dateFrom": first.isoformat(), "dateTo": last.isoformat(), "classTypeId": year.class_types[class_type]}
    await sim.script(prompt, {"text": "Let me check which classes that is.", "tool_uses": [tool("class_sessions__bulk_preview", **selection)]},
                     {"text": "That is these classes. Delete them?", "tool_uses": []})
    previewed = await send(http, year.studio.org.id, year.studio.owner.user_id, prompt)
    assert previewed.types()[-1] == "done" and not previewed.of("error")
    preview = completed(previewed, "bulk_preview")
    assert preview["ok"] is True and preview["output"]["count"] > 0 and not preview["output"]["truncated"]
    assert {i["className"] for i in preview["output"]["items"]} == {class_type}
    cid = previewed.conversation_id

    token = preview["output"]["selectionToken"]
    await sim.script(approval, {"text": None, "tool_uses": [tool("class_sessions__bulk_delete", **selection, selectionToken=token)]},
                     {"text": "Finished with the bulk delete.", "tool_uses": []})
    asked = await send(http, year.studio.org.id, year.studio.owner.user_id, approval, cid)
    assert [t for t in asked.types() if t != "text_delta"] == ["message_done", "confirmation_pending", "done"]
    pending = asked.of("confirmation_pending")[0]
    assert (pending["router"], pending["action"], pending["confirm"]) == ("class_sessions", "bulk_delete", "destructive")
    assert pending["input"] == {**selection, "selectionToken": token}
    return cid, preview["output"], pending


async def test_bulk_delete_previewed_approved_and_executed(http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim, year: Year) -> None:
    before = await live_sessions(pool, year, "Mobility", year.next_week)
    cid, preview, pending = await preview_then_ask_to_delete(
        http, sim, year, "Mobility", "delete next week's Mobility classes", "yes, delete those mobility classes")
    assert preview["count"] == len(before) and {i["id"] for i in preview["items"]} == {str(r["id"]) for r in before}
    assert await live_sessions(pool, year, "Mobility", year.next_week) == before  # held, not run

    approved = await confirm(http, year, cid, pending["toolUseId"])
    assert [t for t in approved.types() if t != "text_delta"] == ["tool_started", "tool_completed", "message_done", "done"]
    deleted = completed(approved, "bulk_delete")
    assert deleted["ok"] is True and deleted["output"]["deleted"] == preview["count"]
    assert await live_sessions(pool, year, "Mobility", year.next_week) == []
    gone = await pool.fetchval("SELECT count(*) FROM class_sessions WHERE id = ANY($1) AND deleted_at IS NOT NULL",
                               [r["id"] for r in before])
    assert gone == len(before)
    audit = await rows(pool, "SELECT action, resource, metadata FROM audit_logs WHERE organization_id = $1 AND metadata->>'toolUseId' = $2",
                       uuid.UUID(year.studio.org.id), pending["toolUseId"])
    assert [(a["action"], a["resource"]) for a in audit] == [("class_session.bulk_deleted", "class_session")]
    assert audit[0]["metadata"]["agent"] is True and audit[0]["metadata"]["conversationId"] == cid
    assert await pool.fetchval("SELECT status::text FROM ai_tool_executions WHERE conversation_id = $1 AND tool_use_id = $2",
                               uuid.UUID(cid), pending["toolUseId"]) == "succeeded"
    assert_requests_valid(await sim.requests())


async def change_the_selection(pool: asyncpg.Pool, year: Year, class_type: str, change: str, before: list[dict[str, Any]]) -> None:
    """What someone at the studio does between the preview and the approval."""
    if change == "edited":
        await pool.execute("UPDATE class_sessions SET notes = 'Bring your own belt', updated_at = now() WHERE id = $1",
                           before[0]["id"])
        return
    wednesday = datetime.combine(year.next_week[0] + timedelta(days=2), time(21, 30), tzinfo=year.tz)
    await pool.execute(
        """INSERT INTO class_sessions (organization_id, class_type_id, starts_at, ends_at, capacity, published)
           VALUES ($1, $2, $3, $4, 8, true)""",
        uuid.UUID(year.studio.org.id), uuid.UUID(year.class_types[class_type]), wednesday, wednesday + timedelta(hours=1))


# Each its own class type, so that neither depends on the approved delete of next week's Mobility.
@pytest.mark.parametrize(("change", "class_type"), [("edited", "Olympic Lifting"), ("added", "Foundations")])
async def test_bulk_delete_refused_when_the_selection_changed_after_the_preview(
    http: httpx.AsyncClient, pool: asyncpg.Pool, sim: Sim, year: Year, change: str, class_type: str
) -> None:
    prompt = f"delete next week's {class_type} classes"
    before = await live_sessions(pool, year, class_type, year.next_week)
    cid, preview, pending = await preview_then_ask_to_delete(
        http, sim, year, class_type, prompt, f"yes, delete those {class_type} classes")
    assert preview["count"] == len(before)

    await change_the_selection(pool, year, class_type, change, before)
    changed = await live_sessions(pool, year, class_type, year.next_week)
    approved = await confirm(http, year, cid, pending["toolUseId"])
    assert approved.types()[-1] == "done" and not approved.of("error")
    refused = completed(approved, "bulk_delete")
    assert refused["ok"] is False and refused["output"]["code"] == "selection_changed"
    # Nothing was deleted: every class of the changed selection is still there, as it was.
    assert await live_sessions(pool, year, class_type, year.next_week) == changed
    assert len(changed) == len(before) + (change == "added")
    assert await pool.fetchval("SELECT status::text FROM ai_tool_executions WHERE conversation_id = $1 AND tool_use_id = $2",
                               uuid.UUID(cid), pending["toolUseId"]) == "failed"
    assert await pool.fetchval("SELECT count(*) FROM audit_logs WHERE organization_id = $1 AND metadata->>'toolUseId' = $2",
                               uuid.UUID(year.studio.org.id), pending["toolUseId"]) == 0
    # The model is told, as an error tool_result, and answers.
    (*_, last) = requests_with(await sim.requests(), prompt)
    result = next(b for b in last["messages"][-1]["content"] if b.get("tool_use_id") == pending["toolUseId"])
    assert result["is_error"] is True and "selection_changed" in str(result["content"])
    assert "Finished" in approved.text()
    assert_requests_valid(await sim.requests())
