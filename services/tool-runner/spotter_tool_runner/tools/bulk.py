"""Bulk operations bound to what was previewed (SPEC decision 17).

`bulk_preview` is a dry run: it selects the rows a bulk action would touch and returns them with a
`selectionToken`, a digest of exactly those rows (ids and last change). `bulk_delete` and
`bulk_publish` take the same selection plus that token; they select again with the rows locked and
refuse, changing nothing, when the digest differs — a row was added, removed or edited since the
preview the person approved. Since the token is part of the approved input, what was approved is
what runs.

Declares no tool, so `Registry.register_module` finds nothing here."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import asyncpg
from pydantic import Field

from ..declaration import ToolFailure, ToolInput, ToolOutput

PREVIEW_LIMIT = 50


class SelectionToken(ToolInput):
    """Mixin for bulk_delete / bulk_publish inputs: the token bulk_preview returned."""

    selection_token: str = Field(
        min_length=16, max_length=128,
        description="selectionToken from the bulk_preview of this same selection; the action refuses if "
        "the selection changed since.",
    )


class Preview(ToolOutput):
    count: int = Field(description="How many rows the bulk action would touch.")
    items: list[dict[str, Any]] = Field(description=f"The first {PREVIEW_LIMIT} of them.")
    truncated: bool = Field(description="True when there are more than the items listed.")
    selection_token: str = Field(description="Pass it to the bulk action for exactly this selection.")


def token_of(rows: Sequence[asyncpg.Record | dict[str, Any]]) -> str:
    """Digest of a selection: each row's id and updated_at, in id order."""
    parts = sorted(f"{row['id']}@{row['updated_at'].isoformat() if row['updated_at'] else ''}" for row in rows)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def preview(rows: Sequence[asyncpg.Record], item: Any) -> Preview:
    """`item(row)` is what the model sees of each row (compact: ids and labels)."""
    return Preview(
        count=len(rows), items=[item(row) for row in rows[:PREVIEW_LIMIT]],
        truncated=len(rows) > PREVIEW_LIMIT, selection_token=token_of(rows),
    )


def require_unchanged(rows: Sequence[asyncpg.Record], token: str, router: str) -> None:
    """Refuse a bulk action whose selection (selected again, rows locked) is not what was previewed."""
    if not rows:
        raise ToolFailure("empty_selection", "Nothing matches this selection any more; nothing was changed.",
                          hint="Tell the user; preview again if they still want it.")
    if token_of(rows) != token:
        raise ToolFailure(
            "selection_changed",
            f"The selection changed since it was previewed (now {len(rows)} rows); nothing was changed.",
            hint=f"Run {router}__bulk_preview again, show the user the new selection and ask again.",
        )
