"""Whether a confirm, pick, undo or cancel may start: decided here and nowhere else.

`judge` is a pure function over what the owners report — the call's recorded state (tool-runner),
its spec (the caller's catalog) and the command's own turn (ours). The gateway asks over
`spotter.turns.admit` before it opens a stream, and the orchestrator asks the same function again
when it consumes the command, so a click that raced another is refused with the same code.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal

from spotter_shared.contracts.commands import Admission, AdmitCommand
from spotter_shared.contracts.tools import CallState
from spotter_shared.errors import ErrorCode, SpotterError

from .calls import ToolCall

Resolution = Literal["confirm", "pick", "undo"]

# Deterministic turn ids: a double click publishes the same command twice, which JetStream drops,
# and both clicks stream the one turn.
_NS = uuid.UUID("0f7c4c1d-4a7e-4f51-b3f3-0e6a7a0c2b9d")

ALREADY_RESOLVED = "This action was already resolved."


def command_turn_id(command: str, conversation_id: str, tool_use_id: str) -> str:
    return str(uuid.uuid5(_NS, f"{command}:{conversation_id}:{tool_use_id}"))


@dataclass(frozen=True)
class Start:
    pass


@dataclass(frozen=True)
class Attach:
    """The same command's turn is already running: follow it rather than start another."""


@dataclass(frozen=True)
class Refused:
    code: ErrorCode
    message: str

    def error(self) -> SpotterError:
        return SpotterError(self.code, self.message)


Verdict = Start | Attach | Refused


def judge(
    command: Resolution,
    call: ToolCall | None,
    state: CallState | None,
    *,
    picked_id: str | None = None,
    earlier_pending: bool = False,
    own_turn: str | None = None,
) -> Verdict:
    """`call` is the tool_use as the model wrote it (with the caller's spec), `state` what the
    tool-runner recorded for it, `own_turn` the status of this command's deterministic turn if it
    exists, `earlier_pending` whether an earlier call of the same batch still waits for a person."""
    if call is None or state is None:
        return Refused(ErrorCode.TOOL_EXECUTION_NOT_FOUND, "No such tool call in this conversation.")
    match command:
        case "confirm" if not call.waits_for_person(state) or call.is_picker:
            return Refused(ErrorCode.INVALID_REQUEST, "This tool call does not take a confirmation.")
        case "pick" if not call.is_picker:
            return Refused(ErrorCode.INVALID_REQUEST, "This tool call does not take a pick.")
        case "pick" if state.status == "pending" and picked_id not in candidate_ids(state):
            return Refused(ErrorCode.INVALID_PICK, "That choice is not one of the offered candidates.")
        case "undo" if not state.inverse_available:
            return Refused(ErrorCode.UNDO_UNAVAILABLE, "Only a completed action that declares an undo can be undone.")
    if own_turn is not None:
        return Attach() if own_turn == "running" else Refused(ErrorCode.TOOL_ALREADY_RESOLVED, ALREADY_RESOLVED)
    if command != "undo":
        if state.status != "pending":
            return Refused(ErrorCode.TOOL_ALREADY_RESOLVED, ALREADY_RESOLVED)
        if earlier_pending:
            return Refused(ErrorCode.INVALID_REQUEST, "Resolve the earlier pending action first.")
    return Start()


def candidate_ids(state: CallState) -> set[str]:
    candidates = state.input.get("candidates")
    return {str(c.get("id")) for c in candidates if isinstance(c, dict)} if isinstance(candidates, list) else set()


def admitted(verdict: Verdict, turn_id: str) -> Admission:
    """The verdict on the wire: refusals travel as typed error replies with their stable code."""
    match verdict:
        case Refused():
            raise verdict.error()
        case Attach():
            return Admission(verdict="attach", turn_id=turn_id)
        case Start():
            return Admission(verdict="start", turn_id=turn_id)


def resolution_of(cmd: AdmitCommand) -> Resolution:
    if cmd.command == "cancel" or cmd.tool_use_id is None:
        raise SpotterError(ErrorCode.INVALID_REQUEST, f"{cmd.command} needs a toolUseId.")
    return cmd.command
