"""Signing in through the development page, and what each role is shown."""

from __future__ import annotations

import re

import pytest
from playwright.async_api import Browser, BrowserContext, Page, expect

from spotter_cli.seed import seed_demo
from tests.factories import Studio
from tests.platform import Platform

from .conftest import DESKTOP, Shots, sign_in
from .ui import Spotter


@pytest.fixture(scope="session")
async def demo_seeded(db_url: str) -> None:
    # `spotter seed-demo`'s own seeder, into the session's database: the sign-in page lists Demo Gym's people.
    await seed_demo(db_url)


async def test_dev_sign_in_as_the_demo_owner_opens_the_shell(demo_seeded: None, page: Page, platform: Platform, shots: Shots) -> None:
    await page.goto(platform.base_url + "/")
    await expect(page.get_by_role("heading", name="Sign in to Spotter")).to_be_visible()
    owner = page.get_by_role("button", name=re.compile(r"owner@demo\.gym"))
    await expect(owner).to_be_visible()
    await shots.take(page, "sign-in")

    await owner.click()
    await expect(page.get_by_role("navigation", name="Main")).to_be_visible()
    await expect(page.get_by_text("Dana Owner")).to_be_visible()
    await expect(Spotter(page).launcher).to_be_visible()
    assert await page.evaluate("localStorage.getItem('spotter.token')")
    await shots.take(page, "shell")


async def test_a_member_sees_no_spotter(page: Page, context: BrowserContext, browser: Browser, studio: Studio, platform: Platform, shots: Shots) -> None:
    await sign_in(context, studio.member, studio.org.id)
    await page.goto(platform.base_url + "/schedule")
    # The shell is there for the member (their name, the schedule)...
    await expect(page.get_by_role("navigation", name="Main")).to_be_visible()
    await expect(page.get_by_text(studio.member.full_name)).to_be_visible()
    await expect(page.get_by_role("navigation", name="Main").get_by_role("link", name="Schedule")).to_be_visible()
    await shots.take(page, "member")
    # ...and neither the launcher, nor the composer, nor Cmd/Ctrl-K bring Spotter up.
    spotter = Spotter(page)
    await page.keyboard.press("Control+k")
    await expect(spotter.launcher).to_have_count(0)
    await expect(spotter.composer).to_have_count(0)
    await expect(page.get_by_role("navigation", name="Main").get_by_role("link", name="Members")).to_have_count(0)
    # The same page for the studio's coach does offer Spotter: it is the role that hides it.
    coach = await browser.new_context(viewport=DESKTOP, locale="en-US")
    try:
        await sign_in(coach, studio.coach, studio.org.id)
        coach_page = await coach.new_page()
        await coach_page.goto(platform.base_url + "/schedule")
        await expect(Spotter(coach_page).launcher).to_be_visible()
    finally:
        await coach.close()


async def test_the_demo_member_login_is_offered(demo_seeded: None, page: Page, platform: Platform) -> None:
    """`spotter seed-demo` names member@demo.gym as a login; the sign-in page must reach it."""
    await page.goto(platform.base_url + "/")
    await page.get_by_role("searchbox", name="Filter demo users").fill("member@demo.gym")
    member = page.get_by_role("button", name=re.compile(r"member@demo\.gym"))
    await member.click()
    await expect(page.get_by_text("Maya Member")).to_be_visible()
    await expect(Spotter(page).launcher).to_have_count(0)
