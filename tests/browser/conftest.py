"""Browser tests: Debian's chromium driven by Playwright for Python against the running platform.

One browser per session; a fresh context (cookies, localStorage) and a fresh studio per test. A
signed-in page gets its token and studio through localStorage before the app's first script runs,
as the development sign-in page would leave them. Screenshots of the states a test names, and of
every failure, go to tests/browser/artifacts/ (or $SPOTTER_TEST_ARTIFACTS)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import httpx
import pytest
from playwright.async_api import Browser, BrowserContext, Page, async_playwright, expect

from spotter_shared.studio import Person
from tests.e2e.client import Sim, token_for
from tests.factories import Studio, make_studio
from tests.platform import Platform

CHROMIUM = "/usr/bin/chromium"
# As root in a container, without a GPU, on a machine whose network reaches nothing: no sandbox, no
# GPU process, and none of the background requests chromium makes to its own servers.
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
ARTIFACTS = Path(os.environ.get("SPOTTER_TEST_ARTIFACTS") or Path(__file__).parent / "artifacts")
_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # noqa: ARG001
    report = yield
    item.stash.setdefault(_REPORTS, {})[report.when] = report
    return report


def _failed(item: pytest.Item) -> bool:
    return any(r.failed for r in item.stash.get(_REPORTS, {}).values())


class Shots:
    """Screenshots named after the test: `<test>--<state>.png`."""

    def __init__(self, item: pytest.Item) -> None:
        self.prefix = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.name)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        for old in ARTIFACTS.glob(f"{self.prefix}--*.png"):  # a previous run's, failure shots included
            old.unlink()

    def path(self, state: str) -> Path:
        return ARTIFACTS / f"{self.prefix}--{state}.png"

    async def take(self, page: Page, state: str) -> Path:
        path = self.path(state)
        await page.screenshot(path=path, full_page=False)
        return path


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Browser]:
    # A loaded 2-core machine runs five services, a simulator and chromium: 5 s is tight for a page's first paint.
    expect.set_options(timeout=10_000)
    async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        await b.close()


@pytest.fixture
def viewport() -> dict[str, int]:
    """Overridden by phone tests (`@pytest.mark.parametrize("viewport", [PHONE], indirect=True)` or a local fixture)."""
    return DESKTOP


@pytest.fixture
async def context(browser: Browser, viewport: dict[str, int]) -> AsyncIterator[BrowserContext]:
    ctx = await browser.new_context(viewport=viewport, locale="en-US", timezone_id="UTC")
    ctx.set_default_timeout(10_000)
    yield ctx
    await ctx.close()


@pytest.fixture
async def page(context: BrowserContext, request: pytest.FixtureRequest, shots: Shots) -> AsyncIterator[Page]:
    p = await context.new_page()
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    yield p
    if _failed(request.node):
        await shots.take(p, "failure")
        if errors:
            print("page errors:", *errors, sep="\n  ")


@pytest.fixture
def shots(request: pytest.FixtureRequest) -> Shots:
    return Shots(request.node)


@pytest.fixture
async def studio(pool: asyncpg.Pool) -> Studio:
    return await make_studio(pool)


@pytest.fixture
async def sim(platform: Platform) -> AsyncIterator[Sim]:
    async with httpx.AsyncClient(base_url=platform.sim_url, timeout=10) as client:
        yield Sim(client)


async def sign_in(context: BrowserContext, person: Person, org_id: str) -> None:
    """What the sign-in page leaves behind: the bearer token and the chosen studio in localStorage."""
    values = {"spotter.token": token_for(person.user_id), "spotter.org": org_id}
    await context.add_init_script(
        f"""(() => {{ try {{
              for (const [k, v] of Object.entries({json.dumps(values)})) if (localStorage.getItem(k) === null) localStorage.setItem(k, v);
            }} catch (e) {{}} }})();"""
    )


@pytest.fixture
async def owner_page(page: Page, context: BrowserContext, studio: Studio, platform: Platform) -> Page:
    """The studio's owner, signed in, on the app's home page with the shell shown."""
    await sign_in(context, studio.owner, studio.org.id)
    await page.goto(platform.base_url + "/")
    return page
