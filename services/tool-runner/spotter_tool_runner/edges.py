"""What the tool-runner sends on the bus, declared at module level so the AsyncAPI document shows every
edge: its announcements of changed programs and workouts to rag's indexer, the hybrid searches its
read tools ask of rag, and the news that the tool packs changed (for the orchestrators' catalogs)."""

from __future__ import annotations

from faststream.nats import NatsRouter

from spotter_shared import bus
from spotter_shared.contracts.rag import ENTITIES_CHANGED, HYBRID_SEARCH
from spotter_shared.contracts.tools import TOOLS_CHANGED

router = NatsRouter()

entities_changed = bus.publisher(router, ENTITIES_CHANGED)
hybrid_search = bus.requester(router, HYBRID_SEARCH)
tools_changed = bus.publisher(router, TOOLS_CHANGED)
