"""Seed 003 §4 and §5 as pure functions: the session's events become native messages (every tool_use
answered next, knowledge and artifacts buffered behind a pending result, user messages merged, a call
cut short by a crash answered as interrupted), four cache breakpoints, and the initializer's selection
held to the append-only rules whatever the model says."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from spotter_orchestrator.coach import context, initializer
from spotter_shared.sessions import SessionEvent

_seq = iter(range(1, 10_000))


def ev(event_type: str, *, text: str | None = None, **metadata) -> SessionEvent:
    content = [{"type": "text", "text": text}] if text is not None else []
    return SessionEvent(session_id="s", sequence=next(_seq), event_type=event_type, role="system", content=content,
                        metadata=metadata, thread_id=None, external_event_id=None, created_at=datetime.now(UTC))


def call(call_id: str, name: str = "generate_workout", **args) -> SessionEvent:
    return ev("agent.tool_call", callId=call_id, toolName=name, arguments=args)


def result(call_id: str, text: str = "ok", success: bool = True) -> SessionEvent:
    return ev("agent.tool_result", callId=call_id, toolName="x", formatted=text, success=success)


def test_events_become_alternating_messages_with_every_tool_use_answered() -> None:
    events = [
        ev("user.message", text="leg day please"),
        ev("coach.knowledge", source="workout_history", data="No workouts logged."),
        ev("coach.llm_request", model="m"),  # observability: never in the prompt
        call("t1", title="Legs"),
        ev("coach.knowledge", source="category_goals", data="strength"),  # arrives while t1 is pending
        result("t1", "made art_1"),
        ev("coach.artifact", artifact={"artifact_id": "art_1", "type": "exercise_list", "title": "Legs",
                                       "summary": {"exercise_count": 1, "muscles": ["Glutes"]},
                                       "payload": {"exercises": [{"order": 1, "exercise_name": "Squat", "exercise_type": "reps", "id": "e1"}]}}),
        call("t2", "message_notify_user", message="here", artifact_id="art_1"),
        result("t2", "sent", success=False),
        ev("user.message", text="thanks"),
        ev("user.message", text="and tomorrow?"),
    ]
    messages = context.messages_of(events)
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert [b["text"] for b in messages[0]["content"]] == [
        "leg day please", '<knowledge source="workout_history">\nNo workouts logged.\n</knowledge>']
    assert messages[1]["content"] == [{"type": "tool_use", "id": "t1", "name": "generate_workout", "input": {"title": "Legs"}}]
    first = messages[2]["content"]
    assert first[0] == {"type": "tool_result", "tool_use_id": "t1", "content": "made art_1"}
    assert first[1]["text"].startswith('<knowledge source="category_goals">')  # buffered behind the result
    assert first[2]["text"].startswith('<artifact type="exercise_list" id="art_1">') and "1. Squat (reps) id=e1" in first[2]["text"]
    last = messages[4]["content"]
    assert last[0] == {"type": "tool_result", "tool_use_id": "t2", "content": "sent", "is_error": True}
    assert [b["text"] for b in last[1:]] == ["thanks", "and tomorrow?"]  # consecutive user messages merged


def test_a_call_cut_short_by_a_crash_is_answered_as_interrupted() -> None:
    messages = context.messages_of([ev("user.message", text="go"), call("t9", "log_workout")])
    assert messages[-1]["content"][0]["tool_use_id"] == "t9" and messages[-1]["content"][0]["is_error"]
    assert "interrupted" in messages[-1]["content"][0]["content"]
    with pytest.raises(ValueError, match="no events in session"):
        context.messages_of([ev("coach.llm_request")])


def test_four_cache_breakpoints() -> None:
    tools = context.tool_params([{"name": "a"}, {"name": "b"}])
    system = context.system_blocks("<user_data>\n</user_data>")
    messages = context.with_cached_tail(context.messages_of([ev("user.message", text="hi")]))
    marked = [t for t in tools if "cache_control" in t] + [b for b in system if "cache_control" in b] + \
        [b for m in messages for b in m["content"] if "cache_control" in b]
    assert len(marked) == 4 and tools[-1]["cache_control"] == {"type": "ephemeral"}
    assert system[1]["text"] == "<user_data>\n</user_data>"


def test_the_initializer_appends_only_what_is_missing_or_wider() -> None:
    loaded = initializer.loaded_sources([ev("coach.knowledge", source="workout_history", daysBack=14),
                                         ev("coach.knowledge", source="category_goals")])
    assert loaded == {"workout_history": 14, "category_goals": None}
    answer = {"reasoning": "progress", "use_existing": ["category_goals", "nonsense"], "append_knowledge": [
        {"source": "workout_history", "reason": "expand_range", "days_back": 30},
        {"source": "category_goals", "reason": "not_in_context", "days_back": None},  # already there: dropped
        {"source": "muscle_goals", "reason": "not_in_context", "days_back": 9},  # not ranged: no days_back
        {"source": "passwords", "reason": "not_in_context", "days_back": None},
    ]}
    selection = initializer.parse(json.dumps(answer), loaded)
    assert selection.append == [("workout_history", "expand_range", 30), ("muscle_goals", "not_in_context", None)]
    assert selection.use_existing == ["category_goals"]
    assert initializer.params_of(selection) == {"workout_history": {"days_back": 30}}
    narrower = initializer.parse(json.dumps({"append_knowledge": [{"source": "workout_history", "reason": "x", "days_back": 7}]}), loaded)
    assert narrower.append == []
    body = initializer.request_body("claude-haiku-5-5", "how was my month?", loaded)
    assert body["output_config"]["format"]["type"] == "json_schema" and "tools" not in body
    assert body["system"][0]["text"].startswith(initializer.MARKER)
    assert "<loaded_sources>workout_history(days_back=14), category_goals</loaded_sources>" in body["messages"][0]["content"][0]["text"]
