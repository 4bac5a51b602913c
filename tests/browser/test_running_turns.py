"""A running turn from the user's side: Stop ends it, and a reload finds it where it stands."""

from __future__ import annotations

import uuid

import asyncpg
from playwright.async_api import Page, expect

from tests.e2e.client import Sim
from tests.factories import Studio

from .conftest import Shots
from .ui import TURN_TIMEOUT_MS, Spotter, assert_each_once, slow_answer


async def turn_statuses(pool: asyncpg.Pool, org_id: str) -> list[str]:
    rows = await pool.fetch(
        """SELECT t.status::text FROM ai_turns t JOIN ai_conversations c ON c.id = t.conversation_id
            WHERE c.organization_id = $1 ORDER BY t.started_at""", uuid.UUID(org_id))
    return [r["status"] for r in rows]


async def test_stop_cancels_the_running_turn(owner_page: Page, studio: Studio, pool: asyncpg.Pool, sim: Sim, shots: Shots) -> None:
    spotter = Spotter(owner_page)
    await spotter.open()
    async with slow_answer(sim, spotter, "stop", 60, tokens_per_second=15) as (_, words):
        await spotter.sheet.get_by_role("button", name="Stop").click()
        await spotter.idle()
    await expect(spotter.sheet.get_by_role("button", name="Stop")).to_have_count(0)
    assert words[-1] not in await spotter.sheet.inner_text()
    assert await turn_statuses(pool, studio.org.id) == ["aborted"]
    await expect(spotter.composer).to_be_editable()
    await shots.take(owner_page, "stopped")


async def test_a_reload_mid_stream_shows_the_turn_where_it_stands(owner_page: Page, studio: Studio, pool: asyncpg.Pool, sim: Sim, shots: Shots) -> None:
    spotter = Spotter(owner_page)
    await spotter.open()
    async with slow_answer(sim, spotter, "reload", 40) as (ask, words):
        await owner_page.reload()
        # The app reopens on the running conversation (the sheet may need opening again) and follows it to the end.
        if not await spotter.composer.is_visible():
            await spotter.open()
        await spotter.says(ask)
        await spotter.says(words[-1])
        await spotter.idle()
    await expect(spotter.sheet).to_contain_text(" ".join(words), timeout=TURN_TIMEOUT_MS)
    await assert_each_once(spotter.sheet, words)
    assert await turn_statuses(pool, studio.org.id) == ["completed"]
    await shots.take(owner_page, "reloaded")
