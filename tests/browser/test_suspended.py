"""A conversation waiting for a person: reopened where it stands, or left behind by typing on; and
the keyboard path into and out of the sheet."""

from __future__ import annotations

import asyncpg
from playwright.async_api import Page, expect

from tests.e2e.client import Sim
from tests.factories import Studio

from .conftest import Shots
from .ui import TURN_TIMEOUT_MS, Spotter, make_workout, tag, tool, tool_status, workout_deleted


async def test_a_reload_shows_the_pending_confirmation_and_it_still_works(
    owner_page: Page, studio: Studio, pool: asyncpg.Pool, sim: Sim, shots: Shots,
) -> None:
    workout_id = await make_workout(pool, studio.org.id, "Sunday WOD")
    ask = f"delete sunday wod {tag()}"
    await sim.script(ask, {"text": "Deleting it.", "tool_uses": [tool("workouts__delete", id=workout_id)]},
                     {"text": "Deleted Sunday WOD.", "tool_uses": []})
    spotter = Spotter(owner_page)
    await spotter.open()
    await spotter.send(ask)
    await expect(spotter.card("confirm-card")).to_be_visible(timeout=TURN_TIMEOUT_MS)
    await spotter.idle()

    await owner_page.reload()
    await spotter.open()
    confirm = spotter.card("confirm-card")
    await expect(confirm).to_be_visible(timeout=TURN_TIMEOUT_MS)
    await expect(spotter.sheet).to_contain_text(ask)
    approve = confirm.get_by_role("button", name="Approve")
    await expect(approve).to_be_enabled()
    await shots.take(owner_page, "reopened-confirm")
    assert await workout_deleted(pool, workout_id) is False

    await approve.click()
    await spotter.says("Deleted Sunday WOD.")
    await spotter.idle()
    assert await workout_deleted(pool, workout_id) is True
    assert [r["status"] for r in await tool_status(pool, studio.org.id, "workouts", "delete")] == ["succeeded"]


async def test_typing_past_a_confirmation_retires_its_buttons(
    owner_page: Page, studio: Studio, pool: asyncpg.Pool, sim: Sim, shots: Shots,
) -> None:
    workout_id = await make_workout(pool, studio.org.id, "Tuesday WOD")
    word = tag()
    await sim.script(f"delete tuesday wod {word}", {"text": "Deleting it.", "tool_uses": [tool("workouts__delete", id=workout_id)]})
    await sim.script(f"never mind {word}", {"text": "Okay, nothing deleted.", "tool_uses": []})
    spotter = Spotter(owner_page)
    await spotter.open()
    await spotter.send(f"delete tuesday wod {word}")
    confirm = spotter.card("confirm-card")
    await expect(confirm).to_be_visible(timeout=TURN_TIMEOUT_MS)
    await spotter.idle()

    await spotter.send(f"never mind {word}")
    await expect(confirm.get_by_role("button", name="Approve")).to_be_disabled()
    await expect(confirm.get_by_role("button", name="Reject")).to_be_disabled()
    await expect(confirm).to_contain_text("Skipped")
    await spotter.says("Okay, nothing deleted.")
    await spotter.idle()
    await shots.take(owner_page, "skipped")
    assert await workout_deleted(pool, workout_id) is False


async def test_the_keyboard_opens_and_closes_spotter_and_focus_follows(owner_page: Page) -> None:
    spotter = Spotter(owner_page)
    await expect(spotter.launcher).to_be_visible()
    await owner_page.keyboard.press("Control+k")
    await expect(spotter.composer).to_be_focused()
    await expect(spotter.sheet).to_have_attribute("data-open", "true")
    await owner_page.keyboard.press("Escape")
    await expect(spotter.sheet).to_have_attribute("data-open", "false")
    await expect(spotter.launcher).to_be_focused()
    # The launcher itself is a button on the tab path: Enter opens the sheet again.
    await owner_page.keyboard.press("Enter")
    await expect(spotter.composer).to_be_focused()
