"""Rag as the tool-runner's core sees it, over the declared edges (edges.py): the hybrid search the read
tools ask, with a short deadline, and the durable announcements of entities a call changed."""

from __future__ import annotations

import asyncio

from spotter_shared import bus
from spotter_shared.contracts.rag import EntitiesChanged, SearchQuery, SearchResult

from . import edges


class Rag:
    def __init__(self, *, search_timeout_s: float, announce_timeout_s: float) -> None:
        self._search_timeout_s = search_timeout_s
        self._announce_timeout_s = announce_timeout_s

    async def search(self, query: SearchQuery, *, trace_id: str) -> SearchResult:
        """Raises TimeoutError past the deadline, NoRespondersError without rag, RemoteError on its refusal."""
        async with asyncio.timeout(self._search_timeout_s):
            return await edges.hybrid_search(query, timeout=self._search_timeout_s, trace_id=trace_id)

    async def announce(self, changed: EntitiesChanged, *, msg_id: str, trace_id: str) -> None:
        """Stored on rag's stream once JetStream acknowledges it; a second publish of `msg_id` is dropped."""
        async with asyncio.timeout(self._announce_timeout_s):
            await bus.publish(
                edges.entities_changed, changed, headers=bus.publish_headers(msg_id=msg_id, trace_id=trace_id)
            )
