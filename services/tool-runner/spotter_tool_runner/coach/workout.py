"""Seed 003's workout: four exercise types with their required fields, the 16 muscles, shares that
add up to ~1.0, optional groups — and the artifact a generated workout becomes. A workout that breaks
a rule is refused with the exact field and what is wrong, so the model can fix it in one try."""

from __future__ import annotations

import secrets
import uuid
from collections import defaultdict
from typing import Annotated, Any, Final, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

MUSCLES: Final[tuple[str, ...]] = (
    "Chest", "Back", "Shoulders", "Biceps", "Triceps", "Abs", "Lower Back", "Quadriceps", "Hamstrings", "Glutes",
    "Calves", "Trapezius", "Abductors", "Adductors", "Forearms", "Neck",
)
Muscle = Literal[MUSCLES]  # type: ignore[valid-type]
SHARE_TOLERANCE = 0.05
SCHEMA_VERSION = "1"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MuscleShare(_Strict):
    muscle: Muscle = Field(description="One of the 16 muscles.")  # type: ignore[valid-type]
    share: float = Field(gt=0, le=1, description="Part of the exercise's work, 0–1.")


class GoalShare(_Strict):
    goal: str = Field(min_length=1, max_length=40, description="e.g. strength, hypertrophy, endurance, mobility.")
    share: float = Field(gt=0, le=1, description="Part of the exercise's purpose, 0–1.")


class ExerciseGroup(_Strict):
    id: str = Field(min_length=1, max_length=40, description="Group id shared by its exercises, e.g. superset-1.")
    type: Literal["circuit", "superset", "giant_set", "warmup", "cooldown", "sequence"]
    position: int = Field(ge=1, le=20, description="Order within the group (1-indexed).")
    name: str | None = Field(default=None, max_length=80, description="Display name (first exercise only).")
    rounds: int | None = Field(default=None, ge=1, le=50, description="Times the group repeats (first exercise only).")
    rest_between_rounds_sec: int | None = Field(default=None, ge=0, le=900)


class _Exercise(_Strict):
    id: str | None = Field(default=None, description="Set by the server; ignored on input.")
    exercise_name: str = Field(min_length=1, max_length=120)
    order: int = Field(ge=1, le=60, description="Position in the workout (1-indexed).")
    muscles_utilized: list[MuscleShare] = Field(min_length=1, max_length=16)
    goals_addressed: list[GoalShare] = Field(min_length=1, max_length=8)
    reasoning: str = Field(min_length=1, max_length=600, description="Why this exercise, briefly.")
    group: ExerciseGroup | None = None

    @model_validator(mode="after")
    def _shares(self) -> _Exercise:
        for field, items in (("muscles_utilized", self.muscles_utilized), ("goals_addressed", self.goals_addressed)):
            total = sum(i.share for i in items)
            if abs(total - 1.0) > SHARE_TOLERANCE:
                raise ValueError(f"{field} shares add up to {total:.2f}; they must add up to 1.0 (±{SHARE_TOLERANCE})")
        muscles = [m.muscle for m in self.muscles_utilized]
        if len(set(muscles)) != len(muscles):
            raise ValueError("muscles_utilized names a muscle twice")
        return self


def _per_set(values: list[Any] | None, sets: int, field: str) -> None:
    if values is not None and len(values) != sets:
        raise ValueError(f"{field} must have one value per set (sets={sets}, got {len(values)})")


class RepsExercise(_Exercise):
    exercise_type: Literal["reps"]
    sets: int = Field(ge=1, le=20)
    reps: list[Annotated[int, Field(ge=1, le=300)]] = Field(min_length=1, description="Reps per set, one per set.")
    rest_sec: int = Field(ge=0, le=900)
    load_each: list[Annotated[float, Field(ge=0, le=1000)]] | None = Field(default=None, description="Load per set.")
    load_unit: Literal["kg", "lb", "bodyweight"] | None = None

    @model_validator(mode="after")
    def _sets(self) -> RepsExercise:
        _per_set(self.reps, self.sets, "reps")
        _per_set(self.load_each, self.sets, "load_each")
        if self.load_each is not None and self.load_unit is None:
            raise ValueError("load_each needs a load_unit (kg, lb or bodyweight)")
        return self


class HoldExercise(_Exercise):
    exercise_type: Literal["hold"]
    sets: int = Field(ge=1, le=20)
    hold_sec: list[Annotated[int, Field(ge=1, le=600)]] = Field(min_length=1, description="Hold per set, one per set.")
    rest_sec: int = Field(ge=0, le=900)

    @model_validator(mode="after")
    def _sets(self) -> HoldExercise:
        _per_set(self.hold_sec, self.sets, "hold_sec")
        return self


class DurationExercise(_Exercise):
    exercise_type: Literal["duration"]
    duration_min: float = Field(gt=0, le=600)
    distance: float | None = Field(default=None, gt=0, le=1000)
    distance_unit: Literal["km", "mi", "m"] | None = None
    target_pace: str | None = Field(default=None, max_length=32)

    @model_validator(mode="after")
    def _distance(self) -> DurationExercise:
        if self.distance is not None and self.distance_unit is None:
            raise ValueError("distance needs a distance_unit (km, mi or m)")
        return self


