"""The member's coach in the browser (issue 12): a member opens Coach, asks for a workout, gets it as a
card, swaps an exercise from the card, logs it; reopening the page brings the session back. Staff
have no Coach page."""

from __future__ import annotations

import uuid

import asyncpg
from playwright.async_api import BrowserContext, Page, expect

from tests.factories import make_studio
from tests.platform import Platform

from .conftest import Shots, sign_in
from .ui import TURN_TIMEOUT_MS


async def test_a_member_gets_swaps_and_logs_a_workout(page: Page, context: BrowserContext, pool: asyncpg.Pool,
                                                      platform: Platform, shots: Shots) -> None:
    studio = await make_studio(pool)
    await sign_in(context, studio.member, studio.org.id)
    await page.goto(platform.base_url + "/schedule")
    await page.get_by_role("link", name="Coach").click()
    await expect(page).to_have_url(platform.base_url + "/coach")
    await expect(page.get_by_role("heading", name="What shall we train today?")).to_be_visible()

    await page.get_by_role("button", name="Give me a quick 30-minute workout").click()
    card = page.get_by_test_id("workout-card")
    await expect(card).to_be_visible(timeout=TURN_TIMEOUT_MS)
    await expect(page.get_by_test_id("coach-message").first).to_be_visible()
    await expect(page.get_by_test_id("coach-knowledge").first).to_contain_text("Looked at your")
    await expect(page.get_by_role("textbox", name="Message your coach")).to_be_enabled(timeout=TURN_TIMEOUT_MS)
    await shots.take(page, "workout")

    swap = card.get_by_role("button", name="Swap ").first
    old_name = (await swap.get_attribute("aria-label") or "").removeprefix("Swap ")
    await swap.click()
    await expect(page.get_by_test_id("coach-user-message").last).to_contain_text(f"Swap exercise 1 ({old_name})")
    await expect(page.get_by_role("textbox", name="Message your coach")).to_be_enabled(timeout=TURN_TIMEOUT_MS)
    await expect(page.get_by_test_id("workout-card").last.get_by_role("button", name=f"Swap {old_name}")).to_have_count(0)
    await shots.take(page, "swapped")

    await page.get_by_test_id("workout-card").last.get_by_role("button", name="Log workout").click()
    await expect(page.get_by_test_id("workout-card").last).to_contain_text("Logged ✓", timeout=TURN_TIMEOUT_MS)
    logs = await pool.fetch("SELECT title FROM member_workout_logs WHERE membership_id = $1", uuid.UUID(studio.member.membership_id))
    assert len(logs) == 1
    await shots.take(page, "logged")

    # Reopening the page continues the session: the conversation and the card come back.
    await page.reload()
    await expect(page.get_by_test_id("workout-card").first).to_be_visible()
    await expect(page.get_by_test_id("coach-user-message").first).to_contain_text("Give me a quick 30-minute workout")


async def test_staff_have_no_coach_page(page: Page, context: BrowserContext, pool: asyncpg.Pool, platform: Platform) -> None:
    studio = await make_studio(pool)
    await sign_in(context, studio.coach, studio.org.id)
    await page.goto(platform.base_url + "/members")
    await expect(page.get_by_role("main")).to_be_visible()
    await expect(page.get_by_role("link", name="Coach")).to_have_count(0)
