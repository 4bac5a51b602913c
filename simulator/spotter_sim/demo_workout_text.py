"""A workout as a coach types it ("3 rounds — 200m run, 30 double-unders") split into a format and
movements with their quantities, in the shape workouts__create takes."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# What a section's format looks like: "3 rounds", "AMRAP 12", "EMOM 10", "For time", "21-15-9", "5x5".
_FORMAT_RE = re.compile(
    r"\b(?:rounds?|amrap|emom|e\d+mom|for\s+time|rft|tabata|chipper|ladder|sets?)\b|\b\d+(?:-\d+)+\b|\b\d+x\d+\b", re.I
)
# The format ends at a dash or colon with space around it; "double-unders" keeps its hyphen.
_FORMAT_END_RE = re.compile(r"\s+[—–-]+\s+|\s*[—–]\s*|:\s+")
_SPLIT_RE = re.compile(r"\s*(?:,|;|\+|\band\b|\bthen\b)\s*", re.I)
_QUANTITY_RE = re.compile(
    r"^(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>km|kg|k|mins?|m|cals?|lbs?|secs?|s|reps?|x)?\s+(?P<name>.+)$", re.I
)
_CLOCK_RE = re.compile(r"^(?P<min>\d+):(?P<sec>\d{2})\s+(?P<name>.+)$")
_LOAD_RE = re.compile(r"\s*(?:@|at)?\s*\(?(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>kg|lbs?)\)?\s*$", re.I)


@dataclass(frozen=True)
class Movement:
    written: str  # as the user wrote it, quantities included: what read__exercises_resolve_batch takes
    name: str
    reps: int | None = None
    distance_m: int | None = None
    load_kg: float | None = None
    duration_s: int | None = None
    notes: str | None = None

    def as_input(self, name: str | None = None) -> dict[str, Any]:
        """The workouts__create movement, camelCase, quantities that are not set left out."""
        fields = {"name": name or self.name, "reps": self.reps, "distanceM": self.distance_m,
                  "loadKg": self.load_kg, "durationS": self.duration_s, "notes": self.notes}
        return {k: v for k, v in fields.items() if v is not None}


@dataclass(frozen=True)
class WorkoutText:
    format: str | None
    movements: tuple[Movement, ...]


def parse_workout(text: str) -> WorkoutText:
    text = text.strip().rstrip(".!")
    format_, body = None, text
    head = _FORMAT_END_RE.split(text, maxsplit=1)
    if len(head) == 2 and _FORMAT_RE.search(head[0]):
        format_, body = head[0].strip(), head[1]
    pieces = [p.strip(" .") for p in _SPLIT_RE.split(body) if p.strip(" .")]
    return WorkoutText(format_, tuple(_movement(p) for p in pieces))


def _movement(written: str) -> Movement:
    load = _LOAD_RE.search(written)
    rest = written[: load.start()] if load and load.start() > 0 else written
    load_kg = _kg(float(load["n"]), load["unit"]) if load and load.start() > 0 else None
    clock = _CLOCK_RE.match(rest)
    if clock:
        seconds = int(clock["min"]) * 60 + int(clock["sec"])
        return Movement(written, _title(clock["name"]), duration_s=seconds, load_kg=load_kg)
    quantity = _QUANTITY_RE.match(rest)
    if quantity is None:
        return Movement(written, _title(rest), load_kg=load_kg)
    n, unit, name = float(quantity["n"]), (quantity["unit"] or "").lower(), _title(quantity["name"])
    if unit == "m":
        return Movement(written, name, distance_m=int(n), load_kg=load_kg)
    if unit in ("km", "k"):
        return Movement(written, name, distance_m=int(n * 1000), load_kg=load_kg)
    if unit in ("s", "sec", "secs"):
        return Movement(written, name, duration_s=int(n), load_kg=load_kg)
    if unit in ("min", "mins"):
        return Movement(written, name, duration_s=int(n * 60), load_kg=load_kg)
    if unit in ("cal", "cals"):
        return Movement(written, name, notes=f"{n:g} cal", load_kg=load_kg)
    if unit in ("kg", "lb", "lbs"):
        return Movement(written, name, load_kg=_kg(n, unit))
    return Movement(written, name, reps=int(n), load_kg=load_kg)


def _kg(n: float, unit: str) -> float:
    return n if unit.lower() == "kg" else round(n * 0.4536, 1)


def _title(name: str) -> str:
    name = name.strip(" .")
    return name[:1].upper() + name[1:]
