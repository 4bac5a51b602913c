"""A tool pack in the studio's chat (seed 002): a call a studio rule holds shows the rule's message on its
confirmation card, runs once when approved, and its card then shows what the external API answered."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.async_api import Page, expect

from tests.cli.test_org import spotter as spotter_cli
from tests.e2e.client import Sim
from tests.factories import Studio
from tests.petstore import PETSTORE_SPEC, Petstore
from tests.platform import Platform

from .conftest import Shots
from .ui import TURN_TIMEOUT_MS, Spotter, tag, tool

RULES = """
rules:
  - name: sold_pets_need_a_yes
    condition: 'tool.operationId == "findPetsByStatus" && has(params.status) && "sold" in params.status'
    action: require_confirmation
    message: Listing sold pets shows who bought them; confirm first.
"""


@pytest.fixture
def store() -> Iterator[Petstore]:
    with Petstore(api_key="browser-key") as served:
        yield served


async def test_a_rules_confirmation_shows_its_reason_and_runs_once(
    owner_page: Page, studio: Studio, platform: Platform, sim: Sim, store: Petstore, shots: Shots, tmp_path: Path,
) -> None:
    pack = f"pets{uuid.uuid4().hex[:6]}"
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    added = await spotter_cli(platform.env["DATABASE_URL"], "packs", "add", pack, "--spec", str(PETSTORE_SPEC),
                              "--base-url", store.base_url, "--org", studio.org.slug, "--header", "api_key: browser-key",
                              "--org-rules", str(rules))
    assert added.code == 0, added.err
    ask = f"which pets were sold {tag()}"
    await sim.script(ask, {"text": "Checking the pet shop.", "tool_uses": [tool(f"{pack}__findPetsByStatus", status=["sold"])]},
                     {"text": "Bubbles was sold.", "tool_uses": []})
    chat = Spotter(owner_page)
    await chat.open()
    await chat.send(ask)

    confirm = chat.card("confirm-card")
    await expect(confirm).to_be_visible(timeout=TURN_TIMEOUT_MS)
    await expect(confirm.get_by_test_id("confirm-reason")).to_have_text("Listing sold pets shows who bought them; confirm first.")
    await expect(chat.card("tool-card")).to_have_count(0)  # the started call became the question
    await shots.take(owner_page, "rule-confirm")
    assert store.count("GET", "/pet/findByStatus") == 0

    await confirm.get_by_role("button", name="Approve").click()
    await chat.says("Bubbles was sold.")
    await chat.idle()
    await expect(chat.card("tool-card")).to_be_visible()
    await shots.take(owner_page, "rule-approved")
    assert store.count("GET", "/pet/findByStatus") == 1
    assert (await spotter_cli(platform.env["DATABASE_URL"], "packs", "remove", pack)).code == 0
