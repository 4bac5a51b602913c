"""Seed 003 §5: before each member message, a small model call with structured output picks the data
sources the coach needs that the session does not hold yet (append-only: a source already loaded with
enough range is reused, a wider range is appended, nothing is replaced). The picked sources are fetched
in parallel and become `coach.knowledge` events. Best effort: any failure leaves the turn to run with
what it has."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Final

from spotter_shared import coach_data
from spotter_shared.sessions import SessionEvent

log = logging.getLogger(__name__)

MARKER: Final = "You select data sources for Spotter's coach."
PROMPT: Final = MARKER + """ A member of a fitness studio just wrote to their AI coach. Pick
the member data the coach needs to answer, from these sources:
- user_profile: body stats and experience
- category_goals: training goals (strength, endurance, ...)
- muscle_goals: muscles they want to focus on
- active_preferences: injuries, limits, likes and dislikes
- workout_history: recent workouts (days_back: how far back)
- exercise_distribution: how their recent training spread over the muscles (days_back)
- user_settings: units
- all_locations: their locations and the equipment at each
Task to data: workout generation → category_goals, muscle_goals, active_preferences, workout_history;
goal setting → category_goals, muscle_goals; statistics or progress → workout_history with a wider
days_back, category_goals; location questions → all_locations; preferences → active_preferences;
general conversation → nothing unless clearly relevant.
Append only what is not loaded yet (reason not_in_context), or a wider range of a loaded source
(reason expand_range, with days_back), or a fresh copy of state that changed (reason refresh_state).
List loaded sources you are relying on in use_existing."""

SCHEMA: Final = {
    "type": "object",
    "additionalProperties": False,
    "required": ["reasoning", "append_knowledge", "use_existing"],
    "properties": {
        "reasoning": {"type": "string"},
        "append_knowledge": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["source", "reason", "days_back"],
                "properties": {
                    "source": {"type": "string", "enum": list(coach_data.SOURCES)},
                    "reason": {"type": "string", "enum": ["not_in_context", "expand_range", "refresh_state"]},
                    "days_back": {"type": ["integer", "null"]},
                },
            },
        },
        "use_existing": {"type": "array", "items": {"type": "string"}},
    },
}
_RANGED: Final = ("workout_history", "exercise_distribution")
_DEFAULT_DAYS: Final = {"workout_history": 14, "exercise_distribution": 30}


@dataclass(frozen=True)
class Selection:
    reasoning: str
    append: list[tuple[str, str, int | None]] = field(default_factory=list)  # source, reason, days_back
    use_existing: list[str] = field(default_factory=list)


def loaded_sources(events: list[SessionEvent]) -> dict[str, int | None]:
    """What the session already holds: each source with the widest days_back loaded."""
    held: dict[str, int | None] = {}
    for event in events:
        if event.event_type == "coach.knowledge" and event.metadata.get("source") in coach_data.SOURCES:
            source, days = event.metadata["source"], event.metadata.get("daysBack")
            held[source] = max(filter(None, (held.get(source), days)), default=days)
    return held


def request_body(model: str, message: str, loaded: dict[str, int | None]) -> dict[str, Any]:
    listed = ", ".join(f"{s}(days_back={d})" if d else s for s, d in loaded.items()) or "none"
    return {
        "model": model,
        "max_tokens": 400,
        "system": [{"type": "text", "text": PROMPT}],
        "messages": [{"role": "user", "content": [{"type": "text", "text":
                      f"<user_message>{message}</user_message>\n<loaded_sources>{listed}</loaded_sources>"}]}],
        "output_config": {"format": {"type": "json_schema", "schema": SCHEMA}},
    }


def parse(text: str, loaded: dict[str, int | None]) -> Selection:
    """The model's JSON, held to the append-only rules whatever it says: a source loaded with enough
    range is not fetched again."""
    data = json.loads(text)
    picks: list[tuple[str, str, int | None]] = []
    for item in data.get("append_knowledge", []):
        source, reason, days = item.get("source"), item.get("reason", "not_in_context"), item.get("days_back")
        if source not in coach_data.SOURCES or any(p[0] == source for p in picks):
            continue
        if source in _RANGED:
            days = int(days) if isinstance(days, int) and days > 0 else _DEFAULT_DAYS[source]
            days = min(days, 365)
        else:
            days = None
        if source in loaded:
            held = loaded[source]
            wider = source in _RANGED and days is not None and (held is None or days > held)
            if not (wider or reason == "refresh_state"):
                continue
            reason = "expand_range" if wider else reason
        picks.append((source, reason, days))
    return Selection(reasoning=str(data.get("reasoning", ""))[:500], append=picks,
                     use_existing=[s for s in data.get("use_existing", []) if s in loaded])


def params_of(selection: Selection) -> dict[str, dict[str, Any]]:
    return {source: {"days_back": days} for source, _, days in selection.append if days}
