"""The member coach (seed 003) in the simulator: its demo policy — always exactly one tool call, a
valid generate_workout for a workout request, then message_notify_user with the artifact id, then
idle; swap / adjust / remove / log / location / progress for the member's edits — its initializer side
task (structured-output JSON choosing data sources, append-only), and the request validation both
rely on (output_config, tool_choice)."""

from __future__ import annotations

import json
import math
from itertools import count
from typing import Any

import anthropic
import pytest

from spotter_sim.coach_catalogue import CATALOGUE, GOALS as GOAL_CATEGORIES, MUSCLES, PARTS
from spotter_sim.coach_phrases import language
from spotter_sim.conversation import exchange_progress, latest_user_text
from spotter_sim.policy import ScriptStore, decide
from spotter_sim.side_tasks import kind_of
from spotter_sim.turns import Turn

from .helpers import DEMO_TOOLS, MODEL, Sim

HAIKU_4 = "claude-haiku-4-5"
HAIKU_5 = "claude-haiku-5-5"
COACH_TOOLS = [
    {"name": name, "description": f"The coach's {name} tool.", "input_schema": {"type": "object", "properties": {}}}
    for name in ("message_notify_user", "message_ask_user", "idle", "generate_workout", "swap_exercise",
                 "adjust_exercise", "remove_exercise", "log_workout", "fetch_data", "set_current_location")
]
TYPES = {"reps", "hold", "duration", "intervals"}
ART = "art_1a2b3c4d5e6f"


# --- a validator for what the coach's tools accept (seed 003 §6.4) -------------------------------------


def _shares_sum_to_one(items: list[dict[str, Any]], key: str, allowed: set[str] | None = None) -> None:
    assert isinstance(items, list) and items, items
    for item in items:
        assert set(item) == {key, "share"}, item
        assert isinstance(item[key], str) and item[key], item
        if allowed is not None:
            assert item[key] in allowed, item
        assert isinstance(item["share"], (int, float)) and 0 < item["share"] <= 1, item
    assert math.isclose(sum(i["share"] for i in items), 1.0, abs_tol=0.011), items


def _ints(values: Any, n: int) -> None:
    assert isinstance(values, list) and len(values) == n, values
    assert all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values), values


def check_exercise(ex: dict[str, Any], order: int | None = None) -> None:
    required = {"exercise_name", "exercise_type", "order", "muscles_utilized", "goals_addressed", "reasoning"}
    assert required <= set(ex), required - set(ex)
    assert isinstance(ex["exercise_name"], str) and ex["exercise_name"]
    assert ex["exercise_type"] in TYPES
    assert isinstance(ex["order"], int) and (order is None or ex["order"] == order)
    assert isinstance(ex["reasoning"], str) and ex["reasoning"]
    _shares_sum_to_one(ex["muscles_utilized"], "muscle", set(MUSCLES))
    _shares_sum_to_one(ex["goals_addressed"], "goal")
    kind = ex["exercise_type"]
    per_type = {
        "reps": ({"sets", "reps", "rest_sec"}, {"load_each", "load_unit"}),
        "hold": ({"sets", "hold_sec", "rest_sec"}, set()),
        "duration": ({"duration_min"}, {"distance", "distance_unit", "target_pace"}),
        "intervals": ({"rounds", "work_sec", "rest_sec"}, set()),
    }
    needed, optional = per_type[kind]
    extra = set(ex) - required - needed - optional - {"group"}
    assert needed <= set(ex) and not extra, (kind, needed - set(ex), extra)
    if kind in ("reps", "hold"):
        assert isinstance(ex["sets"], int) and ex["sets"] > 0
        _ints(ex["reps" if kind == "reps" else "hold_sec"], ex["sets"])
        assert isinstance(ex["rest_sec"], int)
    if kind == "reps" and "load_each" in ex:
        assert len(ex["load_each"]) == ex["sets"] and all(isinstance(v, (int, float)) for v in ex["load_each"])
        assert ex["load_unit"] in ("kg", "lb")
    if kind == "reps" and "load_unit" in ex:
        assert ex["load_unit"] in ("kg", "lb", "bodyweight")
    if kind == "duration":
        assert isinstance(ex["duration_min"], int) and ex["duration_min"] > 0
        if "distance_unit" in ex:
            assert ex["distance_unit"] in ("km", "mi", "m") and isinstance(ex["distance"], (int, float))
    if kind == "intervals":
        assert all(isinstance(ex[k], int) and ex[k] > 0 for k in ("rounds", "work_sec", "rest_sec"))
    if "group" in ex:
        group = ex["group"]
        assert group["type"] == "superset" and group["id"] and group["position"] in (1, 2)


def check_workout(tool_input: dict[str, Any]) -> dict[str, Any]:
    assert set(tool_input) == {"workout"}
    workout = tool_input["workout"]
    assert isinstance(workout["title"], str) and workout["title"]
    assert isinstance(workout["description"], str) and workout["description"]
    assert isinstance(workout["estimated_duration_min"], int) and workout["estimated_duration_min"] > 0
    exercises = workout["exercises"]
    assert 3 <= len(exercises) <= 6
    for i, ex in enumerate(exercises, start=1):
        check_exercise(ex, order=i)
    assert len({e["exercise_name"] for e in exercises}) == len(exercises)
    assert len({e["exercise_type"] for e in exercises}) >= 2  # a mix of types
    groups = [e["group"] for e in exercises if "group" in e]
    assert [g["position"] for g in groups] in ([], [1, 2])
    return workout


