"""Seed 003's data sources: what the member coach may know about the member it talks to, each read
for one membership in one organization and written as compact text for the model (§9), and the
user-data block of the prompt's third cache breakpoint (§4.4).

Read-only: the coach's tools (tool-runner) write these tables; anyone may read them here. Every
query is scoped by both the organization and the membership, so a membership of another studio
reads as a member with no data. Each source is one entry of `_SOURCES`: its display name, the
parameters it takes, a fetcher (SQL) and a formatter (pure)."""

from __future__ import annotations

import asyncio
import html
import json
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from types import MappingProxyType
from typing import Any, Final, TypeAlias

import asyncpg

Reader: TypeAlias = asyncpg.Connection | asyncpg.Pool

# Seed 003's vocabulary, shared with the tools that write it (the migration's CHECKs hold the same).
MUSCLES: Final[tuple[str, ...]] = (
    "Chest", "Back", "Shoulders", "Biceps", "Triceps", "Abs", "Lower Back", "Quadriceps", "Hamstrings", "Glutes",
    "Calves", "Trapezius", "Abductors", "Adductors", "Forearms", "Neck",
)
GOAL_CATEGORIES: Final[tuple[str, ...]] = (
    "strength", "hypertrophy", "endurance", "mobility", "fat_loss", "power", "general_fitness",
)
EQUIPMENT_CATEGORIES: Final[tuple[str, ...]] = ("free_weights", "machines", "cardio", "bodyweight", "accessories")
EXERCISE_TYPES: Final[tuple[str, ...]] = ("reps", "hold", "duration", "intervals")

_KG_TO_LB: Final = 2.2046226218
_CM_PER_INCH: Final = 2.54
_MUSCLE_BY_KEY: Final = {m.lower(): m for m in MUSCLES}


class UnknownSource(ValueError):
    """A source name that is not one of `SOURCES`."""

    def __init__(self, source: str) -> None:
        super().__init__(f"unknown data source {source!r}; known: {', '.join(SOURCES)}")
        self.source = source


@dataclass(frozen=True)
class _Scope:
    organization_id: uuid.UUID
    membership_id: uuid.UUID
    today: date | None  # None: today in the studio's time zone, resolved by the query


@dataclass(frozen=True)
class _Param:
    default: int
    maximum: int


@dataclass(frozen=True)
class _Source:
    display: str
    fetch: Callable[[Reader, _Scope, Mapping[str, int]], Awaitable[Any]]
    format: Callable[[Any, Mapping[str, int]], str]
    params: Mapping[str, _Param] = field(default_factory=dict)


@dataclass(frozen=True)
class _Units:
    weight: str = "kg"
    distance: str = "km"


# --- SQL -------------------------------------------------------------------------------------------
# $1 is the organization and $2 the membership in every query; where a query has days, $3 is today
# (NULL: today in the studio's time zone).

_LOCAL_TODAY = "coalesce($3::date, (now() AT TIME ZONE o.timezone)::date)"
_UNITS = """coalesce((SELECT s.weight_unit FROM member_settings s
                       WHERE s.organization_id = $1 AND s.membership_id = $2), 'kg') AS weight_unit,
            coalesce((SELECT s.distance_unit FROM member_settings s
                       WHERE s.organization_id = $1 AND s.membership_id = $2), 'km') AS distance_unit"""

_PROFILE_SQL = f"""
SELECT u.full_name, p.membership_id IS NOT NULL AS has_profile, p.sex, p.birth_date, p.height_cm, p.weight_kg,
       p.body_fat_pct, p.experience, {_LOCAL_TODAY} AS today, {_UNITS}
  FROM memberships m
  JOIN organizations o ON o.id = m.organization_id
  JOIN users u ON u.id = m.user_id
  LEFT JOIN member_profiles p ON p.membership_id = m.id AND p.organization_id = m.organization_id
 WHERE m.organization_id = $1 AND m.id = $2"""

