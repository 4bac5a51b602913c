"""Hebrew: right to left, Hebrew strings, and `x-locale: he` on what the app sends."""

from __future__ import annotations

from playwright.async_api import Page, Request, expect

from tests.e2e.client import Sim

from .conftest import Shots
from .ui import TURN_TIMEOUT_MS, Spotter, hebrew, tag


async def test_hebrew_is_right_to_left_in_hebrew_and_sent_as_x_locale(owner_page: Page, sim: Sim, shots: Shots) -> None:
    page = owner_page
    sent: list[Request] = []
    page.on("request", lambda r: sent.append(r) if "/organizations/" in r.url or r.url.endswith("/me") else None)
    await expect(page.locator("html")).to_have_attribute("dir", "ltr")
    await page.get_by_role("combobox", name="Language").select_option("he")

    await expect(page.locator("html")).to_have_attribute("dir", "rtl")
    await expect(page.locator("html")).to_have_attribute("lang", "he")
    await expect(page.get_by_role("navigation", name="ראשי").get_by_role("link", name="משימות")).to_be_visible()
    await expect(page.get_by_role("button", name="Open Spotter")).to_have_count(0)  # its Hebrew name now
    await shots.take(page, "hebrew-shell")

    ask = f"שלום {tag()}"
    await sim.script(ask, {"text": "שלום! איך אפשר לעזור?", "tool_uses": []})
    spotter = Spotter(page)
    await page.keyboard.press("Control+k")
    composer = spotter.sheet.get_by_role("textbox")
    await expect(composer).to_be_visible()
    assert hebrew(await composer.get_attribute("aria-label") or ""), "the composer's accessible name is not Hebrew"
    assert hebrew(await spotter.sheet.inner_text())
    await composer.fill(ask)
    await composer.press("Enter")
    await expect(spotter.sheet).to_contain_text("איך אפשר לעזור", timeout=TURN_TIMEOUT_MS)
    await shots.take(page, "hebrew-sheet")

    posts = [r for r in sent if r.method == "POST" and r.url.endswith("/agent/messages")]
    assert posts, [r.url for r in sent]
    assert (await posts[-1].all_headers()).get("x-locale") == "he"
    # The choice sticks: after a reload the app is still Hebrew.
    await page.reload()
    await expect(page.locator("html")).to_have_attribute("dir", "rtl")
