from __future__ import annotations

from typing import Literal

from pydantic import Field

from spotter_shared.settings import CommonSettings


class OrchestratorSettings(CommonSettings):
    anthropic_api_key: str | None = None
    anthropic_base_url: str | None = None
    spotter_model: str = "claude-sonnet-5-5"
    # Summaries (compaction) and titles; priced in billing's rate card like every configured model.
    spotter_summary_model: str = "claude-haiku-5-5"
    spotter_summary_budget_s: float = 3.0  # seed 000: a compaction summary gets 3 s
    spotter_title_budget_s: float = 1.5  # seed 000: a title gets 1.5 s, best effort
    spotter_compact_at: int = 24  # messages past the latest system_note anchor
    spotter_compact_keep: int = 6  # kept verbatim
    spotter_embed_timeout_s: float = 1.0  # a summary's embedding (best effort)
    # Where the per-turn context goes: "cached" = in the newest user turn, after the history (SPEC
    # decision 15); "seed" = seed 000's third system block, kept only for the benchmark's comparison.
    spotter_prompt_layout: Literal["cached", "seed"] = "cached"
    spotter_max_tokens: int = 4096
    # Streamed text is stored and published in batches at most this often (the first at once). Each
    # batch costs ~1 ms of CPU across the platform; 40 ms made a plain turn's CPU 32 ms, 100 ms 25 ms.
    spotter_delta_flush_ms: int = Field(100, ge=0, le=1000)
    # Seed 003's member coach: its model and the initializer's (both priced in billing's rate card).
    spotter_coach_model: str = "claude-haiku-5-5"
    spotter_coach_initializer_model: str = "claude-haiku-5-5"
    spotter_coach_max_tokens: int = 8192
    spotter_max_turns: int = 6  # model round trips per controller call (seed 000 MAX_TURNS)
    spotter_rag_budget_ms: int = 800
    spotter_tool_timeout_s: float = 30.0
    spotter_provider_retries: int = 2
    spotter_turn_concurrency: int = 32
    # Commands a replica takes beyond its turn slots (per command subject), waiting with heartbeats.
    # 0: a replica whose slots are full leaves new commands in JetStream for one that has room. With 4,
    # one of two replicas took 36 of 50 long turns and 4 of them waited over a minute for its slots
    # while the other replica had 18 free (tests/replicas, rolling restart).
    spotter_turn_prefetch: int = 0
    # A crashed replica's command is redelivered after this; live work sends in-progress acks.
    spotter_ack_wait_s: float = 10.0
    spotter_turn_lock_ttl_s: float = 45.0
    # A command delivered this many times without finishing is ended with `internal` (poison guard).
    spotter_max_deliveries: int = 5
    # Seed 004: a running human session with nothing recorded for this long is abandoned (the tab
    # was closed); the sweep looks every spotter_human_session_sweep_s.
    spotter_human_session_idle_s: float = 12 * 3600
    spotter_human_session_sweep_s: float = 300

    @property
    def model_configured(self) -> bool:
        return bool(self.anthropic_api_key or self.anthropic_base_url)