class IntervalsExercise(_Exercise):
    exercise_type: Literal["intervals"]
    rounds: int = Field(ge=1, le=100)
    work_sec: int = Field(ge=1, le=3600)
    rest_sec: int = Field(ge=0, le=3600)


Exercise = Annotated[Union[RepsExercise, HoldExercise, DurationExercise, IntervalsExercise],
                     Field(discriminator="exercise_type")]
EXERCISE: Final = TypeAdapter(Exercise)
EXERCISE_TYPES: Final = ("reps", "hold", "duration", "intervals")


class Workout(_Strict):
    title: str = Field(min_length=1, max_length=120)
    description: str | None = Field(default=None, max_length=1000)
    estimated_duration_min: int | None = Field(default=None, ge=1, le=300)
    exercises: list[Exercise] = Field(min_length=1, max_length=30)

    @model_validator(mode="after")
    def _order(self) -> Workout:
        orders = [e.order for e in self.exercises]
        if len(set(orders)) != len(orders):
            raise ValueError("two exercises have the same order; number them 1, 2, 3, …")
        groups: dict[str, list[int]] = defaultdict(list)
        for e in self.exercises:
            if e.group is not None:
                groups[e.group.id].append(e.group.position)
        for gid, positions in groups.items():
            if sorted(positions) != list(range(1, len(positions) + 1)):
                raise ValueError(f"group {gid!r} positions must be 1..{len(positions)} (got {sorted(positions)})")
        return self


class WorkoutPayload(_Strict):
    workout: Workout


def explain(exc: ValidationError, prefix: str = "") -> str:
    """Pydantic's errors as one line per problem, each with its path: what the model must fix."""
    lines = []
    for err in exc.errors(include_url=False)[:8]:
        path = ".".join(str(p) for p in err.get("loc", ()) if not (isinstance(p, str) and p in EXERCISE_TYPES))
        message = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        lines.append(f"{prefix}{path}: {message}" if path else f"{prefix}{message}")
    return "; ".join(lines)


def with_ids(exercises: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Server ids for exercises that have none, in order."""
    out = []
    for exercise in sorted(exercises, key=lambda e: e["order"]):
        out.append({**exercise, "id": exercise.get("id") or str(uuid.uuid4())})
    return out


def dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", exclude_none=True)


def artifact_of(workout: Workout, artifact_id: str | None = None, version: int = 1) -> dict[str, Any]:
    exercises = with_ids([dump(e) for e in workout.exercises])
    return artifact_from(artifact_id or new_artifact_id(), workout.title, workout.description,
                         workout.estimated_duration_min, exercises, version)


def artifact_from(artifact_id: str, title: str, description: str | None, duration: int | None,
                  exercises: list[dict[str, Any]], version: int) -> dict[str, Any]:
    """Seed 003's artifact record (`exercise_list`), with a summary the client shows without the payload."""
    load: dict[str, float] = defaultdict(float)
    for exercise in exercises:
        for share in exercise.get("muscles_utilized", []):
            load[share["muscle"]] += share["share"]
    muscles = [m for m, _ in sorted(load.items(), key=lambda kv: (-kv[1], kv[0]))][:4]
    return {
        "artifact_id": artifact_id, "type": "exercise_list", "schema_version": SCHEMA_VERSION, "version": version,
        "title": title, "auto_start": False,
        "summary": {"exercise_count": len(exercises), "estimated_duration_min": duration, "muscles": muscles},
        "payload": {"title": title, "description": description, "estimated_duration_min": duration, "exercises": exercises},
    }


def renumbered(exercises: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**e, "order": i} for i, e in enumerate(sorted(exercises, key=lambda e: e["order"]), start=1)]


def new_artifact_id() -> str:
    return f"art_{secrets.token_hex(6)}"


def prescription(exercise: dict[str, Any]) -> str:
    """One line a person (or the model) reads: "3 × 10, 10, 8 · 20 kg · rest 60 s"."""
    kind = exercise.get("exercise_type")
    if kind == "reps":
        text = f"{exercise['sets']} × {', '.join(str(r) for r in exercise['reps'])}"
        if exercise.get("load_each") and exercise.get("load_unit") != "bodyweight":
            loads = sorted(set(exercise["load_each"]))
            text += f" · {'/'.join(f'{v:g}' for v in loads)} {exercise.get('load_unit', '')}".rstrip()
        return text + f" · rest {exercise['rest_sec']} s"
    if kind == "hold":
        return f"{exercise['sets']} × {'/'.join(str(s) for s in exercise['hold_sec'])} s hold · rest {exercise['rest_sec']} s"
    if kind == "duration":
        text = f"{exercise['duration_min']:g} min"
        if exercise.get("distance"):
            text += f" · {exercise['distance']:g} {exercise.get('distance_unit', '')}"
        if exercise.get("target_pace"):
            text += f" · {exercise['target_pace']}"
        return text
    if kind == "intervals":
        return f"{exercise['rounds']} rounds · {exercise['work_sec']} s on / {exercise['rest_sec']} s off"
    return ""


def listing(exercises: list[dict[str, Any]]) -> list[str]:
    """`N. Name (type) id=<uuid> — prescription` per exercise, the form tool results and the
    current-workout knowledge share."""
    return [f"{e['order']}. {e['exercise_name']} ({e['exercise_type']}) id={e['id']} — {prescription(e)}"
            for e in sorted(exercises, key=lambda e: e["order"])]
