"""A lean client for the Messages API (`POST /v1/messages`), in place of the SDK on the hot path.

The SDK deep-copied and transformed every request and built a pydantic model per SSE event: ~39% of
the orchestrator's CPU per turn. Here a request is one `json.dumps` (tools and system blocks, the same
from call to call, are encoded once), and the stream is folded into plain dicts as the SDK's
`accumulate_event` folds it. The reply's blocks come out as the SDK's
`block.model_dump(mode="json", exclude_none=True)` did: stored content is replayed to the model byte
for byte, so its prompt cache keeps matching.

HTTP is aiohttp's (C parser, plain asyncio reads) rather than httpx/httpcore's (pure-Python h11, an
anyio cancel scope per read), which cost ~20% of the orchestrator's CPU per turn: against the simulator,
a streamed ~100-token reply costs the client ~60% less CPU.

Retries follow the SDK's policy (statuses, `x-should-retry`, `retry-after[-ms]`, backoff), and only
before a response has started: a streamed reply is never retried once events may have been passed on.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import random
import socket
import ssl
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import certifi
from yarl import URL

# What anthropic 2.10 sends (anthropic._constants.ANTHROPIC_API_VERSION); a test holds the two together.
API_VERSION = "2026-10-21"
DEFAULT_BASE_URL = "https://api.anthropic.com"
# The SDK's defaults: 10 minutes between reads (a slow stream may think for long), 5 s to connect a
# socket (TLS included), and up to 10 minutes to get a connection (waiting for a free one, DNS). No
# limit on a whole call: a long stream that keeps coming is never cut.
TIMEOUT = aiohttp.ClientTimeout(total=None, connect=600.0, sock_connect=5.0, sock_read=600.0)
MAX_CONNECTIONS = 1000
KEEPALIVE_S = 5.0  # an idle pooled connection is closed after this, as httpx's pool did
INITIAL_RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 8.0


class ProviderFailure(Exception):
    """The provider answered with an error, or could not be reached. `status` is the HTTP status (200
    for an `event: error` inside a stream), None when no answer came; `body` the parsed error body."""

    def __init__(self, status: int | None, body: Any = None, request_id: str | None = None) -> None:
        super().__init__(f"provider failure: status {status}")
        self.status = status
        self.body = body
        self.request_id = request_id


@dataclass
class Message:
    """A reply as the API gave it: content blocks already in their stored shape, usage as JSON."""

    id: str | None
    model: str | None
    content: list[dict[str, Any]]
    stop_reason: str | None
    usage: dict[str, Any]
    request_id: str | None = None
    retries: int = 0


# Stored shape ----------------------------------------------------------------------------------------
# The SDK's models list these fields in this order; model_dump(exclude_none=True) writes the set ones in
# that order, then any unknown field in arrival order.
_FIELDS: dict[str, tuple[str, ...]] = {
    "text": ("citations", "text", "type"),
    "thinking": ("signature", "thinking", "type"),
    "redacted_thinking": ("data", "type"),
    "tool_use": ("id", "caller", "input", "name", "type", "toolset_name"),
}
# Nested models whose own field order and None-dropping the plain path does not reproduce.
_NESTED = ("citations", "caller")


def stored_block(block: dict[str, Any]) -> dict[str, Any]:
    """One content block as `block.model_dump(mode="json", exclude_none=True)` wrote it."""
    fields = _FIELDS.get(block.get("type"))  # type: ignore[arg-type]
    if fields is None or any(block.get(name) for name in _NESTED):
        return _sdk_dump(block)
    out = {name: block[name] for name in fields if block.get(name) is not None}
    for key, value in block.items():
        if key not in fields and value is not None:
            out[key] = value
    return out


def _sdk_dump(block: dict[str, Any]) -> dict[str, Any]:
    """Blocks this client does not shape itself (citations, server tools, new types): the SDK's models
    still do it, off the hot path, so what is stored never differs from what the SDK stored."""
    from anthropic._models import construct_type
    from anthropic.types import ContentBlock

    model = construct_type(type_=ContentBlock, value=block)
    return model.model_dump(mode="json", exclude_none=True)  # type: ignore[union-attr]


# Streaming fold ---------------------------------------------------------------------------------------
@dataclass
class MessageFold:
    """Stream events folded into the final message, as the SDK's `accumulate_event` does: deltas append
    to the block at their index, tool input JSON is parsed once its block stops, and `message_delta`'s
    usage counts are cumulative (they overwrite; an omitted one keeps the `message_start` value)."""

    started: bool = False
    id: str | None = None
    model: str | None = None
    stop_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    content: list[dict[str, Any]] = field(default_factory=list)
    _parts: dict[int, list[str]] = field(default_factory=dict)  # text / thinking / partial JSON per open block

    def feed(self, event: dict[str, Any]) -> str | None:
        """Folds one event in; returns the text of a text delta, which the caller streams on."""
        kind = event.get("type")
        if kind == "content_block_delta":
            return self._delta(event["index"], event["delta"])
        if kind == "content_block_start":
            self.content.append(dict(event["content_block"]))
        elif kind == "content_block_stop":
            self._close(event["index"])
        elif kind == "message_start":
            message = event["message"]
            self.started = True
            self.id, self.model = message.get("id"), message.get("model")
            self.stop_reason = message.get("stop_reason")
            self.usage = dict(message.get("usage") or {})
            self.content = [dict(b) for b in message.get("content") or ()]
        elif kind == "message_delta":
            self.stop_reason = event["delta"].get("stop_reason")
            usage = event.get("usage") or {}
            self.usage["output_tokens"] = usage.get("output_tokens")
            for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
                        "server_tool_use", "output_tokens_details"):
                if usage.get(key) is not None:
                    self.usage[key] = usage[key]
        return None

    def _delta(self, index: int, delta: dict[str, Any]) -> str | None:
        block = self.content[index]
        kind = delta.get("type")
        if kind == "text_delta":
            if block["type"] == "text":
                self._parts.setdefault(index, []).append(delta["text"])
                return delta["text"]
        elif kind == "input_json_delta":
            if "input" in block:
                self._parts.setdefault(index, []).append(delta["partial_json"])
        elif kind == "thinking_delta":
            if block["type"] == "thinking":
                self._parts.setdefault(index, []).append(delta["thinking"])
        elif kind == "signature_delta":
            if block["type"] == "thinking":
                block["signature"] = delta["signature"]
        elif kind == "citations_delta":
            if block["type"] == "text":
                block["citations"] = [*(block.get("citations") or ()), delta["citation"]]
        return None

    def _close(self, index: int) -> None:
        parts = self._parts.pop(index, None)
        if parts is None:
            return
        block = self.content[index]
        joined = "".join(parts)
        if block["type"] == "text":
            block["text"] = block.get("text", "") + joined
        elif block["type"] == "thinking":
            block["thinking"] = block.get("thinking", "") + joined
        elif joined:
            # The SDK keeps the start's `{}` when no JSON came.
            block["input"] = json.loads(joined)

    def message(self, request_id: str | None = None, retries: int = 0) -> Message:
        for index in list(self._parts):
            self._close(index)  # a stream that ended without a block's stop keeps what it got, as the SDK did
        return Message(self.id, self.model, [stored_block(b) for b in self.content], self.stop_reason,
                       self.usage, request_id, retries)


def parse_sse(buffer: bytes) -> tuple[list[tuple[str | None, bytes]], bytes]:
    """Complete events (name, data) at the front of `buffer`, and what is left of it. Line-based, as the
    SSE spec reads a stream: `event:` and `data:` fields, comments skipped, events end at a blank line."""
    if b"\r" in buffer:
        held = buffer.endswith(b"\r")  # maybe the first half of a CRLF split across reads
        buffer = buffer[:-1] if held else buffer
        buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n") + (b"\r" if held else b"")
    *blocks, rest = buffer.split(b"\n\n")
    events = []
    for block in blocks:
        name: str | None = None
        data: list[bytes] = []
        for line in block.split(b"\n"):
            if line.startswith(b"data:"):
                data.append(line[6:] if line[5:6] == b" " else line[5:])
            elif line.startswith(b"event:"):
                name = (line[7:] if line[6:7] == b" " else line[6:]).decode()
        if data:
            events.append((name, b"\n".join(data)))
    return events, rest


# Request body -------------------------------------------------------------------------------------------
def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class BodyEncoder:
    """Encodes a request once, as compact UTF-8 JSON. The tools list and the system blocks are rebuilt
    per turn around the same catalog objects and strings, so their JSON is kept under a cheap key: per
    item, strings by value and anything else by identity. An entry holds its objects, so no identity in
    a live key can be reused by another object; catalogs are immutable once fetched."""

    CACHED = ("system", "tools")

    def __init__(self, size: int = 64) -> None:
        self._size = size
        self._cache: OrderedDict[tuple[Any, ...], tuple[Any, str]] = OrderedDict()
        # The same list object again (a catalog's tools, prompt.tool_params): found without building its key.
        self._by_id: dict[int, tuple[Any, str]] = {}

    def encode(self, params: dict[str, Any]) -> bytes:
        parts = []
        for key, value in params.items():
            text = self.json_of(value) if key in self.CACHED else _dumps(value)
            parts.append(f"{_dumps(key)}:{text}")
        return ("{" + ",".join(parts) + "}").encode()

    def json_of(self, items: Any) -> str:
        """The JSON of a tools list or system blocks, encoded once per distinct content."""
        if not isinstance(items, list):
            return _dumps(items)
        same = self._by_id.get(id(items))
        if same is not None and same[0] is items:
            return same[1]
        try:
            key = tuple(tuple((k, v if isinstance(v, str) else id(v)) for k, v in item.items()) for item in items)
        except AttributeError:
            return _dumps(items)  # not a list of blocks: nothing to reuse
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            text = hit[1]
        else:
            text = _dumps(items)
            self._cache[key] = (items, text)
            if len(self._cache) > self._size:
                self._cache.popitem(last=False)
        if len(self._by_id) >= self._size:
            self._by_id.clear()
        self._by_id[id(items)] = (items, text)  # holds the list, so its id is not reused while it is here
        return text


# HTTP ----------------------------------------------------------------------------------------------------
def should_retry(status: int, headers: Mapping[str, str]) -> bool:
    """The SDK's rule: the server's `x-should-retry` first, else 408, 409, 429 and 5xx (529 included).
    `headers` is the response's, read case-insensitively (aiohttp's CIMultiDictProxy)."""
    header = headers.get("x-should-retry")
    if header == "true":
        return True
    if header == "false":
        return False
    return status in (408, 409, 429) or status >= 500


def retry_delay(retries_taken: int, headers: Mapping[str, str] | None) -> float:
    """Seconds before the next attempt: what the server asks (`retry-after-ms`, else `retry-after` in
    seconds or as a date; a zero or negative ask is ignored), else 0.5 s doubling per retry, capped at
    8 s, less up to 25% jitter — the SDK's schedule."""
    asked = _retry_after(headers) if headers is not None else None
    if asked is not None and asked > 0:
        return min(asked, 4_294_967.0)
    delay = min(INITIAL_RETRY_DELAY * 2.0 ** min(retries_taken, 1000), MAX_RETRY_DELAY)
    return delay * (1 - 0.25 * random.random())


