"""Unit tests of the one judge of confirm / pick / undo (no I/O): every stable code it answers."""

from __future__ import annotations

from typing import Any

import pytest

from spotter_orchestrator.admission import Attach, Refused, Start, command_turn_id, judge
from spotter_orchestrator.calls import ToolCall
from spotter_shared.contracts.tools import CallState, ToolGate, ToolName, ToolSpec
from spotter_shared.errors import ErrorCode


def spec(action: str, *, confirm: str = "never", kind: str = "normal") -> ToolSpec:
    return ToolSpec(name=f"t__{action}", router="t", action=action, summary="s", input_schema={}, side_effects="write",
                    confirm=confirm, kind=kind, has_inverse=False)


DELETE = spec("delete", confirm="destructive")
PICKER = spec("ask_user_to_pick", kind="user_picker")
CREATE = spec("create")
CANDIDATES = {"candidates": [{"id": "a", "label": "Saar Cohen"}, {"id": 7, "label": "Saar Levi"}]}


def call(s: ToolSpec | None, tool_use_id: str = "tu1", tool_input: dict[str, Any] | None = None) -> ToolCall:
    return ToolCall(id=tool_use_id, name=ToolName("t", s.action if s else "gone"), input=tool_input or {}, spec=s)


def state(status: str, *, tool_input: dict[str, Any] | None = None, inverse: bool = False,
          gate: ToolGate | None = None) -> CallState:
    return CallState(tool_use_id="tu1", router="t", action="x", status=status, input=tool_input or {},
                     inverse_available=inverse, gate=gate)


# A tool pack's rule asked a person to confirm this one call of an otherwise ungated tool (seed 002).
GATE = ToolGate(rule="sold_pets_need_a_yes", message="Confirm first.")



@pytest.mark.parametrize(
    ("command", "the_call", "the_state", "kwargs", "expected"),
    [
        ("confirm", None, None, {}, ErrorCode.TOOL_EXECUTION_NOT_FOUND),
        ("confirm", call(DELETE), None, {}, ErrorCode.TOOL_EXECUTION_NOT_FOUND),
        ("confirm", call(CREATE), state("pending"), {}, ErrorCode.INVALID_REQUEST),
        ("confirm", call(CREATE), state("pending", gate=GATE), {}, Start()),
        ("confirm", call(CREATE), state("succeeded", gate=GATE), {}, ErrorCode.TOOL_ALREADY_RESOLVED),
        ("confirm", call(PICKER), state("pending"), {}, ErrorCode.INVALID_REQUEST),
        ("confirm", call(None), state("pending"), {}, ErrorCode.INVALID_REQUEST),  # a tool the role can't see
        ("confirm", call(DELETE), state("pending"), {}, Start()),
        ("confirm", call(DELETE), state("succeeded"), {}, ErrorCode.TOOL_ALREADY_RESOLVED),
        ("confirm", call(DELETE), state("rejected_by_user"), {}, ErrorCode.TOOL_ALREADY_RESOLVED),
        ("confirm", call(DELETE), state("pending"), {"earlier_pending": True}, ErrorCode.INVALID_REQUEST),
        ("confirm", call(DELETE), state("succeeded"), {"own_turn": "running"}, Attach()),
        ("confirm", call(DELETE), state("succeeded"), {"own_turn": "completed"}, ErrorCode.TOOL_ALREADY_RESOLVED),
        ("pick", call(DELETE), state("pending"), {"picked_id": "a"}, ErrorCode.INVALID_REQUEST),
        ("pick", call(PICKER), state("pending", tool_input=CANDIDATES), {"picked_id": "a"}, Start()),
        ("pick", call(PICKER), state("pending", tool_input=CANDIDATES), {"picked_id": "7"}, Start()),
        ("pick", call(PICKER), state("pending", tool_input=CANDIDATES), {"picked_id": "zzz"}, ErrorCode.INVALID_PICK),
        ("pick", call(PICKER), state("succeeded", tool_input=CANDIDATES), {"picked_id": "a"}, ErrorCode.TOOL_ALREADY_RESOLVED),
        ("undo", call(CREATE), state("succeeded", inverse=True), {}, Start()),
        ("undo", call(CREATE), state("succeeded", inverse=False), {}, ErrorCode.UNDO_UNAVAILABLE),
        ("undo", call(CREATE), state("failed"), {}, ErrorCode.UNDO_UNAVAILABLE),
        ("undo", call(CREATE), state("succeeded", inverse=True), {"own_turn": "running"}, Attach()),
        ("undo", call(CREATE), state("succeeded", inverse=True), {"own_turn": "completed"}, ErrorCode.TOOL_ALREADY_RESOLVED),
    ],
)
def test_judge(command: str, the_call: ToolCall | None, the_state: CallState | None, kwargs: dict[str, Any], expected: Any) -> None:
    verdict = judge(command, the_call, the_state, **kwargs)  # type: ignore[arg-type]
    if isinstance(expected, ErrorCode):
        assert isinstance(verdict, Refused) and verdict.code == expected
        assert verdict.error().http_status in (400, 404, 409, 422)
    else:
        assert verdict == expected


def test_command_turn_ids_are_deterministic_per_command_and_call() -> None:
    assert command_turn_id("confirm", "c", "tu1") == command_turn_id("confirm", "c", "tu1")
    assert len({command_turn_id(k, "c", "tu1") for k in ("confirm", "pick", "undo", "cancel")}) == 4
