"""The studio app's HTTP surface on the real gateway: dev sign-in, the studio read endpoints, the
conversation PATCH's validation, and the web app's static serving.

One studio with a whole demo year for the module (realistic volume and shapes), plus rows this
module adds and knows exactly: a client with a plan and payments, a class next week with bookings,
a program with a structured workout, tasks. The module's NATS has no orchestrator, so pin/archive
here ends in 503; the round trip through the orchestrator is tests/e2e/test_studio_api.py."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import asyncpg
import httpx
import pytest

from spotter_cli.devstack import StackUrls
from spotter_gateway.main import create_app
from spotter_gateway.settings import GatewaySettings
from spotter_gateway.web import dist_dir
from spotter_shared.studio import Person, upsert_person
from tests.e2e.client import auth
from tests.factories import Studio, make_demo_year_studio, make_studio
from tests.servers import serve_in_thread

ZONE = "Asia/Jerusalem"
INDEX = "<!doctype html><html><body><div id=root></div><!-- studio test build --></body></html>"
ASSET = "assets/index-test1234.js"


@dataclass(frozen=True)
class Known:
    """The rows this module inserted, and the studio's day."""

    studio: Studio
    other: Studio
    today: date
    tz: ZoneInfo
    client: Person
    session_id: str
    draft_session_id: str
    next_monday: date
    program_id: str
    workout_id: str
    open_task: str
    done_task: str
    deleted_task: str


def at(known_tz: ZoneInfo, day: date, hhmm: str) -> datetime:
    return datetime.combine(day, time.fromisoformat(hhmm), tzinfo=known_tz)