# --- a conversation with the coach, through the simulator's own entry point ---------------------------

try:  # the tool-runner's own input models, when this checkout has them: the demo must never drift from them
    from spotter_tool_runner.coach.tools import BY_NAME as RUNNER_TOOLS
except ImportError:  # pragma: no cover
    RUNNER_TOOLS = None


def wrapped(tool: str, text: str, status: str = "success") -> str:
    return f'<tool_result tool="{tool}" status="{status}">\n{text}\n</tool_result>'


class Studio:
    """The coach's tools as the tool-runner answers them (seed 003 §6), in memory: the workout with
    server ids, the revised artifact after each change, the result texts and their wrapper."""

    def __init__(self) -> None:
        self.workout: dict[str, Any] | None = None
        self.ids = count(1)
        self.history = "No workouts logged in the last 30 days."

    def listing(self) -> list[str]:
        assert self.workout is not None
        return [f"{e['order']}. {e['exercise_name']} ({e['exercise_type']}) id={e['id']} — dose"
                for e in self.workout["exercises"]]

    def artifact(self) -> str:
        assert self.workout is not None
        listed = "\n".join(self.listing())
        return (f'<artifact type="exercise_list" id="{ART}">\n{self.workout["title"]} — '
                f'{len(self.workout["exercises"])} exercises, muscles: Chest\n{listed}\n</artifact>')

    def find(self, ref: str) -> dict[str, Any]:
        assert self.workout is not None
        for e in self.workout["exercises"]:
            if e["id"] == ref or (ref.isdigit() and e["order"] == int(ref)):
                return e
        raise LookupError(f"No exercise {ref!r} in the current workout.")

    def renumber(self, exercises: list[dict[str, Any]]) -> None:
        assert self.workout is not None
        self.workout["exercises"] = [{**e, "order": i} for i, e in enumerate(exercises, start=1)]

    def run(self, name: str, args: dict[str, Any]) -> tuple[str, bool, list[str]]:
        """(result text, ok, text blocks the app adds after the result)."""
        try:
            return self._run(name, args)
        except LookupError as exc:
            return str(exc), False, []

    def _run(self, name: str, args: dict[str, Any]) -> tuple[str, bool, list[str]]:
        if name == "message_notify_user":
            art = args.get("artifact_id")
            return "Message delivered" + (f" with artifact {art}." if art else "."), True, []
        if name == "message_ask_user":
            return "Question sent; the run ends until the member answers.", True, []
        if name == "idle":
            return "Idle.", True, []
        if name == "fetch_data":
            return f'<knowledge source="workout_history">\n{self.history}\n</knowledge>', True, []
        if name == "set_current_location":
            return "Current location is now Home Gym (Dumbbells, Bench).", True, []
        if name == "generate_workout":
            workout = json.loads(json.dumps(args["workout"]))
            for e in workout["exercises"]:
                e["id"] = f"ex-{next(self.ids)}"
            self.workout = workout
            return "\n".join([f'Created workout {ART}: "{workout["title"]}" with {len(workout["exercises"])} exercises.',
                              *self.listing(),
                              f"IMPORTANT: You MUST now call message_notify_user with artifact_id={ART} to deliver it."]), \
                True, [self.artifact()]
        if self.workout is None:
            raise LookupError("There is no active workout in this session. Generate one first (generate_workout).")
        old = self.find(args["exercise_id"]) if "exercise_id" in args else None
        exercises = self.workout["exercises"]
        if name == "swap_exercise":
            assert old is not None
            new = {**args["new_exercise"], "order": old["order"], "id": f"ex-{next(self.ids)}"}
            self.renumber([new if e is old else e for e in exercises])
            text = f"Swapped {old['exercise_name']} for {new['exercise_name']} in {ART}."
        elif name == "adjust_exercise":
            assert old is not None
            self.renumber([{**e, **args["adjustments"]} if e is old else e for e in exercises])
            before = {k: old.get(k) for k in args["adjustments"]}
            text = f"Adjusted {old['exercise_name']}: {json.dumps(args['adjustments'])} (was {json.dumps(before)})."
        elif name == "remove_exercise":
            assert old is not None
            self.renumber([e for e in exercises if e is not old])
            text = f"Removed {old['exercise_name']}."
        else:
            assert name == "log_workout"
            done = {self.find(c["exercise_id"])["id"] for c in args["completed_exercises"] if c["completed"]}
            title, total = self.workout["title"], len(exercises)
            self.workout = None
            return (f'Logged {len(done)} of {total} exercises of "{title}" to the member\'s history; '
                    "the workout is closed."), True, []
        return "\n".join([text, *self.listing()]), True, [self.artifact()]


