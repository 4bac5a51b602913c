"""The member coach's initializer (seed 003 §5): a small model that picks which data sources to
append to the session before the coach's turn.

Told apart by its system prompt (it opens with INITIALIZER_MARKER). The prompt carries the member's
words in <user_message> and what the session already holds in <loaded_sources>
(`user_profile, workout_history(days_back=14)` or `none`). The answer is the JSON of §5.3, chosen
from the words by the task-to-data mapping of §5.5, append-only: a loaded source is never fetched
again, except workout_history when the words need a longer range (reason `expand_range`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from .coach_schema import json_schema_of, conform
from .conversation import tagged, user_prompt_text
from .turns import Turn

INITIALIZER_MARKER = "You select data sources for Spotter's coach."

SOURCES = ("user_profile", "category_goals", "muscle_goals", "active_preferences", "workout_history",
           "exercise_distribution", "user_settings", "all_locations")
DEFAULT_HISTORY_DAYS = 14  # what a workout needs, and what a loaded history without a range is taken to hold
PROGRESS_DAYS = 30
RANGED = {"workout_history": DEFAULT_HISTORY_DAYS, "exercise_distribution": 30}  # default days_back

_WORKOUT_RE = re.compile(
    r"\b(?:work\s?outs?|routines?|sessions?|train(?:ing)?|exercises?|leg\s+day|legs?|chest|arms?|back|core|abs|"
    r"full[\s-]body|upper\s+body|lower\s+body|hiit|stretch(?:es|ing)?|mobility|cardio|shoulders?|glutes?|wod|"
    r"circuit|squats?|push[\s-]?ups?|pull[\s-]?ups?|yoga)\b"
    r"|אימון|אימונים|להתאמן|תרגיל|тренировк|упражнен|потренир", re.I)
# Words that ask for something to be made ("give me", "build", "I want"): a workout word with them is a
# workout request even in a question about history ("a workout like last week's").
GEN_VERB_RE = re.compile(
    r"\b(?:give|create|generate|build|make|plan|want|need|design|suggest|new|let'?s|can\s+you|could\s+you|"
    r"today|get|prepare|put\s+together|write|i'?d\s+like)\b|תבנה|תן|תני|בנה|רוצה|צריך|сделай|составь|дай|хочу|нужн", re.I)
_NOT_WORKOUT_BACK_RE = re.compile(r"\b(?:i'?m|i\s+am|be|come|coming|came|get|got|welcome)\s+back\b", re.I)
_GOALS_RE = re.compile(r"\b(?:goals?|aims?|targets?|objectives?)\b|מטר(?:ה|ות)|цел[ьиейя]", re.I)
_PROGRESS_RE = re.compile(
    r"\b(?:progress|history|stats|statistics|how\s+many|how\s+often|this\s+(?:month|week|year)|"
    r"last\s+(?:\d+\s+)?(?:days?|weeks?|months?|year|workouts?|sessions?|time)|so\s+far|streak|logged)\b"
    r"|\blast\b(?!\s+(?:one|exercise|move|set|rep|round))|התקדמות|היסטורי|סטטיסטיק|החודש|השבוע|כמה\s+אימונים|"
    r"איך\s+הלכ|прогресс|истори|статистик|в\s+этом\s+месяце|на\s+этой\s+неделе|как\s+прошл|сколько", re.I)
_LOCATION_RE = re.compile(
    r"\b(?:locations?|equipment|gym|home|hotel|office|studio|dumbbells?|barbells?|kettlebells?|machines?)\b"
    r"|מכון|ציוד|בבית|зал|оборудован|дома", re.I)
_PREFERENCES_RE = re.compile(
    r"\b(?:prefer(?:ence|ences|red)?|like|love|dislike|hate|avoid|don'?t\s+(?:like|want)|favou?rite|injur(?:y|ed|ies))\b"
    r"|מעדיף|מעדיפה|אוהב|нравится|предпочит", re.I)
_BALANCE_RE = re.compile(
    r"\b(?:distribution|balance[ds]?|imbalances?|which\s+muscles|under[\s-]?trained|neglect(?:ed|ing)?|"
    r"muscle\s+split)\b|איזון|баланс", re.I)
_DAYS_RE = re.compile(r"\b(?:last|past)\s+(\d{1,3})\s+days?\b", re.I)
_WEEKS_RE = re.compile(r"\b(?:last|past)\s+(\d{1,2})\s+weeks?\b", re.I)
_MONTHS_RE = re.compile(r"\b(?:last|past)\s+(\d{1,2})\s+months?\b", re.I)
_LOADED_RE = re.compile(r"([a-z_]+)\s*(?:\(([^)]*)\))?")
_DAYS_PARAM_RE = re.compile(r"(?:days_back\s*[=:]\s*)?(\d+)")


@dataclass(frozen=True)
class Need:
    source: str
    days_back: int | None = None


def respond(body: dict[str, Any]) -> Turn:
    prompt = user_prompt_text(body)
    selection = select(tagged(prompt, "user_message"), parse_loaded(tagged(prompt, "loaded_sources")))
    schema = json_schema_of(body)
    if schema is not None:
        selection = conform(selection, schema)
    return Turn(text=json.dumps(selection, ensure_ascii=False))


def parse_loaded(text: str) -> dict[str, int | None]:
    """`user_profile, workout_history(days_back=14)` → {source: days_back or None}; `none` → {}."""
    loaded: dict[str, int | None] = {}
    if text.strip().lower() in ("", "none", "nothing"):
        return loaded
    for match in _LOADED_RE.finditer(text.lower()):
        source, params = match.group(1), match.group(2) or ""
        if source not in SOURCES:
            continue
        days = _DAYS_PARAM_RE.search(params)
        value = int(days.group(1)) if days else None
        previous = loaded.get(source)
        loaded[source] = max(v for v in (previous, value) if v is not None) if (previous or value) else None
    return loaded


def needs_for(words: str) -> tuple[list[Need], list[str]]:
    """What the words call for (§5.5), in a fixed order, with the task types behind them."""
    needs: dict[str, Need] = {}
    tasks: list[str] = []

    def add(*items: Need) -> None:
        for item in items:
            current = needs.get(item.source)
            if current is None or (item.days_back or 0) > (current.days_back or 0):
                needs[item.source] = item

    workout = bool(_WORKOUT_RE.search(words))
    if workout and not _WORKOUT_RE.search(_NOT_WORKOUT_BACK_RE.sub("", words)):
        workout = False  # "I'm back!" is a greeting, not a back day
    progress = bool(_PROGRESS_RE.search(words))
    stated = progress or bool(_PREFERENCES_RE.search(words) or _BALANCE_RE.search(words))
    if stated and workout and not GEN_VERB_RE.search(words):
        # "how many workouts did I do?" asks about history; "I prefer short sessions" states a preference
        workout = False
    if progress:
        tasks.append("progress")
        add(Need("workout_history", history_days(words)), Need("category_goals"))
    if workout:
        tasks.append("workout")
        add(Need("category_goals"), Need("muscle_goals"), Need("active_preferences"),
            Need("workout_history", DEFAULT_HISTORY_DAYS))
    if _BALANCE_RE.search(words):
        tasks.append("balance")
        add(Need("muscle_goals"), Need("exercise_distribution", max(RANGED["exercise_distribution"], history_days(words))))
    if _GOALS_RE.search(words):
        tasks.append("goals")
        add(Need("category_goals"), Need("muscle_goals"))
    if _LOCATION_RE.search(words):
        tasks.append("location")
        add(Need("all_locations"))
    if _PREFERENCES_RE.search(words):
        tasks.append("preferences")
        add(Need("active_preferences"))
    ordered = [needs[s] for s in SOURCES if s in needs]
    return ordered, tasks


def history_days(words: str) -> int:
    if m := _DAYS_RE.search(words):
        return max(1, int(m.group(1)))
    if m := _WEEKS_RE.search(words):
        return 7 * max(1, int(m.group(1)))
    if m := _MONTHS_RE.search(words):
        return 30 * max(1, int(m.group(1)))
    lowered = words.lower()
    if "year" in lowered:
        return 365
    if "week" in lowered or "שבוע" in lowered or "недел" in lowered:
        return 7
    return PROGRESS_DAYS  # "this month", "progress", "history", "how many"…


_TASK_REASONS = {
    "workout": "a workout needs goals, preferences and recent history",
    "progress": "progress questions need workout history and goals",
    "goals": "goal talk needs the member's goals",
    "location": "location and equipment questions need the member's locations",
    "preferences": "preferences are stored as active preferences",
    "balance": "balance questions need the muscle distribution and focus",
}


def select(words: str, loaded: dict[str, int | None]) -> dict[str, Any]:
    needs, tasks = needs_for(words)
    append: list[dict[str, Any]] = []
    existing: list[str] = []
    for need in needs:
        if need.source not in loaded:
            append.append({"source": need.source, "reason": "not_in_context", "days_back": need.days_back})
            continue
        have = loaded[need.source]
        have_days = have if have is not None else RANGED.get(need.source, 0)
        if need.source in RANGED and need.days_back is not None and need.days_back > have_days:
            append.append({"source": need.source, "reason": "expand_range", "days_back": need.days_back})
        else:
            existing.append(need.source)
    if not tasks:
        reasoning = "General conversation: no extra data needed."
    else:
        reasoning = "; ".join(_TASK_REASONS[t] for t in tasks)
        reasoning = reasoning[0].upper() + reasoning[1:] + "."
        if existing and not append:
            reasoning += " Everything needed is already loaded."
        elif any(a["reason"] == "expand_range" for a in append):
            reasoning += " The loaded history is too short, so a longer range is appended."
    return {"reasoning": reasoning, "append_knowledge": append, "use_existing": existing}