@pytest.fixture(scope="module")
async def known(pool: asyncpg.Pool) -> Known:
    (studio, tz, today), other = await make_demo_year_studio(pool, ZONE), await make_studio(pool)
    org = uuid.UUID(studio.org.id)
    async with pool.acquire() as conn:
        client = await upsert_person(conn, studio.org.id, email=f"zed.quill-{uuid.uuid4().hex[:6]}@test.gym",
                                     full_name="Zed Quillfeather", role="member", plan="3x/week", payment_status="paid")
    mid = uuid.UUID(client.membership_id)
    plan_id = await pool.fetchval("SELECT id FROM plans WHERE organization_id = $1 AND name = '3x/week'", org)
    # Paid last month, then a pending payment 10 days past due: overdue by 14900.
    await pool.execute(
        """INSERT INTO payments (organization_id, membership_id, plan_id, amount_cents, status, due_on, paid_at)
           VALUES ($1, $2, $3, 14900, 'paid', $4, $5), ($1, $2, $3, 14900, 'pending', $6, NULL)""",
        org, mid, plan_id, today - timedelta(days=40), at(tz, today - timedelta(days=40), "08:00"), today - timedelta(days=10),
    )
    class_type = await pool.fetchval(
        "INSERT INTO class_types (organization_id, name) VALUES ($1, 'Quill Conditioning') RETURNING id", org)
    next_monday = today + timedelta(days=7 - today.weekday())
    wednesday = next_monday + timedelta(days=2)
    session_id = await pool.fetchval(
        """INSERT INTO class_sessions (organization_id, class_type_id, coach_membership_id, starts_at, ends_at, capacity, published)
           VALUES ($1, $2, $3, $4, $5, 14, true) RETURNING id""",
        org, class_type, uuid.UUID(studio.coach.membership_id), at(tz, wednesday, "18:30"), at(tz, wednesday, "19:30"))
    draft_id = await pool.fetchval(
        """INSERT INTO class_sessions (organization_id, class_type_id, starts_at, ends_at, capacity)
           VALUES ($1, $2, $3, $4, 8) RETURNING id""",
        org, class_type, at(tz, wednesday, "20:00"), at(tz, wednesday, "21:00"))
    # Two booked, one cancelled: booked = 2.
    await pool.execute(
        """INSERT INTO bookings (session_id, membership_id, status) VALUES ($1, $2, 'booked'), ($1, $3, 'booked'),
                  ($1, $4, 'cancelled')""",
        session_id, mid, uuid.UUID(studio.member.membership_id), uuid.UUID(studio.admin.membership_id))
    # A class three days ago the client attended: one visit in the last 30 days.
    past = await pool.fetchval(
        """INSERT INTO class_sessions (organization_id, class_type_id, starts_at, ends_at, capacity, published)
           VALUES ($1, $2, $3, $4, 10, true) RETURNING id""",
        org, class_type, at(tz, today - timedelta(days=3), "07:00"), at(tz, today - timedelta(days=3), "08:00"))
    await pool.execute("INSERT INTO bookings (session_id, membership_id, checked_in_at) VALUES ($1, $2, $3)",
                       past, mid, at(tz, today - timedelta(days=3), "06:55"))
    program_id = await pool.fetchval(
        "INSERT INTO programs (organization_id, name, description) VALUES ($1, 'Quill Strength', 'Barbell cycle') RETURNING id", org)
    await pool.execute("INSERT INTO program_enrollments (program_id, membership_id) VALUES ($1, $2)", program_id, mid)
    workout_id = await pool.fetchval(
        """INSERT INTO workouts (organization_id, program_id, title, kind, scheduled_for)
           VALUES ($1, $2, 'Quill Day 1', 'structured', $3) RETURNING id""", org, program_id, next_monday)
    section = await pool.fetchval(
        "INSERT INTO workout_sections (workout_id, position, name, format) VALUES ($1, 0, 'Strength', '5 sets') RETURNING id",
        workout_id)
    await pool.execute(
        """INSERT INTO workout_movements (section_id, position, name, reps, load_kg, distance_m, duration_s)
           VALUES ($1, 0, 'Back squat', 5, 80.5, NULL, NULL), ($1, 1, 'Row', NULL, NULL, 500, NULL),
                  ($1, 2, 'Plank', NULL, NULL, NULL, 90)""", section)
    assignee = uuid.UUID(studio.coach.membership_id)
    open_task = await pool.fetchval(
        "INSERT INTO tasks (organization_id, title, due_date, assignee_membership_id) VALUES ($1, 'Quill: call Zed', $2, $3) RETURNING id",
        org, today + timedelta(days=2), assignee)
    done_task = await pool.fetchval(
        "INSERT INTO tasks (organization_id, title, status, completed_at) VALUES ($1, 'Quill: order chalk', 'done', now()) RETURNING id", org)
    deleted_task = await pool.fetchval(
        "INSERT INTO tasks (organization_id, title, deleted_at) VALUES ($1, 'Quill: deleted', now()) RETURNING id", org)
    return Known(studio=studio, other=other, today=today, tz=tz, client=client, session_id=str(session_id),
                 draft_session_id=str(draft_id), next_monday=next_monday, program_id=str(program_id),
                 workout_id=str(workout_id), open_task=str(open_task), done_task=str(done_task),
                 deleted_task=str(deleted_task))