_SETTINGS_SQL = """
SELECT s.weight_unit, s.distance_unit FROM member_settings s WHERE s.organization_id = $1 AND s.membership_id = $2"""

_GOALS_SQL = """
SELECT g.name, g.priority FROM member_goals g
 WHERE g.organization_id = $1 AND g.membership_id = $2 AND g.kind = $3
 ORDER BY g.priority DESC, g.created_at, g.name"""

_PREFERENCES_SQL = """
SELECT p.text FROM member_preferences p
 WHERE p.organization_id = $1 AND p.membership_id = $2 AND p.active
 ORDER BY p.created_at, p.id"""

_LOCATIONS_SQL = f"""
SELECT l.name, l.description, l.is_current, l.equipment::text AS equipment, {_UNITS}
  FROM member_locations l
 WHERE l.organization_id = $1 AND l.membership_id = $2 AND (l.is_current OR NOT $3::boolean)
 ORDER BY l.is_current DESC, lower(l.name)"""

# Days are the studio's: the window runs from the start of (today - days_back) to the end of today.
_LOGS_SQL = f"""
SELECT (l.performed_at AT TIME ZONE o.timezone)::date AS day, l.title, l.notes, l.exercises::text AS exercises,
       count(*) OVER () AS total, {_UNITS}
  FROM member_workout_logs l
  JOIN organizations o ON o.id = l.organization_id
 WHERE l.organization_id = $1 AND l.membership_id = $2
   AND l.performed_at >= ({_LOCAL_TODAY} - $4::int)::timestamp AT TIME ZONE o.timezone
   AND l.performed_at < ({_LOCAL_TODAY} + 1)::timestamp AT TIME ZONE o.timezone
 ORDER BY l.performed_at DESC, l.id
 LIMIT $5"""


# --- fetchers --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Profile:
    name: str
    has_profile: bool
    sex: str | None
    age: int | None
    height_cm: Decimal | None
    weight_kg: Decimal | None
    body_fat_pct: Decimal | None
    experience: str | None
    units: _Units


@dataclass(frozen=True)
class _Location:
    name: str
    description: str | None
    is_current: bool
    equipment: list[Mapping[str, Any]]
    units: _Units


@dataclass(frozen=True)
class _Logs:
    days_back: int
    total: int
    rows: list[asyncpg.Record]


def _units(row: Mapping[str, Any] | None) -> _Units:
    return _Units(row["weight_unit"], row["distance_unit"]) if row else _Units()


def _age(birth: date | None, today: date) -> int | None:
    if birth is None:
        return None
    return today.year - birth.year - ((today.month, today.day) < (birth.month, birth.day))


async def _fetch_profile(conn: Reader, scope: _Scope, _: Mapping[str, int]) -> _Profile | None:
    row = await conn.fetchrow(_PROFILE_SQL, scope.organization_id, scope.membership_id, scope.today)
    if row is None:
        return None
    return _Profile(
        name=row["full_name"], has_profile=row["has_profile"], sex=row["sex"], age=_age(row["birth_date"], row["today"]),
        height_cm=row["height_cm"], weight_kg=row["weight_kg"], body_fat_pct=row["body_fat_pct"],
        experience=row["experience"], units=_units(row),
    )


async def _fetch_settings(conn: Reader, scope: _Scope, _: Mapping[str, int]) -> _Units | None:
    row = await conn.fetchrow(_SETTINGS_SQL, scope.organization_id, scope.membership_id)
    return _units(row) if row else None


def _fetch_goals(kind: str) -> Callable[[Reader, _Scope, Mapping[str, int]], Awaitable[list[asyncpg.Record]]]:
    async def fetch(conn: Reader, scope: _Scope, _: Mapping[str, int]) -> list[asyncpg.Record]:
        return await conn.fetch(_GOALS_SQL, scope.organization_id, scope.membership_id, kind)

    return fetch


