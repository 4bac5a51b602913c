"""One operation of a pack, called over HTTP (httpx, with timeouts): the URL from the pack's base URL
and the operation's path (path parameters quoted), its query and header parameters, its JSON (or
URL-encoded form) body,
and the pack's own headers (its API keys: they win over a parameter of the same name, and are never
part of the result). Failures are healed where that is safe (healing.py): a write is retried only when
its method is idempotent or the operation takes an `Idempotency-Key` header, which then carries the
call's stable key. The response body comes back parsed when it is JSON, cut to a size a model can
read, with every header value of the pack blanked out should the service echo one."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote, urlencode

import httpx

from spotter_shared.packs.openapi import Operation

from .healing import Healed, call_with_healing

IDEMPOTENCY_HEADER: Final = "idempotency-key"
MAX_BODY_CHARS: Final = 20_000
REDACTED: Final = "[redacted]"


@dataclass(frozen=True)
class PackResult:
    healed: Healed
    body: Any

    @property
    def ok(self) -> bool:
        return self.healed.ok

    @property
    def status(self) -> int | None:
        return self.healed.classified.status


def request_of(op: Operation, base_url: str, args: Mapping[str, Any], pack_headers: Mapping[str, str],
               idempotency_key: str | None) -> tuple[httpx.Request, bool]:
    """The HTTP request for a call, and whether it is safe to send twice."""
    path = op.path
    query: list[tuple[str, str]] = []
    headers: dict[str, str] = {}
    for p in op.parameters:
        if p.key not in args or args[p.key] is None:
            continue
        value = args[p.key]
        if p.location == "path":
            path = path.replace("{" + p.name + "}", quote(str(value), safe=""))
        elif p.location == "query":
            for item in value if isinstance(value, list) else [value]:
                query.append((p.name, _text(item)))
        else:
            headers[p.name] = _text(value)
    takes_key = any(p.location == "header" and p.name.lower() == IDEMPOTENCY_HEADER for p in op.parameters)
    if takes_key and idempotency_key:
        headers["Idempotency-Key"] = idempotency_key
    headers.update(pack_headers)  # the pack's credentials are not the model's to set
    body, raw = None, args.get("body")
    if op.body == "json" and raw is not None:
        body, headers["Content-Type"] = json.dumps(raw).encode(), "application/json"
    elif op.body == "form" and isinstance(raw, dict):
        form = [(k, _text(item)) for k, v in raw.items() if v is not None for item in (v if isinstance(v, list) else [v])]
        body, headers["Content-Type"] = urlencode(form).encode(), "application/x-www-form-urlencoded"
    request = httpx.Request(op.method.upper(), base_url.rstrip("/") + path, params=query, headers=headers, content=body)
    return request, op.idempotent or (takes_key and idempotency_key is not None)


async def call_operation(client: httpx.AsyncClient, op: Operation, base_url: str, args: Mapping[str, Any],
                         pack_headers: Mapping[str, str], *, idempotency_key: str | None = None,
                         refresh: Callable[[], Awaitable[None]] | None = None,
                         sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> PackResult:
    """`refresh` reads the resource again before a conflicting write is retried (once)."""
    request, safe_twice = request_of(op, base_url, args, pack_headers, idempotency_key)

    async def send() -> httpx.Response:
        return await client.send(request)

    healed = await call_with_healing(send, retry_writes=safe_twice, refresh=refresh, sleep=sleep)
    return PackResult(healed, _body(healed.response, pack_headers.values()))


def _body(response: httpx.Response | None, secrets: Any) -> Any:
    if response is None or not response.content:
        return None
    text = response.text
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    if "json" in response.headers.get("content-type", ""):
        try:
            return json.loads(text) if len(text) <= MAX_BODY_CHARS else text[:MAX_BODY_CHARS] + "…"
        except ValueError:
            pass
    return text if len(text) <= MAX_BODY_CHARS else text[:MAX_BODY_CHARS] + "…"


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value) if isinstance(value, (dict, list)) else str(value)