@pytest.fixture(scope="module")
def web_dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A build of our own: the real one in the package may be rebuilt by `npm run build` mid-run."""
    dist = tmp_path_factory.mktemp("dist")
    (dist / "assets").mkdir()
    (dist / "index.html").write_text(INDEX)
    (dist / ASSET).write_text("console.log('studio');")
    return dist


@pytest.fixture(scope="module")
def gateway_settings(private_nats: str, stack: StackUrls, db_url: str, known: Known, web_dist: Path) -> GatewaySettings:
    return GatewaySettings(nats_url=private_nats, database_url=db_url, redis_url=stack.redis_url, spotter_env="test",
                           spotter_db_pool_max=2, spotter_dev_signin_orgs=[known.studio.org.slug, known.other.org.slug],
                           spotter_web_dist=web_dist)


def studio_url(known: Known, path: str) -> str:
    return f"/organizations/{known.studio.org.id}/studio/{path}"


def assert_error(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code and error["message"] and error["traceId"]


# Dev sign-in -----------------------------------------------------------------------------------------


async def test_dev_users_lists_the_configured_studios_staff_first(http: httpx.AsyncClient, known: Known) -> None:
    response = await http.get("/dev/users")
    assert response.status_code == 200
    users = response.json()["users"]
    assert len(users) == 40  # capped; the demo year alone has hundreds of members
    roles = [u["role"] for u in users]
    staff = [u for u in users if u["role"] != "member"]
    # Both studios' owners, then admins, then coaches (the demo year hires a few more), then members.
    rank = ["owner", "admin", "coach", "member"]
    assert [rank.index(r) for r in roles] == sorted(rank.index(r) for r in roles)
    assert roles[:4] == ["owner", "owner", "admin", "admin"] and roles[-1] == "member"
    assert staff[0] == {"userId": known.studio.owner.user_id, "email": known.studio.owner.email,
                        "fullName": known.studio.owner.full_name, "organizationName": known.studio.org.name,
                        "role": "owner"}
    assert {u["organizationName"] for u in staff} == {known.studio.org.name, known.other.org.name}


async def test_dev_users_narrows_by_name_email_or_studio(http: httpx.AsyncClient, known: Known) -> None:
    # Case-insensitive on name, email or studio; LIKE's wildcards are taken literally. (Finding a
    # member past the first 40 is tests/browser/test_sign_in.py's member login.)
    last = (await http.get("/dev/users", params={"q": "zz-no-such-person"})).json()["users"]
    assert last == []
    found = (await http.get("/dev/users", params={"q": known.studio.coach.full_name.upper()})).json()["users"]
    assert [u["email"] for u in found] == [known.studio.coach.email]
    assert (await http.get("/dev/users", params={"q": "%"})).json()["users"] == []
    assert (await http.get("/dev/users", params={"q": "x" * 101})).status_code == 400


async def test_dev_sign_in_issues_a_token_the_gateway_accepts(http: httpx.AsyncClient, known: Known) -> None:
    response = await http.post("/dev/sign-in", json={"email": known.studio.coach.email.upper()})
    assert response.status_code == 200
    body = response.json()
    assert body["userId"] == known.studio.coach.user_id
    me = await http.get("/me", headers={"Authorization": f"Bearer {body['token']}"})
    assert me.status_code == 200 and me.json()["user"]["email"] == known.studio.coach.email


async def test_dev_sign_in_refuses_unknown_and_malformed(http: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    assert_error(await http.post("/dev/sign-in", json={"email": "nobody@nowhere.test"}), 404, "not_found")
    # A real user, but not in a dev sign-in studio.
    outsider = await make_studio(pool)
    assert_error(await http.post("/dev/sign-in", json={"email": outsider.owner.email}), 404, "not_found")
    assert_error(await http.post("/dev/sign-in", json={}), 400, "invalid_request")
    assert_error(await http.post("/dev/sign-in", json={"email": "a@b.c", "role": "owner"}), 400, "invalid_request")


@pytest.fixture(scope="module")
def production_url(private_nats: str, stack: StackUrls, db_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A production gateway whose web app was never built (an empty dist)."""
    settings = GatewaySettings(nats_url=private_nats, database_url=db_url, redis_url=stack.redis_url,
                               spotter_env="production", spotter_jwt_secret="a-real-production-secret-" + uuid.uuid4().hex,
                               spotter_db_pool_max=1, spotter_web_dist=tmp_path_factory.mktemp("unbuilt"))
    with serve_in_thread(create_app(settings), "production gateway") as url:
        yield url


@pytest.fixture
async def production(production_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=production_url, timeout=10) as client:
        yield client


async def test_dev_sign_in_is_refused_in_production(production: httpx.AsyncClient, known: Known) -> None:
    for response in (await production.get("/dev/users"),
                     await production.post("/dev/sign-in", json={"email": known.studio.owner.email})):
        assert_error(response, 403, "forbidden")
        assert "development sign-in is disabled" in response.json()["error"]["message"].lower()


