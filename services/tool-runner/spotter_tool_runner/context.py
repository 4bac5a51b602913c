"""What a tool handler may use: the execution's connection and transaction, the caller, and the org."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import asyncpg

from spotter_shared.contracts.commands import Actor


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
    the execution record and its audit row, or not at all."""

    conn: asyncpg.Connection
    actor: Actor
    conversation_id: str
    tool_use_id: str
    trace_id: str
    now: datetime
    _org: OrgInfo | None = field(default=None, repr=False)

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
