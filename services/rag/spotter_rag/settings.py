from __future__ import annotations

from pydantic import Field, SecretStr

from spotter_shared.settings import CommonSettings


class RagSettings(CommonSettings):
    # Below the orchestrator's 800 ms budget for the whole request, leaving room for the round trip.
    rag_search_budget_ms: int = Field(default=600, gt=0, lt=800)
    # How long ambient waits for the query's embedding (from its start) before answering with the
    # lexical half alone: on a loaded rag, a turn does not queue behind other turns' embeddings.
    rag_semantic_wait_ms: int = Field(default=150, gt=0, lt=800)
    rag_statement_timeout_ms: int = Field(default=450, gt=0, lt=800)
    # HYBRID_SEARCH for the read tools: a person asked for it, so it may take longer than ambient.
    rag_tool_search_budget_ms: int = Field(default=2000, gt=0, le=30000)
    # pgvector HNSW ef_search (PITFALLS: recall@10 0.975 at 40 over 100k × 384).
    rag_hnsw_ef_search: int = Field(default=40, ge=10, le=1000)

    # e5 lanes for queries, a thread each on one shared engine; 0: one per CPU this process may use (its
    # cgroup's CPU quota, rounded up, or its CPU affinity).
    rag_query_lanes: int = Field(default=0, ge=0, le=64)

    # Voyage voyage-multilingual-2 when a key is set (env VOYAGE_API_KEY); the bundled e5 otherwise.
    voyage_api_key: SecretStr | None = None
    voyage_url: str = "https://api.voyageai.com/v1/embeddings"
    voyage_timeout_s: float = Field(default=10.0, gt=0, le=120)

    # Embedding memo: Redis in front (raw float32), ai_cache behind for passages (base64), both expiring.
    rag_embed_redis_ttl_s: int = Field(default=30 * 24 * 3600, ge=60, le=365 * 24 * 3600)
    rag_embed_db_ttl_days: int = Field(default=90, ge=1, le=3650)

    # Indexing: passages per embedding call, entities per sweep round and scope, seconds between
    # sweeps (0: no periodic sweep, e.g. a test that drives the indexer itself).
    rag_embed_batch: int = Field(default=32, ge=1, le=32)
    rag_sweep_batch: int = Field(default=256, ge=1, le=5000)
    rag_sweep_interval_s: float = Field(default=30.0, ge=0, le=24 * 3600)

    # ENTITIES_CHANGED consumer: ack wait (in-progress acks keep long work alive) and the delivery
    # count after which an announcement is parked on the dead-letter subject.
    rag_ack_wait_s: float = Field(default=30.0, gt=0, le=600)
    rag_max_deliveries: int = Field(default=5, ge=1, le=100)
