"""A small SSE client for tests: POST or GET, collect events with their ids until `done`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import aconnect_sse

from spotter_shared.auth import issue_dev_token
from spotter_shared.settings import AuthSettings


def token_for(user_id: str) -> str:
    return issue_dev_token(AuthSettings(), user_id)


def auth(user_id: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token_for(user_id)}"}


@dataclass
class Stream:
    status: int
    events: list[dict[str, Any]] = field(default_factory=list)
    ids: list[str | None] = field(default_factory=list)
    body: Any = None

    def types(self) -> list[str]:
        return [e["type"] for e in self.events]

    def of(self, type_: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == type_]

    def text(self) -> str:
        return "".join(e["delta"] for e in self.of("text_delta"))

    @property
    def conversation_id(self) -> str:
        return self.of("done")[-1]["conversationId"]


async def sse(client: httpx.AsyncClient, method: str, url: str, *, until_done: bool = True, stop_after: int | None = None, **kwargs: Any) -> Stream:
    async with aconnect_sse(client, method, url, **kwargs) as source:
        response = source.response
        if response.status_code != 200 or not response.headers.get("content-type", "").startswith("text/event-stream"):
            await response.aread()
            return Stream(status=response.status_code, body=response.json() if response.content else None)
        out = Stream(status=200)
        async for event in source.aiter_sse():
            if not event.data:  # the keep-alive comment (": ping") of a long wait
                continue
            data = json.loads(event.data)
            assert data["type"] == event.event, "SSE event name and payload type must agree"
            out.events.append(data)
            out.ids.append(event.id or None)
            if stop_after is not None and len(out.events) >= stop_after:
                break
            if until_done and data["type"] == "done":
                break
        return out


async def send(client: httpx.AsyncClient, org_id: str, user_id: str, message: str, conversation_id: str | None = None, **kw: Any) -> Stream:
    return await sse(
        client, "POST", f"/organizations/{org_id}/agent/messages",
        json={"conversationId": conversation_id, "message": message}, headers=auth(user_id), **kw,
    )


class Sim:
    """Control of the model simulator (scripts, faults, request log)."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def script(self, match: str, *responses: dict[str, Any]) -> None:
        r = await self.client.post("/_sim/script", json={"match": match, "responses": list(responses)})
        r.raise_for_status()

    async def fault(self, **body: Any) -> None:
        (await self.client.post("/_sim/faults", json=body)).raise_for_status()

    async def latency(self, ttft_ms: int, tokens_per_second: float) -> None:
        (await self.client.post("/_sim/latency", json={"ttft_ms": ttft_ms, "tokens_per_second": tokens_per_second})).raise_for_status()

    async def requests(self) -> list[dict[str, Any]]:
        r = await self.client.get("/_sim/requests")
        r.raise_for_status()
        data = r.json()
        return data["requests"] if isinstance(data, dict) else data