def _retry_after(headers: Mapping[str, str]) -> float | None:
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value) / scale
        except ValueError:
            if name == "retry-after-ms":
                continue
        date = email.utils.parsedate_tz(value)
        return None if date is None else float(email.utils.mktime_tz(date) - time.time())
    return None


async def _read(response: aiohttp.ClientResponse, fold: MessageFold, on_event: Callable[[], None],
                on_text: Callable[[str], Awaitable[None]], request_id: str | None) -> None:
    """Reads the stream to its end, folding each read's events in. A connection cut mid-stream (or no
    byte for 600 s) is a ProviderFailure, never retried, as part of the reply may have been passed on."""
    content = response.content  # the body, already de-chunked (and decoded, if the server compressed it)
    buffer = b""
    while True:
        try:
            chunk = await content.readany()
        except (aiohttp.ClientError, OSError) as exc:
            raise ProviderFailure(None, None, request_id) from exc
        if not chunk:
            return
        events, buffer = parse_sse(buffer + chunk)
        texts, failure = _fold_events(fold, events, on_event, request_id)
        for text in texts:
            await on_text(text)
        if failure is not None:
            raise failure


def _fold_events(fold: MessageFold, events: list[tuple[str | None, bytes]], on_event: Callable[[], None],
                 request_id: str | None) -> tuple[list[str], ProviderFailure | None]:
    """One read's events folded in: the texts to pass on, then the failure that ends the stream, if any
    (texts that came before an error still reach the user, as with the SDK)."""
    texts: list[str] = []
    for name, data in events:
        if name is None or name == "ping":
            continue
        if name == "error":
            return texts, ProviderFailure(200, _json_or_text(data), request_id)
        on_event()
        if not data:
            continue
        try:
            text = fold.feed(json.loads(data))
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            failure = ProviderFailure(None, None, request_id)  # a garbled event
            failure.__cause__ = exc
            return texts, failure
        if text:
            texts.append(text)
    return texts, None


