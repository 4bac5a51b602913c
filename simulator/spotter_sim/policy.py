"""What the simulated model says: titles and summaries by their own rules (side_tasks), then for the
agent's requests scripted turns first, then the demo policy.

A script is a queue of assistant turns for requests whose latest user text
contains `match`. Which turn a request gets is derived from the request itself
(how many assistant messages follow that user text), so retries and replays are
deterministic and independent of request ordering.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from . import coach_demo, coach_schema, demo, side_tasks
from .conversation import exchange_progress, latest_user_text
from .turns import DONE, Turn


@dataclass
class Script:
    id: str
    match: str | None
    responses: list[Turn]
    times: int | None  # how many exchanges may start with this script; None = unlimited
    started: int = 0

    def applies(self, user_text: str, progress: int) -> bool:
        if self.match is not None and self.match.lower() not in user_text.lower():
            return False
        # An exhausted script still finishes exchanges it already started.
        return self.times is None or self.started < self.times or progress > 0

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "match": self.match,
            "times": self.times,
            "started": self.started,
            "responses": [t.model_dump() for t in self.responses],
        }


class ScriptStore:
    def __init__(self) -> None:
        self._scripts: list[Script] = []

    def add(self, match: str | None, responses: list[Turn], times: int | None) -> Script:
        script = Script(f"script_{secrets.token_hex(6)}", match, responses, times)
        self._scripts.append(script)
        return script

    def clear(self) -> None:
        self._scripts.clear()

    def list(self) -> list[dict[str, Any]]:
        return [s.describe() for s in self._scripts]

    def pick(self, user_text: str, progress: int) -> Script | None:
        # Newest first, so a test can override a broader script registered earlier.
        for script in reversed(self._scripts):
            if script.applies(user_text, progress):
                return script
        return None


@dataclass(frozen=True)
class Decision:
    turn: Turn
    script_id: str | None
    kind: side_tasks.Kind = "agent"


def decide(body: dict[str, Any], scripts: ScriptStore) -> Decision:
    kind = side_tasks.kind_of(body)
    if kind != "agent":
        # Scripts are written for the agent's turns: a title request quoting "find Saar" must not
        # be answered with the tool call scripted for "find Saar".
        return Decision(coach_schema.conform_turn(body, side_tasks.respond(body, kind)), None, kind)
    messages = body["messages"]
    user_text = latest_user_text(messages)
    progress = exchange_progress(messages)
    script = scripts.pick(user_text, progress)
    if script is None:
        # The member coach (its tools include generate_workout) has a demo of its own.
        answer = coach_demo.respond(body) if coach_demo.is_coach(body) else demo.respond(body)
        return Decision(coach_schema.conform_turn(body, answer), None)
    if progress == 0:
        script.started += 1
    turn = script.responses[progress] if progress < len(script.responses) else DONE
    return Decision(turn, script.id)