async def _fetch_preferences(conn: Reader, scope: _Scope, _: Mapping[str, int]) -> list[str]:
    return [r["text"] for r in await conn.fetch(_PREFERENCES_SQL, scope.organization_id, scope.membership_id)]


async def _locations(conn: Reader, scope: _Scope, *, current_only: bool) -> list[_Location]:
    rows = await conn.fetch(_LOCATIONS_SQL, scope.organization_id, scope.membership_id, current_only)
    return [
        _Location(r["name"], r["description"], r["is_current"], _json_list(r["equipment"]), _units(r)) for r in rows
    ]


async def _fetch_locations(conn: Reader, scope: _Scope, _: Mapping[str, int]) -> list[_Location]:
    return await _locations(conn, scope, current_only=False)


async def _logs(conn: Reader, scope: _Scope, days_back: int, limit: int | None) -> _Logs:
    rows = await conn.fetch(_LOGS_SQL, scope.organization_id, scope.membership_id, scope.today, days_back, limit)
    return _Logs(days_back=days_back, total=rows[0]["total"] if rows else 0, rows=rows)


async def _fetch_history(conn: Reader, scope: _Scope, params: Mapping[str, int]) -> _Logs:
    return await _logs(conn, scope, params["days_back"], params["limit"])


async def _fetch_distribution(conn: Reader, scope: _Scope, params: Mapping[str, int]) -> _Logs:
    return await _logs(conn, scope, params["days_back"], None)


# --- formatters ------------------------------------------------------------------------------------


def _num(value: Any) -> str:
    """5.0 → 5, 2.5 → 2.5, 138.88 → 138.9; anything that is not a number as it is."""
    try:
        return f"{float(value):.1f}".removesuffix(".0")
    except (TypeError, ValueError):
        return str(value)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _json_list(text: str | None) -> list[Any]:
    value = json.loads(text) if text else []
    return value if isinstance(value, list) else []


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _body_lines(p: _Profile) -> Iterator[tuple[str, str]]:
    """(label, value) of each known body stat, in the member's units."""
    if p.sex:
        yield "Sex", p.sex
    if p.age is not None:
        yield "Age", str(p.age)
    if p.height_cm is not None:
        if p.units.distance == "mi":
            feet, inches = divmod(round(float(p.height_cm) / _CM_PER_INCH), 12)
            yield "Height", f"{feet} ft {inches} in"
        else:
            yield "Height", f"{_num(p.height_cm)}cm"
    if p.weight_kg is not None:
        weight = float(p.weight_kg) * _KG_TO_LB if p.units.weight == "lb" else p.weight_kg
        yield "Weight", f"{_num(weight)}{p.units.weight}"
    if p.body_fat_pct is not None:
        yield "Body Fat", f"{_num(p.body_fat_pct)}%"


def _format_profile(p: _Profile | None, _: Mapping[str, int]) -> str:
    if p is None:
        return "No profile found."
    lines = [f"Name: {p.name}"]
    if not p.has_profile:
        return "\n".join([*lines, "No body stats or experience recorded yet."])
    lines += [f"{label}: {value}" for label, value in _body_lines(p)]
    lines.append(f"Experience: {p.experience}")
    return "\n".join(lines)


def _format_settings(units: _Units | None, _: Mapping[str, int]) -> str:
    shown = units or _Units()
    lines = [f"Weight: {shown.weight}", f"Distance: {shown.distance}"]
    return "\n".join(lines if units else [*lines, "(defaults: the member has not chosen units)"])


def _format_goals(empty: str) -> Callable[[list[asyncpg.Record], Mapping[str, int]], str]:
    def format(rows: list[asyncpg.Record], _: Mapping[str, int]) -> str:
        if not rows:
            return empty
        return "\n".join(["Priority 1–5, 5 highest:", *(f"- {r['name']}: {r['priority']}" for r in rows)])

    return format


def _format_preferences(texts: list[str], _: Mapping[str, int]) -> str:
    return "\n".join(f"- {t}" for t in texts) if texts else "No preferences recorded."


