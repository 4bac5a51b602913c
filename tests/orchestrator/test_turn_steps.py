"""Unit tests of the pure step decisions the orchestrator makes on (re)entry."""

from __future__ import annotations

import json

from spotter_orchestrator.loop import CallModel, Finished, RunTools, result_from_status, split_tool_name
from spotter_orchestrator.store import StoredMessage
from spotter_orchestrator.turns import find_batch, resume_point, unfinished_text


def msg(role: str, content: list, turn: str | None = "t1", stop: str | None = None) -> StoredMessage:
    return StoredMessage(id=f"m-{role}-{len(content)}", role=role, content=content, turn_id=turn, stop_reason=stop)


TOOL_USE = {"type": "tool_use", "id": "tu1", "name": "read__members_search", "input": {"query": "x"}}


def test_resume_point_after_each_stored_state() -> None:
    user = msg("user", [{"type": "text", "text": "q"}])
    assert resume_point([], "t1") == CallModel()
    assert resume_point([user], "t1") == CallModel()
    asked = msg("assistant", [TOOL_USE])
    assert resume_point([user, asked], "t1") == RunTools(message_id=asked.id, tool_uses=[TOOL_USE])
    answered = msg("tool_result", [{"type": "tool_result", "tool_use_id": "tu1", "content": "{}"}])
    assert resume_point([user, asked, answered], "t1") == CallModel()
    final = msg("assistant", [{"type": "text", "text": "done"}], stop="end_turn")
    assert resume_point([user, asked, answered, final], "t1") == Finished(stop_reason="end_turn")
    # Another turn's last message never resumes this one.
    assert resume_point([user, msg("assistant", [TOOL_USE], turn="t0")], "t1") == CallModel()


def test_unfinished_text_is_what_streamed_since_the_last_other_event() -> None:
    logged = [{"type": "text_delta", "delta": "old "}, {"type": "message_done"},
              {"type": "text_delta", "delta": "new "}, {"type": "text_delta", "delta": "text"}]
    assert unfinished_text(logged) == "new text"
    assert unfinished_text(logged + [{"type": "tool_started"}]) == ""


def test_find_batch_and_results_from_statuses() -> None:
    asked = msg("assistant", [TOOL_USE, {**TOOL_USE, "id": "tu2"}])
    assert find_batch([asked], "tu2") == (asked, asked.content)
    assert find_batch([asked], "nope") is None
    ok = result_from_status("tu1", {"status": "succeeded", "output": {"a": 1}, "error_code": None, "error_message": None})
    assert ok == {"type": "tool_result", "tool_use_id": "tu1", "content": json.dumps({"a": 1})}
    rejected = result_from_status("tu2", {"status": "rejected_by_user", "output": None, "error_code": "rejected_by_user", "error_message": None})
    assert rejected["is_error"] and json.loads(rejected["content"])["code"] == "rejected_by_user"
    pending = result_from_status("tu3", {"status": "pending", "output": None, "error_code": None, "error_message": None})
    assert pending["is_error"] and "superseded" in pending["content"]
    assert split_tool_name("workouts__delete") == ("workouts", "delete") and split_tool_name("bad") == ("", "bad")
