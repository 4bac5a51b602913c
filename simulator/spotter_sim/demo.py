"""The deterministic demo "model" used when no script matches.

It recognises a few intents in the latest user text, calls only tools that the
request offers (names are `{router}__{action}`), and summarises tool results
in plain sentences.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .conversation import ambient_item_count, content_blocks, latest_user_text
from .turns import ToolUseSpec, Turn

_TASK_CREATE_RE = re.compile(r"\b(?:create|add)\s+(?:a\s+)?task\s+(?:called\s+|named\s+)?(.+)", re.I)
_TASK_DELETE_RE = re.compile(r"\b(?:delete|remove)\s+(?:the\s+)?task\s+(?:called\s+|named\s+)?(.+)", re.I)
_FIND_RE = re.compile(r"\b(?:find|search(?:\s+for)?|look\s+up)\s+(?:the\s+)?(?:members?\s+)?(.+)", re.I)


def respond(body: dict[str, Any]) -> Turn:
    messages: list[dict[str, Any]] = body["messages"]
    tools = [t["name"] for t in body.get("tools") or [] if isinstance(t.get("name"), str)]
    if (body.get("tool_choice") or {}).get("type") == "none":
        tools = []  # tools are described but may not be called

    last = messages[-1]
    results = [b for b in content_blocks(last) if b.get("type") == "tool_result"] if last["role"] == "user" else []
    if results:
        names = _tool_names_by_id(messages[-2] if len(messages) > 1 else None)
        chained = _chain(names, results, tools, latest_user_text(messages))
        if chained is not None:
            return chained
        return Turn(text=" ".join(_summarise(names.get(r["tool_use_id"], "tool"), r) for r in results))

    text = latest_user_text(messages)
    lowered = text.lower()
    task = _TASK_CREATE_RE.search(text)
    if task and _clean(task.group(1)):
        return _call(tools, "create", {"title": _clean(task.group(1))}, router="tasks")
    task = _TASK_DELETE_RE.search(text)
    if task and _clean(task.group(1)):
        return _call(tools, "list", {}, router="tasks")
    if "who am i" in lowered:
        return _call(tools, "get_current_context", {})
    if "program" in lowered:
        return _call(tools, "programs_list", {})
    found = _FIND_RE.search(text)
    if found and found.group(1).strip(" ?.!\"'"):
        return _call(tools, "members_search", {"query": found.group(1).strip(" ?.!\"'")})
    return Turn(text=_greeting(body))


def _greeting(body: dict[str, Any]) -> str:
    text = (
        "Hi! I'm Spotter, your studio assistant. I can tell you who you're signed in as, "
        "list your programs, find members (\"find Saar\"), and create or delete tasks "
        "(\"add a task call the plumber\", \"delete task call the plumber\"). Just ask."
    )
    count = ambient_item_count(body)
    if count is not None:
        text += f" I can see {count} item{'s' if count != 1 else ''} in your current context."
    return text


def _clean(value: str) -> str:
    return value.strip(" ?.!\"'")


def _chain(names: dict[str, str], results: list[dict[str, Any]], tools: list[str], user_text: str) -> Turn | None:
    """A second step that depends on the first one's result, as a real model would take it:
    several members match → ask which one; a pick → its detail; the task list → delete the one named."""
    if len(results) != 1 or results[0].get("is_error"):
        return None
    action = names.get(results[0]["tool_use_id"], "").split("__")[-1]
    data, _ = _parse_content(results[0].get("content"))
    if not isinstance(data, dict):
        return None
    if action == "members_search" and len(data.get("members") or []) >= 2 and _find_tool(tools, "ask_user_to_pick"):
        found = _FIND_RE.search(user_text)
        candidates = [
            {"id": m["membershipId"], "label": m.get("name") or "?", "sublabel": m.get("plan") or m.get("email")}
            for m in data["members"][:8] if m.get("membershipId")
        ]
        prompt = f"Which {_clean(found.group(1)) if found else 'member'}?"
        return _call(tools, "ask_user_to_pick", {"kind": "member", "prompt": prompt, "candidates": candidates})
    if action == "ask_user_to_pick" and data.get("pickedId") and data.get("kind") == "member":
        return _call(tools, "members_get", {"membershipId": data["pickedId"]})
    wanted = _TASK_DELETE_RE.search(user_text)
    if action == "list" and wanted and isinstance(data.get("tasks"), list):
        name = _clean(wanted.group(1)).lower()
        match = next((t for t in data["tasks"] if name in str(t.get("title", "")).lower()), None)
        if match is None:
            return Turn(text=f"I couldn't find a task called {_clean(wanted.group(1))}.")
        return _call(tools, "delete", {"id": match["id"]}, router="tasks")
    return None


def _call(tools: list[str], action: str, tool_input: dict[str, Any], router: str = "read") -> Turn:
    name = f"{router}__{action}" if f"{router}__{action}" in tools else _find_tool(tools, action)
    if name is None:
        return Turn(text=f"I'd use {action.replace('_', ' ')} for that, but that tool isn't available to me here.")
    return Turn(text=_preamble(action), tool_uses=[ToolUseSpec(name=name, input=tool_input)])


def _preamble(action: str) -> str:
    return {
        "get_current_context": "Let me check who you are.",
        "programs_list": "Let me pull up your programs.",
        "members_search": "Let me look that member up.",
        "ask_user_to_pick": "Several match.",
        "create": "Creating it.",
        "list": "Let me find it.",
        "delete": "Deleting it once you approve.",
    }.get(action, "One moment.")


def _find_tool(tools: list[str], action: str) -> str | None:
    """Prefer the `read__` router, else any router offering the action."""
    if f"read__{action}" in tools:
        return f"read__{action}"
    return next((t for t in tools if t.split("__")[-1] == action), None)


def _tool_names_by_id(message: dict[str, Any] | None) -> dict[str, str]:
    if not message or message.get("role") != "assistant":
        return {}
    return {b["id"]: b["name"] for b in content_blocks(message) if b.get("type") == "tool_use"}


# --- tool result summaries -------------------------------------------------------


def _summarise(tool: str, result: dict[str, Any]) -> str:
    data, raw = _parse_content(result.get("content"))
    action = tool.split("__")[-1]
    if result.get("is_error"):
        code = _first(data, ("code", "error_code", "type")) if data is not None else None
        return f"I couldn't complete {action}: {code or raw[:80] or 'unknown error'}."
    if action == "get_current_context" and isinstance(data, dict):
        return _context_sentence(data)
    items = _items(data)
    if action == "programs_list" and items is not None:
        names = [n for n in (_name(i) for i in items) if n]
        return f"Your programs: {', '.join(names)}." if names else "There are no programs yet."
    if action == "members_search" and items is not None:
        if not items:
            return "No members matched that search."
        if len(items) == 1:
            return f"Found {_member_sentence(items[0])}."
        names = [n for n in (_name(i) for i in items) if n]
        return f"Found {len(items)} members: {', '.join(names)}."
    if action == "create" and isinstance(data, dict) and data.get("title"):
        return f"Created \"{data['title']}\". You can undo it."
    if action == "delete" and isinstance(data, dict) and (data.get("title") or data.get("name")):
        return f"Deleted \"{data.get('title') or data.get('name')}\"."
    if action == "members_get" and isinstance(data, dict):
        member = data.get("member") if isinstance(data.get("member"), dict) else data
        return f"Here is {_member_sentence(member)}."
    if items is not None:
        return f"{action} returned {len(items)} result{'s' if len(items) != 1 else ''}."
    if isinstance(data, dict):
        pairs = ", ".join(f"{k}: {v}" for k, v in list(data.items())[:3] if not isinstance(v, (dict, list)))
        return f"{action} returned {pairs}." if pairs else f"{action} returned a result."
    return f"{action} said: {raw[:200]}" if raw else f"{action} returned nothing."


def _parse_content(content: Any) -> tuple[Any, str]:
    """A tool_result's content as (parsed JSON or None, raw text)."""
    if isinstance(content, list):
        raw = "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    else:
        raw = content if isinstance(content, str) else ""
    try:
        return json.loads(raw), raw
    except ValueError:
        return None, raw


