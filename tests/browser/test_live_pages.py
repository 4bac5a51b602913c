"""Spotter beside the pages: a write shows up on the page behind the sheet, and a running turn
survives navigation."""

from __future__ import annotations

import re

import asyncpg
from playwright.async_api import Page, expect

from tests.e2e.client import Sim
from tests.factories import Studio
from tests.platform import Platform

from .conftest import Shots
from .ui import TURN_TIMEOUT_MS, Spotter, assert_each_once, nav, slow_answer, tag, tool


async def test_a_task_spotter_creates_appears_on_the_tasks_page_without_reload(
    owner_page: Page, studio: Studio, pool: asyncpg.Pool, sim: Sim, platform: Platform, shots: Shots,
) -> None:
    word = tag()
    title = f"Call the plumber {word}"
    await sim.script(f"plumber task {word}", {"text": None, "tool_uses": [tool("tasks__create", title=title)]},
                     {"text": "Task added.", "tool_uses": []})
    await owner_page.goto(platform.base_url + "/tasks")
    main = owner_page.get_by_role("main")
    await expect(main.get_by_text(title)).to_have_count(0)
    await owner_page.evaluate("window.__sameDocument = true")

    spotter = Spotter(owner_page)
    await spotter.open()
    await spotter.send(f"plumber task {word}")
    await spotter.says("Task added.")
    await expect(main.get_by_text(title)).to_be_visible()
    assert await owner_page.evaluate("window.__sameDocument === true"), "the page was reloaded"
    assert await pool.fetchval("SELECT count(*) FROM tasks WHERE organization_id = $1::uuid AND title = $2", studio.org.id, title) == 1
    await shots.take(owner_page, "task-on-page")


async def test_a_class_spotter_schedules_appears_on_the_schedule_page(
    owner_page: Page, studio: Studio, pool: asyncpg.Pool, sim: Sim, platform: Platform, shots: Shots,
) -> None:
    word = tag()
    today = await pool.fetchval("SELECT (now() AT TIME ZONE 'UTC')::date")  # the studio's time zone is UTC
    class_name = f"Kettlebells {word}"
    await pool.execute("INSERT INTO class_types (organization_id, name) VALUES ($1::uuid, $2)", studio.org.id, class_name)
    await sim.script(f"schedule kettlebells {word}", {"text": None, "tool_uses": [tool(
        "class_sessions__create", class_name=class_name, date=today.isoformat(), start_time="18:00", end_time="19:00",
        capacity=12, published=True)]}, {"text": "Scheduled.", "tool_uses": []})
    await owner_page.goto(platform.base_url + "/schedule")
    main = owner_page.get_by_role("main")
    await expect(main).to_be_visible()
    await owner_page.evaluate("window.__sameDocument = true")

    spotter = Spotter(owner_page)
    await spotter.open()
    await spotter.send(f"schedule kettlebells {word}")
    await spotter.says("Scheduled.")
    await expect(main.get_by_text(class_name)).to_be_visible()
    assert await owner_page.evaluate("window.__sameDocument === true"), "the page was reloaded"
    assert await pool.fetchval(
        """SELECT count(*) FROM class_sessions s JOIN class_types t ON t.id = s.class_type_id
            WHERE s.organization_id = $1::uuid AND t.name = $2""", studio.org.id, class_name) == 1
    await shots.take(owner_page, "class-on-page")


async def test_a_stream_keeps_going_across_navigation(owner_page: Page, sim: Sim, shots: Shots) -> None:
    spotter = Spotter(owner_page)
    await spotter.open()
    async with slow_answer(sim, spotter, "nav", 40) as (_, words):
        await expect(spotter.sheet).to_have_attribute("data-state", "running")
        await nav(owner_page, "Tasks")
        await expect(owner_page).to_have_url(re.compile(r"/tasks$"))
        # Still the same turn, still streaming, after the route change.
        await expect(spotter.sheet).to_have_attribute("data-state", "running")
        await shots.take(owner_page, "streaming-after-nav")
        await spotter.says(words[-1])
        await spotter.idle()
    await expect(spotter.sheet).to_contain_text(" ".join(words), timeout=TURN_TIMEOUT_MS)
    await assert_each_once(spotter.sheet, words)


async def test_the_composer_sends_the_page_and_what_is_selected_on_it(
    owner_page: Page, studio: Studio, pool: asyncpg.Pool, sim: Sim, platform: Platform,
) -> None:
    member = studio.member
    ask = f"what about this member {tag()}"
    await sim.script(ask, {"text": "Looking.", "tool_uses": []})
    await owner_page.goto(platform.base_url + "/members")
    await owner_page.get_by_role("link", name=member.full_name).click()
    await expect(owner_page).to_have_url(re.compile(rf"/members/{member.membership_id}$"))
    await expect(owner_page.get_by_role("heading", name=member.full_name)).to_be_visible()
    spotter = Spotter(owner_page)
    await spotter.open()
    await spotter.send(ask)
    await spotter.says("Looking.")
    await spotter.idle()
    stored = await pool.fetchval(
        """SELECT m.page_context FROM ai_messages m JOIN ai_conversations c ON c.id = m.conversation_id
            WHERE c.organization_id = $1::uuid AND m.role = 'user' ORDER BY m.created_at DESC LIMIT 1""", studio.org.id)
    assert stored["pathname"] == f"/members/{member.membership_id}"
    assert stored["selection"] == {"kind": "member", "id": member.membership_id, "label": member.full_name}
