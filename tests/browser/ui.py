"""Spotter as a person sees it: the launcher, the sheet, the composer — located by role and
accessible name, with data-testid hooks only where roles are not enough."""

from __future__ import annotations

import asyncio
import contextlib
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
from playwright.async_api import Locator, Page, expect

from tests.e2e.client import Sim

# A turn's whole round trip (gateway → orchestrator → simulator → tool-runner) on a 2-core machine.
TURN_TIMEOUT_MS = 20_000


def tool(name: str, **tool_input: Any) -> dict[str, Any]:
    return {"name": name, "input": tool_input}


async def until(check: Callable[[], Awaitable[Any]], timeout: float = 10.0) -> None:
    """Wait for a database condition the UI may show before the server has stored it (an optimistic
    list update): polls `check` until it is truthy, fails after `timeout` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


def tag() -> str:
    """A per-test word, so scripted replies match this test's message only."""
    return uuid.uuid4().hex[:8]


class Spotter:
    def __init__(self, page: Page) -> None:
        self.page = page
        self.launcher = page.get_by_role("button", name="Open Spotter")
        self.sheet = page.get_by_test_id("agent-sheet")
        self.composer = page.get_by_role("textbox", name="Message Spotter")

    async def open(self) -> None:
        await expect(self.launcher).to_be_visible()
        await self.launcher.click()
        await expect(self.composer).to_be_visible()

    async def send(self, text: str) -> None:
        await self.composer.fill(text)
        await self.composer.press("Enter")

    async def idle(self) -> None:
        await expect(self.sheet).to_have_attribute("data-state", "idle", timeout=TURN_TIMEOUT_MS)

    async def says(self, text: str) -> None:
        await expect(self.sheet).to_contain_text(text, timeout=TURN_TIMEOUT_MS)

    def card(self, testid: str) -> Locator:
        return self.sheet.get_by_test_id(testid)


async def nav(page: Page, name: str) -> None:
    await page.get_by_role("navigation", name="Main").get_by_role("link", name=name).click()


def hebrew(text: str) -> bool:
    return re.search(r"[\u0590-\u05FF]", text) is not None


async def workout_deleted(pool: asyncpg.Pool, workout_id: str) -> bool | None:
    return await pool.fetchval("SELECT deleted_at IS NOT NULL FROM workouts WHERE id = $1", uuid.UUID(workout_id))


async def make_workout(pool: asyncpg.Pool, org_id: str, title: str) -> str:
    return str(await pool.fetchval(
        "INSERT INTO workouts (organization_id, title, kind) VALUES ($1, $2, 'freeform') RETURNING id", uuid.UUID(org_id), title))


async def tool_status(pool: asyncpg.Pool, org_id: str, router: str, action: str) -> list[asyncpg.Record]:
    return await pool.fetch(
        """SELECT e.tool_use_id, e.status::text AS status, e.output FROM ai_tool_executions e
             JOIN ai_conversations c ON c.id = e.conversation_id
            WHERE c.organization_id = $1 AND e.router = $2 AND e.action = $3 ORDER BY e.created_at""",
        uuid.UUID(org_id), router, action)


@contextlib.asynccontextmanager
async def slow_answer(sim: Sim, spotter: Spotter, prefix: str, n: int, tokens_per_second: float = 20) -> AsyncIterator[tuple[str, list[str]]]:
    """Ask for an answer of `n` numbered words streamed slowly (20 tokens/s: 40 words take ~4 s);
    yields the question and the words once the first word has shown, while the turn still runs.
    The simulator's speed is global, so it is restored however the block ends."""
    words = numbered_words(prefix, n)
    ask = f"{prefix} please {tag()}"
    await sim.script(ask, {"text": " ".join(words), "tool_uses": []})
    await sim.latency(ttft_ms=200, tokens_per_second=tokens_per_second)
    try:
        await spotter.send(ask)
        await spotter.says(words[0])
        yield ask, words
    finally:
        await sim.latency(ttft_ms=0, tokens_per_second=0)


def numbered_words(prefix: str, n: int) -> list[str]:
    """Words that each occur once, so a replayed or lost delta shows as a count other than 1."""
    return [f"{prefix}{i:02d}" for i in range(1, n + 1)]


async def assert_each_once(locator: Locator, words: list[str]) -> None:
    text = await locator.inner_text()
    counts = {w: len(re.findall(rf"\b{w}\b", text)) for w in words}
    assert all(c == 1 for c in counts.values()), {w: c for w, c in counts.items() if c != 1}
