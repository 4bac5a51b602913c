"""A lean SSE response: frames arrive already encoded, each batch of them leaves in one `send`, and the
stream runs in the request's own task. sse-starlette's EventSourceResponse, which this replaces, ran four
tasks per stream in an anyio task group (body, ping timer, disconnect listener, shutdown listener) and
encoded every frame through a StringIO and two regular expressions; at 5,000 streams that was most of
the gateway's memory per stream and of its event-loop time (bench/bench_fanout.py).

The wire format is sse-starlette's, byte for byte: `id:`, `event:`, `data:` lines in that order, CRLF
line ends, a blank line after each frame, and `: ping - <UTC time>` comments as keep-alives."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import suppress
from datetime import datetime, timezone

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

log = logging.getLogger(__name__)

SEP = "\r\n"
_LINES = re.compile(r"\r\n|\r|\n")
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no", "Connection": "keep-alive"}


def frame(data: str, *, event: str | None = None, id: str | None = None) -> bytes:
    """One SSE frame. A JSON document (`json.dumps`) has no raw line break, so it is one `data:` line."""
    head = ""
    if id is not None:
        head += f"id: {_LINES.sub('', id)}{SEP}"
    if event is not None:
        head += f"event: {_LINES.sub('', event)}{SEP}"
    if "\n" in data or "\r" in data:
        body = "".join(f"data: {line}{SEP}" for line in _LINES.split(data))
    else:
        body = f"data: {data}{SEP}"
    return f"{head}{body}{SEP}".encode()


def ping() -> bytes:
    return f": ping - {datetime.now(timezone.utc)}{SEP}{SEP}".encode()


class SseResponse(Response):
    """`chunks` yields encoded frames (one or many per chunk, each chunk one `send`). Nothing here pings
    on a timer: a long-lived stream's source yields `ping()` when it has been quiet (streams.py does,
    from the replica's one watchdog), so a stream costs no timer of its own.

    `on_disconnect` is for sources that wait: the client's disconnect is heard by one small task on
    `receive`, which calls it so that the source ends its wait and the stream ends. A finite source
    needs none (a send to a gone client is dropped by the server). `on_close` runs however the
    response ends, even when its body never started."""

    media_type = "text/event-stream"
    _raw_headers: tuple[tuple[bytes, bytes], ...] | None = None

    def __init__(self, chunks: AsyncIterator[bytes], *, on_disconnect: Callable[[], None] | None = None,
                 on_close: Callable[[], Awaitable[None]] | None = None) -> None:
        self.chunks = chunks
        self.on_disconnect = on_disconnect
        self.on_close = on_close
        self.status_code = 200
        self.background = None
        # The same headers for every stream: encoded once (Response.init_headers), copied per response.
        if SseResponse._raw_headers is None:
            self.init_headers(HEADERS)
            SseResponse._raw_headers = tuple(self.raw_headers)
        self.raw_headers = list(SseResponse._raw_headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        listener: asyncio.Task[None] | None = None
        try:
            await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            if scope.get("method") != "HEAD":  # HEAD: headers only, the stream would never end
                if self.on_disconnect is not None:
                    listener = asyncio.create_task(self._listen(receive))
                async for chunk in self.chunks:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            if listener is not None:
                listener.cancel()
            aclose = getattr(self.chunks, "aclose", None)
            if aclose is not None:
                await aclose()
            if self.on_close is not None:
                await self.on_close()

    async def _listen(self, receive: Receive) -> None:
        with suppress(Exception):  # a receive that fails means the same as a disconnect
            while (await receive())["type"] != "http.disconnect":
                pass
        assert self.on_disconnect is not None
        self.on_disconnect()
