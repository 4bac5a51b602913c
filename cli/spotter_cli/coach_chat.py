"""`spotter coach`: the member coach in a terminal, streamed in seed 003's frames — the coach's
messages, the data it looked at, its progress, questions with options, and workouts as lists."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httpx
from httpx_sse import aconnect_sse

from .chat import BOLD, DIM, RED, RESET, converse, signed_in


def workout_lines(artifact: dict[str, Any]) -> list[str]:
    payload = artifact.get("payload", {})
    lines = [f"  {BOLD}{payload.get('title', '')}{RESET} {DIM}({artifact.get('artifact_id')}){RESET}"]
    for e in payload.get("exercises", []):
        lines.append(f"    {e.get('order')}. {e.get('exercise_name')} — {_prescription(e)}")
    return lines


def _prescription(e: dict[str, Any]) -> str:
    match e.get("exercise_type"):
        case "reps":
            load = f" @ {_per_set(e['load_each'], '/')} {e.get('load_unit', '')}" if e.get("load_each") else ""
            return f"{e.get('sets')} × {_per_set(e.get('reps', []), ', ')}{load}, rest {e.get('rest_sec')} s"
        case "hold":
            return f"{e.get('sets')} × {_per_set(e.get('hold_sec', []), '/')} s hold, rest {e.get('rest_sec')} s"
        case "duration":
            return f"{e.get('duration_min')} min" + (f", {e.get('distance')} {e.get('distance_unit')}" if e.get("distance") else "")
        case "intervals":
            return f"{e.get('rounds')} rounds of {e.get('work_sec')} s on / {e.get('rest_sec')} s off"
    return ""


def _per_set(values: list[Any], sep: str) -> str:
    """Once when every set is the same ("4 × 10"), else each ("3 × 10, 10, 8")."""
    shown = [f"{v:g}" if isinstance(v, float) else str(v) for v in values]
    return shown[0] if shown and len(set(shown)) == 1 else sep.join(shown)


async def _stream(client: httpx.AsyncClient, url: str, body: dict[str, Any], state: dict[str, Any]) -> None:
    async with aconnect_sse(client, "POST", url, json=body) as source:
        if source.response.status_code != 200:
            await source.response.aread()
            print(f"{RED}{source.response.status_code}: {source.response.text}{RESET}")
            return
        async for sse in source.aiter_sse():
            frame = json.loads(sse.data)
            kind, data = frame["type"], frame.get("data") or {}
            if kind == "knowledge":
                print(f"{DIM}  looked at your {data.get('displayName')}{RESET}")
            elif kind == "status" and data.get("phase") == "start":
                print(f"{DIM}  {data.get('message')}{RESET}")
            elif kind == "error":
                print(f"{RED}error {frame.get('code')}: {frame.get('message')}{RESET}")
            elif kind == "done":
                state["session_id"] = frame["sessionId"]
            elif frame.get("status") == "failed":
                print(f"{DIM}  {kind} failed{RESET}")
            elif kind == "message_notify_user" and frame.get("status") == "done":
                print(f"{BOLD}coach{RESET} {data.get('message')}")
                if frame.get("artifact"):
                    print("\n".join(workout_lines(frame["artifact"])))
            elif kind == "message_ask_user" and frame.get("status") == "done":
                print(f"{BOLD}coach{RESET} {data.get('question')}")
                for i, option in enumerate(data.get("options") or [], 1):
                    print(f"    {i}. {option}")
            elif kind == "log_workout" and frame.get("status") == "done":
                print(f"{DIM}  logged {data.get('logged_count')} of {data.get('total_in_workout')} exercises{RESET}")


async def _coach(url: str, email: str, token: str | None, messages: list[str] | None) -> int:
    async with await signed_in(url, email, token) as client:
        me = (await client.get("/me")).raise_for_status().json()
        active = [m for m in me["memberships"] if m["status"] == "active"]
        if not active:
            print("this user has no active studio membership", file=sys.stderr)
            return 1
        org = active[0]
        print(f"{DIM}{me['user']['fullName']} at {org['organizationName']}, with your coach. Try: give me a quick "
              f"30-minute workout / swap 2 / I finished it, log it. Ctrl-D quits.{RESET}")
        state: dict[str, Any] = {"session_id": None}
        url = f"/organizations/{org['organizationId']}/coach/stream"

        async def say(text: str) -> None:
            body = {"message": text} | ({"sessionId": state["session_id"]} if state["session_id"] else {})
            await _stream(client, url, body, state)

        return await converse(say, messages)


def run_coach(url: str, email: str, token: str | None, messages: list[str] | None) -> int:
    try:
        return asyncio.run(_coach(url, email, token, messages))
    except KeyboardInterrupt:
        return 0