class CoachChat:
    def __init__(self, words: str | list[dict[str, Any]] | None = None, *, model: str = HAIKU_4,
                 system: list[dict[str, Any]] | None = None) -> None:
        self.model = model
        self.system = system or [{"type": "text", "text": "You are Spotter's member coach."}]
        self.messages: list[dict[str, Any]] = []
        self.studio = Studio()
        self.turn: Turn | None = None
        self._ids = count(1)
        if words is not None:
            self.say(words)

    def say(self, words: str | list[dict[str, Any]]) -> None:
        content = [{"type": "text", "text": words}] if isinstance(words, str) else words
        if self.messages and self.messages[-1]["role"] == "user":
            self.messages[-1]["content"] = [*self.messages[-1]["content"], *content]
        else:
            self.messages.append({"role": "user", "content": content})

    def body(self) -> dict[str, Any]:
        choice = {"type": "any"} if self.model == HAIKU_4 else {"type": "auto", "disable_parallel_tool_use": True}
        return {"model": self.model, "max_tokens": 8192, "system": self.system, "messages": self.messages,
                "tools": COACH_TOOLS, "tool_choice": choice}

    def call(self) -> tuple[str, dict[str, Any]]:
        """The one tool call the coach makes next (valid input for the real tool)."""
        decision = decide(self.body(), ScriptStore())
        self.turn = decision.turn
        assert decision.kind == "agent" and decision.script_id is None
        assert self.turn.text is None, self.turn.text  # never plain text
        assert len(self.turn.tool_uses) == 1, self.turn.tool_uses
        use = self.turn.tool_uses[0]
        if RUNNER_TOOLS is not None:
            RUNNER_TOOLS[use.name].input.model_validate(use.input)
        if use.name == "generate_workout":
            check_workout(use.input)
        if use.name == "swap_exercise":
            check_exercise(use.input["new_exercise"])
        return use.name, use.input

    def answer(self, text: str, status: str = "success", after: list[str] = ()) -> None:
        """Record the call with this result (and the app's blocks after it)."""
        assert self.turn is not None
        use = self.turn.tool_uses[0]
        call_id = f"toolu_{next(self._ids)}"
        self.messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": call_id, "name": use.name, "input": use.input}]})
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": wrapped(use.name, text, status)}
        if status == "error":
            result["is_error"] = True
        self.messages.append({"role": "user", "content": [result, *({"type": "text", "text": t} for t in after)]})

    def run(self) -> None:
        """The studio runs the call just made."""
        assert self.turn is not None
        use = self.turn.tool_uses[0]
        text, ok, after = self.studio.run(use.name, use.input)
        self.answer(text, "success" if ok else "error", after)

    def finish(self, expect_artifact: str | None = None) -> str:
        """notify, then idle: the message the member reads."""
        name, given = self.call()
        assert name == "message_notify_user", (name, given)
        assert isinstance(given["message"], str) and given["message"]
        assert given.get("artifact_id") == expect_artifact
        self.run()
        assert self.call()[0] == "idle"
        self.run()
        return given["message"]

    def exchange(self, words: str, tool: str, expect_artifact: str | None = None) -> tuple[dict[str, Any], str]:
        """A whole exchange: the words, the call (run by the studio), notify, idle."""
        self.say(words)
        name, given = self.call()
        assert name == tool, (name, given)
        self.run()
        return given, self.finish(expect_artifact)

    def exercises(self) -> list[dict[str, Any]]:
        assert self.studio.workout is not None
        return self.studio.workout["exercises"]


GOALS = '<knowledge source="category_goals">\nPriority 1–5, 5 highest:\n- endurance: 3\n- strength: 5\n</knowledge>'


@pytest.mark.parametrize(("words", "part", "most"), [
    ("give me a chest workout", "chest", 6),
    ("quick leg day please", "legs", 3),
    ("I want to train arms and shoulders", "arms", 6),
    ("a 45 minute full body session", "full_body", 6),
    ("something for my core, short", "core", 3),
    ("HIIT!", "cardio", 6),
    ("תבנה לי אימון רגליים", "legs", 6),
    ("хочу тренировку на спину", "back", 6),
])
def test_a_workout_request_gets_a_valid_workout_then_the_artifact_then_idle(words: str, part: str, most: int) -> None:
    chat = CoachChat()
    given, message = chat.exchange(words, "generate_workout", expect_artifact=ART)
    workout = given["workout"]
    assert len(workout["exercises"]) <= most
    assert workout["exercises"][0]["exercise_name"] in PARTS[part]
    assert workout["title"] in message
    assert {g["goal"] for e in workout["exercises"] for g in e["goals_addressed"]} <= set(GOAL_CATEGORIES)


def test_the_workout_serves_the_members_goals_and_units() -> None:
    user_data = ("<user_data>\n<unit_preferences>\nWeight: lb\nDistance: mi\n</unit_preferences>\n\n<body_stats>\n"
                 "Weight: 180lb\n</body_stats>\n\n<current_location>\nLocation: Home Gym\nEquipment:\n"
                 "  - Dumbbells (free_weights): 10, 20, 30lb\n</current_location>\n</user_data>")
    system = [{"type": "text", "text": "You are Spotter's member coach."}, {"type": "text", "text": user_data}]
    chat = CoachChat([{"type": "text", "text": "chest workout please"}, {"type": "text", "text": GOALS}], system=system)
    workout = chat.call()[1]["workout"]
    for ex in workout["exercises"]:
        assert [g["goal"] for g in ex["goals_addressed"]] == ["strength", "endurance"]  # by priority
        if "load_each" in ex:
            assert ex["load_unit"] == "lb" and set(ex["load_each"]) <= {10, 20, 30}
    assert any("load_each" in ex for ex in workout["exercises"])
    assert "strength" in workout["description"]


