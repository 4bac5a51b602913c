from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import field_validator
from pydantic_settings import NoDecode

from spotter_shared.settings import AuthSettings


class GatewaySettings(AuthSettings):
    spotter_http_host: str = "127.0.0.1"
    spotter_http_port: int = 8080
    spotter_max_message_chars: int = 16000
    spotter_max_body_bytes: int = 256 * 1024
    # The orchestrator's lease; the gateway claims it before publishing a send.
    spotter_turn_lock_ttl_s: float = 45.0
    # A stream with no event for this long ends with `internal` (the turn may still finish; resume).
    spotter_stream_idle_timeout_s: float = 120.0
    spotter_sse_ping_s: float = 15.0
    # Conversation search asks rag for the query's embedding for this long, then goes lexical only.
    spotter_search_embed_timeout_s: float = 0.5
    # Turn-starting requests (send, confirm, pick, undo) per user and per organization, sliding window.
    spotter_rate_limit_user: str = "60/minute"
    spotter_rate_limit_org: str = "600/minute"
    # Development sign-in (GET /dev/users, POST /dev/sign-in) offers the people of these studios
    # (slugs); it is refused outright when spotter_env is production.
    spotter_dev_signin_orgs: Annotated[list[str], NoDecode] = ["demo-gym", "other-gym"]
    # The built web app (index.html + assets/); default: the package's web/dist, where `make bootstrap` builds it.
    spotter_web_dist: Path | None = None

    @field_validator("spotter_dev_signin_orgs", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        # SPOTTER_DEV_SIGNIN_ORGS=demo-gym,other-gym
        if isinstance(value, str):
            return [slug.strip() for slug in value.split(",") if slug.strip()]
        return value