# Members ---------------------------------------------------------------------------------------------


async def test_members_lists_the_clients_with_plan_and_payment(http: httpx.AsyncClient, pool: asyncpg.Pool, known: Known) -> None:
    headers = auth(known.studio.owner.user_id)
    response = await http.get(studio_url(known, "members"), params={"limit": 5}, headers=headers)
    assert response.status_code == 200
    body = response.json()
    clients = await pool.fetchval("SELECT count(*) FROM memberships WHERE organization_id = $1 AND role = 'member'",
                                  uuid.UUID(known.studio.org.id))
    assert body["total"] == clients > 100 and len(body["members"]) == 5
    names = [m["fullName"] for m in body["members"]]
    assert names == sorted(names)

    found = (await http.get(studio_url(known, "members"), params={"q": "quillfeather zed"}, headers=headers)).json()
    assert found["total"] == 1
    assert found["members"] == [{
        "membershipId": known.client.membership_id, "userId": known.client.user_id, "fullName": "Zed Quillfeather",
        "email": known.client.email, "status": "active", "plan": {"name": "3x/week", "sessionsPerWeek": 3},
        "payment": {"status": "overdue", "amountDueCents": 14900, "currency": "USD",
                    "lastPaidAt": at(known.tz, known.today - timedelta(days=40), "08:00").astimezone(UTC).isoformat()},
    }]
    # Staff are not clients; a % in q is a literal character.
    staff = await http.get(studio_url(known, "members"), params={"q": known.studio.coach.email}, headers=headers)
    assert staff.json() == {"members": [], "total": 0}
    assert (await http.get(studio_url(known, "members"), params={"q": "%"}, headers=headers)).json()["total"] == 0
    page_past_end = await http.get(studio_url(known, "members"), params={"offset": 100000}, headers=headers)
    assert page_past_end.json() == {"members": [], "total": clients}


async def test_member_detail(http: httpx.AsyncClient, known: Known) -> None:
    response = await http.get(studio_url(known, f"members/{known.client.membership_id}"), headers=auth(known.studio.admin.user_id))
    assert response.status_code == 200
    body = response.json()
    assert body["fullName"] == "Zed Quillfeather" and body["payment"]["status"] == "overdue"
    assert [(p["status"], p["amountCents"], p["dueDate"]) for p in body["payments"]] == [
        ("pending", 14900, (known.today - timedelta(days=10)).isoformat()),
        ("paid", 14900, (known.today - timedelta(days=40)).isoformat()),
    ]
    assert body["programs"] == [{"id": known.program_id, "name": "Quill Strength"}]
    # Newest first: next week's class, then the one three days ago they came to.
    assert [(b["className"], b["status"], b["attended"]) for b in body["bookings"]] == [
        ("Quill Conditioning", "booked", False), ("Quill Conditioning", "booked", True)]
    assert body["bookings"][0]["classSessionId"] == known.session_id
    assert body["visitsLast30d"] == 1


async def test_member_detail_refusals(http: httpx.AsyncClient, known: Known) -> None:
    owner = auth(known.studio.owner.user_id)
    assert_error(await http.get(studio_url(known, "members/not-a-uuid"), headers=owner), 400, "invalid_request")
    assert_error(await http.get(studio_url(known, f"members/{known.other.member.membership_id}"), headers=owner), 404, "not_found")
    assert_error(await http.get(studio_url(known, f"members/{known.studio.coach.membership_id}"), headers=owner), 404, "not_found")
    assert_error(await http.get(studio_url(known, "members"), params={"limit": 0}, headers=owner), 400, "invalid_request")
    assert_error(await http.get(studio_url(known, "members"), params={"offset": -1}, headers=owner), 400, "invalid_request")


# Schedule --------------------------------------------------------------------------------------------