def test_no_equipment_means_bodyweight_and_a_pull_up_bar_is_used_when_the_location_has_one() -> None:
    workout = CoachChat("full body workout, no equipment").call()[1]["workout"]
    assert all(CATALOGUE[e["exercise_name"]].equipment in ("bodyweight", "outdoors") for e in workout["exercises"])
    system = [{"type": "text", "text": "coach"}, {"type": "text", "text": (
        "<user_data>\n<current_location>\nLocation: Park\nEquipment:\n  - Pull-up Bar\n</current_location>\n</user_data>")}]
    workout = CoachChat("back workout", system=system).call()[1]["workout"]
    names = [e["exercise_name"] for e in workout["exercises"]]
    assert "Pull-up" in names and not any(CATALOGUE[n].equipment == "dumbbells" for n in names)


def test_swaps_act_on_the_workout_as_it_now_is() -> None:
    chat = CoachChat()
    chat.say("hi")  # an earlier exchange in the same session
    chat.finish()
    chat.exchange("give me a chest workout", "generate_workout", expect_artifact=ART)
    before = [e["exercise_name"] for e in chat.exercises()]

    chat.say("swap 2 for dips")
    name, given = chat.call()
    assert name == "swap_exercise" and given["exercise_id"] == chat.exercises()[1]["id"]
    assert given["new_exercise"]["exercise_name"] == "Bench Dip" and given["new_exercise"]["order"] == 2 and given["reason"]
    chat.run()
    message = chat.finish(expect_artifact=ART)  # the revised workout is delivered again
    assert before[1] in message and "Bench Dip" in message

    # the next edit uses the swapped exercise's new id, from the revised artifact
    chat.say("make the dips harder")
    name, given = chat.call()
    assert name == "adjust_exercise" and given["exercise_id"] == chat.exercises()[1]["id"] != "ex-2"
    assert given["adjustments"] == {"sets": 4, "reps": [12] * 4}  # the swap's own sets and reps, one set more
    chat.run()
    assert "Bench Dip" in chat.finish(expect_artifact=ART)


def test_swap_by_name_keeps_the_type_and_works_similar_muscles() -> None:
    chat = CoachChat()
    chat.exchange("give me a chest workout", "generate_workout", expect_artifact=ART)
    plank = next(e for e in chat.exercises() if e["exercise_name"] == "Plank")
    chat.say("can you replace the plank with something else?")
    name, given = chat.call()
    assert name == "swap_exercise" and given["exercise_id"] == plank["id"]
    new = given["new_exercise"]
    assert new["exercise_type"] == "hold" and new["exercise_name"] != "Plank" and new["order"] == plank["order"]
    assert "Abs" in {m["muscle"] for m in new["muscles_utilized"]}


def test_adjust_remove_and_log() -> None:
    chat = CoachChat()
    chat.exchange("give me a chest workout", "generate_workout", expect_artifact=ART)
    names = [e["exercise_name"] for e in chat.exercises()]
    ids = [e["id"] for e in chat.exercises()]

    given, message = chat.exchange("4 sets of push-ups", "adjust_exercise", expect_artifact=ART)
    assert given["exercise_id"] == ids[names.index("Push-up")]
    assert given["adjustments"]["sets"] == 4 and given["adjustments"]["reps"] == [12] * 4
    assert "Push-up" in message

    given, _ = chat.exchange("make the plank harder", "adjust_exercise", expect_artifact=ART)
    assert given == {"exercise_id": ids[names.index("Plank")], "adjustments": {"hold_sec": [60, 60, 60]}}

    given, _ = chat.exchange("12 reps on 1", "adjust_exercise", expect_artifact=ART)
    assert given == {"exercise_id": ids[0], "adjustments": {"reps": [12] * 4}}

    given, message = chat.exchange("drop the burpees", "remove_exercise", expect_artifact=ART)
    assert given["exercise_id"] == ids[names.index("Burpee Intervals")] and given["reason"]
    assert "Burpee Intervals" in message

    given, message = chat.exchange("remove 2", "remove_exercise", expect_artifact=ART)
    assert given == {"exercise_id": ids[1], "reason": "Member asked to remove it."} and names[1] in message

    left = [e["id"] for e in chat.exercises()]
    given, message = chat.exchange("done! that was tough", "log_workout")
    assert given["completed_exercises"] == [{"exercise_id": i, "completed": True} for i in left]
    assert given["workout_notes"] == "done! that was tough"
    assert f"{len(left)} exercises" in message

    chat.say("log it")  # the workout was logged: nothing left to log
    name, given = chat.call()
    assert name == "message_ask_user" and 2 <= len(given["options"]) <= 4


# The Coach page's own words (web/src/coach/messages.ts): its prompts, and what its card's buttons send.
APP_WORDS = {
    "en": ("Give me a quick 30-minute workout", "Plan a leg day with what I have at home",
           "How did my training go this month?", "Swap exercise {order} ({name}) for something else",
           "Adjust exercise {order} ({name}): {text}", "make it harder", "I finished the workout — log it"),
    "he": ("תן לי אימון קצר של 30 דקות", "תכנן לי יום רגליים עם מה שיש לי בבית", "איך הלכו האימונים שלי החודש?",
           "החלף את תרגיל {order} ({name}) במשהו אחר", "התאם את תרגיל {order} ({name}): {text}", "קשה יותר",
           "סיימתי את האימון — תתעד אותו"),
    "ru": ("Дай быструю тренировку на 30 минут", "Составь день ног с тем, что есть дома",
           "Как прошли мои тренировки в этом месяце?", "Замени упражнение {order} ({name}) на что-то другое",
           "Измени упражнение {order} ({name}): {text}", "сложнее", "Я закончил(а) тренировку — запиши её"),
}


