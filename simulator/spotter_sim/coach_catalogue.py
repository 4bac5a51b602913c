"""The member coach demo's exercise catalogue and the workouts it builds from it (seed 003 §6.4).

Every exercise it emits is valid for generate_workout: one of the four types with that type's
fields, the 16 preset muscles with shares summing to 1.0, goals with shares summing to 1.0, an
order, and a reason. The body part comes from the member's words, the goals from a
<knowledge source="category_goals"> block, units and equipment from <user_data>.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

MUSCLES = ("Chest", "Back", "Shoulders", "Biceps", "Triceps", "Abs", "Lower Back", "Quadriceps", "Hamstrings",
           "Glutes", "Calves", "Trapezius", "Abductors", "Adductors", "Forearms", "Neck")
TYPES = ("reps", "hold", "duration", "intervals")
GOALS = ("strength", "hypertrophy", "endurance", "mobility", "fat_loss", "power", "general_fitness")


@dataclass(frozen=True)
class Move:
    name: str
    type: str
    muscles: tuple[tuple[str, float], ...]
    goals: tuple[tuple[str, float], ...]
    equipment: str  # "bodyweight", "dumbbells", "barbell", "kettlebell", "pull-up bar", "bench", "outdoors"
    reasoning: str
    fields: dict[str, Any] = field(default_factory=dict)  # the type's defaults; load in kg

    def __post_init__(self) -> None:
        assert self.type in TYPES, self.name
        assert all(m in MUSCLES for m, _ in self.muscles), self.name
        assert abs(sum(s for _, s in self.muscles) - 1) < 1e-9, self.name
        assert abs(sum(s for _, s in self.goals) - 1) < 1e-9, self.name


def _reps(sets: int, reps: int, rest: int, load: float | None = None) -> dict[str, Any]:
    return {"sets": sets, "reps": reps, "rest_sec": rest, "load_kg": load}


def _hold(sets: int, sec: int, rest: int) -> dict[str, Any]:
    return {"sets": sets, "hold_sec": sec, "rest_sec": rest}


def _intervals(rounds: int, work: int, rest: int) -> dict[str, Any]:
    return {"rounds": rounds, "work_sec": work, "rest_sec": rest}


STR_HYP = (("strength", 0.5), ("hypertrophy", 0.5))
STR_END = (("strength", 0.6), ("endurance", 0.4))
HYP = (("hypertrophy", 0.7), ("strength", 0.3))
COND = (("endurance", 0.5), ("fat_loss", 0.5))
POWER = (("power", 0.5), ("fat_loss", 0.3), ("endurance", 0.2))
MOB = (("mobility", 0.8), ("general_fitness", 0.2))
CORE = (("strength", 0.5), ("endurance", 0.3), ("general_fitness", 0.2))

_ALL = [
    # chest
    Move("Push-up", "reps", (("Chest", 0.6), ("Triceps", 0.25), ("Shoulders", 0.15)), STR_END, "bodyweight",
         "A bodyweight press that builds pushing strength anywhere.", _reps(3, 12, 60)),
    Move("Dumbbell Bench Press", "reps", (("Chest", 0.65), ("Triceps", 0.2), ("Shoulders", 0.15)), STR_HYP, "dumbbells",
         "The main chest builder, loaded with dumbbells.", _reps(4, 10, 90, 15)),
    Move("Dumbbell Floor Press", "reps", (("Chest", 0.6), ("Triceps", 0.3), ("Shoulders", 0.1)), STR_HYP, "dumbbells",
         "A chest press that needs no bench.", _reps(3, 10, 75, 15)),
    Move("Dumbbell Fly", "reps", (("Chest", 0.85), ("Shoulders", 0.15)), HYP, "dumbbells",
         "Isolates the chest through a long stretch.", _reps(3, 12, 60, 8)),
    Move("Incline Push-up", "reps", (("Chest", 0.6), ("Triceps", 0.2), ("Shoulders", 0.2)), STR_END, "bodyweight",
         "An easier push-up angle for extra chest volume.", _reps(3, 15, 45)),
    # legs
    Move("Goblet Squat", "reps", (("Quadriceps", 0.5), ("Glutes", 0.3), ("Adductors", 0.1), ("Abs", 0.1)), STR_HYP,
         "dumbbells", "A squat the front-held weight keeps upright.", _reps(4, 10, 90, 16)),
    Move("Bodyweight Squat", "reps", (("Quadriceps", 0.55), ("Glutes", 0.3), ("Hamstrings", 0.15)), STR_END,
         "bodyweight", "The basic knee-dominant pattern, no equipment needed.", _reps(3, 15, 60)),
    Move("Reverse Lunge", "reps", (("Quadriceps", 0.45), ("Glutes", 0.35), ("Hamstrings", 0.2)), STR_HYP, "bodyweight",
         "Single-leg work that is kind to the knees.", _reps(3, 10, 60)),
    Move("Dumbbell Romanian Deadlift", "reps", (("Hamstrings", 0.5), ("Glutes", 0.3), ("Lower Back", 0.2)), STR_HYP,
         "dumbbells", "Trains the hip hinge and the back of the legs.", _reps(3, 10, 90, 20)),
    Move("Glute Bridge", "reps", (("Glutes", 0.6), ("Hamstrings", 0.3), ("Lower Back", 0.1)), STR_END, "bodyweight",
         "Strengthens the glutes with no load on the spine.", _reps(3, 15, 45)),
    Move("Wall Sit", "hold", (("Quadriceps", 0.7), ("Glutes", 0.2), ("Calves", 0.1)), (("endurance", 0.6), ("strength", 0.4)),
         "bodyweight", "An isometric finisher for the quads.", _hold(3, 40, 45)),
    Move("Standing Calf Raise", "reps", (("Calves", 1.0),), STR_END, "bodyweight",
         "Direct calf work for ankles and running.", _reps(3, 20, 30)),
    Move("Jump Squat Intervals", "intervals", (("Quadriceps", 0.45), ("Glutes", 0.35), ("Calves", 0.2)), POWER,
         "bodyweight", "Explosive intervals to finish the legs.", _intervals(6, 20, 40)),
    Move("Barbell Back Squat", "reps", (("Quadriceps", 0.5), ("Glutes", 0.3), ("Lower Back", 0.1), ("Adductors", 0.1)),
         STR_HYP, "barbell", "The heaviest lower-body lift.", _reps(5, 5, 150, 60)),
    # back
    Move("One-arm Dumbbell Row", "reps", (("Back", 0.6), ("Biceps", 0.2), ("Trapezius", 0.1), ("Forearms", 0.1)),
         STR_HYP, "dumbbells", "Builds the lats one side at a time.", _reps(3, 10, 60, 16)),
    Move("Pull-up", "reps", (("Back", 0.6), ("Biceps", 0.25), ("Forearms", 0.15)), STR_HYP, "pull-up bar",
         "The best bodyweight pull for the back.", _reps(4, 6, 120)),
    Move("Inverted Row", "reps", (("Back", 0.6), ("Biceps", 0.2), ("Trapezius", 0.2)), STR_END, "bodyweight",
         "A horizontal pull under a sturdy table or bar.", _reps(3, 10, 60)),
    Move("Dumbbell Reverse Fly", "reps", (("Shoulders", 0.5), ("Trapezius", 0.3), ("Back", 0.2)), HYP, "dumbbells",
         "Rear shoulders and upper back for posture.", _reps(3, 15, 45, 5)),
    Move("Superman Hold", "hold", (("Lower Back", 0.6), ("Glutes", 0.25), ("Back", 0.15)), CORE, "bodyweight",
         "Strengthens the lower back isometrically.", _hold(3, 30, 30)),
    Move("Barbell Deadlift", "reps", (("Hamstrings", 0.3), ("Glutes", 0.3), ("Lower Back", 0.2), ("Back", 0.1),
                                      ("Trapezius", 0.1)), STR_HYP, "barbell",
         "A full posterior-chain strength lift.", _reps(4, 5, 150, 70)),
    # arms
    Move("Dumbbell Biceps Curl", "reps", (("Biceps", 0.85), ("Forearms", 0.15)), HYP, "dumbbells",
         "Direct biceps work.", _reps(3, 12, 45, 10)),
    Move("Overhead Triceps Extension", "reps", (("Triceps", 0.9), ("Shoulders", 0.1)), HYP, "dumbbells",
         "Trains the long head of the triceps.", _reps(3, 12, 45, 10)),
    Move("Hammer Curl", "reps", (("Biceps", 0.6), ("Forearms", 0.4)), HYP, "dumbbells",
         "Biceps and forearms with a neutral grip.", _reps(3, 12, 45, 10)),
    Move("Bench Dip", "reps", (("Triceps", 0.7), ("Chest", 0.15), ("Shoulders", 0.15)), STR_END, "bodyweight",
         "Bodyweight triceps work off a bench or chair.", _reps(3, 12, 45)),
    Move("Diamond Push-up", "reps", (("Triceps", 0.55), ("Chest", 0.35), ("Shoulders", 0.1)), STR_END, "bodyweight",
         "A close-hand push-up that shifts the work to the triceps.", _reps(3, 10, 60)),
    Move("Farmer's Carry Hold", "hold", (("Forearms", 0.5), ("Trapezius", 0.3), ("Abs", 0.2)), STR_END, "dumbbells",
         "Grip and trap endurance under load.", _hold(3, 40, 60)),
    # shoulders
    Move("Dumbbell Shoulder Press", "reps", (("Shoulders", 0.7), ("Triceps", 0.2), ("Trapezius", 0.1)), STR_HYP,
         "dumbbells", "The main overhead press.", _reps(4, 10, 75, 12)),
    Move("Lateral Raise", "reps", (("Shoulders", 0.9), ("Trapezius", 0.1)), HYP, "dumbbells",
         "Widens the shoulders by isolating the side delts.", _reps(3, 15, 45, 5)),
    Move("Pike Push-up", "reps", (("Shoulders", 0.6), ("Triceps", 0.3), ("Chest", 0.1)), STR_END, "bodyweight",
         "A bodyweight overhead press.", _reps(3, 8, 60)),
    Move("Dumbbell Shrug", "reps", (("Trapezius", 0.85), ("Forearms", 0.15)), HYP, "dumbbells",
         "Direct trap work.", _reps(3, 15, 45, 16)),
    Move("Neck Isometric Hold", "hold", (("Neck", 0.8), ("Trapezius", 0.2)), MOB, "bodyweight",
         "Gentle isometrics for a stronger neck.", _hold(2, 20, 20)),
    # core
    Move("Plank", "hold", (("Abs", 0.7), ("Shoulders", 0.15), ("Lower Back", 0.15)), CORE, "bodyweight",
         "Builds core stability for every other lift.", _hold(3, 45, 30)),
    Move("Dead Bug", "reps", (("Abs", 0.8), ("Lower Back", 0.2)), CORE, "bodyweight",
         "Teaches the core to brace while the limbs move.", _reps(3, 12, 30)),
    Move("Side Plank", "hold", (("Abs", 0.6), ("Abductors", 0.2), ("Shoulders", 0.2)), CORE, "bodyweight",
         "Trains the obliques and hip stabilisers.", _hold(3, 30, 30)),
    Move("Russian Twist", "reps", (("Abs", 0.85), ("Lower Back", 0.15)), CORE, "bodyweight",
         "Rotational core work.", _reps(3, 20, 30)),
    Move("Bird Dog", "reps", (("Lower Back", 0.5), ("Abs", 0.3), ("Glutes", 0.2)), CORE, "bodyweight",
         "Back-friendly core control.", _reps(3, 10, 30)),
    Move("Mountain Climber Intervals", "intervals", (("Abs", 0.4), ("Shoulders", 0.2), ("Quadriceps", 0.2),
                                                     ("Chest", 0.2)), COND, "bodyweight",
         "Core under a conditioning load.", _intervals(6, 30, 30)),
    # conditioning
    Move("Burpee Intervals", "intervals", (("Quadriceps", 0.3), ("Chest", 0.25), ("Shoulders", 0.15), ("Abs", 0.15),
                                           ("Glutes", 0.15)), COND, "bodyweight",
         "A full-body finisher that drives the heart rate up.", _intervals(5, 30, 30)),
    Move("Jump Rope Intervals", "intervals", (("Calves", 0.5), ("Quadriceps", 0.2), ("Shoulders", 0.15),
                                              ("Forearms", 0.15)), COND, "bodyweight",
         "Light, quick conditioning.", _intervals(8, 40, 20)),
    Move("High Knees Intervals", "intervals", (("Quadriceps", 0.4), ("Abs", 0.3), ("Calves", 0.3)), COND, "bodyweight",
         "Conditioning with no equipment.", _intervals(6, 30, 30)),
    Move("Easy Run", "duration", (("Quadriceps", 0.3), ("Calves", 0.3), ("Hamstrings", 0.2), ("Glutes", 0.2)),
         (("endurance", 0.7), ("fat_loss", 0.3)), "outdoors", "Aerobic base at a conversational pace.",
         {"duration_min": 20, "distance": 3, "distance_unit": "km", "target_pace": "6:30/km"}),
    Move("Brisk Walk", "duration", (("Quadriceps", 0.3), ("Calves", 0.3), ("Glutes", 0.2), ("Hamstrings", 0.2)),
         (("general_fitness", 0.6), ("endurance", 0.4)), "outdoors", "Easy movement to warm up or cool down.",
         {"duration_min": 10}),
    # mobility
    Move("Cat-Cow", "reps", (("Lower Back", 0.5), ("Back", 0.3), ("Neck", 0.2)), MOB, "bodyweight",
         "Mobilises the whole spine.", _reps(2, 10, 15)),
    Move("Hip Flexor Stretch", "hold", (("Quadriceps", 0.5), ("Glutes", 0.3), ("Adductors", 0.2)), MOB, "bodyweight",
         "Opens the hips after sitting.", _hold(2, 45, 15)),
    Move("Hamstring Stretch", "hold", (("Hamstrings", 0.8), ("Calves", 0.2)), MOB, "bodyweight",
         "Lengthens the back of the legs.", _hold(2, 45, 15)),
    Move("Child's Pose", "hold", (("Lower Back", 0.5), ("Back", 0.3), ("Shoulders", 0.2)), MOB, "bodyweight",
         "A relaxing stretch for the back and shoulders.", _hold(2, 60, 15)),
    Move("World's Greatest Stretch", "reps", (("Hamstrings", 0.3), ("Adductors", 0.3), ("Back", 0.2),
                                               ("Shoulders", 0.2)), MOB, "bodyweight",
         "Hips, hamstrings and thoracic spine in one flow.", _reps(2, 6, 20)),
]
CATALOGUE: dict[str, Move] = {m.name: m for m in _ALL}

# Each part's curated order: the main lifts first, a hold or intervals to finish.
PARTS: dict[str, tuple[str, ...]] = {
    "chest": ("Dumbbell Bench Press", "Push-up", "Dumbbell Fly", "Plank", "Burpee Intervals", "Dumbbell Floor Press",
              "Incline Push-up"),
    "legs": ("Barbell Back Squat", "Goblet Squat", "Dumbbell Romanian Deadlift", "Reverse Lunge", "Glute Bridge",
             "Wall Sit", "Jump Squat Intervals", "Bodyweight Squat", "Standing Calf Raise"),
    "back": ("Pull-up", "One-arm Dumbbell Row", "Dumbbell Reverse Fly", "Superman Hold", "Mountain Climber Intervals",
             "Inverted Row", "Barbell Deadlift"),
    "arms": ("Dumbbell Biceps Curl", "Overhead Triceps Extension", "Hammer Curl", "Bench Dip", "Farmer's Carry Hold",
             "Diamond Push-up", "Burpee Intervals"),
    "shoulders": ("Dumbbell Shoulder Press", "Lateral Raise", "Pike Push-up", "Dumbbell Reverse Fly", "Plank",
                  "Dumbbell Shrug", "Neck Isometric Hold"),
    "core": ("Dead Bug", "Plank", "Russian Twist", "Side Plank", "Mountain Climber Intervals", "Bird Dog"),
    "cardio": ("Easy Run", "Jump Rope Intervals", "Burpee Intervals", "High Knees Intervals",
               "Mountain Climber Intervals", "Bodyweight Squat"),
    "mobility": ("Cat-Cow", "World's Greatest Stretch", "Hip Flexor Stretch", "Hamstring Stretch", "Child's Pose",
                 "Brisk Walk"),
    "full_body": ("Goblet Squat", "Push-up", "One-arm Dumbbell Row", "Plank", "Burpee Intervals",
                  "Dumbbell Shoulder Press", "Glute Bridge", "Bodyweight Squat", "Inverted Row"),
}
PART_TITLES = {
    "chest": "Chest", "legs": "Leg Day", "back": "Back", "arms": "Arms", "shoulders": "Shoulders", "core": "Core",
    "cardio": "Cardio", "mobility": "Mobility", "full_body": "Full Body",
}
_PART_RE: dict[str, re.Pattern[str]] = {
    "chest": re.compile(r"\b(?:chest|pecs?|push(?:ing)?\s+day)\b|חזה|груд", re.I),
    "legs": re.compile(r"\b(?:legs?|leg\s+day|lower\s+body|quads?|glutes?|hamstrings?|squats?|calves)\b|רגליים|ног", re.I),
    "back": re.compile(r"\b(?:back|lats|pull(?:ing)?\s+day)\b|גב\b|спин", re.I),
    "arms": re.compile(r"\b(?:arms?|biceps?|triceps?|guns)\b|ידיים|рук", re.I),
    "shoulders": re.compile(r"\b(?:shoulders?|delts?|traps?)\b|כתפיים|плеч", re.I),
    "core": re.compile(r"\b(?:core|abs|abdominals?|six[\s-]?pack)\b|בטן|пресс", re.I),
    "cardio": re.compile(r"\b(?:cardio|hiit|conditioning|run(?:ning)?|fat\s+burn(?:ing|er)?|sweat)\b|קרדיו|кардио", re.I),
    "mobility": re.compile(r"\b(?:stretch(?:es|ing)?|mobility|yoga|flexib\w*|recovery|cool[\s-]?down)\b|מתיחות|растяж", re.I),
    "full_body": re.compile(r"\b(?:full[\s-]?body|total[\s-]?body|whole\s+body)\b|כל\s+הגוף|всё\s+тело|все\s+тело", re.I),
}
_NOT_BACK_RE = re.compile(r"\b(?:i'?m|i\s+am|be|come|coming|came|get|got|welcome)\s+back\b", re.I)
_QUICK_RE = re.compile(r"\b(?:quick|short|fast|brief|express|mini)\b|קצר|מהיר|быстр|коротк", re.I)
_LONG_RE = re.compile(r"\b(?:long|big|intense|full\s+hour)\b|ארוך|длинн", re.I)
_MINUTES_RE = re.compile(r"(\d{1,3})\s*(?:-\s*)?(?:min(?:ute)?s?\b|דקות|мин)", re.I)
_BODYWEIGHT_RE = re.compile(
    r"\b(?:no\s+equipment|without\s+equipment|bodyweight|body\s+weight|no\s+weights|hotel\s+room)\b"
    r"|בלי\s+ציוד|без\s+оборудован", re.I)

_EQUIPMENT_WORDS = {
    "dumbbells": ("dumbbell",), "barbell": ("barbell",), "kettlebell": ("kettlebell",),
    "pull-up bar": ("pull-up", "pull up", "pullup", "chin-up", "chin up"), "bench": ("bench",),
}


def parts_in(words: str) -> list[str]:
    """Body parts the words name, in the order they name them; full body when none."""
    cleaned = _NOT_BACK_RE.sub(" ", words)
    found = [(m.start(), part) for part, rx in _PART_RE.items() if (m := rx.search(cleaned))]
    parts = [part for _, part in sorted(found)]
    if "full_body" in parts:
        return ["full_body"]
    return parts or ["full_body"]


@dataclass(frozen=True)
class Setting:
    """What the conversation tells about the member: units, equipment, goals."""

    weight_unit: str = "kg"  # kg | lb
    distance_unit: str = "km"  # km | mi
    equipment: frozenset[str] | None = None  # None: unknown, anything goes
    dumbbell_weights: tuple[float, ...] = ()
    goals: tuple[str, ...] = ()


def setting_from(user_data: str, goals_block: str) -> Setting:
    weight = "lb" if re.search(r"Weight:\s*(?:lb|lbs|pounds)\b", user_data, re.I) else "kg"
    distance = "mi" if re.search(r"Distance:\s*(?:mi|miles?)\b", user_data, re.I) else "km"
    equipment: frozenset[str] | None = None
    weights: tuple[float, ...] = ()
    location = re.search(r"<current_location>(.*?)</current_location>", user_data, re.S)
    if location and "equipment" in location.group(1).lower():
        text = location.group(1).lower()
        equipment = frozenset(kind for kind, words in _EQUIPMENT_WORDS.items() if any(w in text for w in words))
        line = next((ln for ln in text.splitlines() if "dumbbell" in ln), "")
        weights = tuple(sorted({float(n) for n in re.findall(r"\d+(?:\.\d+)?", line.split(":", 1)[-1])}))
    return Setting(weight, distance, equipment, weights, goals_from(goals_block))


_GOAL_WORDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("strength", re.compile(r"strength|\bstrong|כוח|сил[аы]", re.I)),
    ("hypertrophy", re.compile(r"hypertroph|muscle[\s_]gain|build(?:ing)?[\s_]muscle|muscle[\s_]mass|מסת|масс", re.I)),
    ("endurance", re.compile(r"endurance|stamina|aerobic|סיבולת|выносливост", re.I)),
    ("mobility", re.compile(r"mobility|flexib|גמישות|гибкост|подвижност", re.I)),
    ("fat_loss", re.compile(r"fat[\s_]loss|weight[\s_]loss|lose[\s_]weight|lean|ירידה\s+במשקל|похуд|сброс", re.I)),
    ("power", re.compile(r"\bpower|explosiv|athletic", re.I)),
    ("general_fitness", re.compile(r"general[\s_]fitness|overall|health|wellness|כושר\s+כללי|общ", re.I)),
)


def goals_from(block: str) -> tuple[str, ...]:
    """The member's goal categories, in the order the category_goals block names them (at most 3)."""
    if not block.strip():
        return ()
    # "- strength: 5" lines (priority 1–5, 5 highest): the highest priorities first
    rated = [(m.group(1), int(m.group(2))) for m in re.finditer(r"^\s*[-*•]\s*([^:\n]+):\s*(\d+)\s*$", block, re.M)]
    if rated:
        ranked = sorted(rated, key=lambda r: -r[1])
        canonical = [next((g for g, rx in _GOAL_WORDS if rx.search(name)), None) for name, _ in ranked]
        if all(canonical):
            return tuple(dict.fromkeys(g for g in canonical if g))[:3]
    found = sorted((m.start(), goal) for goal, rx in _GOAL_WORDS if (m := rx.search(block)))
    goals = [goal for _, goal in found]
    if not goals:  # categories of its own: the names of its list items
        for line in block.splitlines():
            item = re.match(r"\s*(?:[-*•]|\d+\.)\s*([^:(\n]+)", line)
            if item and item.group(1).strip():
                goals.append(re.sub(r"\W+", "_", item.group(1).strip().lower()).strip("_"))
    return tuple(dict.fromkeys(g for g in goals if g))[:3]


