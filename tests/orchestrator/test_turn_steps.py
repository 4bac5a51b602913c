"""Unit tests of the pure step decisions the orchestrator makes on (re)entry."""

from __future__ import annotations

import json

from spotter_orchestrator.calls import result_block, tool_calls
from spotter_orchestrator.loop import CallModel, Finished, RunTools
from spotter_orchestrator.store import StoredMessage
from spotter_orchestrator.turns import find_batch, resume_point, unfinished_text
from spotter_shared.contracts.events import ToolError
from spotter_shared.contracts.tools import ToolName, ToolOutcome


def msg(role: str, content: list, turn: str | None = "t1", stop: str | None = None) -> StoredMessage:
    return StoredMessage(id=f"m-{role}-{len(content)}", role=role, content=content, turn_id=turn, stop_reason=stop)


TOOL_USE = {"type": "tool_use", "id": "tu1", "name": "read__members_search", "input": {"query": "x"}}


def test_resume_point_after_each_stored_state() -> None:
    user = msg("user", [{"type": "text", "text": "q"}])
    assert resume_point([], "t1") == CallModel()
    assert resume_point([user], "t1") == CallModel()
    asked = msg("assistant", [TOOL_USE])
    assert resume_point([user, asked], "t1") == RunTools(message_id=asked.id, calls=tool_calls([TOOL_USE], {}))
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


def outcome(tool_use_id: str, **fields) -> ToolOutcome:
    return ToolOutcome(tool_use_id=tool_use_id, duration_ms=0, inverse_available=False, **fields)


def test_find_batch_and_results_from_outcomes() -> None:
    asked = msg("assistant", [TOOL_USE, {**TOOL_USE, "id": "tu2"}])
    assert find_batch([asked], "tu2") == (asked, tool_calls(asked.content, {}))
    assert find_batch([asked], "nope") is None
    ok = result_block("tu1", outcome("tu1", status="succeeded", output={"a": 1}))
    assert ok == {"type": "tool_result", "tool_use_id": "tu1", "content": json.dumps({"a": 1})}
    error = ToolError(code="rejected_by_user", message="The user rejected this action.", hint="Do not retry it unless the user asks again.")
    rejected = result_block("tu2", outcome("tu2", status="failed", error=error))
    assert rejected["is_error"] and json.loads(rejected["content"])["code"] == "rejected_by_user"
    pending = result_block("tu3", None)  # never resolved
    assert pending["is_error"] and "superseded" in pending["content"]
    assert ToolName.parse("workouts__delete") == ToolName("workouts", "delete") and ToolName.parse("bad") == ToolName("", "bad")
    assert ToolName("workouts", "delete").wire == "workouts__delete"


def test_tool_completed_and_tool_result_come_from_one_outcome() -> None:
    [call] = tool_calls([TOOL_USE], {})
    for result in (outcome("tu1", status="succeeded", output={"hits": [1]}),
                   outcome("tu1", status="failed", error=ToolError(code="invalid_input", message="bad", hint="fix"))):
        event, block = call.completed(result), call.result_block(result)
        assert json.loads(block["content"]) == event.output == result.result()
        assert event.ok == (not block.get("is_error", False)) == result.ok
        assert (event.router, event.action) == ("read", "members_search")
