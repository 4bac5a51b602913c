"""Injected failures: HTTP errors up front, or an `error` event mid-stream."""

from __future__ import annotations

import secrets
from dataclasses import asdict, dataclass
from typing import Any

from .errors import DEFAULT_MESSAGES, ERROR_TYPES


@dataclass
class Fault:
    id: str
    status: int
    remaining: int
    retry_after: float | None = None
    match: str | None = None
    # Streaming requests fail with an `error` SSE event after this many output tokens.
    after_tokens: int | None = None
    message: str | None = None
    # Which requests it hits: the agent's turns (default), or the title / summary side tasks.
    kind: str = "agent"

    @property
    def error_type(self) -> str:
        return ERROR_TYPES.get(self.status, "api_error")

    @property
    def error_message(self) -> str:
        return self.message or DEFAULT_MESSAGES.get(self.error_type, "Simulated failure")

    def headers(self) -> dict[str, str]:
        if self.retry_after is None:
            return {}
        value = self.retry_after
        return {"retry-after": str(int(value)) if float(value).is_integer() else str(value)}

    def describe(self) -> dict[str, Any]:
        return asdict(self)


class FaultStore:
    def __init__(self) -> None:
        self._faults: list[Fault] = []

    def add(self, status: int, count: int, retry_after: float | None, match: str | None,
            after_tokens: int | None, message: str | None, kind: str = "agent") -> Fault:
        fault = Fault(f"fault_{secrets.token_hex(6)}", status, count, retry_after, match, after_tokens, message, kind)
        self._faults.append(fault)
        return fault

    def clear(self) -> None:
        self._faults.clear()

    def list(self) -> list[dict[str, Any]]:
        return [f.describe() for f in self._faults]

    def take(self, user_text: str, kind: str = "agent") -> Fault | None:
        """Consume one use of the oldest fault matching this request, if any."""
        for fault in self._faults:
            if fault.kind != kind:
                continue
            if fault.match is None or fault.match.lower() in user_text.lower():
                fault.remaining -= 1
                if fault.remaining <= 0:
                    self._faults.remove(fault)
                return fault
        return None
