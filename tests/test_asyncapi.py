"""The committed AsyncAPI document must match what the services generate."""

from __future__ import annotations

from pathlib import Path

from spotter_cli.asyncapi import DOC_PATH, build, render
from spotter_shared.contracts import CATALOG

ROOT = Path(__file__).resolve().parents[1]


def test_committed_asyncapi_is_current() -> None:
    committed = (ROOT / DOC_PATH).read_text()
    assert committed == render(), "deploy/asyncapi.json is stale: run `.venv/bin/spotter asyncapi`"


def test_every_catalog_subject_is_documented() -> None:
    doc = build()
    documented = {channel["address"] for channel in doc["channels"].values()}
    assert {ep.subject for ep in CATALOG} <= documented