async def test_schedule_shows_the_week_holding_the_day(http: httpx.AsyncClient, known: Known) -> None:
    thursday = known.next_monday + timedelta(days=3)
    response = await http.get(studio_url(known, "schedule"), params={"week": thursday.isoformat()},
                              headers=auth(known.studio.coach.user_id))
    assert response.status_code == 200
    body = response.json()
    assert (body["timezone"], body["weekStart"], body["weekEnd"]) == (
        ZONE, known.next_monday.isoformat(), (known.next_monday + timedelta(days=6)).isoformat())
    ours = {s["id"]: s for s in body["sessions"] if s["classType"]["name"] == "Quill Conditioning"}
    wednesday = known.next_monday + timedelta(days=2)
    assert ours[known.session_id] == {
        "id": known.session_id, "classType": {"id": ours[known.session_id]["classType"]["id"], "name": "Quill Conditioning"},
        "startsAt": at(known.tz, wednesday, "18:30").astimezone(UTC).isoformat(),
        "endsAt": at(known.tz, wednesday, "19:30").astimezone(UTC).isoformat(),
        "capacity": 14, "booked": 2, "coach": {"userId": known.studio.coach.user_id, "fullName": known.studio.coach.full_name},
        "status": "published",
    }
    assert ours[known.draft_session_id]["status"] == "draft" and ours[known.draft_session_id]["coach"] is None
    starts = [s["startsAt"] for s in body["sessions"]]
    assert starts == sorted(starts)
    lo, hi = at(known.tz, known.next_monday, "00:00"), at(known.tz, known.next_monday + timedelta(days=7), "00:00")
    assert all(lo <= datetime.fromisoformat(s) < hi for s in starts)


async def test_schedule_for_members_hides_drafts_and_defaults_to_this_week(http: httpx.AsyncClient, known: Known) -> None:
    member = auth(known.studio.member.user_id)
    body = (await http.get(studio_url(known, "schedule"), params={"week": known.next_monday.isoformat()}, headers=member)).json()
    ids = {s["id"] for s in body["sessions"]}
    assert known.session_id in ids and known.draft_session_id not in ids
    this_week = (await http.get(studio_url(known, "schedule"), headers=member)).json()
    assert this_week["weekStart"] == (known.today - timedelta(days=known.today.weekday())).isoformat()
    assert this_week["sessions"], "the demo year has classes every week"
    for bad in ("2024-13-01", "next week", "2024-02-30"):
        assert_error(await http.get(studio_url(known, "schedule"), params={"week": bad}, headers=member), 400, "invalid_request")


# Programs --------------------------------------------------------------------------------------------


async def test_programs_and_a_program_with_its_workouts(http: httpx.AsyncClient, known: Known) -> None:
    member = auth(known.studio.member.user_id)
    listed = (await http.get(studio_url(known, "programs"), headers=member)).json()["programs"]
    ours = next(p for p in listed if p["id"] == known.program_id)
    assert (ours["name"], ours["description"], ours["workoutCount"], ours["memberCount"]) == ("Quill Strength", "Barbell cycle", 1, 1)
    assert len(listed) > 2 and all(p["workoutCount"] >= 0 for p in listed)

    detail = (await http.get(studio_url(known, f"programs/{known.program_id}"), headers=member)).json()
    assert detail["name"] == "Quill Strength" and detail["workoutCount"] == 1
    assert detail["workouts"] == [{
        "id": known.workout_id, "title": "Quill Day 1", "date": known.next_monday.isoformat(), "description": None,
        "sections": [{"title": "Strength", "format": "5 sets", "notes": None, "movements": [
            {"name": "Back squat", "prescription": "5 reps × 80.5 kg"},
            {"name": "Row", "prescription": "500 m"},
            {"name": "Plank", "prescription": "1:30"},
        ]}],
    }]


async def test_program_refusals(http: httpx.AsyncClient, known: Known) -> None:
    owner = auth(known.studio.owner.user_id)
    other_program = known.other.programs["CrossFit"]
    assert_error(await http.get(studio_url(known, f"programs/{other_program}"), headers=owner), 404, "not_found")
    assert_error(await http.get(studio_url(known, "programs/123"), headers=owner), 400, "invalid_request")