def _items(data: Any) -> list[Any] | None:
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        for key in ("items", "results", "data", "programs", "members"):
            if isinstance(data.get(key), list):
                return data[key]
    return None


def _name(obj: Any) -> str | None:
    if isinstance(obj, str):
        return obj
    if not isinstance(obj, dict):
        return None
    for key in ("name", "full_name", "display_name", "title"):
        if isinstance(obj.get(key), str):
            return obj[key]
    parts = [obj.get("first_name"), obj.get("last_name")]
    return " ".join(p for p in parts if isinstance(p, str)) or None


def _first(data: Any, keys: tuple[str, ...]) -> str | None:
    """First scalar value under any of `keys`, searching depth-first."""
    if isinstance(data, dict):
        for key in keys:
            value = data.get(key)
            if isinstance(value, (str, int, float)) and not isinstance(value, bool):
                return str(value)
            if isinstance(value, dict):
                named = _name(value)
                if named:
                    return named
        for value in data.values():
            found = _first(value, keys)
            if found:
                return found
    elif isinstance(data, list):
        for value in data:
            found = _first(value, keys)
            if found:
                return found
    return None


def _context_sentence(data: dict[str, Any]) -> str:
    person = next((data[k] for k in ("caller", "user", "me", "staff", "actor") if isinstance(data.get(k), dict)), data)
    name = _name(person) or "signed in"
    role = _first(person, ("role", "role_name")) or _first(data, ("role", "role_name"))
    if role is None and isinstance(person.get("roles"), list) and person["roles"]:
        role = ", ".join(str(r) for r in person["roles"])
    org_value = next((data[k] for k in ("org", "organization", "studio", "tenant") if k in data), None)
    org = _name(org_value) or _first(data, ("org_name", "organization_name", "studio_name")) or "your studio"
    return f"You are {name} ({role or 'member'}) at {org}."


def _member_sentence(member: Any) -> str:
    name = _name(member) or "that member"
    if not isinstance(member, dict):
        return name
    plan = _first(member, ("plan", "plan_name", "membership_plan", "membership")) or "no plan"
    status = _first(member, ("paymentStatus", "payment_status", "billing_status", "payment", "status")) or "unknown"
    return f"{name} — {plan}, payment {status}"
