"""The member coach's demo policy (seed 003 §3, §6): what the simulated model does for a coach
request no script answers. A coach request is one whose tools include `generate_workout`.

Every answer is exactly one tool call (the loop forces tool use), chosen per exchange — everything
after the member's latest words:

- no call yet: the words' intent — generate_workout for a workout request, swap / adjust / remove /
  log for an edit of the current workout, fetch_data for progress, set_current_location for a
  location, message_ask_user when the words are too vague, else message_notify_user;
- after a successful action: message_notify_user summing it up (with the artifact id it names);
- after a failed call: message_notify_user saying what went wrong;
- after message_notify_user (or anything else once the exchange has run long): idle.

At most one generate_workout and one notify per exchange, so the demo never loops.
"""

from __future__ import annotations

import re
from typing import Any

from . import coach_catalogue as catalogue
from .coach_exchange import CoachExchange, Entry, Step, result_text
from .coach_initializer import GEN_VERB_RE, history_days
from .coach_phrases import action, language, options, say
from .turns import ToolUseSpec, Turn

COACH_TOOL = "generate_workout"
MAX_STEPS = 6  # the orchestrator stops at 10 iterations; the demo is done long before


def is_coach(body: dict[str, Any]) -> bool:
    return any(isinstance(t, dict) and t.get("name") == COACH_TOOL for t in body.get("tools") or [])


def respond(body: dict[str, Any]) -> Turn:
    ex = CoachExchange.of(body)
    return _Policy(ex).decide()


# --- the member's words ------------------------------------------------------------------------------

_WORKOUT_NOUN_RE = re.compile(
    r"\b(?:work\s?outs?|routines?|sessions?|training|train|exercises?|leg\s+day|wod|circuit|program(?:me)?)\b"
    r"|אימון|אימונים|להתאמן|тренировк|потренир|упражнен", re.I)
_GEN_VERB_RE = GEN_VERB_RE
_LOG_RE = re.compile(
    r"\blog(?:ged)?\b|\b(?:i'?m|i\s+am|all|just|we'?re)\s+done\b|^\s*done\b|\bfinished\b|\bcompleted?\s+(?:it|the|my)\b"
    r"|\bi\s+did\s+it\b|\bcompleted\b|סיימתי|תרשום|закончил|выполнил|запиши", re.I)
_SWAP_RE = re.compile(r"\b(?:swap|replace|substitute|switch\s+out|exchange)\b|\binstead\s+of\b|תחליף|החלף|замени|поменя",
                      re.I)
_REMOVE_RE = re.compile(r"\b(?:remove|drop|skip|delete|take\s+out|get\s+rid\s+of|cut\s+out|ditch)\b|תוריד|הסר|убери|удали",
                        re.I)
_ADJUST_RE = re.compile(
    r"\b(?:adjust|change|modify|tweak|harder|easier|heavier|lighter|tougher|more|less|fewer|increase|decrease|add|bump|longer|shorter|"
    r"intense|intensity)\b|\d+\s*(?:x\s*)?(?:sets?|reps?|rounds?|seconds?|secs?|s\b|minutes?|mins?|kgs?|lbs?|pounds)\b"
    r"|התאם|קשה\s+יותר|להקשות|קל\s+יותר|להקל|כבד\s+יותר|измени|сложнее|легче|тяжелее", re.I)
_PROGRESS_RE = re.compile(
    r"\b(?:progress|history|stats|statistics|how\s+many|how\s+often|this\s+(?:month|week|year)|"
    r"last\s+(?:\d+\s+)?(?:days?|weeks?|months?)|so\s+far|streak)\b|התקדמות|היסטוריה|החודש|השבוע|כמה\s+אימונים|"
    r"איך\s+הלכ|прогресс|истори|статистик|в\s+этом\s+месяце|на\s+этой\s+неделе|как\s+прошл|сколько", re.I)
_GOALS_RE = re.compile(r"\bgoals?\b|מטרות|מטרה|цел[ьи]", re.I)
_GREETING_RE = re.compile(r"^\W*(?:hi|hello|hey|yo|good\s+(?:morning|afternoon|evening)|shalom|שלום|היי|привет|здравствуй)\b",
                          re.I)
