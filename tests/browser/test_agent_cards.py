"""A card per tool call, and the human in the loop: undo, approve, reject, pick — each checked in
the page and in the database."""

from __future__ import annotations

import asyncpg
from playwright.async_api import Page, expect

from tests.e2e.client import Sim
from tests.factories import Studio

from .conftest import Shots
from .ui import TURN_TIMEOUT_MS, Spotter, make_workout, tag, tool, tool_status, workout_deleted


async def test_a_write_gets_a_card_an_undo_button_and_a_toast_and_undo_reverts_it(
    owner_page: Page, studio: Studio, pool: asyncpg.Pool, sim: Sim, shots: Shots,
) -> None:
    ask = f"build the {tag()} workout"
    await sim.script(ask, {"text": None, "tool_uses": [tool("workouts__create", title="Browser WOD", description="5 rounds")]},
                     {"text": "Created Browser WOD.", "tool_uses": []})
    spotter = Spotter(owner_page)
    await spotter.open()
    await spotter.send(ask)

    card = spotter.card("tool-card")
    await expect(card).to_be_visible(timeout=TURN_TIMEOUT_MS)
    await spotter.says("Created Browser WOD.")
    toast = owner_page.get_by_test_id("toast")
    await expect(toast).to_contain_text("Workout created")
    await expect(toast.get_by_role("button", name="Undo")).to_be_visible()
    await expect(card.get_by_role("button", name="Undo")).to_be_enabled()
    created = await tool_status(pool, studio.org.id, "workouts", "create")
    assert [r["status"] for r in created] == ["succeeded"]
    workout_id = created[0]["output"]["id"]
    assert await workout_deleted(pool, workout_id) is False
    await shots.take(owner_page, "created")

    await toast.get_by_role("button", name="Undo").click()
    await expect(card.get_by_role("button", name="Undo")).to_have_count(0, timeout=TURN_TIMEOUT_MS)
    await spotter.idle()
    assert await workout_deleted(pool, workout_id) is True
    undone = await tool_status(pool, studio.org.id, "workouts", "delete")
    assert [r["status"] for r in undone] == ["succeeded"]
    await shots.take(owner_page, "undone")


async def test_approve_runs_the_destructive_tool_once(owner_page: Page, studio: Studio, pool: asyncpg.Pool, sim: Sim, shots: Shots) -> None:
    workout_id = await make_workout(pool, studio.org.id, "Friday WOD")
    ask = f"delete friday wod {tag()}"
    await sim.script(ask, {"text": "Deleting it.", "tool_uses": [tool("workouts__delete", id=workout_id)]},
                     {"text": "Deleted Friday WOD.", "tool_uses": []})
    spotter = Spotter(owner_page)
    await spotter.open()
    await spotter.send(ask)

    confirm = spotter.card("confirm-card")
    await expect(confirm).to_be_visible(timeout=TURN_TIMEOUT_MS)
    approve, reject = confirm.get_by_role("button", name="Approve"), confirm.get_by_role("button", name="Reject")
    await expect(approve).to_be_enabled()
    await shots.take(owner_page, "confirm")
    assert await workout_deleted(pool, workout_id) is False

    await approve.click()
    await expect(approve).to_be_disabled()
    await expect(reject).to_be_disabled()
    await spotter.says("Deleted Friday WOD.")
    await spotter.idle()
    assert await workout_deleted(pool, workout_id) is True
    assert [r["status"] for r in await tool_status(pool, studio.org.id, "workouts", "delete")] == ["succeeded"]
    await shots.take(owner_page, "approved")


async def test_reject_changes_nothing(owner_page: Page, studio: Studio, pool: asyncpg.Pool, sim: Sim) -> None:
    workout_id = await make_workout(pool, studio.org.id, "Saturday WOD")
    ask = f"delete saturday wod {tag()}"
    await sim.script(ask, {"text": None, "tool_uses": [tool("workouts__delete", id=workout_id)]},
                     {"text": "Okay, I kept it.", "tool_uses": []})
    spotter = Spotter(owner_page)
    await spotter.open()
    await spotter.send(ask)

    confirm = spotter.card("confirm-card")
    reject = confirm.get_by_role("button", name="Reject")
    await reject.click(timeout=TURN_TIMEOUT_MS)
    await expect(reject).to_be_disabled()
    await expect(confirm.get_by_role("button", name="Approve")).to_be_disabled()
    await spotter.says("Okay, I kept it.")
    await spotter.idle()
    assert await workout_deleted(pool, workout_id) is False
    assert [r["status"] for r in await tool_status(pool, studio.org.id, "workouts", "delete")] == ["rejected_by_user"]


async def test_picker_offers_a_button_per_candidate_and_completes_with_the_pick(
    owner_page: Page, studio: Studio, pool: asyncpg.Pool, sim: Sim, shots: Shots,
) -> None:
    ask = f"which saar {tag()}"
    candidates = [{"id": "m-1", "label": "Saar Cohen", "sublabel": "Unlimited"}, {"id": "m-2", "label": "Saar Levi"}]
    await sim.script(ask, {"text": None, "tool_uses": [tool("read__ask_user_to_pick", kind="member", prompt="Which Saar?", candidates=candidates)]},
                     {"text": "Got it: Saar Levi.", "tool_uses": []})
    spotter = Spotter(owner_page)
    await spotter.open()
    await spotter.send(ask)

    picker = spotter.card("picker-card")
    await expect(picker).to_contain_text("Which Saar?", timeout=TURN_TIMEOUT_MS)
    await expect(picker.get_by_role("button", name="Saar Cohen")).to_be_visible()
    await expect(picker.get_by_role("button", name="Saar Levi")).to_be_visible()
    await shots.take(owner_page, "picker")

    await picker.get_by_role("button", name="Saar Levi").click()
    await spotter.says("Got it: Saar Levi.")
    await spotter.idle()
    picked = await tool_status(pool, studio.org.id, "read", "ask_user_to_pick")
    assert [(r["status"], r["output"]["pickedId"]) for r in picked] == [("succeeded", "m-2")]
