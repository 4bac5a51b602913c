"""When things go wrong: a dropped connection mid-stream resumes without losing or repeating text,
errors are shown in the user's language with their trace id, and an exhausted budget blocks."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import asyncpg
import pytest
from playwright.async_api import BrowserContext, Page, Request, expect

from tests.e2e.client import Sim
from tests.factories import Studio
from tests.platform import Platform

from .conftest import Shots, sign_in
from .proxy import CuttableProxy
from .ui import TURN_TIMEOUT_MS, Spotter, assert_each_once, slow_answer, tag


@pytest.fixture
async def proxy(platform: Platform) -> AsyncIterator[CuttableProxy]:
    target = urlsplit(platform.base_url)
    p = CuttableProxy(target.hostname, target.port)
    await p.start()
    yield p
    await p.close()


async def test_a_dropped_connection_resumes_from_the_last_event(
    page: Page, context: BrowserContext, studio: Studio, proxy: CuttableProxy, sim: Sim, shots: Shots,
) -> None:
    await sign_in(context, studio.owner, studio.org.id)
    await page.goto(f"http://127.0.0.1:{proxy.port}/")
    resumed: list[Request] = []
    page.on("request", lambda r: resumed.append(r) if "/events" in r.url else None)

    spotter = Spotter(page)
    await spotter.open()
    async with slow_answer(sim, spotter, "drop", 40) as (_, words):
        await spotter.says(words[2])
        await expect(spotter.sheet).to_have_attribute("data-state", "running")
        assert proxy.cut() >= 1
        await shots.take(page, "after-drop")
        await spotter.says(words[-1])
        await spotter.idle()
    await expect(spotter.sheet).to_contain_text(" ".join(words))
    await assert_each_once(spotter.sheet, words)
    # It came back through the events endpoint, after the last event it had seen.
    assert resumed, "no request to the conversation's events endpoint after the drop"
    after = [r for r in resumed if "after=" in r.url or (await r.all_headers()).get("last-event-id")]
    assert after, [r.url for r in resumed]
    await shots.take(page, "resumed")


async def test_a_provider_error_is_shown_localized_with_its_trace_id(
    owner_page: Page, studio: Studio, pool: asyncpg.Pool, sim: Sim, shots: Shots,
) -> None:
    ask = f"overload please {tag()}"
    await sim.fault(status=529, count=1, match=ask)
    spotter = Spotter(owner_page)
    await spotter.open()
    await spotter.send(ask)
    banner = owner_page.get_by_test_id("error-banner")
    await expect(banner).to_be_visible(timeout=TURN_TIMEOUT_MS)
    trace_id = await pool.fetchval(
        """SELECT e.data->>'traceId' FROM ai_conversation_events e JOIN ai_conversations c ON c.id = e.conversation_id
            WHERE c.organization_id = $1 AND e.type = 'error'""", uuid.UUID(studio.org.id))
    assert trace_id
    await expect(banner).to_contain_text(trace_id)
    text = await banner.inner_text()
    assert "provider_overloaded" not in text.replace(trace_id, ""), "the raw code instead of a message"
    assert re.search(r"[A-Za-z]{4,}", text.replace(trace_id, ""))
    await shots.take(owner_page, "error")
    # Still usable: the next message is answered.
    await spotter.send("who am I?")
    await spotter.idle()


async def test_an_exhausted_budget_opens_the_blocking_modal(
    owner_page: Page, studio: Studio, pool: asyncpg.Pool, shots: Shots,
) -> None:
    # The pro tier's cap is $5.00 a day; $6.00 spent today by another member of the studio.
    await pool.execute(
        """INSERT INTO ai_usage_daily (organization_id, user_id, day, cost_usd_micros)
           VALUES ($1, $2, (now() AT TIME ZONE 'utc')::date, 6000000)""",
        uuid.UUID(studio.org.id), uuid.UUID(studio.admin.user_id),
    )
    spotter = Spotter(owner_page)
    await spotter.open()
    footer = owner_page.get_by_test_id("usage-footer")
    await expect(footer).to_contain_text("6.00 / $5.00")
    await expect(footer).to_contain_text("Upgrade your plan")  # billing's showUpgradeHint (≥ 80 %)
    await spotter.send(f"plan my week {tag()}")
    modal = owner_page.get_by_role("alertdialog")
    await expect(modal).to_be_visible(timeout=TURN_TIMEOUT_MS)
    await expect(modal).to_have_attribute("data-testid", "budget-modal")
    await shots.take(owner_page, "budget-modal")
    assert await pool.fetchval(
        "SELECT count(*) FROM ai_messages m JOIN ai_conversations c ON c.id = m.conversation_id WHERE c.organization_id = $1",
        uuid.UUID(studio.org.id)) == 0
