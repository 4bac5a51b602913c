"""The human activity bridge in the browser (issue 11): "What are you working on?", the pages a
person visits recorded while a task runs, Cmd/Ctrl+M for a marker (never while typing), and Spotter
knowing all of it when asked "what was I doing?"."""

from __future__ import annotations

import uuid

import asyncpg
from playwright.async_api import BrowserContext, Page, expect

from tests.e2e.client import Sim
from tests.factories import make_studio, make_task
from tests.platform import Platform

from .conftest import Shots, sign_in
from .ui import Spotter, tag, until


async def _log(pool: asyncpg.Pool, user_id: str) -> list[dict]:
    rows = await pool.fetch(
        """SELECT e.event_type, e.content, e.metadata FROM session_events e JOIN sessions s ON s.id = e.session_id
            WHERE s.user_id = $1 AND s.source = 'human' ORDER BY s.created_at, e.sequence""", uuid.UUID(user_id))
    return [dict(r) for r in rows]


async def test_working_on_a_task_and_asking_what_was_i_doing(
    page: Page, context: BrowserContext, pool: asyncpg.Pool, sim: Sim, platform: Platform, shots: Shots,
) -> None:
    studio = await make_studio(pool, extra_members=[{"full_name": "Dana Levi"}])
    await make_task(pool, studio.org.id, "Win back lapsed members")
    await make_task(pool, studio.org.id, "Order chalk")
    dana = studio.people["Dana Levi"].membership_id
    await sign_in(context, studio.coach, studio.org.id)
    await page.goto(platform.base_url + "/members")

    sidebar = page.get_by_role("complementary")
    idle = page.get_by_role("button", name="What are you working on?")
    await expect(idle).to_be_visible()
    await idle.click()
    picker = page.get_by_role("dialog", name="What are you working on?")
    await expect(picker.get_by_role("option", name="Win back lapsed members")).to_be_visible()
    await picker.get_by_role("combobox").fill("lapsed")
    await expect(picker.get_by_role("option")).to_have_count(2)  # the match, and "Create new task “lapsed”"
    await shots.take(page, "picker")
    await picker.get_by_role("option", name="Win back lapsed members").click()
    working = page.get_by_test_id("working-on")
    await expect(working).to_contain_text("Working on: Win back lapsed members · just now")
    await expect(sidebar.get_by_role("button", name="Stop working")).to_be_visible()

    # Visit Dana's page, then leave a marker with Ctrl+M (focus on the page, not in a field).
    await page.get_by_role("main").get_by_text("Dana Levi").first.click()
    await expect(page).to_have_url(f"{platform.base_url}/members/{dana}")
    await page.get_by_role("main").focus()
    await page.keyboard.press("Control+m")
    marker = page.get_by_role("dialog", name="Add a marker")
    await expect(marker).to_be_visible()
    await marker.get_by_role("textbox", name="Marker").fill("offered Dana the Tuesday 7am slot")
    await shots.take(page, "marker")
    await marker.get_by_role("textbox", name="Marker").press("Enter")
    await expect(marker).to_be_hidden()

    # Typing "m" with Ctrl in Spotter's composer never opens it.
    spotter = Spotter(page)
    await spotter.open()
    await spotter.composer.press("Control+m")
    await expect(page.get_by_role("dialog", name="Add a marker")).to_have_count(0)

    async def recorded() -> bool:
        log = await _log(pool, studio.coach.user_id)
        return any(e["event_type"] == "human.entity_view" and e["metadata"]["entityId"] == dana for e in log)
    await until(recorded, timeout=15)  # the 5-second flush
    log = await _log(pool, studio.coach.user_id)
    kinds = [e["event_type"] for e in log]
    assert kinds[0] == "session.created" and "human.marker" in kinds
    assert kinds.index("human.entity_view") < kinds.index("human.marker"), "the page before the note about it"
    assert [e["metadata"]["pathname"] for e in log if e["event_type"] == "human.navigate"][:2] == ["/members", f"/members/{dana}"]

    word = tag()
    await spotter.send(f"what was I doing? {word}")
    await spotter.idle()
    await spotter.says("You're working on Win back lapsed members")
    await spotter.says('noted "offered Dana the Tuesday 7am slot"')
    [body] = [r["body"] for r in await sim.requests() if r.get("body") and word in str(r["body"]["messages"][0])][:1]
    activity = body["messages"][-1]["content"][-1]["text"]
    assert activity.startswith('<recent-activity untrusted="true">')
    assert "Working on: **Win back lapsed members**" in activity
    assert f"viewed **Dana Levi** (member, id {dana})" in activity
    assert 'marker "offered Dana the Tuesday 7am slot"' in activity
    await shots.take(page, "asked")

    # Stop: the control goes back to the question, and the session is completed.
    await sidebar.get_by_role("button", name="Stop working").click()
    await expect(idle).to_be_visible()
    assert await pool.fetchval("SELECT status::text FROM sessions WHERE user_id = $1 AND source = 'human'",
                               uuid.UUID(studio.coach.user_id)) == "completed"
    # No task running: Ctrl+M is the browser's again.
    await page.get_by_role("main").focus()
    await page.keyboard.press("Control+m")
    await expect(page.get_by_role("dialog", name="Add a marker")).to_have_count(0)


async def test_a_new_task_from_the_picker_and_members_see_no_control(
    page: Page, context: BrowserContext, pool: asyncpg.Pool, platform: Platform, shots: Shots,
) -> None:
    studio = await make_studio(pool)
    await sign_in(context, studio.admin, studio.org.id)
    await page.goto(platform.base_url + "/tasks")
    await page.get_by_role("button", name="What are you working on?").click()
    picker = page.get_by_role("dialog", name="What are you working on?")
    await expect(picker.get_by_text("No open tasks")).to_be_visible()
    await picker.get_by_role("combobox").fill("Fix the rower")
    await picker.get_by_role("combobox").press("Enter")
    await expect(page.get_by_test_id("working-on")).to_contain_text("Working on: Fix the rower")
    await expect(page.get_by_role("main").get_by_text("Fix the rower")).to_be_visible()  # the Tasks page, no reload
    assert await pool.fetchval("SELECT count(*) FROM tasks WHERE organization_id = $1 AND title = 'Fix the rower'",
                               uuid.UUID(studio.org.id)) == 1
    await shots.take(page, "new-task")

    member = await make_studio(pool)
    other = await context.browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        await sign_in(other, member.member, member.org.id)
        p = await other.new_page()
        await p.goto(platform.base_url + "/schedule")
        await expect(p.get_by_role("main")).to_be_visible()
        await expect(p.get_by_role("button", name="What are you working on?")).to_have_count(0)
    finally:
        await other.close()


async def test_the_control_on_a_phone(page: Page, context: BrowserContext, pool: asyncpg.Pool, platform: Platform,
                                      shots: Shots) -> None:
    studio = await make_studio(pool)
    await make_task(pool, studio.org.id, "Deep-clean the rig and re-tape the kettlebell handles")
    await page.set_viewport_size({"width": 390, "height": 844})
    await sign_in(context, studio.coach, studio.org.id)
    await page.goto(platform.base_url + "/schedule")
    await page.get_by_role("button", name="What are you working on?").click()
    await page.get_by_role("option", name="Deep-clean the rig and re-tape the kettlebell handles").click()
    working = page.get_by_test_id("working-on")
    await expect(working).to_contain_text("Working on: Deep-clean the rig")
    box = await working.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, box
    await expect(page.get_by_role("button", name="Stop working")).to_be_visible()
    await shots.take(page, "phone")