@pytest.mark.parametrize("lang", list(APP_WORDS))
def test_the_coach_pages_words_in_every_language(lang: str) -> None:
    quick, legs, month, swap, adjust, harder, log = APP_WORDS[lang]
    home = ("<user_data>\n<current_location>\nLocation: Home\nEquipment:\n  - Dumbbells (free_weights): 4, 8, 12kg\n"
            "</current_location>\n</user_data>")
    chat = CoachChat(system=[{"type": "text", "text": "coach"}, {"type": "text", "text": home}])

    given, message = chat.exchange(quick, "generate_workout", expect_artifact=ART)
    assert len(given["workout"]["exercises"]) == 3 and given["workout"]["estimated_duration_min"] == 30
    assert given["workout"]["title"] in message and language(message) == lang  # the member's language

    given, _ = chat.exchange(month, "fetch_data")
    assert given["params"]["workout_history"]["days_back"] == 30

    given, _ = chat.exchange(legs, "generate_workout", expect_artifact=ART)
    names = [e["exercise_name"] for e in given["workout"]["exercises"]]
    assert names[0] in PARTS["legs"] and "Goblet Squat" in names  # the dumbbells at home are used
    loads = {w for e in given["workout"]["exercises"] for w in e.get("load_each", [])}
    assert loads and loads <= {4, 8, 12}

    first = chat.exercises()[0]
    given, _ = chat.exchange(swap.format(order=1, name=first["exercise_name"]), "swap_exercise", expect_artifact=ART)
    assert given["exercise_id"] == first["id"] and given["new_exercise"]["exercise_name"] != first["exercise_name"]

    second = chat.exercises()[1]
    given, _ = chat.exchange(adjust.format(order=2, name=second["exercise_name"], text=harder), "adjust_exercise",
                             expect_artifact=ART)
    assert given["exercise_id"] == second["id"] and given["adjustments"]

    chat.say(adjust.format(order=2, name=second["exercise_name"], text="?"))  # nothing the demo understands
    name, given = chat.call()
    assert name == "message_ask_user" and len(given["options"]) == 4
    chat.run()

    ids = [e["id"] for e in chat.exercises()]
    given, _ = chat.exchange(log, "log_workout")
    assert [c["exercise_id"] for c in given["completed_exercises"]] == ids


def test_the_current_workout_from_the_app_is_what_edits_act_on() -> None:
    # as the orchestrator writes it: the workout's text escaped, then escaped again inside the knowledge block
    current = ('<knowledge source="current_workout">\nTitle: Morning Legs\n1. Goblet Squat (reps) id=aaa-1\n'
               "2. Reverse Lunge (reps) id=aaa-2\n3. Farmer&amp;#x27;s Carry Hold (hold) id=aaa-3\n</knowledge>")
    chat = CoachChat([{"type": "text", "text": "swap the lunges"}, {"type": "text", "text": current}])
    name, given = chat.call()
    assert name == "swap_exercise" and given["exercise_id"] == "aaa-2" and given["new_exercise"]["order"] == 2
    assert given["new_exercise"]["exercise_type"] == "reps" and given["new_exercise"]["exercise_name"] != "Reverse Lunge"
    chat = CoachChat([{"type": "text", "text": "skip the farmer's carry"}, {"type": "text", "text": current}])
    assert chat.call() == ("remove_exercise", {"exercise_id": "aaa-3", "reason": "Member asked to remove it."})
    chat = CoachChat([{"type": "text", "text": "finished!"}, {"type": "text", "text": current}])
    assert [c["exercise_id"] for c in chat.call()[1]["completed_exercises"]] == ["aaa-1", "aaa-2", "aaa-3"]


def test_an_edit_without_a_workout_in_sight_uses_the_order_number_and_the_error_is_explained() -> None:
    chat = CoachChat("swap 3")
    name, given = chat.call()
    assert name == "swap_exercise" and given["exercise_id"] == "3"
    chat.run()  # no workout in the studio either
    name, given = chat.call()
    assert name == "message_notify_user" and "There is no active workout in this session" in given["message"]
    assert "artifact_id" not in given
    chat.run()
    assert chat.call()[0] == "idle"

    assert CoachChat("remove exercise 2").call() == ("remove_exercise", {"exercise_id": "2", "reason": "Member asked to remove it."})
    name, given = CoachChat("swap the squats").call()
    assert name == "message_ask_user" and given["options"]


def test_a_refused_workout_is_explained() -> None:
    chat = CoachChat("leg day")
    chat.call()
    chat.answer("workout.exercises.0.reps: reps must have one value per set (sets=4, got 3)", status="error")
    name, given = chat.call()
    assert name == "message_notify_user" and "reps must have one value per set" in given["message"]


