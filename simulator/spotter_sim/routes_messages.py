"""`POST /v1/messages` and `POST /v1/messages/count_tokens`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from starlette.requests import ClientDisconnect
from fastapi.responses import JSONResponse, Response
from sse_starlette import EventSourceResponse, ServerSentEvent

from .conversation import latest_user_text
from .errors import InvalidRequest, error_response, new_request_id
from .policy import decide
from .response import plan_message
from .side_tasks import kind_of
from .state import SimState
from .stream import message_events, ping_event
from .tokens import flatten_prompt
from .validate import validate_request

router = APIRouter()

_PING_SECONDS = 10  # keep-alive pings while a slow stream is idle


def _state(request: Request) -> SimState:
    return request.app.state.sim


async def _read_json(request: Request) -> Any:
    raw = await request.body()
    try:
        return json.loads(raw)
    except ValueError:
        raise InvalidRequest("There was an issue with the request body: it is not valid JSON.") from None


def _refused(exc: InvalidRequest) -> dict[str, Any]:
    return {"ok": False, "status": 400, "error_type": exc.error_type, "message": exc.message}


@router.post("/v1/messages")
async def create_message(request: Request) -> Response:
    state = _state(request)
    request_id = new_request_id()
    received_at = state.clock.now()
    # An entry is listed only once its body is read: a request still arriving has no kind yet,
    # and a caller listing the log must never see a half-received one.
    entry: dict[str, Any] = {
        "request_id": request_id,
        "path": "/v1/messages",
        "received_at": received_at,
        "stream": False,
        "kind": None,  # agent | title | summary, once the body is read
        "body": None,
        "verdict": {"ok": True, "status": 200},
        "fault": None,
        "script_id": None,
        "response": None,
        # True once the whole reply left for the client: a stream's last event was sent, or a
        # plain reply's client was still connected. A caller killed mid-call never gets its usage.
        "delivered": False,
    }
    try:
        body = entry["body"] = await _read_json(request)
    except ClientDisconnect:
        # The caller died while sending (a test kills it): no request arrived, none is listed.
        state.log.record({**entry, "kind": "abandoned"})
        return Response(status_code=499)
    except InvalidRequest as exc:
        state.log.record({**entry, "verdict": _refused(exc)})
        return error_response(400, exc.error_type, exc.message, request_id)
    entry = state.log.record(entry)
    try:
        validate_request(body, thinking_secret=state.config.thinking_secret)
    except InvalidRequest as exc:
        entry["verdict"] = _refused(exc)
        return error_response(400, exc.error_type, exc.message, request_id)

    streaming = body.get("stream") is True
    entry["stream"] = streaming
    kind = entry["kind"] = kind_of(body)

    # Faults apply to requests that passed validation, so a typo never eats one.
    fault = state.faults.take(latest_user_text(body["messages"]), kind)
    if fault is not None:
        entry["fault"] = fault.describe()
        if not (streaming and fault.after_tokens is not None):
            entry["verdict"] = {"ok": False, "status": fault.status, "error_type": fault.error_type,
                                "message": fault.error_message}
            return error_response(fault.status, fault.error_type, fault.error_message, request_id,
                                  headers=fault.headers())

    decision = decide(body, state.scripts)
    usage = state.cache.account(
        body["model"], flatten_prompt(body), state.config.min_cacheable_tokens(body["model"])
    )
    planned = plan_message(body, decision.turn, usage, state.config.thinking_secret)
    entry["script_id"] = decision.script_id
    entry["response"] = planned.message_json()

    headers = {"request-id": request_id}
    latency = state.latency
    if streaming:
        return EventSourceResponse(
            _marking_delivered(message_events(planned, latency, fault, request_id), entry),
            headers=headers,
            ping=_PING_SECONDS,
            ping_message_factory=ping_event,
            sep="\n",
        )
    await asyncio.sleep(latency.ttft_ms / 1000 + latency.per_tokens(planned.output_tokens))
    entry["delivered"] = not await request.is_disconnected()
    return JSONResponse(planned.message_json(), headers=headers)


async def _marking_delivered(events: AsyncIterator[ServerSentEvent], entry: dict[str, Any]) -> AsyncIterator[ServerSentEvent]:
    async for event in events:
        yield event
    entry["delivered"] = entry["fault"] is None


@router.post("/v1/messages/count_tokens")
async def count_tokens(request: Request) -> Response:
    request_id = new_request_id()
    state = _state(request)
    try:
        body = await _read_json(request)
        validate_request(body, thinking_secret=state.config.thinking_secret, count_tokens=True)
    except InvalidRequest as exc:
        return error_response(400, exc.error_type, exc.message, request_id)
    total = sum(b.tokens for b in flatten_prompt(body))
    return JSONResponse({"input_tokens": total}, headers={"request-id": request_id})
