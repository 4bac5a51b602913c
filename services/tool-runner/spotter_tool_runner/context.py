"""What a tool handler may use: the execution's connection and transaction, the caller, the org, rag's
hybrid search, and where it notes the indexed entities it changed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Any
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


# The org's columns as ToolContext.known_org reads them, from `organizations o`.
ORG_COLUMNS = "o.id AS org_id, o.name AS org_name, o.tier::text AS org_tier, o.locale AS org_locale, o.timezone AS org_timezone"


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
            self.known_org(await self.conn.fetchrow(f"SELECT {ORG_COLUMNS} FROM organizations o WHERE o.id = $1",
                                                    self.actor.organization_id))
        return self.known_org(None)

    def known_org(self, row: Mapping[str, Any] | None) -> OrgInfo:
        """The org as a row with `ORG_COLUMNS` read it (a tool's own statement may select them with what
        else it reads): kept for the rest of the call. LookupError when there is neither row nor org."""
        if self._org is None:
            if row is None:
                raise LookupError("organization of the actor does not exist")
            self._org = OrgInfo(id=str(row["org_id"]), name=row["org_name"], tier=row["org_tier"],
                                locale=row["org_locale"], timezone=row["org_timezone"])
        return self._org