@pytest.mark.parametrize("words", ["help", "?", "what should I do", "hmm"])
def test_vague_words_get_a_question_with_options(words: str) -> None:
    name, given = CoachChat(words).call()
    assert name == "message_ask_user" and given["question"]
    assert 2 <= len(given["options"]) <= 4 and all(isinstance(o, str) and o for o in given["options"])


@pytest.mark.parametrize(("words", "expect"), [
    ("hi there", "coach"), ("thanks!", "welcome"), ("what's a good protein intake?", "workout"), ("שלום", "המאמן"),
])
def test_anything_else_is_a_short_answer_then_idle(words: str, expect: str) -> None:
    assert expect in CoachChat(words).finish()


def test_progress_and_location() -> None:
    chat = CoachChat()
    chat.studio.history = ("Workouts in the last 30 days (2), newest first:\n2031-02-03 Mon: Leg Day\n"
                           "  - Goblet Squat: 4×10 @ 16kg\n2031-02-01 Sat: Chest Workout\n  - Push-up: 3×12")
    given, message = chat.exchange("how is my progress?", "fetch_data")
    assert given == {"sources": ["workout_history"], "params": {"workout_history": {"days_back": 30}}}
    assert "2031-02-03 Mon: Leg Day; 2031-02-01 Sat: Chest Workout" in message
    chat.studio.history = "No workouts logged in the last 7 days."
    given, message = chat.exchange("what did I do this week?", "fetch_data")
    assert given["params"]["workout_history"]["days_back"] == 7 and "build one" in message
    assert CoachChat("how many workouts have I logged this month?").call()[0] == "fetch_data"

    given, message = chat.exchange("switch to my home gym", "set_current_location")
    assert given == {"location_name": "home gym"} and "Home Gym" in message

    # a location and a workout in one breath: the location first, then the workout, then the artifact
    chat.say("I'm at the hotel gym today, give me a quick workout")
    assert chat.call() == ("set_current_location", {"location_name": "hotel gym"})
    chat.run()
    name, given = chat.call()
    assert name == "generate_workout" and len(given["workout"]["exercises"]) == 3
    chat.run()
    chat.finish(expect_artifact=ART)
    assert CoachChat("switch to a leg workout").call()[0] == "generate_workout"


def test_the_demo_never_loops() -> None:
    chat = CoachChat("chest workout")
    chat.call()
    chat.run()
    assert chat.call()[0] == "message_notify_user"
    chat.run()
    for _ in range(3):  # whatever comes back, the exchange is over
        assert chat.call()[0] == "idle"
        chat.run()


def test_app_blocks_and_corrections_are_not_the_members_words() -> None:
    chat = CoachChat([
        {"type": "text", "text": "give me a back workout"},
        {"type": "text", "text": GOALS},
        {"type": "text", "text": '<artifact type="exercise_list" id="art_old">\nOld — 1 exercises\n</artifact>'},
        {"type": "text", "text": "<current_workout>\n1. Plank (hold) id=p-1\n</current_workout>"},
    ])
    assert latest_user_text(chat.messages) == "give me a back workout"
    # a reply without a tool call, and the orchestrator's correction after it
    chat.messages.append({"role": "assistant", "content": [{"type": "text", "text": "Sure, here's a plan…"}]})
    chat.messages.append({"role": "user", "content": [{"type": "text", "text": (
        "<coach_correction>Your last reply had no tool call.</coach_correction>")}]})
    assert latest_user_text(chat.messages) == "give me a back workout" and exchange_progress(chat.messages) == 1
    name, given = chat.call()
    assert name == "generate_workout" and given["workout"]["exercises"][0]["exercise_name"] in PARTS["back"]
    chat.messages[-1]["content"] = [{"type": "text", "text": "<coach_correction>Call a tool now."}]  # never closed
    assert chat.call()[0] == "generate_workout"


def test_tool_choice_none_gets_plain_text() -> None:
    body = CoachChat("chest workout").body() | {"tool_choice": {"type": "none"}}
    turn = decide(body, ScriptStore()).turn
    assert not turn.tool_uses and turn.text


# --- over HTTP: scripts, streaming, validation ------------------------------------------------------------


def coach_request(words: str, **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 8192, "system": [{"type": "text", "text": "You are Spotter's coach."}],
            "messages": [{"role": "user", "content": words}], "tools": COACH_TOOLS,
            "tool_choice": {"type": "auto", "disable_parallel_tool_use": True}, **extra}


async def test_coach_requests_stream_with_one_tool_call_and_usage(client: anthropic.AsyncAnthropic, sim: Sim) -> None:
    async with client.messages.stream(**coach_request("give me a leg workout")) as stream:
        message = await stream.get_final_message()
    uses = [b for b in message.content if b.type == "tool_use"]
    assert [b.type for b in message.content] == ["thinking", "tool_use"] and message.stop_reason == "tool_use"
    assert uses[0].name == "generate_workout"
    check_workout(uses[0].input)
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0
    [entry] = sim.requests()
    assert entry["kind"] == "agent" and entry["response"]["content"][1]["input"] == uses[0].input

    legacy = await client.messages.create(**coach_request("hello") | {"model": HAIKU_4, "tool_choice": {"type": "any"}})
    assert [b.type for b in legacy.content] == ["tool_use"] and legacy.content[0].name == "message_notify_user"