_THANKS_RE = re.compile(r"\b(?:thanks|thank\s+you|thx|cheers)\b|תודה|спасибо", re.I)
_VAGUE_RE = re.compile(
    r"^\W*(?:help|help\s+me|what\s+should\s+i\s+do|what\s+now|what\s+next|idk|i\s+don'?t\s+know|not\s+sure|"
    r"anything|something|hmm+|ok|okay|what\s+do\s+you\s+suggest|suggest\s+something|\?+|עזרה|מה\s+לעשות|"
    r"помоги|что\s+делать)\W*$", re.I)
_NOT_BACK_RE = re.compile(r"\b(?:i'?m|i\s+am|be|come|coming|came|get|got|welcome)\s+back\b", re.I)

_PLACE_WORDS = r"(?:gym|home|studio|hotel|office|garage|park|basement|location|house|apartment|club|place|work|box)"
_LOCATION_RES = (
    re.compile(r"\b(?:switch|change|move|set)\s+(?:my\s+)?(?:location\s+)?to\s+(?P<name>[^,.!?;\n]+)", re.I),
    re.compile(r"\b(?:use|using)\s+(?:my|the)\s+(?P<name>[^,.!?;\n]+)", re.I),
    re.compile(r"\b(?:i'?m|i\s+am|we'?re|training|working\s+out)\s+(?:at|in)\s+(?P<name>[^,.!?;\n]+)", re.I),
)
_PLACE_RE = re.compile(rf"\b{_PLACE_WORDS}\b", re.I)
_NAME_TAIL_RE = re.compile(r"\s+(?:and|so|but|today|now|right\s+now|this\s+\w+|tonight|for|with|—|-)\b.*$", re.I)
_NAME_HEAD_RE = re.compile(r"^(?:my|the|a|an|our)\s+", re.I)

_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "1st": 1, "2nd": 2, "3rd": 3,
             "4th": 4, "5th": 5, "6th": 6}
_UNIT_AFTER = r"(?!\s*(?:x\b|sets?|reps?|rounds?|seconds?|secs?|s\b|minutes?|mins?|kgs?|lbs?|pounds|%|times))"
_NUMBER_RE = re.compile(rf"(?:#|\bnumber\s+|\bexercise\s+|\bno\.?\s*)?(?<![\d.])(\d{{1,2}})(?![\d.]){_UNIT_AFTER}", re.I)
_SPLIT_RE = re.compile(r"\s+(?:for|with|to|into)\s+", re.I)
_AMOUNT_RE = re.compile(
    r"(\d+(?:\.\d+)?)\s*(?:x\s*)?(sets?|reps?|rounds?|seconds?|secs?|s\b|minutes?|mins?|kgs?|lbs?|pounds)", re.I)


def _workout_request(words: str) -> bool:
    cleaned = _NOT_BACK_RE.sub(" ", words)
    if _WORKOUT_NOUN_RE.search(cleaned):
        return True
    return catalogue.parts_in(cleaned) != ["full_body"] or bool(re.search(r"full[\s-]?body", cleaned, re.I))


def _explicit_request(words: str) -> bool:
    return bool(_WORKOUT_NOUN_RE.search(words) and _GEN_VERB_RE.search(words))


def location_in(words: str) -> str | None:
    for i, rx in enumerate(_LOCATION_RES):
        found = rx.search(words)
        if not found:
            continue
        name = _NAME_TAIL_RE.sub("", found.group("name")).strip()
        name = _NAME_HEAD_RE.sub("", name).strip(" '\"")
        if not name:
            continue
        if i < 2 and not _PLACE_RE.search(name):
            continue  # "switch to a leg workout", "use my dumbbells"
        if i == 2 and (re.match(r"(?:a\s+)?(?:hurry|rush|pain|the\s+mood|least|all)\b", name, re.I)
                       or _WORKOUT_NOUN_RE.search(name) or not re.match(r"[^\W\d]", name)):
            continue
        return name
    return None


# --- the policy ----------------------------------------------------------------------------------------


