"""What the demo policy reads from a request: the user's latest words, the tools it may call, and
the tool calls already answered for those words (the exchange so far).

The policy keeps no state between requests: every step is derived again from the conversation the
request carries, so a replayed or retried request gets the same answer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from .conversation import content_blocks, strip_app_text
from .turns import ToolUseSpec, Turn

# The app reports facts (an Undo, …) as <app_event> text in a user turn; they are not the user's words.
_APP_EVENT_RE = re.compile(r"<app_event\b[^>]*>.*?</app_event>", re.S)

_PREAMBLES = {
    "get_current_context": "Let me check who you are.",
    "programs_list": "Let me pull up your programs.",
    "members_search": "Let me look that member up.",
    "members_get": "Let me open their details.",
    "ask_user_to_pick": "Several match.",
    "create": "Creating it.",
    "list": "Let me find it.",
    "delete": "Deleting it once you approve.",
    "exercises_search": "Let me search the exercise library.",
    "attendance_summary": "Let me look at attendance.",
    "at_risk_members": "Let me check who might be slipping away.",
    "revenue_summary": "Let me pull up the revenue.",
    "list_pending_for_org": "Let me check who still owes forms.",
}


@dataclass(frozen=True)
class Step:
    """One tool call of this exchange, with its result."""

    name: str
    input: dict[str, Any]
    data: Any  # the result parsed as JSON; None when it is not JSON
    raw: str
    is_error: bool

    @property
    def router(self) -> str:
        return self.name.split("__")[0] if "__" in self.name else ""

    @property
    def action(self) -> str:
        return self.name.split("__")[-1]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default) if isinstance(self.data, dict) else default


@dataclass(frozen=True)
class Exchange:
    text: str  # the user's latest words, app events and the turn's context left out
    tools: tuple[str, ...]  # names of the tools the request lets the model call
    steps: tuple[Step, ...]  # tool calls answered since those words, oldest first
    answering: tuple[Step, ...]  # the results the request ends with; empty when it ends with the words

    @classmethod
    def of(cls, body: dict[str, Any]) -> Exchange:
        messages: list[dict[str, Any]] = body["messages"]
        tools = tuple(t["name"] for t in body.get("tools") or [] if isinstance(t.get("name"), str))
        if (body.get("tool_choice") or {}).get("type") == "none":
            tools = ()  # tools are described but may not be called
        start = _latest_words(messages)
        text = _words(messages[start]) if start is not None else ""
        after = messages[start + 1 :] if start is not None else messages
        steps = _steps(after)
        last = after[-1] if after else None
        ending = sum(1 for b in content_blocks(last) if b.get("type") == "tool_result") if last else 0
        answering = steps[len(steps) - ending :] if last and last.get("role") == "user" and ending else ()
        return cls(text, tools, steps, answering)

    def tool(self, router: str, action: str) -> str | None:
        """The offered tool for router/action. A read may come from any router offering the action
        (a catalog may rename the read router); a write only from its own router."""
        name = f"{router}__{action}"
        if name in self.tools:
            return name
        if router != "read":
            return None
        return next((t for t in self.tools if t.split("__")[-1] == action), None)

    def lacking(self, *names: str) -> Turn | None:
        """A plain answer when one of the tools (`router__action`) a plan needs is not offered."""
        for name in names:
            router, action = name.split("__")
            if self.tool(router, action) is None:
                return missing(action)
        return None

    def call(self, router: str, action: str, tool_input: dict[str, Any], say: str | None = None) -> Turn:
        name = self.tool(router, action)
        if name is None:
            return missing(action)
        use = ToolUseSpec(name=name, input=tool_input)
        return Turn(text=say or _PREAMBLES.get(action, "One moment."), tool_uses=[use])

    def done(self, action: str, router: str | None = None) -> Step | None:
        """The latest successful call of `action` (of `router`, when given) in this exchange."""
        for step in reversed(self.steps):
            if step.action == action and not step.is_error and (router is None or step.router == router):
                return step
        return None


def missing(action: str) -> Turn:
    return Turn(text=f"I'd use {action.replace('_', ' ')} for that, but that tool isn't available to me here.")


def parse_content(content: Any) -> tuple[Any, str]:
    """A tool_result's content as (parsed JSON or None, raw text)."""
    if isinstance(content, list):
        raw = "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    else:
        raw = content if isinstance(content, str) else ""
    try:
        return json.loads(raw), raw
    except ValueError:
        return None, raw


def _words(message: dict[str, Any]) -> str:
    text = "\n".join(b["text"] for b in content_blocks(message) if b.get("type") == "text" and b.get("text"))
    return strip_app_text(_APP_EVENT_RE.sub("", text))


def _latest_words(messages: list[dict[str, Any]]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user" and _words(messages[i]):
            return i
    return None


def _steps(messages: list[dict[str, Any]]) -> tuple[Step, ...]:
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    steps: list[Step] = []
    for message in messages:
        for block in content_blocks(message):
            if block.get("type") == "tool_use":
                calls[block.get("id", "")] = (block.get("name", "tool"), block.get("input") or {})
            elif block.get("type") == "tool_result":
                name, tool_input = calls.get(block.get("tool_use_id", ""), ("tool", {}))
                data, raw = parse_content(block.get("content"))
                steps.append(Step(name, tool_input, data, raw, bool(block.get("is_error"))))
    return tuple(steps)