def _equipment_line(item: Mapping[str, Any], unit: str) -> str:
    """'Dumbbells (free_weights): 5, 10, 15, 20kg' when it has weights, else just its name."""
    name = str(item.get("name") or "Equipment")
    weights = _as_list(item.get("weights"))
    if not weights:
        return name
    return f"{name} ({item.get('category')}): {', '.join(_num(w) for w in weights)}{unit}"


def _format_locations(locations: list[_Location], _: Mapping[str, int]) -> str:
    if not locations:
        return "No locations set."
    blocks = []
    for loc in locations:
        head = loc.name + (" (current)" if loc.is_current else "")
        lines = [f"{head}: {loc.description}" if loc.description else head]
        lines += [f"  - {_equipment_line(item, loc.units.weight)}" for item in loc.equipment if isinstance(item, Mapping)]
        if len(lines) == 1:
            lines.append("  No equipment listed.")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _series(values: list[Any]) -> str:
    """3 equal values read as one ('10'), different ones as a series ('10/8/6')."""
    shown = [_num(v) for v in values]
    return shown[0] if len(set(shown)) == 1 else "/".join(shown)


def _reps(ex: Mapping[str, Any], units: _Units) -> str:
    reps = _as_list(ex.get("reps"))
    sets = ex.get("sets") or len(reps)
    text = f"{_num(sets)}×{_series(reps)}" if reps else (f"{_num(sets)} sets" if sets else "")
    loads = _as_list(ex.get("load_each"))
    unit = ex.get("load_unit") or units.weight
    if loads and unit != "bodyweight" and any(_num(v) != "0" for v in loads):
        text += f" @ {_series(loads)}{unit}"
    return text


def _hold(ex: Mapping[str, Any], _: _Units) -> str:
    holds = _as_list(ex.get("hold_sec"))
    sets = ex.get("sets") or len(holds) or 1
    return f"{_num(sets)}×{_series(holds)}s hold" if holds else f"{_num(sets)} holds"


def _duration(ex: Mapping[str, Any], units: _Units) -> str:
    parts = []
    if ex.get("duration_min") is not None:
        parts.append(f"{_num(ex['duration_min'])} min")
    if ex.get("distance") is not None:
        parts.append(f"{_num(ex['distance'])}{ex.get('distance_unit') or units.distance}")
    return ", ".join(parts)


def _intervals(ex: Mapping[str, Any], _: _Units) -> str:
    text = f"{_num(ex.get('rounds') or 1)} rounds"
    if ex.get("work_sec") is not None:
        text += f" × {_num(ex['work_sec'])}s on"
        if ex.get("rest_sec") is not None:
            text += f" / {_num(ex['rest_sec'])}s off"
    return text


_DOSE: Final[Mapping[str, Callable[[Mapping[str, Any], _Units], str]]] = MappingProxyType(
    {"reps": _reps, "hold": _hold, "duration": _duration, "intervals": _intervals}
)


# What log_workout records as actually done, next to the planned field it replaces.
_DONE: Final[Mapping[str, str]] = MappingProxyType(
    {"sets": "sets_done", "reps": "reps_done", "load_each": "load_used", "duration_min": "duration_min_done"}
)


def _exercise_line(ex: Mapping[str, Any], units: _Units) -> str:
    ex = {**ex, **{planned: ex[done] for planned, done in _DONE.items() if ex.get(done) not in (None, [])}}
    dose = _DOSE.get(str(ex.get("exercise_type")), lambda *_: "")(ex, units)
    line = str(ex.get("exercise_name") or "Exercise") + (f": {dose}" if dose else "")
    if ex.get("completed") is False:
        line += " (not completed)"
    if ex.get("notes"):
        line += f" — {ex['notes']}"
    return line