class _Policy:
    def __init__(self, ex: CoachExchange) -> None:
        self.ex = ex
        self.lang = language(ex.words)
        self.setting = catalogue.setting_from(ex.user_data, ex.knowledge.get("category_goals", ""))

    # one tool call (or, when it is not offered, the closest thing that is)
    def use(self, name: str, tool_input: dict[str, Any]) -> Turn:
        if self.ex.offers(name):
            return Turn(tool_uses=[ToolUseSpec(name=name, input=tool_input)])
        if name in ("message_notify_user", "message_ask_user"):
            text = tool_input.get("message") or tool_input.get("question") or ""
            if name == "message_ask_user" and self.ex.offers("message_notify_user"):
                return self.use("message_notify_user", {"message": text})
            return Turn(text=text)
        if name == "idle":
            return Turn(text="All set.")
        return self.notify(say("missing_tool", self.lang, tool=name))

    def notify(self, message: str, artifact_id: str | None = None) -> Turn:
        tool_input: dict[str, Any] = {"message": message}
        if artifact_id:
            tool_input["artifact_id"] = artifact_id
        return self.use("message_notify_user", tool_input)

    def ask(self, question: str, choices: list[str]) -> Turn:
        return self.use("message_ask_user", {"question": question, "options": choices[:4]})

    def idle(self, reason: str) -> Turn:
        return self.use("idle", {"reason": reason})

    def decide(self) -> Turn:
        steps = self.ex.steps
        if steps:
            return self.follow_up(steps)
        return self.start()

    # after a tool call of this exchange
    def follow_up(self, steps: tuple[Step, ...]) -> Turn:
        last = steps[-1]
        if self.ex.did("message_notify_user") or last.name in ("message_ask_user", "idle"):
            return self.idle("Delivered the reply; nothing else to do.")
        if len(steps) >= MAX_STEPS:
            return self.idle("Stopping here.")
        if not last.ok:
            reason = result_text(last) or "something went wrong."
            reason = reason if len(reason) <= 220 else reason[:219].rstrip() + "…"
            return self.notify(say("failed", self.lang, action=action(last.name, self.lang), reason=reason))
        if (last.name == "set_current_location" and not self.ex.did(COACH_TOOL)
                and _explicit_request(self.ex.words)):
            return self.generate()
        return self.notify(*self.summary(last))

    def summary(self, step: Step) -> tuple[str, str | None]:
        lang, tool_input = self.lang, step.input
        if step.name == "generate_workout":
            workout = tool_input.get("workout") or {}
            title_match = re.search(r"\"([^\"]+)\"", step.body)
            title = workout.get("title") or (title_match.group(1) if title_match else "your workout")
            count = len(workout.get("exercises") or []) or len(self.ex.workout)
            minutes = workout.get("estimated_duration_min") or catalogue.estimate_minutes(workout.get("exercises") or [])
            return say("intro", lang, title=title, count=count, minutes=minutes), step.artifact_id or self.ex.artifact_id
        if step.name == "swap_exercise":
            new = (tool_input.get("new_exercise") or {}).get("exercise_name") or "the new exercise"
            old = self._old_name(step) or "that exercise"
            return say("swapped", lang, old=old, new=new), self._delivered(step)
        if step.name == "adjust_exercise":
            name = self._old_name(step) or "that exercise"
            return say("adjusted", lang, name=name, change=_describe(tool_input.get("adjustments") or {})), self._delivered(step)
        if step.name == "remove_exercise":
            return say("removed", lang, name=self._old_name(step) or "that exercise"), self._delivered(step)
        if step.name == "log_workout":
            count = len(tool_input.get("completed_exercises") or [])
            found = re.search(r"(\d+)\s+(?:of\s+\d+\s+)?exercises?", step.body)
            return say("logged", lang, count=int(found.group(1)) if found else count), None
        if step.name == "set_current_location":
            found = re.search(r"\bis now (.+?) \(", step.body) or re.search(r"\"([^\"]+)\"", step.body)
            name = found.group(1) if found else tool_input.get("location_name") or tool_input.get("location_id")
            return say("location", lang, name=name), None
        if step.name == "fetch_data":
            days = ((tool_input.get("params") or {}).get("workout_history") or {}).get("days_back") or 30
            lines = [ln.strip(" -*•") for ln in step.body.splitlines()
                     if ln.strip() and not ln.strip().startswith(("<", "IMPORTANT"))]
            if not lines or re.search(r"\bno (?:workouts|history|entries)\b", step.body, re.I):
                return say("history_empty", lang, days=days), None
            dated = [ln for ln in lines if re.match(r"\d{4}-\d\d-\d\d", ln)]
            if dated:  # one line per workout, newest first
                shown = "; ".join(dated[:4]) + ("…" if len(dated) > 4 else ".")
                head = next((ln for ln in lines if ln.startswith("Workouts in")), None)
                shown = (head.rstrip(":") + ": " if head else "") + shown
            else:
                shown = "; ".join(lines[:3]) + ("…" if len(lines) > 3 else ".")
            return say("history", lang, days=days, summary=shown), None
        return (result_text(step) or "Done."), step.artifact_id

    def _delivered(self, step: Step) -> str | None:
        """The revised workout to deliver after a change: the artifact its result (or the app's artifact
        block after it) names."""
        return step.artifact_id or self.ex.artifact_id

    def _old_name(self, step: Step) -> str | None:
        """The exercise a swap/adjust/remove touched, as the result or the workout before it names it."""
        for pattern in (r"(?:Swapped|Replaced|Removed|Adjusted|Updated)\s+\"?([^\"\n:]+?)\"?"
                        r"(?:\s+(?:for|with|to|from|in)\b|\s*[:(]|\.(?:\s|$))",
                        r"(?:Swapped|Replaced|Removed|Adjusted|Updated)\s+\"([^\"]+)\""):
            found = re.search(pattern, step.body)
            if found:
                return found.group(1).strip()
        ident = str(step.input.get("exercise_id", ""))
        for i, (entry_id, name) in enumerate(step.before):
            if entry_id == ident or (ident.isdigit() and int(ident) == i + 1):
                return name
        return None

    # the first call for the member's words
    def start(self) -> Turn:
        words, ex = self.ex.words, self.ex
        if not words or _VAGUE_RE.match(words):
            return self.ask(say("vague", self.lang), options("edit" if ex.workout else "start", self.lang))
        explicit = _explicit_request(words)
        asks_history = bool(_PROGRESS_RE.search(words) and re.search(r"\?|^\W*(?:how|what|when|which|show)\b", words, re.I))
        if _LOG_RE.search(words) and not (explicit and not ex.workout) and not asks_history:
            return self.log()
        place = location_in(words)
        if place:
            return self.use("set_current_location", {"location_name": place})
        if _SWAP_RE.search(words):
            return self.swap()
        if _REMOVE_RE.search(words):
            return self.remove()
        if _ADJUST_RE.search(words) and (ex.workout or self.target(words) is not None) and not (
                explicit and not ex.workout):
            return self.adjust()
        if _PROGRESS_RE.search(words) and not explicit:
            return self.use("fetch_data", {"sources": ["workout_history"],
                                           "params": {"workout_history": {"days_back": history_days(words)}}})
        if _workout_request(words):
            return self.generate()
        if _GOALS_RE.search(words) and self.setting.goals:
            return self.notify(say("goals", self.lang, goals=", ".join(g.replace("_", " ") for g in self.setting.goals)))
        if _GREETING_RE.search(words):
            return self.notify(say("greeting", self.lang))
        if _THANKS_RE.search(words):
            return self.notify(say("thanks", self.lang))
        if len(re.findall(r"\w+", words)) <= 1 and "?" not in words:
            return self.ask(say("vague", self.lang), options("edit" if ex.workout else "start", self.lang))
        return self.notify(say("general", self.lang))

    def generate(self) -> Turn:
        return self.use(COACH_TOOL, catalogue.build_workout(self.ex.words, self.setting))

    def target(self, words: str, part: str | None = None) -> tuple[int | None, Entry | None] | None:
        """(position, entry) of the exercise the words point at; position without entry when the workout
        is not known; None when nothing is pointed at."""
        text = part if part is not None else words
        workout = self.ex.workout
        lowered = text.lower()
        if re.search(r"\b(?:last|final)\s+(?:one|exercise|move)\b|\bthe\s+last\b", lowered) and workout:
            return len(workout), workout[-1]
        for word, n in _ORDINALS.items():
            if re.search(rf"\b{word}\b", lowered):
                return (n, workout[n - 1]) if n <= len(workout) else ((n, None) if not workout else None)
        best: tuple[int, int] | None = None  # (score, index)
        text_norm = catalogue._norm(text)
        for i, entry in enumerate(workout):
            score = _name_score(catalogue._norm(entry.name), text_norm)
            if score and (best is None or score > best[0]):
                best = (score, i)
        if best is not None:
            return best[1] + 1, workout[best[1]]
        number = _NUMBER_RE.search(text)
        if number:
            n = int(number.group(1))
            if workout:
                return (n, workout[n - 1]) if 1 <= n <= len(workout) else None
            return (n, None) if n >= 1 else None
        return None

    def _ident(self, position: int, entry: Entry | None) -> str:
        return entry.id if entry is not None and entry.id else str(position)

    def _no_target(self) -> Turn:
        if not self.ex.workout:
            return self.ask(say("no_workout", self.lang), options("build", self.lang))
        return self.ask(say("which", self.lang), [e.name for e in self.ex.workout][:4])

    def swap(self) -> Turn:
        words = self.ex.words
        verb = _SWAP_RE.search(words)
        tail = words[verb.end():] if verb else words
        instead = re.search(r"\binstead\s+of\s+(.+)$", words, re.I)
        if instead:  # "lunges instead of squats"
            target_part, new_part = instead.group(1), words[:instead.start()]
        else:
            pieces = _SPLIT_RE.split(tail, maxsplit=1)
            target_part, new_part = pieces[0], (pieces[1] if len(pieces) > 1 else "")
        found = self.target(words, target_part) or (self.target(words) if not new_part else None)
        if found is None:
            return self._no_target()
        position, entry = found
        avoid = tuple(e.name for e in self.ex.workout)
        wanted = catalogue.find_move(new_part, exclude=(entry.name,) if entry else ()) if new_part else None
        harder = True if re.search(r"\bharder|tougher|heavier\b", words, re.I) else (
            False if re.search(r"\beasier|lighter|simpler|gentler\b", words, re.I) else None)
        move = wanted or catalogue.alternative(entry.name if entry else "", entry.type if entry else None,
                                               self.setting, avoid, harder)
        new_exercise = catalogue.exercise(move, position, self.setting)
        if entry is not None and isinstance(entry.detail.get("group"), dict):
            new_exercise["group"] = entry.detail["group"]  # the replacement takes the old one's place in its group
        old = entry.name if entry else f"exercise {position}"
        return self.use("swap_exercise", {
            "exercise_id": self._ident(position, entry),
            "new_exercise": new_exercise,
            "reason": f"Member asked to replace {old}; {move.name} works similar muscles." if not wanted
                      else f"Member asked for {move.name} instead of {old}.",
        })

    def remove(self) -> Turn:
        words = self.ex.words
        verb = _REMOVE_RE.search(words)
        found = self.target(words, words[verb.end():] if verb else words) or self.target(words)
        if found is None:
            return self._no_target()
        position, entry = found
        return self.use("remove_exercise", {"exercise_id": self._ident(position, entry),
                                            "reason": "Member asked to remove it."})

    def adjust(self) -> Turn:
        words = self.ex.words
        found = self.target(words)
        if found is None:
            if len(self.ex.workout) == 1:
                found = (1, self.ex.workout[0])
            else:
                return self._no_target()
        position, entry = found
        adjustments = _adjustments(words, entry)
        if not adjustments:
            return self._no_target() if entry is None else self.ask(say("what_change", self.lang), options("change", self.lang))
        return self.use("adjust_exercise", {"exercise_id": self._ident(position, entry), "adjustments": adjustments})

    def log(self) -> Turn:
        workout = self.ex.workout
        if not workout:
            return self.ask(say("no_workout", self.lang), options("build", self.lang))
        completed = [{"exercise_id": self._ident(i + 1, e), "completed": True} for i, e in enumerate(workout)]
        tool_input: dict[str, Any] = {"completed_exercises": completed}
        notes = self.ex.words.strip()
        if len(notes) > 12:
            tool_input["workout_notes"] = notes[:300]
        return self.use("log_workout", tool_input)


