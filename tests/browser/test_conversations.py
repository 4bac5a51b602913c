"""The conversation list: open one, pin one (it moves to the top), archive one (it leaves the list)."""

from __future__ import annotations

import uuid

import asyncpg
import httpx
from playwright.async_api import Page, expect

from tests.e2e.client import send
from tests.factories import Studio
from tests.platform import Platform

from .conftest import Shots
from .ui import Spotter, tag, until


async def test_open_pin_and_archive_conversations(owner_page: Page, studio: Studio, pool: asyncpg.Pool, platform: Platform, shots: Shots) -> None:
    word = tag()
    ids: dict[str, str] = {}
    async with httpx.AsyncClient(base_url=platform.base_url, timeout=httpx.Timeout(10, read=60)) as http:
        for name in ("Alpha", "Beta"):
            stream = await send(http, studio.org.id, studio.owner.user_id, f"who am I? {name.lower()} {word}")
            ids[name] = stream.conversation_id
            # Our titles, set before the model's: the model's title only replaces the one it saw (none).
            await pool.execute("UPDATE ai_conversations SET title = $2 WHERE id = $1", uuid.UUID(ids[name]), f"{name} {word}")

    spotter = Spotter(owner_page)
    await spotter.open()
    await spotter.sheet.get_by_role("button", name="Conversations").click()
    items = spotter.sheet.get_by_test_id("conversation-item")
    await expect(items).to_have_count(2)
    await expect(items.nth(0)).to_contain_text(f"Beta {word}")  # newest first
    await expect(items.nth(1)).to_contain_text(f"Alpha {word}")
    await shots.take(owner_page, "list")

    alpha = items.filter(has_text=f"Alpha {word}")
    await alpha.get_by_role("button", name="Pin").click()
    await expect(items.nth(0)).to_contain_text(f"Alpha {word}")  # pinned first
    await expect(alpha.get_by_role("button", name="Unpin")).to_be_visible()
    await until(lambda: pool.fetchval("SELECT pinned FROM ai_conversations WHERE id = $1", uuid.UUID(ids["Alpha"])))

    await items.filter(has_text=f"Beta {word}").get_by_role("button", name="Archive").click()
    await expect(items).to_have_count(1)
    await until(lambda: pool.fetchval("SELECT archived_at IS NOT NULL FROM ai_conversations WHERE id = $1", uuid.UUID(ids["Beta"])))
    await shots.take(owner_page, "pinned-archived")

    # Opening one shows its messages.
    await alpha.get_by_text(f"Alpha {word}").click()
    await expect(spotter.sheet).to_contain_text(f"who am I? alpha {word}")
    await expect(spotter.composer).to_be_visible()
