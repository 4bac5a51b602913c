"""Seed 002 §5: an external API's failures classified and, where it is safe, healed before the model
ever sees them — retryable (network, timeout, 429 honouring Retry-After, 5xx) with bounded retries and
backoff, conflict (409) refreshed and retried once, and a typed result with guidance for the rest
(user_fixable 400/422, permission 401/403, fatal). Writes are retried only when the request carried an
idempotency key or its method is idempotent. Healing is visible: every attempt is kept, with why."""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final, Literal

import httpx

Category = Literal["ok", "retryable", "user_fixable", "permission", "conflict", "fatal"]

RETRY_ATTEMPTS: Final = 3  # in all, the first included
MAX_WAIT_S: Final = 8.0

GUIDANCE: Final[dict[Category, str]] = {
    "ok": "",
    "retryable": "The service is unavailable right now; try again in a moment.",
    "user_fixable": "The service refused the input; correct the fields it names and call again.",
    "permission": "The service refused the pack's credentials or this action; ask an admin to check the pack.",
    "conflict": "Someone changed this at the same time; read it again before changing it.",
    "fatal": "The call failed in a way a retry will not fix; tell the user what was tried.",
}


@dataclass(frozen=True)
class Classified:
    category: Category
    status: int | None
    reason: str
    retry_after_s: float | None = None

    @property
    def guidance(self) -> str:
        return GUIDANCE[self.category]


@dataclass(frozen=True)
class Attempt:
    number: int
    status: int | None
    category: Category
    reason: str
    waited_s: float  # before this attempt


@dataclass
class Healed:
    """The last response (None when none came), its classification, and every attempt made."""

    response: httpx.Response | None
    classified: Classified
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.classified.category == "ok"

    @property
    def healed(self) -> bool:
        return self.ok and len(self.attempts) > 1

    def summary(self) -> str:
        """One line for the tool's outcome and the audit row: "2 attempts: 503 retryable, then 200"."""
        if len(self.attempts) == 1:
            return f"1 attempt: {self.attempts[0].reason}"
        return f"{len(self.attempts)} attempts: " + ", then ".join(a.reason for a in self.attempts)


def classify(response: httpx.Response | None = None, error: BaseException | None = None) -> Classified:
    if error is not None:
        if isinstance(error, (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)):
            return Classified("retryable", None, f"{type(error).__name__}")
        return Classified("fatal", None, f"{type(error).__name__}")
    assert response is not None
    status = response.status_code
    if status < 400:
        return Classified("ok", status, str(status))
    if status == 429 or status >= 500:
        return Classified("retryable", status, f"{status} retryable", retry_after(response))
    if status in (400, 422):
        return Classified("user_fixable", status, f"{status} user_fixable")
    if status in (401, 403):
        return Classified("permission", status, f"{status} permission")
    if status == 409:
        return Classified("conflict", status, f"{status} conflict")
    return Classified("fatal", status, f"{status} fatal")


def retry_after(response: httpx.Response) -> float | None:
    """Retry-After in seconds (a number or an HTTP date), None when absent or unreadable."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    when = email.utils.parsedate_to_datetime(value) if value else None
    return max(0.0, when.timestamp() - time.time()) if when else None


async def call_with_healing(
    send: Callable[[], Awaitable[httpx.Response]], *, retry_writes: bool,
    refresh: Callable[[], Awaitable[None]] | None = None, attempts: int = RETRY_ATTEMPTS,
    base_delay_s: float = 0.5, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Healed:
    """Send, and heal what can be healed: `retry_writes` says whether sending twice is safe (an
    idempotent method, or an idempotency key on the request)."""
    history: list[Attempt] = []
    waited, conflict_refreshed = 0.0, False
    while True:
        try:
            response, error = await send(), None
        except httpx.HTTPError as exc:
            response, error = None, exc
        verdict = classify(response, error)
        history.append(Attempt(len(history) + 1, verdict.status, verdict.category, verdict.reason, waited))
        if verdict.category == "retryable" and retry_writes and len(history) < attempts:
            pause = min(MAX_WAIT_S, verdict.retry_after_s if verdict.retry_after_s is not None
                        else base_delay_s * 2 ** (len(history) - 1))
            await sleep(pause)
            waited = pause
            continue
        if verdict.category == "conflict" and retry_writes and not conflict_refreshed and refresh is not None:
            await refresh()
            conflict_refreshed, waited = True, 0.0
            continue
        return Healed(response, verdict, history)
