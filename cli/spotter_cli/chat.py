"""`spotter chat`: a terminal client that streams a conversation the way the web sheet does."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable

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


async def _stream(client: httpx.AsyncClient, url: str, body: dict | None, state: dict) -> None:
    """POST and print one SSE stream; remembers the conversation id and any pending card."""
    state["pending"] = None
    async with aconnect_sse(client, "POST", url, json=body) as source:
        if source.response.status_code != 200:
            await source.response.aread()
            print(f"{RED}{source.response.status_code}: {source.response.text}{RESET}")
            return
        sys.stdout.write(f"{BOLD}spotter{RESET} ")
        async for sse in source.aiter_sse():
            event = json.loads(sse.data)
            match event["type"]:
                case "conversation_started":
                    state["conversation_id"] = event["conversationId"]
                case "text_delta":
                    sys.stdout.write(event["delta"])
                case "tool_started":
                    sys.stdout.write(f"\n{DIM}  → {event['router']}.{event['action']} {json.dumps(event['input'])}{RESET}\n")
                case "tool_completed":
                    status = "ok" if event["ok"] else f"failed: {event.get('output')}"
                    undo = " (undo available)" if event.get("inverseAvailable") else ""
                    sys.stdout.write(f"{DIM}  ← {event['router']}.{event['action']} {status}{undo}{RESET}\n")
                case "confirmation_pending":
                    state["pending"] = event
                    sys.stdout.write(f"\n{BOLD}  needs your approval ({event['confirm']}): {event['router']}.{event['action']} "
                                     f"{json.dumps(event['input'])}{RESET}\n")
                case "disambiguation_pending":
                    state["pending"] = event
                    sys.stdout.write(f"\n{BOLD}  {event['prompt']}{RESET}\n")
                    for i, c in enumerate(event["candidates"], 1):
                        sub = f" — {c['sublabel']}" if c.get("sublabel") else ""
                        sys.stdout.write(f"    {i}. {c['label']}{sub}\n")
                case "error":
                    sys.stdout.write(f"\n{RED}error {event['code']}: {event['message']} (trace {event['traceId']}){RESET}\n")
                case "done":
                    state["conversation_id"] = event["conversationId"]
                    usage = event["usage"]
                    sys.stdout.write(f"\n{DIM}  [{usage['inputTokens']} in / {usage['outputTokens']} out / "
                                     f"{usage['cacheReadTokens']} cached, ${usage['costUsdMicros'] / 1e6:.4f}]{RESET}\n")
            sys.stdout.flush()


async def _answer_pending(client: httpx.AsyncClient, org_id: str, state: dict,
                          ask: Callable[[str], Awaitable[str | None]]) -> None:
    """Confirmation and picker cards, answered at the prompt like the web sheet's buttons. `ask` gives
    None when input has ended (a script, `-m` with stdin closed): the card is left open, not answered."""
    while state.get("pending"):
        event = state["pending"]
        base = f"/organizations/{org_id}/agent/conversations/{state['conversation_id']}"
        question = ("  approve? [y/N] " if event["type"] == "confirmation_pending"
                    else f"  pick 1-{len(event['candidates'])} (empty: type something else) ")
        answer = await ask(question)
        if answer is None:
            print(f"\n{DIM}  (input ended: the card stays open in the conversation){RESET}")
            state["pending"] = None
            return
        answer = answer.strip()
        if event["type"] == "confirmation_pending":
            await _stream(client, f"{base}/confirm/{event['toolUseId']}", {"approved": answer.lower() in ("y", "yes")}, state)
        else:
            if not answer.isdigit() or not 1 <= int(answer) <= len(event["candidates"]):
                state["pending"] = None  # the next message closes the picker (replay guard)
                return
            chosen = event["candidates"][int(answer) - 1]["id"]
            await _stream(client, f"{base}/pick/{event['toolUseId']}", {"id": chosen}, state)


def terminal_locale(env: dict[str, str] | None = None) -> str | None:
    """The terminal's language as a BCP-47 tag for `x-locale` (LC_ALL, LC_MESSAGES, LANG: he_IL.UTF-8 →
    he-IL); None for the C/POSIX locale, so the gateway falls back to the user's own."""
    env = os.environ if env is None else env
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = env.get(name, "").split(".")[0].split("@")[0]
        if value:
            return None if value in ("C", "POSIX") else value.replace("_", "-")
    return None


async def signed_in(url: str, email: str, token: str | None) -> httpx.AsyncClient:
    """A client of the gateway as this user (a development token minted for `email` unless given),
    speaking the terminal's language."""
    headers = {"Authorization": f"Bearer {token or await _token_for(email)}"}
    if locale := terminal_locale():
        headers["x-locale"] = locale
    return httpx.AsyncClient(base_url=url, headers=headers, timeout=httpx.Timeout(10, read=300))


async def _chat(url: str, email: str, token: str | None, messages: list[str] | None) -> int:
    async with await signed_in(url, email, token) as client:
        me = (await client.get("/me")).raise_for_status().json()
        staff = [m for m in me["memberships"] if m["role"] != "member"]
        if not staff:
            print("this user is not staff in any organization", file=sys.stderr)
            return 1
        org = staff[0]
        print(f"{DIM}{me['user']['fullName']} ({org['role']}) at {org['organizationName']}. "
              f"Try: who am I? / what programs do we run? / find Saar. Ctrl-D quits.{RESET}")
        state: dict = {"conversation_id": None, "pending": None}
        url = f"/organizations/{org['organizationId']}/agent/messages"

        async def ask(prompt: str) -> str | None:
            try:
                return await asyncio.to_thread(input, prompt)
            except EOFError:
                return None

        async def say(text: str) -> None:
            await _stream(client, url, {"conversationId": state["conversation_id"], "message": text}, state)
            await _answer_pending(client, org["organizationId"], state, ask)

        return await converse(say, messages)


async def converse(say: Callable[[str], Awaitable[None]], messages: list[str] | None) -> int:
    """The given messages one by one (`-m`), or a prompt until end of input."""
    if messages:
        for text in messages:
            print(f"{BOLD}you{RESET} {text}")
            await say(text)
        return 0
    while True:
        try:
            text = await asyncio.to_thread(input, f"{BOLD}you{RESET} ")
        except EOFError:
            print()
            return 0
        if text.strip():
            await say(text)


def run_chat(url: str, email: str, token: str | None, messages: list[str] | None) -> int:
    try:
        return asyncio.run(_chat(url, email, token, messages))
    except KeyboardInterrupt:
        return 0