def _usable(move: Move, setting: Setting, bodyweight_only: bool) -> bool:
    if move.equipment in ("bodyweight", "outdoors"):
        return True
    if bodyweight_only:
        return False
    if setting.equipment is None:
        return move.equipment in ("dumbbells", "pull-up bar")  # a barbell is not assumed
    return move.equipment in setting.equipment or (move.equipment == "dumbbells" and "kettlebell" in setting.equipment
                                                   and move.name == "Goblet Squat")


def exercise_count(words: str) -> int:
    minutes = _MINUTES_RE.search(words)
    if _QUICK_RE.search(words):
        return 3
    if minutes:
        return max(3, min(6, int(minutes.group(1)) // 9))
    if _LONG_RE.search(words):
        return 6
    return 5


def build_workout(words: str, setting: Setting) -> dict[str, Any]:
    """The generate_workout input for the member's words."""
    parts = parts_in(words)
    count = exercise_count(words)
    bodyweight_only = bool(_BODYWEIGHT_RE.search(words))
    names = _pick(parts, count, setting, bodyweight_only)
    exercises = [exercise(CATALOGUE[name], i + 1, setting) for i, name in enumerate(names)]
    if len(exercises) >= 4:
        _superset(exercises)
    minutes = _MINUTES_RE.search(words)
    duration = int(minutes.group(1)) if minutes else estimate_minutes(exercises)
    quick = bool(_QUICK_RE.search(words))
    title = ("Quick " if quick else "") + " & ".join(PART_TITLES[p] for p in parts[:2])
    if not title.endswith(("Day", "Blast")):
        title += " Blast" if quick else " Workout"
    focus = " and ".join(PART_TITLES[p].lower() for p in parts[:2])
    goals = f" aimed at {', '.join(g.replace('_', ' ') for g in setting.goals)}" if setting.goals else ""
    return {"workout": {
        "title": title,
        "description": f"A {duration}-minute {focus} session{goals}: {len(exercises)} exercises mixing "
                       f"{', '.join(dict.fromkeys(e['exercise_type'] for e in exercises))} work.",
        "estimated_duration_min": duration,
        "exercises": exercises,
    }}


def _pick(parts: list[str], count: int, setting: Setting, bodyweight_only: bool) -> list[str]:
    lists = [[n for n in PARTS[p] if _usable(CATALOGUE[n], setting, bodyweight_only)] for p in parts]
    picked: list[str] = []
    # The parts take turns, so "chest and arms" gets both.
    while len(picked) < count and any(lists):
        for names in lists:
            while names and names[0] in picked:
                names.pop(0)
            if names and len(picked) < count:
                picked.append(names.pop(0))
    # Keep a finisher: if no hold or intervals made it in, the last slot takes the part's first one.
    if count >= 3 and all(CATALOGUE[n].type == "reps" for n in picked):
        finisher = next((n for p in parts for n in PARTS[p] if CATALOGUE[n].type != "reps" and n not in picked
                         and _usable(CATALOGUE[n], setting, bodyweight_only)), None)
        if finisher:
            picked[-1] = finisher
    # Main lifts first, the holds and intervals after them.
    rank = {"reps": 0, "duration": 0, "hold": 1, "intervals": 2}
    return sorted(picked, key=lambda n: rank[CATALOGUE[n].type])


def exercise(move: Move, order: int, setting: Setting) -> dict[str, Any]:
    """One valid exercise object for generate_workout / swap_exercise."""
    out: dict[str, Any] = {"exercise_name": move.name, "exercise_type": move.type, "order": order}
    f = move.fields
    if move.type == "reps":
        out.update(sets=f["sets"], reps=[f["reps"]] * f["sets"], rest_sec=f["rest_sec"])
        if f.get("load_kg"):
            load = _load(f["load_kg"], setting)
            out.update(load_each=[load] * f["sets"], load_unit=setting.weight_unit)
        else:
            out.update(load_unit="bodyweight")
    elif move.type == "hold":
        out.update(sets=f["sets"], hold_sec=[f["hold_sec"]] * f["sets"], rest_sec=f["rest_sec"])
    elif move.type == "duration":
        out["duration_min"] = f["duration_min"]
        if "distance" in f:
            miles = setting.distance_unit == "mi"
            out.update(distance=round(f["distance"] * 0.621, 1) if miles else f["distance"],
                       distance_unit=setting.distance_unit,
                       target_pace="10:30/mi" if miles else f["target_pace"])
    else:
        out.update(rounds=f["rounds"], work_sec=f["work_sec"], rest_sec=f["rest_sec"])
    out["muscles_utilized"] = [{"muscle": m, "share": s} for m, s in move.muscles]
    out["goals_addressed"] = goal_shares(move, setting.goals)
    out["reasoning"] = move.reasoning
    return out


def _load(kg: float, setting: Setting) -> float:
    if setting.weight_unit == "lb":
        value = float(round(kg * 2.2046 / 5) * 5) or 5.0
    else:
        value = float(kg)
    if setting.dumbbell_weights:
        value = min(setting.dumbbell_weights, key=lambda w: (abs(w - value), w))
    return value


def goal_shares(move: Move, member_goals: tuple[str, ...]) -> list[dict[str, Any]]:
    """The move's goals; with member goals, those goals weighted by how much the move serves each."""
    affinity = dict(move.goals)
    if member_goals:
        weights = [(g, affinity.get(g, 0.1)) for g in member_goals]
    else:
        weights = list(move.goals)
    return [{"goal": g, "share": s} for g, s in _shares([w for _, w in weights], [g for g, _ in weights])]


def _shares(weights: list[float], names: list[str]) -> list[tuple[str, float]]:
    total = sum(weights) or 1.0
    shares = [round(w / total, 2) for w in weights]
    shares[-1] = round(1.0 - sum(shares[:-1]), 2)
    return list(zip(names, shares))


def _superset(exercises: list[dict[str, Any]]) -> None:
    """Pair the first two neighbouring reps exercises after the opener as superset-1."""
    for i in range(1, len(exercises) - 1):
        a, b = exercises[i], exercises[i + 1]
        if a["exercise_type"] == b["exercise_type"] == "reps":
            a["group"] = {"id": "superset-1", "type": "superset", "position": 1, "name": f"{a['exercise_name']} + "
                          f"{b['exercise_name']}", "rest_between_rounds_sec": 60}
            b["group"] = {"id": "superset-1", "type": "superset", "position": 2}
            return


def estimate_minutes(exercises: list[dict[str, Any]]) -> int:
    seconds = 0
    for e in exercises:
        kind = e["exercise_type"]
        if kind == "reps":
            seconds += e["sets"] * (sum(e["reps"]) / e["sets"] * 3 + e["rest_sec"])
        elif kind == "hold":
            seconds += sum(e["hold_sec"]) + e["sets"] * e["rest_sec"]
        elif kind == "duration":
            seconds += e["duration_min"] * 60
        else:
            seconds += e["rounds"] * (e["work_sec"] + e["rest_sec"])
    return max(10, int(round(seconds / 60 / 5)) * 5)


_GENERIC = {"dumbbell", "barbell", "one", "arm", "standing", "interval", "hold"}


def find_move(text: str, exclude: tuple[str, ...] = ()) -> Move | None:
    """A catalogue exercise the text names ("lunges", "a plank", "pull ups")."""
    padded = f" {_norm(text)} "
    words = set(padded.split())
    best: tuple[int, Move] | None = None
    for move in _ALL:
        if move.name in exclude:
            continue
        name = _norm(move.name)
        key = [w for w in name.split() if w not in _GENERIC]
        if f" {name} " in padded:
            score = 100 + len(name)
        elif key and all(w in words for w in key):
            score = 50 + len(" ".join(key))
        elif key and key[-1] in words:  # the head noun: "lunges" → Reverse Lunge
            score = 10 - len(key)
        else:
            continue
        if best is None or score > best[0]:
            best = (score, move)
    return best[1] if best else None


def alternative(old_name: str, old_type: str | None, setting: Setting, avoid: tuple[str, ...],
                harder: bool | None = None) -> Move:
    """A replacement of the same type working similar muscles."""
    old = CATALOGUE.get(old_name) or find_move(old_name)
    kind = old.type if old else (old_type if old_type in TYPES else "reps")
    target = dict(old.muscles) if old else dict(_guess_muscles(old_name))
    candidates = [m for m in _ALL if m.type == kind and m.name not in avoid and m.name != old_name
                  and _usable(m, setting, False)]
    if not candidates:
        candidates = [m for m in _ALL if m.name not in avoid and m.name != old_name] or _ALL

    def overlap(m: Move) -> float:
        return sum(min(s, target.get(muscle, 0.0)) for muscle, s in m.muscles)

    scored = sorted(candidates, key=lambda m: (-overlap(m), _ALL.index(m)))
    if harder is not None and old is not None and len(scored) > 1:
        # "something easier": prefer bodyweight; "harder": prefer a loaded move.
        prefer = [m for m in scored[:3] if (m.equipment != "bodyweight") == harder]
        if prefer:
            return prefer[0]
    return scored[0]


_GUESSES = (
    (("press", "push", "fly", "dip"), (("Chest", 0.6), ("Triceps", 0.25), ("Shoulders", 0.15))),
    (("squat", "lunge", "leg", "step"), (("Quadriceps", 0.5), ("Glutes", 0.35), ("Hamstrings", 0.15))),
    (("deadlift", "hinge", "bridge", "hip"), (("Hamstrings", 0.4), ("Glutes", 0.4), ("Lower Back", 0.2))),
    (("row", "pull", "chin", "lat"), (("Back", 0.6), ("Biceps", 0.25), ("Forearms", 0.15))),
    (("curl",), (("Biceps", 0.85), ("Forearms", 0.15))),
    (("plank", "crunch", "sit", "twist", "abs", "core"), (("Abs", 0.8), ("Lower Back", 0.2))),
    (("run", "bike", "row", "jump", "burpee", "sprint"), (("Quadriceps", 0.4), ("Calves", 0.3), ("Glutes", 0.3))),
)


def _guess_muscles(name: str) -> tuple[tuple[str, float], ...]:
    lowered = name.lower()
    for words, muscles in _GUESSES:
        if any(w in lowered for w in words):
            return muscles
    return (("Quadriceps", 0.3), ("Chest", 0.3), ("Back", 0.2), ("Abs", 0.2))


def _norm(text: str) -> str:
    text = text.lower().replace("’", "'")
    text = re.sub(r"[^a-z0-9' ]+", " ", text)
    words = []
    for w in text.split():
        if len(w) > 3 and w.endswith("es") and w[:-2].endswith(("sh", "ch", "x")):
            w = w[:-2]
        elif len(w) > 2 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]
        words.append(w)
    return " ".join(words)