def _format_history(logs: _Logs, _: Mapping[str, int]) -> str:
    if not logs.rows:
        return f"No workouts logged in the last {_plural(logs.days_back, 'day')}."
    shown = len(logs.rows)
    count = f"{shown}" if shown == logs.total else f"the latest {shown} of {logs.total}"
    lines = [f"Workouts in the last {_plural(logs.days_back, 'day')} ({count}), newest first:"]
    for row in logs.rows:
        units = _units(row)
        lines.append(f"{row['day'].isoformat()} {row['day']:%a}: {row['title']}")
        lines += [f"  - {_exercise_line(ex, units)}" for ex in _json_list(row["exercises"]) if isinstance(ex, Mapping)]
        if row["notes"]:
            lines.append(f"  Notes: {row['notes']}")
    return "\n".join(lines)


def _muscle_shares(logs: _Logs) -> tuple[dict[str, float], int]:
    """Each preset muscle's summed share over the completed exercises, and how many there were."""
    shares = dict.fromkeys(MUSCLES, 0.0)
    done = 0
    for row in logs.rows:
        for ex in _json_list(row["exercises"]):
            if not isinstance(ex, Mapping) or ex.get("completed") is False:
                continue
            done += 1
            for use in _as_list(ex.get("muscles_utilized")):
                muscle = _MUSCLE_BY_KEY.get(str(use.get("muscle", "")).lower()) if isinstance(use, Mapping) else None
                share = use.get("share") if muscle else None
                if isinstance(share, (int, float)) and not isinstance(share, bool) and share > 0:
                    shares[muscle] += float(share)
    return shares, done


def _format_distribution(logs: _Logs, _: Mapping[str, int]) -> str:
    shares, done = _muscle_shares(logs)
    total = sum(shares.values())
    if total <= 0:
        return f"No completed exercises in the last {_plural(logs.days_back, 'day')}."
    worked = sorted((m for m in MUSCLES if shares[m] > 0), key=lambda m: -shares[m])  # stable: preset order on ties
    lines = [f"Last {_plural(logs.days_back, 'day')}: {_plural(logs.total, 'workout')}, "
             f"{_plural(done, 'completed exercise')}. Share of work per muscle:"]
    for muscle in worked:
        pct = round(100 * shares[muscle] / total)
        lines.append(f"- {muscle}: {pct}%" if pct else f"- {muscle}: <1%")
    idle = [m for m in MUSCLES if shares[m] == 0]
    if idle:
        lines.append(f"Not trained: {', '.join(idle)}")
    return "\n".join(lines)


# --- the registry ----------------------------------------------------------------------------------

_SOURCES: Final[Mapping[str, _Source]] = MappingProxyType({
    "user_profile": _Source("Profile", _fetch_profile, _format_profile),
    "category_goals": _Source("Goals", _fetch_goals("category"), _format_goals("No goals set.")),
    "muscle_goals": _Source("Muscle focus", _fetch_goals("muscle"), _format_goals("No muscle focus set.")),
    "active_preferences": _Source("Preferences", _fetch_preferences, _format_preferences),
    "workout_history": _Source(
        "Workout history", _fetch_history, _format_history,
        params={"limit": _Param(default=10, maximum=50), "days_back": _Param(default=14, maximum=365)},
    ),
    "exercise_distribution": _Source(
        "Exercise balance", _fetch_distribution, _format_distribution,
        params={"days_back": _Param(default=30, maximum=365)},
    ),
    "user_settings": _Source("Units", _fetch_settings, _format_settings),
    "all_locations": _Source("Locations", _fetch_locations, _format_locations),
})

# Source name → the name the client shows ("Gathering your info: Profile, Goals…").
SOURCES: Final[Mapping[str, str]] = MappingProxyType({name: s.display for name, s in _SOURCES.items()})


def _source(name: str) -> _Source:
    try:
        return _SOURCES[name]
    except KeyError:
        raise UnknownSource(name) from None


