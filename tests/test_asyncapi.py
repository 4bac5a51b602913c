"""The committed AsyncAPI document must match what the services generate."""

from __future__ import annotations

from pathlib import Path

from spotter_cli.asyncapi import DOC_PATH, build, edges, render
from spotter_cli.docs import README
from spotter_cli.docs import render as render_readme
from spotter_shared.contracts import CATALOG

ROOT = Path(__file__).resolve().parents[1]


def test_committed_asyncapi_is_current() -> None:
    committed = (ROOT / DOC_PATH).read_text()
    assert committed == render(), "deploy/asyncapi.json is stale: run `.venv/bin/spotter asyncapi`"


def test_every_catalog_subject_is_documented() -> None:
    doc = build()
    documented = {channel["address"] for channel in doc["channels"].values()}
    assert {ep.subject for ep in CATALOG} <= documented


def test_every_subject_has_a_declared_sender_and_receiver() -> None:
    lonely = [(e.subject, e.senders, e.receivers) for e in edges() if not e.senders or not e.receivers]
    assert not lonely, f"subjects nobody declares sending or receiving: {lonely}"


def test_readme_tables_match_the_code() -> None:
    readme = (ROOT / README).read_text()
    assert render_readme(readme) == readme, "README's generated tables are stale: run `.venv/bin/spotter docs`"
