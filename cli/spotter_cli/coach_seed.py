"""Demo data for the member coach (seed 003): Maya Member (member@demo.gym, the demo's member
login) gets a full picture — profile, units, two locations, goals, preferences and eight workouts
over the past three weeks — and the first dozen other members of the studio (by email) smaller,
varied ones drawn from a `random.Random` seeded with their rank, so every run draws the same.

Idempotent and insert-only: profiles, units, locations and goals are inserted unless they exist,
preferences unless the same text does, and workouts carry a `demo-seed:<n>` call id, so a re-run
(on any later day) leaves what is there as it is. Workout days are relative to the first seeding."""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Final
from zoneinfo import ZoneInfo

import asyncpg

from spotter_shared.coach_data import GOAL_CATEGORIES, MUSCLES

_COACH_LOCK: Final = 0x5EED_C0A  # advisory lock class of this writer; the org id is the key
_SEED: Final = "coach-003"  # any constant; changing it redraws every member but Maya
MAYA_EMAIL: Final = "member@demo.gym"  # seed.DEMO_MEMBER_LOGIN
OTHERS: Final = 12
_LB_PER_KG: Final = 2.2046226218
_MI_PER_KM: Final = 0.621371

# --- exercises: type and the share of work per muscle (each sums to 1.0) -----------------------------

EXERCISES: Final[dict[str, tuple[str, dict[str, float]]]] = {
    "Back Squat": ("reps", {"Quadriceps": 0.5, "Glutes": 0.3, "Adductors": 0.1, "Lower Back": 0.1}),
    "Goblet Squat": ("reps", {"Quadriceps": 0.45, "Glutes": 0.35, "Adductors": 0.1, "Abs": 0.1}),
    "Bodyweight Squat": ("reps", {"Quadriceps": 0.5, "Glutes": 0.35, "Calves": 0.15}),
    "Romanian Deadlift": ("reps", {"Hamstrings": 0.45, "Glutes": 0.35, "Lower Back": 0.2}),
    "Deadlift": ("reps", {"Hamstrings": 0.3, "Glutes": 0.3, "Lower Back": 0.2, "Back": 0.1, "Trapezius": 0.1}),
    "Hip Thrust": ("reps", {"Glutes": 0.7, "Hamstrings": 0.2, "Quadriceps": 0.1}),
    "Calf Raise": ("reps", {"Calves": 1.0}),
    "Banded Lateral Walk": ("reps", {"Abductors": 0.7, "Glutes": 0.3}),
    "Band-assisted Pull-up": ("reps", {"Back": 0.6, "Biceps": 0.25, "Forearms": 0.15}),
    "One-arm Dumbbell Row": ("reps", {"Back": 0.65, "Biceps": 0.2, "Shoulders": 0.15}),
    "Barbell Row": ("reps", {"Back": 0.6, "Biceps": 0.2, "Lower Back": 0.1, "Forearms": 0.1}),
    "Lat Pulldown": ("reps", {"Back": 0.65, "Biceps": 0.25, "Forearms": 0.1}),
    "Cable Face Pull": ("reps", {"Shoulders": 0.5, "Trapezius": 0.3, "Back": 0.2}),
    "Band Pull-apart": ("reps", {"Shoulders": 0.5, "Back": 0.3, "Trapezius": 0.2}),
    "Dumbbell Overhead Press": ("reps", {"Shoulders": 0.65, "Triceps": 0.25, "Abs": 0.1}),
    "Bench Press": ("reps", {"Chest": 0.6, "Triceps": 0.25, "Shoulders": 0.15}),
    "Push-up": ("reps", {"Chest": 0.55, "Triceps": 0.25, "Shoulders": 0.2}),
    "Dead Bug": ("reps", {"Abs": 0.85, "Lower Back": 0.15}),
    "Cat-Cow": ("reps", {"Back": 0.6, "Lower Back": 0.4}),
    "Plank": ("hold", {"Abs": 0.8, "Shoulders": 0.1, "Lower Back": 0.1}),
    "Side Plank": ("hold", {"Abs": 0.6, "Abductors": 0.2, "Shoulders": 0.2}),
    "90/90 Hip Switch": ("hold", {"Glutes": 0.5, "Adductors": 0.3, "Lower Back": 0.2}),
    "Couch Stretch": ("hold", {"Quadriceps": 0.8, "Abs": 0.2}),
    "Farmer's Carry": ("hold", {"Forearms": 0.4, "Trapezius": 0.3, "Abs": 0.3}),
    "Rowing": ("duration", {"Back": 0.3, "Quadriceps": 0.25, "Hamstrings": 0.15, "Glutes": 0.1, "Biceps": 0.1, "Abs": 0.1}),
    "Rowing Intervals": ("intervals", {"Back": 0.3, "Quadriceps": 0.25, "Hamstrings": 0.15, "Glutes": 0.1, "Biceps": 0.1, "Abs": 0.1}),
    "Easy Run": ("duration", {"Quadriceps": 0.3, "Hamstrings": 0.2, "Calves": 0.25, "Glutes": 0.25}),
    "Kettlebell Swing": ("intervals", {"Glutes": 0.4, "Hamstrings": 0.3, "Lower Back": 0.15, "Abs": 0.15}),
}