def _socket(addr_info: tuple[Any, ...]) -> socket.socket:
    """Each new connection's socket, with TCP keep-alive probes as the SDK sets them: a long silent
    stream is not dropped by a NAT."""
    family, kind, proto, _, _ = addr_info
    sock = socket.socket(family=family, type=kind, proto=proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    if hasattr(socket, "TCP_KEEPINTVL"):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 60)
    return sock


def _ssl_context() -> ssl.SSLContext:
    """Certificates as httpx (the SDK's client) verified them: SSL_CERT_FILE / SSL_CERT_DIR when set,
    else certifi's bundle, so a host without system CA certificates still reaches the API."""
    if os.environ.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    if os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=os.environ["SSL_CERT_DIR"])
    return ssl.create_default_context(cafile=certifi.where())


class MessagesHTTP:
    """One long-lived HTTP/1.1 keep-alive connection pool for `POST /v1/messages`. The aiohttp session
    is made on the first call, inside the running loop (aiohttp binds it there), and uses nothing the
    Messages API does not need: no cookies, no redirects, no proxies from the environment, no
    compression asked for (a compressed reply is still decoded)."""

    def __init__(self, base_url: str | None, api_key: str, max_retries: int) -> None:
        base = URL((base_url or DEFAULT_BASE_URL).rstrip("/"))
        self.url = base / "v1" / "messages"
        self.host = base.host
        self.port = base.port
        self._retries = max_retries
        self._encoder = BodyEncoder()
        self._headers = {
            # anthropic 2.x sends the key as a bearer token.
            "authorization": f"Bearer {api_key}",
            "anthropic-version": API_VERSION,
            "content-type": "application/json",
            "accept": "application/json",
        }
        self._session: aiohttp.ClientSession | None = None

    def _pool(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=MAX_CONNECTIONS, keepalive_timeout=KEEPALIVE_S, socket_factory=_socket,
                ssl=_ssl_context() if self.url.scheme == "https" else True)
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=TIMEOUT, cookie_jar=aiohttp.DummyCookieJar(),
                # aiohttp would add accept-encoding and user-agent: the request carries only its own headers.
                skip_auto_headers=("accept-encoding", "user-agent"))
        return self._session

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def stream(self, params: dict[str, Any], headers: dict[str, str],
                     on_event: Callable[[], None], on_text: Callable[[str], Awaitable[None]]) -> Message:
        """Streams one reply: `on_event` at each event, `on_text` with each text delta, the folded reply
        at the end. An `event: error` is a ProviderFailure with status 200 (the SDK's APIStatusError)."""
        body = self._encoder.encode({**params, "stream": True})
        response, retries = await self._send(body, headers)
        request_id = response.headers.get("request-id")
        fold = MessageFold()
        try:
            await _read(response, fold, on_event, on_text, request_id)
        finally:
            response.release()  # back to the pool when read to its end; closed if cut short
        if not fold.started:
            raise ProviderFailure(None, None, request_id)
        try:
            return fold.message(request_id, retries)
        except ValueError as exc:
            raise ProviderFailure(None, None, request_id) from exc  # a tool's input JSON cut short

    async def create(self, params: dict[str, Any], headers: dict[str, str]) -> Message:
        """One reply, not streamed."""
        response, retries = await self._send(self._encoder.encode(params), headers)
        request_id = response.headers.get("request-id")
        try:
            message = json.loads(await response.read())
            return Message(message.get("id"), message.get("model"), [stored_block(b) for b in message["content"]],
                           message.get("stop_reason"), dict(message.get("usage") or {}), request_id, retries)
        except (aiohttp.ClientError, OSError, ValueError, KeyError, TypeError) as exc:
            raise ProviderFailure(None, None, request_id) from exc
        finally:
            response.release()

    async def _send(self, body: bytes, headers: dict[str, str]) -> tuple[aiohttp.ClientResponse, int]:
        """The first 2xx response (its body unread) and how many retries it took."""
        session = self._pool()
        all_headers = {**self._headers, **headers}
        retries = 0
        while True:
            try:
                response = await session.post(self.url, data=body, headers=all_headers, allow_redirects=False)
            except (aiohttp.ClientError, OSError) as exc:  # timeouts included (TimeoutError is an OSError)
                if retries >= self._retries:
                    raise ProviderFailure(None) from exc
                await asyncio.sleep(retry_delay(retries, None))
                retries += 1
                continue
            status = response.status
            if 200 <= status < 300:
                return response, retries
            try:
                error = await response.read()
            except (aiohttp.ClientError, OSError):
                error = None
            finally:
                response.release()
            if retries < self._retries and should_retry(status, response.headers):
                await asyncio.sleep(retry_delay(retries, response.headers))
                retries += 1
                continue
            raise ProviderFailure(status, _error_body(error), response.headers.get("request-id"))


def _error_body(body: bytes | None) -> Any:
    try:
        return json.loads(body)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 — not JSON, or not read: the status alone classifies it
        return None


def _json_or_text(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return data.decode(errors="replace")
