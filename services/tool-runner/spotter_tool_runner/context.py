"""What a tool handler may use: the execution's connection and transaction, the caller, the org, rag's
hybrid search, and where it notes the indexed entities it changed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import asyncpg

from spotter_shared.contracts.commands import Actor
from spotter_shared.contracts.rag import Scope, SearchQuery, SearchResult

# Rag's hybrid search (lexical + semantic, any language), as a tool may ask it. It may raise anything (rag down,
# slow, or refusing): a tool that asks has its own answer without it.
Search = Callable[[SearchQuery], Awaitable[SearchResult]]


@dataclass(frozen=True)
class OrgInfo:
    id: str
    name: str
    tier: str
    locale: str
    timezone: str

    @property
    def tz(self) -> tzinfo:
        try:
            return ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            return ZoneInfo("UTC")


@dataclass
class ToolContext:
    """`conn` is inside the execution's transaction: whatever a handler writes commits together with
    the execution record and its audit row, or not at all.

    `search` is rag's hybrid search, or None where there is none (the runner without rag, unit tests).
    `touched` collects the ids of indexed entities (programs, workouts) the call writes, by scope; the
    runner announces them to rag once the transaction has committed, and forgets them if it rolls back."""

    conn: asyncpg.Connection
    actor: Actor
    conversation_id: str
    tool_use_id: str
    trace_id: str
    now: datetime
    search: Search | None = field(default=None, repr=False)
    touched: dict[Scope, set[str]] = field(default_factory=dict)
    _org: OrgInfo | None = field(default=None, repr=False)

    def touch(self, scope: Scope, *ids: object) -> None:
        """Note that these entities were created, changed or deleted by this call."""
        self.touched.setdefault(scope, set()).update(str(i) for i in ids)

    @property
    def organization_id(self) -> str:
        return self.actor.organization_id

    async def org(self) -> OrgInfo:
        if self._org is None:
            row = await self.conn.fetchrow(
                "SELECT id, name, tier::text AS tier, locale, timezone FROM organizations WHERE id = $1",
                self.actor.organization_id,
            )
            if row is None:
                raise LookupError("organization of the actor does not exist")
            self._org = OrgInfo(
                id=str(row["id"]), name=row["name"], tier=row["tier"], locale=row["locale"], timezone=row["timezone"]
            )
        return self._org
