"""Runtime configuration, read from `SPOTTER_SIM_*` environment variables."""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict


class SimConfig(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SPOTTER_SIM_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = 8090
    # Delay before the first content block (time to first token).
    ttft_ms: int = 0
    # Output pacing; 0 streams as fast as possible.
    tokens_per_second: float = 0.0
    max_requests_logged: int = 1000
    # Smallest prefix (in tokens) that may be cached, by model-name prefix; the
    # longest matching prefix wins, otherwise `min_cache_tokens_default` applies.
    min_cache_tokens: dict[str, int] = {
        "claude-sonnet-5-5": 512,
        "claude-haiku": 4096,
    }
    min_cache_tokens_default: int = 1024
    # Key for the HMAC that signs emitted thinking blocks.
    thinking_secret: str = "spotter-sim-thinking"
    log_level: str = "warning"

    def min_cacheable_tokens(self, model: str) -> int:
        best: tuple[int, int] | None = None  # (prefix length, minimum)
        for prefix, minimum in self.min_cache_tokens.items():
            if model.startswith(prefix) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), minimum)
        return best[1] if best else self.min_cache_tokens_default