def ex(name: str, *, sets: int | None = None, reps: int | None = None, load: float | None = None,
       hold: int | None = None, minutes: float | None = None, km: float | None = None,
       rounds: int | None = None, work: int | None = None, rest: int | None = None,
       completed: bool = True, notes: str | None = None) -> dict[str, Any]:
    """One logged exercise, seed 003's shape; loads in kg and distances in km (converted per member)."""
    kind, muscles = EXERCISES[name]
    item: dict[str, Any] = {"exercise_name": name, "exercise_type": kind}
    if kind in ("reps", "hold"):
        item["sets"] = sets
        item["rest_sec"] = rest if rest is not None else (90 if load else 45)
    if kind == "reps":
        item["reps"] = [reps] * (sets or 1)
        if load is not None:
            item["load_each"], item["load_unit"] = [load] * (sets or 1), "kg"
    elif kind == "hold":
        item["hold_sec"] = [hold] * (sets or 1)
    elif kind == "duration":
        item["duration_min"] = minutes
        if km is not None:
            item["distance"], item["distance_unit"] = km, "km"
    else:
        item.update(rounds=rounds, work_sec=work, rest_sec=rest)
    item["muscles_utilized"] = [{"muscle": m, "share": s} for m, s in muscles.items()]
    item["completed"] = completed
    if notes:
        item["notes"] = notes
    return item


# --- what a member's coach data is ----------------------------------------------------------------------


@dataclass(frozen=True)
class Location:
    name: str
    description: str
    equipment: list[dict[str, Any]]  # weights in kg; converted for a member who counts in lb
    current: bool = False


@dataclass(frozen=True)
class Workout:
    days_ago: int
    at: time
    title: str
    exercises: list[dict[str, Any]]
    notes: str | None = None


@dataclass(frozen=True)
class CoachData:
    sex: str | None
    birth_date: date | None
    height_cm: float | None
    weight_kg: float | None
    body_fat_pct: float | None
    experience: str
    weight_unit: str
    distance_unit: str
    locations: list[Location]
    goals: list[tuple[str, str, int]]  # (kind, name, priority)
    preferences: list[str] = field(default_factory=list)
    workouts: list[Workout] = field(default_factory=list)


def _gear(name: str, category: str, weights: Sequence[float] | None = None) -> dict[str, Any]:
    return {"name": name, "category": category, **({"weights": list(weights)} if weights else {})}


HOME = Location("Home", "Living-room corner; a flat upstairs, so nothing that lands hard.", [
    _gear("Dumbbells", "free_weights", [4, 6, 8, 10, 12, 14, 16]),
    _gear("Pull-up Bar", "bodyweight"),
    _gear("Exercise Mat", "accessories"),
    _gear("Resistance Bands", "accessories"),
], current=True)
DEMO_GYM = Location("Demo Gym", "The studio's open gym, before the evening classes.", [
    _gear("Olympic Barbell", "free_weights", [20]),
    _gear("Bumper Plates", "free_weights", [2.5, 5, 10, 15, 20]),
    _gear("Squat Rack", "machines"),
    _gear("Rowing Machine", "cardio"),
    _gear("Kettlebells", "free_weights", [8, 12, 16, 20, 24]),
    _gear("Cable Machine", "machines"),
])


def _birth_date(today: date, age: int, days_since_birthday: int) -> date:
    """A birth date that makes the member `age` today, their last birthday that many days ago."""
    birthday = today - timedelta(days=days_since_birthday)
    if (birthday.month, birthday.day) == (2, 29):
        birthday -= timedelta(days=1)
    return birthday.replace(year=birthday.year - age)