# --- helpers ---------------------------------------------------------------------------------------------


def _name_score(name: str, text: str) -> int:
    padded = f" {text} "
    if f" {name} " in padded:
        return 100 + len(name)
    words = set(text.split())
    key = [w for w in name.split() if w not in catalogue._GENERIC]
    if key and all(w in words for w in key):
        return 50 + len(key)
    if key and key[-1] in words:
        return 10
    return 0


def _sets_of(detail: dict[str, Any]) -> int:
    sets = detail.get("sets")
    return sets if isinstance(sets, int) and sets > 0 else 3


def _per_set(detail: dict[str, Any], key: str, default: float) -> float:
    values = detail.get(key)
    if isinstance(values, list) and values and isinstance(values[0], (int, float)):
        return values[0]
    return default


def _adjustments(words: str, entry: Entry | None) -> dict[str, Any]:
    detail = dict(entry.detail) if entry else {}
    kind = (entry.type if entry else None) or detail.get("exercise_type") or "reps"
    sets = _sets_of(detail)
    out: dict[str, Any] = {}
    for amount, unit in _AMOUNT_RE.findall(words):
        value = float(amount)
        n = int(value)
        unit = unit.lower()
        if unit.startswith("set"):
            out["sets"] = n
            if kind == "reps":
                out["reps"] = [int(_per_set(detail, "reps", 10))] * n
                if isinstance(detail.get("load_each"), list) and detail["load_each"]:
                    out["load_each"] = [detail["load_each"][0]] * n
            elif kind == "hold":
                out["hold_sec"] = [int(_per_set(detail, "hold_sec", 30))] * n
            sets = n
        elif unit.startswith("rep"):
            out["reps"] = [n] * sets
        elif unit.startswith("round"):
            out["rounds"] = n
        elif unit.startswith(("sec", "s")):
            if re.search(r"\brest\b", words, re.I):
                out["rest_sec"] = n
            elif kind == "hold":
                out["hold_sec"] = [n] * sets
            elif kind == "intervals":
                out["work_sec"] = n
            else:
                out["rest_sec"] = n
        elif unit.startswith("min"):
            out["duration_min"] = n
        else:  # a load
            load_unit = "lb" if unit.startswith(("lb", "pound")) else "kg"
            out["load_each"] = [value if value != n else n] * sets
            out["load_unit"] = load_unit
    if out:
        return out
    harder = bool(re.search(r"\b(?:harder|tougher|more|increase|add|bump|longer|intense)\b|קשה\s+יותר|להקשות|сложнее",
                            words, re.I))
    heavier = bool(re.search(r"\bheavier\b|כבד\s+יותר|тяжелее", words, re.I))
    lighter = bool(re.search(r"\blighter\b", words, re.I))
    easier = bool(re.search(r"\b(?:easier|less|fewer|decrease|shorter)\b|קל\s+יותר|להקל|легче", words, re.I))
    if heavier or lighter:
        loads = detail.get("load_each")
        if isinstance(loads, list) and loads:
            step = 5 if detail.get("load_unit") == "lb" else 2.5
            return {"load_each": [max(0, round(x + (step if heavier else -step), 1)) for x in loads]}
        harder, easier = heavier, lighter
    if not (harder or easier):
        return {}
    sign = 1 if harder else -1
    if kind == "hold":
        return {"hold_sec": [max(10, int(_per_set(detail, "hold_sec", 30)) + 15 * sign)] * sets}
    if kind == "duration":
        return {"duration_min": max(5, int(detail.get("duration_min") or 20) + 5 * sign)}
    if kind == "intervals":
        return {"rounds": max(2, int(detail.get("rounds") or 6) + 2 * sign)}
    new_sets = max(1, sets + sign)
    if new_sets == sets:  # already one set: fewer reps instead
        return {"reps": [max(1, int(_per_set(detail, "reps", 10)) - 2)] * sets}
    out = {"sets": new_sets, "reps": [int(_per_set(detail, "reps", 10))] * new_sets}
    if isinstance(detail.get("load_each"), list) and detail["load_each"]:
        out["load_each"] = [detail["load_each"][0]] * new_sets
    return out


def _describe(adjustments: dict[str, Any]) -> str:
    parts = []
    for key, value in adjustments.items():
        shown = value
        if isinstance(value, list):
            shown = "/".join(str(v) for v in value) if len(set(value)) > 1 else f"{len(value)}×{value[0]}" if value else ""
        label = key.replace("_sec", " (sec)").replace("_min", " (min)").replace("_each", "").replace("_", " ")
        parts.append(f"{label} {shown}")
    return ", ".join(parts) or "updated"