def _params(name: str, source: _Source, given: Mapping[str, Any] | None) -> dict[str, int]:
    """Each parameter the source takes: the given whole number, capped at its maximum, or its default."""
    unknown = set(given or {}) - set(source.params)
    if unknown:
        takes = ", ".join(source.params) or "no parameters"
        raise ValueError(f"{name} takes {takes}; got {', '.join(sorted(unknown))}")
    resolved = {}
    for key, spec in source.params.items():
        value = (given or {}).get(key)
        if value is None:
            value = spec.default
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}.{key} must be a whole number of at least 1, not {value!r}")
        resolved[key] = min(value, spec.maximum)
    return resolved


def _scope(organization_id: str, membership_id: str, today: date | None) -> _Scope:
    return _Scope(uuid.UUID(str(organization_id)), uuid.UUID(str(membership_id)), today)


async def fetch_source(
    conn: asyncpg.Connection | asyncpg.Pool,
    organization_id: str,
    membership_id: str,
    source: str,
    params: Mapping[str, Any] | None = None,
    *,
    today: date | None = None,
) -> str:
    """`source` for one member, as text for the model. UnknownSource for a name not in SOURCES,
    ValueError for parameters the source does not take or out of range."""
    spec = _source(source)
    resolved = _params(source, spec, params)
    data = await spec.fetch(conn, _scope(organization_id, membership_id, today), resolved)
    return spec.format(data, resolved)


async def fetch_sources(
    pool: asyncpg.Pool,
    organization_id: str,
    membership_id: str,
    sources: Sequence[str],
    params: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    today: date | None = None,
) -> dict[str, str | Exception]:
    """Several sources at once, each on its own connection; a source that fails is its exception
    in the answer, and the others still arrive (seed 003 §5.2: a failed source is left out)."""

    async def one(name: str) -> str | Exception:
        try:
            async with pool.acquire() as conn:
                return await fetch_source(conn, organization_id, membership_id, name, (params or {}).get(name), today=today)
        except Exception as error:  # noqa: BLE001 — handed back per source, not raised
            return error

    names = list(dict.fromkeys(sources))
    return dict(zip(names, await asyncio.gather(*(one(n) for n in names)), strict=True))


def _xml(value: Any) -> str:
    return html.escape(str(value))


async def user_data_xml(
    conn_or_pool: asyncpg.Connection | asyncpg.Pool,
    organization_id: str,
    membership_id: str,
    *,
    today: date | None = None,
) -> str:
    """Seed 003 §4.4's <user_data> block: units, body stats, the current location and its equipment.
    Stable within a session, so it sits behind its own cache breakpoint; every database string in
    it is escaped, so no name or note can close a tag."""
    scope = _scope(organization_id, membership_id, today)
    profile = await _fetch_profile(conn_or_pool, scope, {})
    current = await _locations(conn_or_pool, scope, current_only=True)
    units = profile.units if profile else _Units()

    body = [f"{label}: {_xml(value)}" for label, value in _body_lines(profile)] if profile else []
    if current:
        loc = current[0]
        place = [f"Location: {_xml(loc.name)}", "Equipment:"]
        place += [f"  - {_xml(_equipment_line(item, units.weight))}" for item in loc.equipment if isinstance(item, Mapping)]
        if len(place) == 2:
            place[-1] = "Equipment: none listed"
    else:
        place = ["No current location set."]
    return "\n".join([
        "<user_data>",
        "<unit_preferences>", f"Weight: {_xml(units.weight)}", f"Distance: {_xml(units.distance)}", "</unit_preferences>",
        "",
        "<body_stats>", *(body or ["No body stats recorded."]), "</body_stats>",
        "",
        "<current_location>", *place, "</current_location>",
        "</user_data>",
    ])


def knowledge_block(source: str, data: str) -> str:
    """Seed 003's `<knowledge source="…">` wrapper, with the data escaped: a member's own text (a
    preference, a location's name) cannot close the block and pass for instructions."""
    return f'<knowledge source="{html.escape(source)}">\n{html.escape(data, quote=False)}\n</knowledge>'
