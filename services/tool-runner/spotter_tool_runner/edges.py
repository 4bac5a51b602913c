"""What the tool-runner sends on the bus, declared at module level so the AsyncAPI document shows every
edge: its announcements of changed programs and workouts to rag's indexer, and the hybrid searches its
read tools ask of rag."""

from __future__ import annotations

from faststream.nats import NatsRouter

from spotter_shared import bus
from spotter_shared.contracts.rag import ENTITIES_CHANGED, HYBRID_SEARCH

router = NatsRouter()

entities_changed = bus.publisher(router, ENTITIES_CHANGED)
hybrid_search = bus.requester(router, HYBRID_SEARCH)
