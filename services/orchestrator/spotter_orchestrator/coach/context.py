"""Seed 003 §4: the coach's prompt from its session's event log. Context events become native
messages — every tool_use answered by its tool_result in the next user message, knowledge and
artifacts that arrive while a result is pending buffered behind it, consecutive user messages merged —
and the request carries four cache breakpoints: the last tool, the system prompt, the member's data
(rebuilt each turn, its own breakpoint) and the tail of the last message."""

from __future__ import annotations

import html
import json
from typing import Any, Final

from spotter_shared import coach_data
from spotter_shared.sessions import SessionEvent

CACHE: Final = {"type": "ephemeral"}

# Which stored events build the prompt (seed 003 §7.4); the rest are observability.
CONTEXT_EVENTS: Final = ("user.message", "agent.tool_call", "agent.tool_result", "coach.knowledge", "coach.artifact")
INTERRUPTED: Final = ('<tool_result tool="{name}" status="error">\nThis call was interrupted (the service restarted) '
                      'and did not finish. Call it again if it is still needed.\n</tool_result>')
CORRECTION: Final = ("<coach_correction>Your last reply had no tool call. Every reply must be exactly one tool call: "
                     "talk to the member with message_notify_user (or ask with message_ask_user), then call idle."
                     "</coach_correction>")

SYSTEM_PROMPT: Final = """You are Spotter Coach, a personal trainer inside a fitness studio's app. You talk with one member of
the studio about their own training: you build workouts for them, change them, log them and look at their
progress. You never talk about other members and you have no access to the studio's business data.

<agent_loop>
You work in a loop. Each reply is exactly one tool call; the app runs it and shows you the result, then you
choose the next call. The loop ends when you call idle (everything asked is done) or message_ask_user (you
need the member's answer). Never reply with plain text: the member sees only what your tools send.
</agent_loop>

<knowledge_injection>
Before each member message, the app loads the member's data you are likely to need and adds it as
<knowledge source="..."> blocks. <user_data> in the system prompt holds their units, body stats and current
location with its equipment. If something you need is missing, call fetch_data.
</knowledge_injection>

<event_stream>
The conversation holds the member's messages, your tool calls and their results, knowledge blocks, and
<artifact> blocks for the workouts you created. <current_workout> knowledge is the workout the app shows.
</event_stream>

<message_rules>
- Use message_notify_user for everything the member should read; keep it short, warm and concrete.
- Use message_ask_user only when you cannot go on without the member's answer; offer 2-4 options.
- Write in the member's language.
- Safety first: respect injuries and limits in their preferences; for pain or medical questions, suggest a
  professional and do not diagnose.
</message_rules>

<tool_use_rules>
- One tool call per reply, never none.
- Call idle once the member has what they asked for (after message_notify_user).
- A tool result with status="error" tells you what to fix: fix the call and try again, or tell the member.
</tool_use_rules>

<exercise_types>
reps: sets, reps[] (one per set), rest_sec; optional load_each[] (one per set) with load_unit.
hold: sets, hold_sec[] (one per set), rest_sec.
duration: duration_min; optional distance with distance_unit, target_pace.
intervals: rounds, work_sec, rest_sec.
Every exercise: exercise_name, exercise_type, order, muscles_utilized and goals_addressed (shares add up to
1.0), reasoning. Group exercises (superset, circuit, ...) with group {id, type, position}.
</exercise_types>

<exercise_recommendation_rules>
1. Injuries, limits and preferences come first.
2. Only equipment available at the member's current location (bodyweight always works).
3. Their goals and focus muscles; balance what their recent history under-trained.
4. Their level and the time they have.
Use the member's units.
</exercise_recommendation_rules>

<artifact_rules>
generate_workout creates an artifact and returns its artifact_id. You MUST then call message_notify_user with
that artifact_id, or the member sees nothing. After swap_exercise, adjust_exercise or remove_exercise, deliver
the updated workout the same way. log_workout closes the workout.
</artifact_rules>"""