# Tasks -----------------------------------------------------------------------------------------------


async def test_tasks_by_status(http: httpx.AsyncClient, known: Known) -> None:
    coach = auth(known.studio.coach.user_id)

    async def ids(status: str | None) -> list[str]:
        params = {"status": status} if status else {}
        response = await http.get(studio_url(known, "tasks"), params=params, headers=coach)
        assert response.status_code == 200
        return [t["id"] for t in response.json()["tasks"]]

    open_ids, done_ids, all_ids = await ids(None), await ids("done"), await ids("all")
    assert known.open_task in open_ids and known.done_task not in open_ids
    assert known.done_task in done_ids and known.open_task not in done_ids
    assert set(all_ids) == set(open_ids) | set(done_ids)
    assert known.deleted_task not in all_ids
    tasks = (await http.get(studio_url(known, "tasks"), headers=coach)).json()["tasks"]
    ours = next(t for t in tasks if t["id"] == known.open_task)
    assert ours["title"] == "Quill: call Zed" and ours["status"] == "open"
    assert ours["dueDate"] == (known.today + timedelta(days=2)).isoformat()
    assert ours["assignee"] == {"userId": known.studio.coach.user_id, "fullName": known.studio.coach.full_name}
    assert_error(await http.get(studio_url(known, "tasks"), params={"status": "late"}, headers=coach), 400, "invalid_request")


# Analytics -------------------------------------------------------------------------------------------


async def test_analytics_figures_and_weekly_attendance(http: httpx.AsyncClient, pool: asyncpg.Pool, known: Known) -> None:
    response = await http.get(studio_url(known, "analytics"), headers=auth(known.studio.owner.user_id))
    assert response.status_code == 200
    body = response.json()
    figures, weeks = body["figures"], body["attendanceByWeek"]
    org = uuid.UUID(known.studio.org.id)
    active = await pool.fetchval(
        """SELECT count(*) FROM memberships WHERE organization_id = $1 AND role = 'member' AND status = 'active'
             AND (ended_on IS NULL OR ended_on > $2)""", org, known.today)
    assert figures["activeMembers"] == active > 50
    assert 1 <= figures["overdueMembers"] < active  # Zed at least
    assert figures["overdueAmountCents"] >= 14900 and figures["currency"] == "USD"
    assert 0 < figures["attendanceRate30d"] < 1 and figures["revenue30dCents"] > 0
    monday = known.today - timedelta(days=known.today.weekday())
    assert [w["weekStart"] for w in weeks] == [(monday - timedelta(weeks=7 - i)).isoformat() for i in range(8)]
    assert all(w["attended"] <= w["booked"] for w in weeks) and all(w["attended"] > 0 for w in weeks[:-1])
    this_week = await pool.fetchval(
        """SELECT count(*) FROM bookings b JOIN class_sessions s ON s.id = b.session_id
            WHERE s.organization_id = $1 AND s.deleted_at IS NULL AND s.cancelled_at IS NULL AND b.status = 'booked'
              AND s.starts_at >= $2 AND s.starts_at < $3""",
        org, at(known.tz, monday, "00:00"), at(known.tz, monday + timedelta(days=7), "00:00"))
    assert figures["bookingsThisWeek"] == this_week == weeks[-1]["booked"]


async def test_coaches_see_analytics_without_revenue(http: httpx.AsyncClient, known: Known) -> None:
    figures = (await http.get(studio_url(known, "analytics"), headers=auth(known.studio.coach.user_id))).json()["figures"]
    assert figures["revenue30dCents"] is None and figures["activeMembers"] > 0


