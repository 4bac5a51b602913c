"""Phone width (390 × 844): the sheet takes the whole width and the composer is usable."""

from __future__ import annotations

import pytest
from playwright.async_api import Page, expect

from tests.e2e.client import Sim

from .conftest import PHONE, Shots
from .ui import Spotter, tag


@pytest.fixture
def viewport() -> dict[str, int]:
    return PHONE


async def test_the_sheet_is_full_width_and_the_composer_works_on_a_phone(owner_page: Page, sim: Sim, shots: Shots) -> None:
    ask = f"hello from my phone {tag()}"
    await sim.script(ask, {"text": "Hi! Ready when you are.", "tool_uses": []})
    spotter = Spotter(owner_page)
    await shots.take(owner_page, "phone-shell")
    await spotter.open()
    # Once it has slid in, the sheet covers the whole width.
    await owner_page.wait_for_function(
        """() => { const r = document.querySelector('[data-testid="agent-sheet"]').getBoundingClientRect();
                   return Math.abs(r.left) <= 1 && Math.abs(r.width - innerWidth) <= 1 && r.top <= 1 }""")
    composer = await spotter.composer.bounding_box()
    assert composer is not None and composer["y"] + composer["height"] <= PHONE["height"], composer
    assert composer["width"] >= PHONE["width"] * 0.6, composer

    await spotter.send(ask)
    await spotter.says("Ready when you are.")
    await spotter.idle()
    await expect(spotter.composer).to_be_editable()
    await shots.take(owner_page, "phone-sheet")