def maya(today: date) -> CoachData:
    am, pm = time(7, 0), time(18, 30)

    def lower(squat: float, rdl: float, thrust: float) -> list[dict[str, Any]]:  # repeated ten days on, heavier
        return [
            ex("Back Squat", sets=4, reps=6, load=squat),
            ex("Romanian Deadlift", sets=3, reps=8, load=rdl),
            ex("Hip Thrust", sets=3, reps=10, load=thrust),
            ex("Plank", sets=3, hold=40),
        ]

    return CoachData(
        sex="female", birth_date=_birth_date(today, 31, 127), height_cm=168, weight_kg=63, body_fat_pct=24,
        experience="intermediate", weight_unit="kg", distance_unit="km",
        locations=[HOME, DEMO_GYM],
        goals=[("category", "strength", 5), ("category", "mobility", 3), ("category", "endurance", 2),
               ("muscle", "Glutes", 5), ("muscle", "Back", 4), ("muscle", "Shoulders", 3)],
        preferences=["No jumping — neighbours downstairs", "Prefers 30–40 minute sessions",
                     "Left knee: avoid deep lunges"],
        workouts=[
            Workout(20, pm, "Lower body strength", lower(40, 40, 50)),
            Workout(18, am, "Upper body pull at home", [
                ex("Band-assisted Pull-up", sets=4, reps=5),
                ex("One-arm Dumbbell Row", sets=3, reps=10, load=12),
                ex("Dumbbell Overhead Press", sets=3, reps=8, load=8),
                ex("Band Pull-apart", sets=3, reps=15),
            ]),
            Workout(15, am, "Mobility flow", [
                ex("90/90 Hip Switch", sets=3, hold=45),
                ex("Cat-Cow", sets=2, reps=10),
                ex("Couch Stretch", sets=2, hold=60, notes="gentle on the left knee"),
                ex("Dead Bug", sets=3, reps=10),
            ], notes="Hips felt tight after the squats."),
            Workout(13, pm, "Row and kettlebells", [
                ex("Rowing", minutes=15, km=3.2),
                ex("Kettlebell Swing", rounds=8, work=30, rest=30),
                ex("Farmer's Carry", sets=4, hold=40),
            ]),
            Workout(10, pm, "Lower body strength", [*lower(42.5, 42.5, 55), ex("Calf Raise", sets=3, reps=15, load=16)]),
            Workout(8, am, "Upper body pull at home", [
                ex("Band-assisted Pull-up", sets=4, reps=5),
                ex("One-arm Dumbbell Row", sets=3, reps=10, load=14),
                ex("Dumbbell Overhead Press", sets=3, reps=8, load=8),
                ex("Push-up", sets=3, reps=10, completed=False, notes="ran out of time"),
            ]),
            Workout(5, am, "Easy run and hips", [
                ex("Easy Run", minutes=30, km=5),
                ex("Banded Lateral Walk", sets=3, reps=12),
            ]),
            Workout(2, pm, "Back and shoulders", [
                ex("Lat Pulldown", sets=4, reps=10, load=35),
                ex("Cable Face Pull", sets=3, reps=15, load=15),
                ex("Dumbbell Overhead Press", sets=3, reps=8, load=10),
                ex("Deadlift", sets=3, reps=5, load=60),
            ], notes="Deadlift felt solid; keep 60 next time."),
        ],
    )


# --- the other members: drawn, not written out ---------------------------------------------------------

# (location, the workouts that fit there)
_PLACES: Final[list[tuple[Location, tuple[str, ...]]]] = [
    (Location("Home", "A spare room with a few basics.", [
        _gear("Dumbbells", "free_weights", [2, 4, 6, 8, 10]), _gear("Exercise Mat", "accessories"),
    ]), ("Full body dumbbells", "Bodyweight circuit", "Easy run")),
    (Location("Demo Gym", "The studio's open gym.", DEMO_GYM.equipment), ("Barbell basics", "Rower intervals", "Full body dumbbells")),
    (Location("Office Gym", "A small gym at work: machines and a treadmill.", [
        _gear("Treadmill", "cardio"), _gear("Chest Press Machine", "machines"),
        _gear("Dumbbells", "free_weights", [5, 7.5, 10, 12.5, 15, 17.5, 20]),
    ]), ("Full body dumbbells", "Easy run")),
    (Location("Park", "Outdoor bars by the running track.", [
        _gear("Pull-up Bar", "bodyweight"), _gear("Parallel Bars", "bodyweight"), _gear("Resistance Bands", "accessories"),
    ]), ("Bodyweight circuit", "Easy run")),
    (Location("Garage Gym", "A rack, a barbell and kettlebells in the garage.", [
        _gear("Olympic Barbell", "free_weights", [20]), _gear("Iron Plates", "free_weights", [1.25, 2.5, 5, 10, 20]),
        _gear("Squat Rack", "machines"), _gear("Kettlebells", "free_weights", [12, 16, 24]),
    ]), ("Barbell basics", "Bodyweight circuit")),
]