def tool_params(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    tools = [dict(spec) for spec in specs]
    if tools:
        tools[-1] = {**tools[-1], "cache_control": CACHE}  # breakpoint 1
    return tools


def system_blocks(user_data: str) -> list[dict[str, Any]]:
    return [
        {"type": "text", "text": SYSTEM_PROMPT, "cache_control": CACHE},  # breakpoint 2
        {"type": "text", "text": user_data, "cache_control": CACHE},  # breakpoint 3
    ]


knowledge_text = coach_data.knowledge_block


def artifact_text(artifact: dict[str, Any]) -> str:
    summary = artifact.get("summary", {})
    listing = "\n".join(
        f"{e.get('order')}. {e.get('exercise_name')} ({e.get('exercise_type')}) id={e.get('id')}"
        for e in artifact.get("payload", {}).get("exercises", [])
    )
    return (f'<artifact type="{html.escape(str(artifact.get("type")))}" id="{html.escape(str(artifact.get("artifact_id")))}">\n'
            f"{html.escape(str(artifact.get('title')))} — {summary.get('exercise_count')} exercises, "
            f"muscles: {', '.join(summary.get('muscles', []))}\n{html.escape(listing)}\n</artifact>")


def current_workout_text(workout: dict[str, Any]) -> str:
    """The workout the app shows (the client's `currentWorkout`), as knowledge the model can act on."""
    lines = [f"Title: {workout.get('title', '')}"]
    for e in sorted(workout.get("exercises", []) or [], key=lambda e: e.get("order", 0) if isinstance(e, dict) else 0):
        if isinstance(e, dict):
            lines.append(f"{e.get('order')}. {e.get('exercise_name')} ({e.get('exercise_type')}) id={e.get('id')}")
    return html.escape("\n".join(lines))


def messages_of(events: list[SessionEvent]) -> list[dict[str, Any]]:
    """Seed 003 §4.3's conversion; raises on an empty log (§12.2)."""
    context = [e for e in events if e.event_type in CONTEXT_EVENTS]
    if not context:
        raise ValueError("Cannot build context: no events in session")
    messages: list[dict[str, Any]] = []
    pending: dict[str, Any] | None = None  # the tool_call whose result has not come yet
    buffered: list[dict[str, Any]] = []

    def user_text(text: str) -> None:
        block = {"type": "text", "text": text}
        if pending is not None:
            buffered.append(block)
        elif messages and messages[-1]["role"] == "user":
            messages[-1]["content"].append(block)
        else:
            messages.append({"role": "user", "content": [block]})

    for event in context:
        meta = event.metadata
        match event.event_type:
            case "user.message":
                user_text("".join(p.get("text", "") for p in event.content if isinstance(p, dict)))
            case "coach.knowledge":
                user_text(knowledge_text(meta.get("source", ""), meta.get("data", "")))
            case "coach.artifact":
                user_text(artifact_text(meta.get("artifact", {})))
            case "agent.tool_call":
                if pending is not None:  # a call whose result never came (a crash): answered as interrupted
                    _answer(messages, pending, INTERRUPTED.format(name=pending["name"]), True, buffered)
                    buffered = []
                content = meta.get("assistantContent") or [
                    {"type": "tool_use", "id": meta["callId"], "name": meta["toolName"], "input": meta.get("arguments", {})}]
                messages.append({"role": "assistant", "content": [dict(b) for b in content]})
                pending = {"id": meta["callId"], "name": meta["toolName"]}
                buffered = []
            case "agent.tool_result":
                if pending is None or meta.get("callId") != pending["id"]:
                    continue  # a result of a call that is not the open one: never replayed out of place
                _answer(messages, pending, meta.get("formatted", ""), not meta.get("success", False), buffered)
                pending, buffered = None, []
    if pending is not None:
        _answer(messages, pending, INTERRUPTED.format(name=pending["name"]), True, buffered)
    if messages and messages[0]["role"] != "user":
        messages.insert(0, {"role": "user", "content": [{"type": "text", "text": "(session resumed)"}]})
    return messages


def _answer(messages: list[dict[str, Any]], pending: dict[str, Any], text: str, is_error: bool,
            buffered: list[dict[str, Any]]) -> None:
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": pending["id"], "content": text}
    if is_error:
        result["is_error"] = True
    messages.append({"role": "user", "content": [result, *buffered]})


def with_cached_tail(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Breakpoint 4: the last content block of the last message."""
    out = json.loads(json.dumps(messages))
    if out and out[-1]["content"]:
        out[-1]["content"][-1]["cache_control"] = CACHE
    return out
