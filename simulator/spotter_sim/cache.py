"""Prompt-cache bookkeeping that mirrors the real API's prefix caching.

Each cache_control breakpoint names a prefix (every block up to and including
it). A request reads the longest cached, unexpired breakpoint prefix and writes
every later breakpoint; the tokens between consecutive boundaries are billed
to the TTL bucket of the breakpoint that closes them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from .clock import SimClock
from .tokens import PromptBlock, canonical_json

TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


@dataclass
class CacheEntry:
    tokens: int
    ttl: str
    expires_at: float


@dataclass(frozen=True)
class CacheUsage:
    input_tokens: int
    cache_read_input_tokens: int
    ephemeral_5m_input_tokens: int
    ephemeral_1h_input_tokens: int

    @property
    def cache_creation_input_tokens(self) -> int:
        return self.ephemeral_5m_input_tokens + self.ephemeral_1h_input_tokens

    @property
    def total_input_tokens(self) -> int:
        return self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens

    def as_usage(self, output_tokens: int) -> dict[str, Any]:
        """The `usage` object of a Message."""
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.ephemeral_5m_input_tokens,
                "ephemeral_1h_input_tokens": self.ephemeral_1h_input_tokens,
            },
            "output_tokens": output_tokens,
            "service_tier": "standard",
        }


@dataclass(frozen=True)
class _Breakpoint:
    key: tuple[str, str]
    tokens: int  # cumulative tokens of the prefix it closes
    ttl: str


class PromptCache:
    def __init__(self, clock: SimClock) -> None:
        self._clock = clock
        self._entries: dict[tuple[str, str], CacheEntry] = {}

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def account(self, model: str, blocks: list[PromptBlock], min_tokens: int) -> CacheUsage:
        """Bill one request: read the best cached prefix, write the later breakpoints."""
        now = self._clock.now()
        self._evict_expired(now)
        breakpoints, total = _breakpoints(model, blocks)
        # Prefixes below the model's minimum are silently not cached.
        eligible = [bp for bp in breakpoints if bp.tokens >= min_tokens]

        boundary = 0
        read = 0
        first_write = 0
        for i in range(len(eligible) - 1, -1, -1):
            entry = self._entries.get(eligible[i].key)
            if entry is not None:
                entry.ttl = _longer(entry.ttl, eligible[i].ttl)
                entry.expires_at = now + TTL_SECONDS[entry.ttl]  # reads refresh the TTL
                read = boundary = entry.tokens
                first_write = i + 1
                break

        written = {"5m": 0, "1h": 0}
        for bp in eligible[first_write:]:
            written[bp.ttl] += bp.tokens - boundary
            boundary = bp.tokens
            self._entries[bp.key] = CacheEntry(bp.tokens, bp.ttl, now + TTL_SECONDS[bp.ttl])

        return CacheUsage(
            input_tokens=total - boundary,
            cache_read_input_tokens=read,
            ephemeral_5m_input_tokens=written["5m"],
            ephemeral_1h_input_tokens=written["1h"],
        )

    def _evict_expired(self, now: float) -> None:
        for key in [k for k, e in self._entries.items() if e.expires_at <= now]:
            del self._entries[key]


def _breakpoints(model: str, blocks: list[PromptBlock]) -> tuple[list[_Breakpoint], int]:
    digest = hashlib.sha256()
    total = 0
    found: list[_Breakpoint] = []
    for block in blocks:
        digest.update(canonical_json(block.payload).encode())
        digest.update(b"\x1e")  # record separator keeps block boundaries distinct
        total += block.tokens
        if block.cache_control is not None:
            ttl = block.cache_control.get("ttl") or "5m"
            found.append(_Breakpoint((model, digest.hexdigest()), total, ttl))
    return found, total


def _longer(a: str, b: str) -> str:
    return a if TTL_SECONDS[a] >= TTL_SECONDS[b] else b