async def test_scripts_answer_coach_requests_exactly(client: anthropic.AsyncAnthropic, sim: Sim) -> None:
    scripted = {"name": "generate_workout", "input": {"workout": {"title": "Scripted", "exercises": []}}}
    script_id = sim.script([{"tool_uses": [scripted]}, {"tool_uses": [{"name": "idle", "input": {"reason": "r"}}]}],
                           match="chest")
    first = await client.messages.create(**coach_request("chest please"))
    assert [(b.name, b.input) for b in first.content if b.type == "tool_use"] == [(scripted["name"], scripted["input"])]
    assert sim.requests()[-1]["script_id"] == script_id


async def test_tool_choice_rules_for_the_coach(client: anthropic.AsyncAnthropic, sim: Sim) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        await client.messages.create(**coach_request("leg day") | {"tool_choice": {"type": "any"}})
    assert "tool_choice.type: 'any' is not supported on claude-sonnet-5-5" in caught.value.api_message
    with pytest.raises(anthropic.BadRequestError) as caught:
        await client.post("/v1/messages", cast_to=anthropic.types.Message, body=coach_request(
            "leg day", tool_choice={"type": "auto", "disable_parallel_tool_use": "yes"}))
    assert "disable_parallel_tool_use: Input should be a valid boolean" in caught.value.api_message
    ok = await client.messages.create(**coach_request("leg day") | {
        "model": HAIKU_4, "tool_choice": {"type": "any", "disable_parallel_tool_use": True}})
    assert ok.content[0].name == "generate_workout"


# --- the initializer ---------------------------------------------------------------------------------------

INITIALIZER_SYSTEM = [
    {"type": "text", "text": "You select data sources for Spotter's coach. Pick only what the member's message needs."},
    {"type": "text", "text": "Sources: user_profile, category_goals, muscle_goals, active_preferences, workout_history, …"},
]
SOURCE_NAMES = ["user_profile", "category_goals", "muscle_goals", "active_preferences", "workout_history",
                "exercise_distribution", "user_settings", "all_locations"]
SELECTION_SCHEMA = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "append_knowledge": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "source": {"type": "string", "enum": SOURCE_NAMES},
                "reason": {"type": "string", "enum": ["not_in_context", "expand_range", "refresh_state"]},
                "days_back": {"type": ["integer", "null"]},
            },
            "required": ["source", "reason", "days_back"],
            "additionalProperties": False,
        }},
        "use_existing": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["reasoning", "append_knowledge", "use_existing"],
    "additionalProperties": False,
}


def initializer_request(words: str, loaded: str = "none", **extra: Any) -> dict[str, Any]:
    prompt = f"<user_message>{words}</user_message>\n<loaded_sources>{loaded}</loaded_sources>"
    return {"model": HAIKU_5, "max_tokens": 400, "system": INITIALIZER_SYSTEM,
            "messages": [{"role": "user", "content": [{"type": "text", "text": prompt}]}],
            "output_config": {"format": {"type": "json_schema", "schema": SELECTION_SCHEMA}}, **extra}


async def select(client: anthropic.AsyncAnthropic, words: str, loaded: str = "none") -> dict[str, Any]:
    reply = await client.messages.create(**initializer_request(words, loaded))
    assert [b.type for b in reply.content] == ["text"] and reply.stop_reason == "end_turn"
    selection = json.loads(reply.content[0].text)
    assert set(selection) == {"reasoning", "append_knowledge", "use_existing"} and selection["reasoning"]
    for item in selection["append_knowledge"]:
        assert set(item) == {"source", "reason", "days_back"} and item["source"] in SOURCE_NAMES
    return selection


def appended(selection: dict[str, Any]) -> list[tuple[str, str, int | None]]:
    return [(a["source"], a["reason"], a["days_back"]) for a in selection["append_knowledge"]]


async def test_initializer_picks_sources_for_a_workout(client: anthropic.AsyncAnthropic, sim: Sim) -> None:
    sim.script([{"text": "a scripted coach turn"}])  # scripts are the agent's: never an initializer's
    selection = await select(client, "give me a leg day workout")
    assert appended(selection) == [("category_goals", "not_in_context", None), ("muscle_goals", "not_in_context", None),
                                   ("active_preferences", "not_in_context", None),
                                   ("workout_history", "not_in_context", 14)]
    assert selection["use_existing"] == []
    [entry] = sim.requests(kind="initializer")
    assert entry["kind"] == "initializer" and entry["script_id"] is None
    assert entry["response"]["usage"]["input_tokens"] > 0
    assert sim.requests() == []  # the default log is the agent's


