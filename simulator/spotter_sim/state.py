"""Mutable simulator state shared by all routes (one instance per app)."""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from .cache import PromptCache
from .clock import SimClock
from .config import SimConfig
from .faults import FaultStore
from .policy import ScriptStore


@dataclass
class Latency:
    ttft_ms: int
    tokens_per_second: float

    def per_tokens(self, tokens: int) -> float:
        """Seconds to emit `tokens` at the configured rate."""
        return tokens / self.tokens_per_second if self.tokens_per_second > 0 else 0.0


class RequestLog:
    """The last N requests with their verdicts, oldest first."""

    def __init__(self, maxlen: int) -> None:
        self._entries: deque[dict[str, Any]] = deque(maxlen=maxlen)
        self._seq = itertools.count(1)

    def record(self, entry: dict[str, Any]) -> dict[str, Any]:
        entry = {"seq": next(self._seq), **entry}
        self._entries.append(entry)
        return entry  # callers may keep filling it in

    def list(self, limit: int | None = None, kind: str | None = None) -> list[dict[str, Any]]:
        entries = [e for e in self._entries if kind is None or (e.get("kind") or "agent") == kind]
        return entries[-limit:] if limit else entries

    def clear(self) -> None:
        self._entries.clear()


@dataclass
class SimState:
    config: SimConfig
    clock: SimClock
    latency: Latency
    cache: PromptCache
    log: RequestLog
    scripts: ScriptStore = field(default_factory=ScriptStore)
    faults: FaultStore = field(default_factory=FaultStore)

    @classmethod
    def create(cls, config: SimConfig, clock: SimClock | None = None) -> SimState:
        clock = clock or SimClock()
        return cls(
            config=config,
            clock=clock,
            latency=Latency(config.ttft_ms, config.tokens_per_second),
            cache=PromptCache(clock),
            log=RequestLog(config.max_requests_logged),
        )

    def reset(self) -> None:
        self.scripts.clear()
        self.faults.clear()
        self.log.clear()
        self.cache.clear()
        self.latency = Latency(self.config.ttft_ms, self.config.tokens_per_second)
