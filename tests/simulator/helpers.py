"""Shared constants and the `/_sim` control client for simulator tests."""

from __future__ import annotations

from typing import Any

import httpx

from spotter_sim import SimClock

MODEL = "claude-sonnet-5-5"
LEGACY_MODEL = "claude-sonnet-4-6"

DEMO_TOOLS: list[dict[str, Any]] = [
    {
        "name": "read__get_current_context",
        "description": "Who the caller is and which studio they act for.",
        "input_schema": {"type": "object", "properties": {}},
    },
    {
        "name": "read__programs_list",
        "description": "List the studio's programs.",
        "input_schema": {"type": "object", "properties": {}},
    },
    {
        "name": "read__members_search",
        "description": "Search members by name or email.",
        "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
]


class Sim:
    """Thin client for the `/_sim` control API."""

    def __init__(self, base_url: str, clock: SimClock) -> None:
        self.base_url = base_url
        self.clock = clock
        self.http = httpx.Client(base_url=base_url, timeout=10)

    def script(self, responses: list[dict[str, Any]], match: str | None = None, times: int | None = None) -> str:
        r = self.http.post("/_sim/script", json={"match": match, "responses": responses, "times": times})
        r.raise_for_status()
        return r.json()["id"]

    def fault(self, status: int, count: int = 1, **extra: Any) -> str:
        r = self.http.post("/_sim/faults", json={"status": status, "count": count, **extra})
        r.raise_for_status()
        return r.json()["id"]

    def latency(self, ttft_ms: int | None = None, tokens_per_second: float | None = None) -> dict[str, Any]:
        r = self.http.post("/_sim/latency", json={"ttft_ms": ttft_ms, "tokens_per_second": tokens_per_second})
        r.raise_for_status()
        return r.json()

    def requests(self, limit: int | None = None, kind: str = "agent") -> list[dict[str, Any]]:
        params: dict[str, Any] = {"kind": kind}
        if limit:
            params["limit"] = limit
        r = self.http.get("/_sim/requests", params=params)
        r.raise_for_status()
        return r.json()["requests"]

    def reset(self) -> None:
        self.http.post("/_sim/reset").raise_for_status()
