"""Server-sent events for a streamed message, in the real API's order:

message_start, ping, then per block content_block_start / *_delta /
content_block_stop, then message_delta (stop_reason, cumulative usage) and
message_stop. An injected fault replaces the rest with an `error` event.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

from sse_starlette import ServerSentEvent

from .errors import error_body
from .faults import Fault
from .response import PlannedMessage
from .state import Latency
from .tokens import approx_tokens

_WORD_GROUPS = (1, 2, 3)  # words per text delta, cycled, so chunking is deterministic
_JSON_CHUNK = 16


def sse(event: str, data: dict[str, Any]) -> ServerSentEvent:
    return ServerSentEvent(data=json.dumps(data, separators=(",", ":"), ensure_ascii=False), event=event, sep="\n")


def ping_event() -> ServerSentEvent:
    return sse("ping", {"type": "ping"})


async def message_events(
    planned: PlannedMessage, latency: Latency, fault: Fault | None, request_id: str
) -> AsyncIterator[ServerSentEvent]:
    yield sse("message_start", {"type": "message_start", "message": planned.start_json()})
    yield ping_event()
    if latency.ttft_ms:
        await asyncio.sleep(latency.ttft_ms / 1000)

    emitted = 0

    def fault_due() -> bool:
        return fault is not None and fault.after_tokens is not None and emitted >= fault.after_tokens

    for index, block in enumerate(planned.content):
        yield sse("content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": _start_shape(block)})
        for delta, tokens in _deltas(block):
            if fault_due():
                yield _error(fault, request_id)
                return
            if tokens:
                await asyncio.sleep(latency.per_tokens(tokens))
            yield sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
            emitted += tokens
        yield sse("content_block_stop", {"type": "content_block_stop", "index": index})

    if fault is not None:  # asked to fail after more tokens than the message has: fail at the end
        yield _error(fault, request_id)
        return

    usage = planned.usage
    yield sse("message_delta", {
        "type": "message_delta",
        "delta": {"stop_reason": planned.stop_reason, "stop_sequence": None},
        "usage": {
            "input_tokens": usage.input_tokens,
            "cache_creation_input_tokens": usage.cache_creation_input_tokens,
            "cache_read_input_tokens": usage.cache_read_input_tokens,
            "output_tokens": planned.output_tokens,
        },
    })
    yield sse("message_stop", {"type": "message_stop"})


def _error(fault: Fault, request_id: str) -> ServerSentEvent:
    return sse("error", error_body(fault.error_type, fault.error_message, request_id))


def _start_shape(block: dict[str, Any]) -> dict[str, Any]:
    if block["type"] == "text":
        return {"type": "text", "text": ""}
    if block["type"] == "thinking":
        return {"type": "thinking", "thinking": "", "signature": ""}
    return {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}


def _deltas(block: dict[str, Any]) -> Iterator[tuple[dict[str, Any], int]]:
    """(delta, output tokens it carries) pairs for one block."""
    if block["type"] == "text":
        for chunk in word_chunks(block["text"]):
            yield {"type": "text_delta", "text": chunk}, approx_tokens(chunk)
    elif block["type"] == "thinking":
        for chunk in word_chunks(block["thinking"]):
            yield {"type": "thinking_delta", "thinking": chunk}, approx_tokens(chunk)
        yield {"type": "signature_delta", "signature": block["signature"]}, 0
    else:
        yield {"type": "input_json_delta", "partial_json": ""}, 0  # the real API opens with an empty chunk
        for chunk in json_chunks(json.dumps(block["input"], ensure_ascii=False)):
            yield {"type": "input_json_delta", "partial_json": chunk}, approx_tokens(chunk)


def word_chunks(text: str) -> list[str]:
    """Split into runs of 1-3 words, keeping whitespace so chunks rejoin exactly."""
    pieces = text.split(" ")
    words = [p + " " for p in pieces[:-1]] + [pieces[-1]]
    chunks: list[str] = []
    i = 0
    while i < len(words):
        size = _WORD_GROUPS[len(chunks) % len(_WORD_GROUPS)]
        chunks.append("".join(words[i : i + size]))
        i += size
    return [c for c in chunks if c]


def json_chunks(text: str) -> list[str]:
    """Fixed-size slices that never end inside a backslash escape."""
    chunks: list[str] = []
    start = 0
    while start < len(text):
        end = min(start + _JSON_CHUNK, len(text))
        while end < len(text) and _inside_escape(text, start, end):
            end += 1
        chunks.append(text[start:end])
        start = end
    return chunks


def _inside_escape(text: str, start: int, end: int) -> bool:
    window = text[max(start, end - 6) : end]
    slash = window.rfind("\\")
    if slash == -1:
        return False
    # Count the run of backslashes ending at `slash`; an odd run opens an escape.
    run_end = max(start, end - 6) + slash
    run = 0
    while run_end - run >= 0 and text[run_end - run] == "\\":
        run += 1
    if run % 2 == 0:
        return False
    escape = text[run_end:end]
    return len(escape) < 2 or (escape[1] == "u" and len(escape) < 6)
