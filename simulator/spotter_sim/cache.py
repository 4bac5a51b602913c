"""Prompt-cache bookkeeping that mirrors the real API's prefix caching.

Each cache_control breakpoint names a prefix (every block up to and including
it). A request reads the longest cached, unexpired prefix that one of its
breakpoints reaches — the breakpoint's own, or one ending at any of the
LOOKBACK_BLOCKS block boundaries before it (the real API's automatic prefix
check) — and writes every later breakpoint; the tokens between consecutive
boundaries are billed to the TTL bucket of the breakpoint that closes them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from .clock import SimClock
from .tokens import PromptBlock, canonical_json

TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
# How many block boundaries before each breakpoint the API also checks for a cached prefix
# (Anthropic's prompt-caching guide: "approximately 20 blocks").
LOOKBACK_BLOCKS = 20


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
class _Boundary:
    """The prefix that ends after one block: its key and cumulative tokens."""

    key: tuple[str, str]
    tokens: int
    ttl: str | None  # the block's breakpoint TTL, None when it carries no cache_control


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
        boundaries = _boundaries(model, blocks)
        total = boundaries[-1].tokens if boundaries else 0
        # Prefixes below the model's minimum are silently not cached.
        eligible = [i for i, b in enumerate(boundaries) if b.ttl is not None and b.tokens >= min_tokens]

        hit = self._lookup(boundaries, eligible)
        read = boundary = 0
        if hit is not None:
            position, entry, ttl = hit
            entry.ttl = _longer(entry.ttl, ttl)
            entry.expires_at = now + TTL_SECONDS[entry.ttl]  # reads refresh the TTL
            read = boundary = entry.tokens

        written = {"5m": 0, "1h": 0}
        for i in eligible:
            bp = boundaries[i]
            if bp.tokens <= boundary:
                continue
            assert bp.ttl is not None
            written[bp.ttl] += bp.tokens - boundary
            boundary = bp.tokens
            self._entries[bp.key] = CacheEntry(bp.tokens, bp.ttl, now + TTL_SECONDS[bp.ttl])

        return CacheUsage(
            input_tokens=total - boundary,
            cache_read_input_tokens=read,
            ephemeral_5m_input_tokens=written["5m"],
            ephemeral_1h_input_tokens=written["1h"],
        )

    def _lookup(self, boundaries: list[_Boundary], eligible: list[int]) -> tuple[int, CacheEntry, str] | None:
        """The longest cached prefix a breakpoint can reach: its own, or one ending at an earlier
        block boundary within LOOKBACK_BLOCKS of it (the API checks those automatically, which is
        what lets a conversation whose tail marker moves on re-read the previous call's prefix)."""
        for i in reversed(eligible):
            ttl = boundaries[i].ttl
            assert ttl is not None
            for j in range(i, max(-1, i - LOOKBACK_BLOCKS - 1), -1):
                entry = self._entries.get(boundaries[j].key)
                if entry is not None:
                    return j, entry, ttl
        return None

    def _evict_expired(self, now: float) -> None:
        for key in [k for k, e in self._entries.items() if e.expires_at <= now]:
            del self._entries[key]


def _boundaries(model: str, blocks: list[PromptBlock]) -> list[_Boundary]:
    digest = hashlib.sha256()
    total = 0
    found: list[_Boundary] = []
    for block in blocks:
        digest.update(canonical_json(block.payload).encode())
        digest.update(b"\x1e")  # record separator keeps block boundaries distinct
        total += block.tokens
        ttl = (block.cache_control.get("ttl") or "5m") if block.cache_control is not None else None
        found.append(_Boundary((model, digest.hexdigest()), total, ttl))
    return found


def _longer(a: str, b: str) -> str:
    return a if TTL_SECONDS[a] >= TTL_SECONDS[b] else b
