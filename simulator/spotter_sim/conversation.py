"""Read-only helpers over a Messages API request body."""

from __future__ import annotations

import html
import re
from typing import Any

# Models that behave like the 5.x generation: no prefill, no sampling knobs,
# no forced tool choice, no manual thinking budgets.
GEN5_PREFIXES = ("claude-sonnet-5", "claude-opus-5", "claude-haiku-5")


def is_gen5(model: str) -> bool:
    return model.startswith(GEN5_PREFIXES)


def content_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A message's content as blocks; a bare string is shorthand for one text block."""
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


# Text the app writes into a user turn (the per-turn context, a summary of earlier messages, the
# caller's recent activity after the cache breakpoint) is not the user's words: scripts, faults and
# the demo policy read the words only. The member coach (seed 003) adds knowledge, artifacts, the
# current workout, the user data and its correction notes.
APP_TEXT_RE = re.compile(
    r"<(turn_context|conversation_summary|recent-activity|knowledge|artifact|current_workout|user_data|coach_correction)"
    r"\b[^>]*>.*?</\1>", re.S)
_ACTIVITY_RE = re.compile(r"<recent-activity\b[^>]*>(.*?)</recent-activity>", re.S)


def recent_activity(body: dict[str, Any]) -> str | None:
    """The caller's <recent-activity> block of this request (its body), if the app sent one."""
    messages = body.get("messages") or []
    if not messages:
        return None
    text = "\n".join(b.get("text", "") for b in content_blocks(messages[-1]) if b.get("type") == "text")
    found = _ACTIVITY_RE.search(text)
    return found.group(1) if found else None


def strip_app_text(text: str) -> str:
    return APP_TEXT_RE.sub("", text).strip()


def _text_of(message: dict[str, Any]) -> str | None:
    texts = [b["text"] for b in content_blocks(message) if b.get("type") == "text" and b.get("text")]
    words = strip_app_text("\n".join(texts)) if texts else ""
    return words or None


def latest_user_text_index(messages: list[dict[str, Any]]) -> int | None:
    """Index of the last user message carrying text (tool_result-only turns are skipped)."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user" and _text_of(messages[i]) is not None:
            return i
    return None


def latest_user_text(messages: list[dict[str, Any]]) -> str:
    i = latest_user_text_index(messages)
    return (_text_of(messages[i]) or "") if i is not None else ""


def exchange_progress(messages: list[dict[str, Any]]) -> int:
    """How many assistant turns already answered the latest user text.

    Scripts are keyed on this, so replaying the same conversation always
    yields the same response, regardless of how many requests came before.
    """
    start = latest_user_text_index(messages)
    tail = messages[(start + 1) if start is not None else 0 :]
    return sum(1 for m in tail if m.get("role") == "assistant")


def system_text(body: dict[str, Any]) -> str:
    """The top-level system prompt plus any `system`-role messages."""
    parts: list[str] = []
    system = body.get("system")
    if isinstance(system, str):
        parts.append(system)
    elif isinstance(system, list):
        parts.extend(b.get("text", "") for b in system if isinstance(b, dict))
    for message in body.get("messages") or []:
        if message.get("role") == "system":
            parts.extend(b.get("text", "") for b in content_blocks(message))
    return "\n".join(parts)


_AMBIENT_RE = re.compile(r"<ambient_context\b[^>]*>(.*?)</ambient_context>", re.S)
_ITEM_RE = re.compile(r"<item\b")


def latest_user_block_text(messages: list[dict[str, Any]]) -> str:
    """Every text block of the newest user message with text, app text included."""
    for message in reversed(messages):
        if message.get("role") == "user":
            texts = [b["text"] for b in content_blocks(message) if b.get("type") == "text" and b.get("text")]
            if texts:
                return "\n".join(texts)
    return ""


_AMBIENT_LINE_RE = re.compile(r"^- (\w+) (.+?) \(id [^)]*\)")
_LOCALE_RE = re.compile(r"^locale: ([A-Za-z]{2,3})", re.M)


def ambient_items(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(scope, label) of each ambient hit in the newest user turn's context, as Spotter renders them."""
    match = _AMBIENT_RE.search(latest_user_block_text(body.get("messages") or []))
    if match is None:
        return []
    return [(m.group(1), m.group(2)) for line in match.group(1).splitlines() if (m := _AMBIENT_LINE_RE.match(line.strip()))]


def caller_locale(body: dict[str, Any]) -> str:
    """The caller's language from the newest turn context (`locale: he`), else English."""
    match = _LOCALE_RE.search(latest_user_block_text(body.get("messages") or []))
    return match.group(1).lower() if match else "en"


def ambient_item_count(body: dict[str, Any]) -> int | None:
    """Items inside an `<ambient_context>` block (in the system prompt, or in the newest user turn's
    context): `<item>` tags if any, else non-empty lines."""
    match = _AMBIENT_RE.search(latest_user_block_text(body.get("messages") or [])) or _AMBIENT_RE.search(system_text(body))
    if match is None:
        return None
    inner = match.group(1)
    tagged = len(_ITEM_RE.findall(inner))
    if tagged:
        return tagged
    return sum(1 for line in inner.splitlines() if line.strip())


def user_prompt_text(body: dict[str, Any]) -> str:
    """Every text block of the request's user messages, joined: what a side task was given."""
    parts = []
    for message in body.get("messages") or []:
        if message.get("role") == "user":
            parts.extend(b.get("text", "") for b in content_blocks(message) if b.get("type") == "text")
    return "\n".join(parts)


def tagged(text: str, name: str) -> str:
    """The (unescaped) text inside `<name>…</name>`, or empty."""
    match = re.search(rf"<{name}>(.*?)</{name}>", text, re.S)
    return html.unescape(match.group(1)).strip() if match else ""