# Roles and organizations -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["members", "members/{client}", "tasks", "analytics"])
async def test_members_of_the_studio_may_not_read_staff_pages(http: httpx.AsyncClient, known: Known, path: str) -> None:
    url = studio_url(known, path.format(client=known.client.membership_id))
    response = await http.get(url, headers=auth(known.studio.member.user_id))
    assert_error(response, 403, "forbidden")
    assert "staff" in response.json()["error"]["message"]


@pytest.mark.parametrize("path", ["members", "schedule", "programs", "tasks", "analytics"])
async def test_other_organizations_are_not_found(http: httpx.AsyncClient, known: Known, path: str) -> None:
    # The other studio's owner asks about this studio: it does not exist for them.
    assert_error(await http.get(studio_url(known, path), headers=auth(known.other.owner.user_id)), 404, "not_found")
    assert_error(await http.get(studio_url(known, path)), 401, "unauthorized")


# Conversation PATCH (validation; no orchestrator on this NATS) ---------------------------------------


async def test_conversation_patch_validation_and_unreachable_orchestrator(http: httpx.AsyncClient, pool: asyncpg.Pool, known: Known) -> None:
    owner = known.studio.owner
    cid = uuid.uuid4()
    await pool.execute(
        """INSERT INTO ai_conversations (id, organization_id, user_id, membership_id, model, title)
           VALUES ($1, $2, $3, $4, 'claude-sonnet-4-5', 'Quill chat')""",
        cid, uuid.UUID(known.studio.org.id), uuid.UUID(owner.user_id), uuid.UUID(owner.membership_id))
    url = f"/organizations/{known.studio.org.id}/agent/conversations/{cid}"
    for body in ({}, {"pinned": "perhaps"}, {"pinned": True, "title": "x"}, {"archived": None}):
        assert_error(await http.patch(url, json=body, headers=auth(owner.user_id)), 400, "invalid_request")
    assert_error(await http.patch(f"/organizations/{known.studio.org.id}/agent/conversations/nope", json={"pinned": True},
                                  headers=auth(owner.user_id)), 400, "invalid_request")
    # Someone else's conversation does not exist for the caller.
    assert_error(await http.patch(url, json={"pinned": True}, headers=auth(known.studio.admin.user_id)), 404, "not_found")
    assert_error(await http.patch(url, json={"pinned": True}, headers=auth(owner.user_id)), 503, "internal")
    assert await pool.fetchval("SELECT pinned FROM ai_conversations WHERE id = $1", cid) is False


# The web app -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/sign-in", "/members", f"/members/{uuid.uuid4()}", "/schedule", "/programs",
                                  "/programs/abc", "/tasks", "/analytics"])
async def test_app_routes_serve_the_index(http: httpx.AsyncClient, path: str) -> None:
    response = await http.get(path)
    assert response.status_code == 200 and response.text == INDEX
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["cache-control"] == "no-cache"


async def test_assets_are_served_for_good_and_api_404s_stay_json(http: httpx.AsyncClient) -> None:
    asset = await http.get(f"/{ASSET}")
    assert asset.status_code == 200 and asset.text == "console.log('studio');"
    assert "immutable" in asset.headers["cache-control"] and "javascript" in asset.headers["content-type"]
    assert_error(await http.get("/assets/missing.js"), 404, "not_found")
    assert_error(await http.get("/organizations/x/nothing-here"), 404, "not_found")
    assert_error(await http.get("/no-such-page"), 404, "not_found")


async def test_an_unbuilt_app_is_a_503_page_not_a_500(production: httpx.AsyncClient) -> None:
    response = await production.get("/schedule")
    assert response.status_code == 503 and response.headers["content-type"].startswith("text/html")
    assert "not built" in response.text and "make bootstrap" in response.text
    assert_error(await production.get("/assets/index.js"), 404, "not_found")


def test_the_default_dist_is_the_packages_web_dist() -> None:
    import spotter_gateway

    assert dist_dir(GatewaySettings()) == Path(spotter_gateway.__file__).parent / "web" / "dist"
    assert dist_dir(GatewaySettings(spotter_web_dist="/srv/spotter/web")) == Path("/srv/spotter/web")
