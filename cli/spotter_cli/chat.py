"""`spotter chat`: a terminal client that streams a conversation the way the web sheet does."""

from __future__ import annotations

import asyncio
import json
import sys

import httpx
from httpx_sse import aconnect_sse

from spotter_shared.auth import issue_dev_token
from spotter_shared.settings import AuthSettings

DIM, BOLD, RED, RESET = "\033[2m", "\033[1m", "\033[31m", "\033[0m"


async def _token_for(email: str) -> str:
    from .main import _user_id

    settings = AuthSettings()
    user_id = await _user_id(settings.database_url, email)
    if user_id is None:
        raise SystemExit(f"no user {email}; run `spotter seed-demo` or pass --token")
    return issue_dev_token(settings, user_id)


async def _turn(client: httpx.AsyncClient, org_id: str, conversation_id: str | None, text: str) -> str | None:
    body = {"conversationId": conversation_id, "message": text}
    async with aconnect_sse(client, "POST", f"/organizations/{org_id}/agent/messages", json=body) as source:
        if source.response.status_code != 200:
            await source.response.aread()
            print(f"{RED}{source.response.status_code}: {source.response.text}{RESET}")
            return conversation_id
        sys.stdout.write(f"{BOLD}spotter{RESET} ")
        async for sse in source.aiter_sse():
            event = json.loads(sse.data)
            match event["type"]:
                case "conversation_started":
                    conversation_id = event["conversationId"]
                case "text_delta":
                    sys.stdout.write(event["delta"])
                case "tool_started":
                    sys.stdout.write(f"\n{DIM}  → {event['router']}.{event['action']} {json.dumps(event['input'])}{RESET}\n")
                case "tool_completed":
                    status = "ok" if event["ok"] else f"failed: {event.get('output')}"
                    sys.stdout.write(f"{DIM}  ← {event['router']}.{event['action']} {status}{RESET}\n")
                case "confirmation_pending" | "disambiguation_pending":
                    sys.stdout.write(f"\n{DIM}  (waiting for you: {event['type']} — use the web UI){RESET}\n")
                case "error":
                    sys.stdout.write(f"\n{RED}error {event['code']}: {event['message']} (trace {event['traceId']}){RESET}\n")
                case "done":
                    usage = event["usage"]
                    sys.stdout.write(f"\n{DIM}  [{usage['inputTokens']} in / {usage['outputTokens']} out / "
                                     f"{usage['cacheReadTokens']} cached, ${usage['costUsdMicros'] / 1e6:.4f}]{RESET}\n")
            sys.stdout.flush()
    return conversation_id


async def _chat(url: str, email: str, token: str | None, messages: list[str] | None) -> int:
    token = token or await _token_for(email)
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=httpx.Timeout(10, read=300)) as client:
        me = (await client.get("/me")).raise_for_status().json()
        staff = [m for m in me["memberships"] if m["role"] != "member"]
        if not staff:
            print("this user is not staff in any organization", file=sys.stderr)
            return 1
        org = staff[0]
        print(f"{DIM}{me['user']['fullName']} ({org['role']}) at {org['organizationName']}. "
              f"Try: who am I? / what programs do we run? / find Saar. Ctrl-D quits.{RESET}")
        conversation_id = None
        if messages:
            for text in messages:
                print(f"{BOLD}you{RESET} {text}")
                conversation_id = await _turn(client, org["organizationId"], conversation_id, text)
            return 0
        while True:
            try:
                text = await asyncio.to_thread(input, f"{BOLD}you{RESET} ")
            except EOFError:
                print()
                return 0
            if text.strip():
                conversation_id = await _turn(client, org["organizationId"], conversation_id, text)


def run_chat(url: str, email: str, token: str | None, messages: list[str] | None) -> int:
    try:
        return asyncio.run(_chat(url, email, token, messages))
    except KeyboardInterrupt:
        return 0