@pytest.mark.parametrize(("words", "loaded", "append", "existing"), [
    ("another chest workout", "user_profile, category_goals, muscle_goals, active_preferences, workout_history(days_back=14)",
     [], ["category_goals", "muscle_goals", "active_preferences", "workout_history"]),
    ("how many workouts did I do this month?", "category_goals, workout_history(days_back=14)",
     [("workout_history", "expand_range", 30)], ["category_goals"]),
    ("how many workouts did I do this month?", "workout_history(days_back=90)", [("category_goals", "not_in_context", None)],
     ["workout_history"]),
    ("show my progress this week", "none", [("category_goals", "not_in_context", None), ("workout_history", "not_in_context", 7)],
     []),
    ("what are my goals?", "none", [("category_goals", "not_in_context", None), ("muscle_goals", "not_in_context", None)], []),
    ("which equipment do I have at the gym?", "none", [("all_locations", "not_in_context", None)], []),
    ("I prefer short sessions", "active_preferences", [], ["active_preferences"]),
    ("hi!", "none", [], []),
    ("am I training my muscles in balance?", "none",
     [("muscle_goals", "not_in_context", None), ("exercise_distribution", "not_in_context", 30)], []),
    ("which muscles did I neglect in the last 60 days?", "muscle_goals, exercise_distribution(days_back=30)",
     [("category_goals", "not_in_context", None), ("workout_history", "not_in_context", 60),
      ("exercise_distribution", "expand_range", 60)], ["muscle_goals"]),
    ("אימון רגליים בבקשה", "none", [("category_goals", "not_in_context", None), ("muscle_goals", "not_in_context", None),
                                   ("active_preferences", "not_in_context", None), ("workout_history", "not_in_context", 14)], []),
    ("хочу тренировку", "category_goals, muscle_goals", [("active_preferences", "not_in_context", None),
                                                         ("workout_history", "not_in_context", 14)],
     ["category_goals", "muscle_goals"]),
])
async def test_initializer_is_append_only(client: anthropic.AsyncAnthropic, sim: Sim, words: str, loaded: str,
                                          append: list, existing: list[str]) -> None:
    selection = await select(client, words, loaded)
    assert appended(selection) == append
    assert selection["use_existing"] == existing


async def test_initializer_streams_and_has_faults_of_its_own(client: anthropic.AsyncAnthropic, sim: Sim) -> None:
    async with client.messages.stream(**initializer_request("leg day")) as stream:
        text = await stream.get_final_text()
    assert [a["source"] for a in json.loads(text)["append_knowledge"]][0] == "category_goals"
    sim.fault(529, kind="initializer")
    with pytest.raises(anthropic.APIStatusError) as failed:
        await client.messages.create(**initializer_request("leg day"))
    assert failed.value.status_code == 529
    coach = await client.messages.create(**coach_request("leg day"))  # the agent's requests pass
    assert coach.content[-1].name == "generate_workout"


def test_initializer_kind_and_schema_fitting() -> None:
    body = initializer_request("leg day")
    assert kind_of(body) == "initializer"
    # A schema with a key the demo does not know gets it filled; closed objects lose unknown keys.
    schema = {**SELECTION_SCHEMA, "properties": {**SELECTION_SCHEMA["properties"], "confidence": {"type": "number"}},
              "required": [*SELECTION_SCHEMA["required"], "confidence"]}
    body["output_config"]["format"]["schema"] = schema
    decision = decide(body, ScriptStore())
    assert decision.kind == "initializer"
    assert set(json.loads(decision.turn.text)) == {"reasoning", "append_knowledge", "use_existing", "confidence"}


# --- output_config -------------------------------------------------------------------------------------------


def plain(**extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}], **extra}


BAD_OUTPUT_CONFIG = [
    ("not a dict", "json", "output_config: Input should be a valid dictionary"),
    ("unknown key", {"verbosity": "low"}, "output_config.verbosity: Extra inputs are not permitted"),
    ("bad effort", {"effort": "extreme"}, "output_config.effort: Input should be"),
    ("format not a dict", {"format": "json"}, "output_config.format: Input should be a valid dictionary"),
    ("wrong format type", {"format": {"type": "json_object", "schema": {}}}, "output_config.format.type: Input should be 'json_schema'"),
    ("no schema", {"format": {"type": "json_schema"}}, "output_config.format.json_schema.schema: Field required"),
    ("schema not a dict", {"format": {"type": "json_schema", "schema": "{}"}},
     "output_config.format.json_schema.schema: Input should be a valid dictionary"),
    ("extra format key", {"format": {"type": "json_schema", "schema": {}, "name": "x"}},
     "output_config.format.json_schema.name: Extra inputs are not permitted"),
]


@pytest.mark.parametrize(("config", "message"), [(c, m) for _, c, m in BAD_OUTPUT_CONFIG],
                         ids=[n for n, _, _ in BAD_OUTPUT_CONFIG])
async def test_malformed_output_config_is_a_400(client: anthropic.AsyncAnthropic, sim: Sim, config: Any, message: str) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        await client.post("/v1/messages", cast_to=anthropic.types.Message, body=plain(output_config=config))
    assert caught.value.status_code == 400 and message in caught.value.api_message
    assert sim.requests()[-1]["verdict"]["status"] == 400


async def test_structured_output_fits_the_schema_for_any_request(client: anthropic.AsyncAnthropic, sim: Sim) -> None:
    effort = await client.messages.create(**plain(output_config={"effort": "low"}))
    assert effort.content[0].text  # an effort alone changes nothing
    schema = {"type": "object", "properties": {"answer": {"type": "string"}, "count": {"type": "integer"},
                                               "mood": {"enum": ["good", "bad"]}},
              "required": ["answer", "count", "mood"], "additionalProperties": False}
    reply = await client.messages.create(**plain(tools=DEMO_TOOLS, output_config={
        "effort": "medium", "format": {"type": "json_schema", "schema": schema}}))
    assert json.loads(reply.content[0].text) == {"answer": "", "count": 0, "mood": "good"}