# Loads for an intermediate; a beginner lifts 70% of them, an advanced member 130%.
_WORKOUTS: Final[dict[str, list[dict[str, Any]]]] = {
    "Full body dumbbells": [ex("Goblet Squat", sets=3, reps=10, load=12), ex("One-arm Dumbbell Row", sets=3, reps=10, load=12),
                            ex("Dumbbell Overhead Press", sets=3, reps=8, load=8), ex("Plank", sets=3, hold=30)],
    "Barbell basics": [ex("Back Squat", sets=5, reps=5, load=50), ex("Bench Press", sets=5, reps=5, load=40),
                       ex("Barbell Row", sets=3, reps=8, load=40)],
    "Bodyweight circuit": [ex("Push-up", sets=3, reps=12), ex("Bodyweight Squat", sets=3, reps=15),
                           ex("Dead Bug", sets=3, reps=10), ex("Side Plank", sets=2, hold=30)],
    "Easy run": [ex("Easy Run", minutes=35, km=6)],
    "Rower intervals": [ex("Rowing Intervals", rounds=10, work=40, rest=20), ex("Plank", sets=2, hold=45)],
}
_SCALE: Final = {"beginner": 0.7, "intermediate": 1.0, "advanced": 1.3}
_PREFERENCES: Final = [
    "Short on time on weekdays", "Shoulder niggle: no overhead pressing", "Likes finishing with a stretch",
    "Hates burpees", "Trains fasted in the morning",
]


def _drawn(rng: random.Random, today: date) -> CoachData:
    sex = rng.choice(["female", "male", "female", "male", "other", None])
    age = rng.randint(19, 64)
    height = {"female": (152, 178), "male": (165, 195)}.get(sex or "", (155, 188))
    height_cm = float(rng.randint(*height))
    imperial = rng.random() < 0.35
    experience = rng.choices(["beginner", "intermediate", "advanced"], weights=[3, 4, 2])[0]
    place, fits = rng.choice(_PLACES)
    categories = rng.sample(GOAL_CATEGORIES, rng.randint(1, 3))
    goals = [("category", name, priority) for name, priority in zip(categories, (5, 3, 2), strict=False)]
    if rng.random() < 0.5:
        goals.append(("muscle", rng.choice(MUSCLES), rng.randint(2, 4)))
    days = sorted(rng.sample(range(1, 22), rng.randint(0, 3)), reverse=True)
    return CoachData(
        sex=sex,
        birth_date=_birth_date(today, age, rng.randint(1, 364)),
        height_cm=height_cm,
        weight_kg=round(rng.uniform(19.5, 29.0) * (height_cm / 100) ** 2, 1),
        body_fat_pct=None if rng.random() < 0.3 else float(rng.randint(10, 22) + (8 if sex == "female" else 0)),
        experience=experience,
        weight_unit="lb" if imperial else "kg",
        distance_unit="mi" if imperial else "km",
        locations=[Location(place.name, place.description, place.equipment, current=True)],
        goals=goals,
        preferences=rng.sample(_PREFERENCES, rng.choice([0, 0, 1])),
        workouts=[
            Workout(d, time(rng.choice([6, 7, 12, 17, 18, 19]), rng.choice([0, 30])), title,
                    [_scaled(item, _SCALE[experience]) for item in _WORKOUTS[title]])
            for d, title in ((d, rng.choice(fits)) for d in days)
        ],
    )


def _scaled(item: dict[str, Any], factor: float) -> dict[str, Any]:
    if "load_each" not in item or factor == 1:
        return item
    return {**item, "load_each": [round(load * factor / 2.5) * 2.5 for load in item["load_each"]]}


# --- units -------------------------------------------------------------------------------------------


def _in_lb(kg: float) -> float:
    """kg as a member counting in lb would have it: to the nearest 5 lb (2.5 under 10 lb)."""
    step = 2.5 if kg * _LB_PER_KG < 10 else 5
    return max(step, round(kg * _LB_PER_KG / step) * step)


def _in_units(item: dict[str, Any], weight_unit: str, distance_unit: str) -> dict[str, Any]:
    """A logged exercise (or a piece of equipment) in the member's units."""
    item = dict(item)
    if weight_unit == "lb":
        for key in ("load_each", "weights"):
            if key in item:
                item[key] = [_in_lb(w) for w in item[key]]
        if "load_unit" in item:
            item["load_unit"] = "lb"
    if distance_unit == "mi" and "distance" in item:
        item["distance"], item["distance_unit"] = round(item["distance"] * _MI_PER_KM, 1), "mi"
    return item


