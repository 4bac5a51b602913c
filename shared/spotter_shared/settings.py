"""Settings shared by every service. Each service subclasses CommonSettings; none reads os.environ."""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEV_JWT_SECRET = "spotter-development-secret-change-me-0123456789"


class CommonSettings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", case_sensitive=False)

    spotter_env: Literal["development", "test", "production"] = "development"
    nats_url: str = "nats://127.0.0.1:4222"
    database_url: str = "postgresql://spotter@127.0.0.1:5432/spotter"
    redis_url: str = "redis://127.0.0.1:6379/0"
    spotter_log_level: str = "INFO"
    # Prometheus metrics of a NATS service on this port (0: off); the gateway serves /metrics itself.
    spotter_metrics_port: int = 0
    # How often the gauges of shared state (consumer lag, budget holds) are sampled while served.
    spotter_metrics_sample_s: float = 15.0
    spotter_db_pool_max: int = 10
    # Redis connections per process; a request for one waits (5 s) while all are in use.
    spotter_redis_max_connections: int = 200
    # JetStream stream replicas: 1 on a single server, 3 on a production cluster (survives a node).
    spotter_jetstream_replicas: int = 1


class AuthSettings(CommonSettings):
    spotter_jwt_secret: str = DEV_JWT_SECRET
    spotter_jwt_issuer: str = "spotter-dev"
    spotter_jwks_url: str | None = None
    spotter_jwt_audience: str | None = None

    @model_validator(mode="after")
    def _refuse_dev_secret_in_production(self) -> "AuthSettings":
        # Same rule as full-stack-fastapi-template: a placeholder secret never reaches production.
        if self.spotter_env == "production" and not self.spotter_jwks_url and self.spotter_jwt_secret == DEV_JWT_SECRET:
            raise ValueError("production needs SPOTTER_JWKS_URL or a real SPOTTER_JWT_SECRET")
        return self