# --- writing -------------------------------------------------------------------------------------------


async def _write(conn: asyncpg.Connection, org: uuid.UUID, member: uuid.UUID, data: CoachData,
                 today: date, tz: ZoneInfo) -> None:
    units = data.weight_unit, data.distance_unit
    await conn.execute(
        """INSERT INTO member_profiles (membership_id, organization_id, sex, birth_date, height_cm, weight_kg,
                                        body_fat_pct, experience)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (membership_id) DO NOTHING""",
        member, org, data.sex, data.birth_date, data.height_cm, data.weight_kg, data.body_fat_pct, data.experience,
    )
    await conn.execute(
        """INSERT INTO member_settings (membership_id, organization_id, weight_unit, distance_unit)
           VALUES ($1, $2, $3, $4) ON CONFLICT (membership_id) DO NOTHING""",
        member, org, *units,
    )
    # No conflict target: a name taken, or a current location already there, both leave it be.
    await conn.executemany(
        """INSERT INTO member_locations (membership_id, organization_id, name, description, is_current, equipment)
           VALUES ($1, $2, $3, $4, $5, $6::text::jsonb) ON CONFLICT DO NOTHING""",
        [(member, org, loc.name, loc.description, loc.current, json.dumps([_in_units(g, *units) for g in loc.equipment]))
         for loc in data.locations],
    )
    await conn.executemany(
        """INSERT INTO member_goals (membership_id, organization_id, kind, name, priority)
           VALUES ($1, $2, $3, $4, $5) ON CONFLICT (membership_id, kind, name) DO NOTHING""",
        [(member, org, kind, name, priority) for kind, name, priority in data.goals],
    )
    await conn.executemany(
        """INSERT INTO member_preferences (membership_id, organization_id, text)
           SELECT $1, $2, $3::text WHERE NOT EXISTS
                  (SELECT 1 FROM member_preferences WHERE membership_id = $1 AND text = $3::text)""",
        [(member, org, text) for text in data.preferences],
    )
    # The seed's call ids stand in for the coach's (session, call): the n-th seeded workout is
    # written once, whatever day the seed runs again.
    await conn.executemany(
        """INSERT INTO member_workout_logs (membership_id, organization_id, call_id, performed_at, title, notes, exercises)
           SELECT $1, $2, $3::text, $4, $5, $6, $7::text::jsonb WHERE NOT EXISTS
                  (SELECT 1 FROM member_workout_logs WHERE membership_id = $1 AND call_id = $3::text)""",
        [
            (member, org, f"demo-seed:{n}", datetime.combine(today - timedelta(days=w.days_ago), w.at, tzinfo=tz).astimezone(UTC),
             w.title, w.notes, json.dumps([_in_units(item, *units) for item in w.exercises]))
            for n, w in enumerate(data.workouts, start=1)
        ],
    )


async def seed_member_coach(conn: asyncpg.Connection, org_id: str, today: date) -> int:
    """Coach data for Maya (when she is a member of `org_id`) and the first `OTHERS` other members by
    email; returns how many members it covers. Runs inside the caller's transaction when there is one."""
    org = uuid.UUID(str(org_id))
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1, hashtext($2::text))", _COACH_LOCK, str(org))
        tz = ZoneInfo(await conn.fetchval("SELECT timezone FROM organizations WHERE id = $1", org))
        rows = await conn.fetch(
            """(SELECT m.id, lower(u.email) AS email FROM memberships m JOIN users u ON u.id = m.user_id
                 WHERE m.organization_id = $1 AND m.role = 'member' AND lower(u.email) = $2)
               UNION ALL
               (SELECT m.id, lower(u.email) FROM memberships m JOIN users u ON u.id = m.user_id
                 WHERE m.organization_id = $1 AND m.role = 'member' AND lower(u.email) <> $2
                 ORDER BY lower(u.email) COLLATE "C", m.id LIMIT $3)""",
            org, MAYA_EMAIL, OTHERS,
        )
        # Byte order (COLLATE "C" above, str order here): the same ranks under any database locale.
        others = sorted((row["email"], row["id"]) for row in rows if row["email"] != MAYA_EMAIL)
        for rank, (_, member) in enumerate(others, start=1):  # the n-th other member by email draws from seed n
            await _write(conn, org, member, _drawn(random.Random(f"{_SEED}:{rank}"), today), today, tz)
        for row in rows:
            if row["email"] == MAYA_EMAIL:
                await _write(conn, org, row["id"], maya(today), today, tz)
    return len(rows)
