"""What the member coach demo reads from a request (seed 003 §4.3): the member's latest words, the
tools offered, the tool calls answered since those words, and the state the conversation implies —
the current workout (from generate_workout results and their inputs, `current_workout` knowledge,
and the swaps, adjustments and removals since), the latest artifact id, the knowledge blocks, and
the <user_data> the app sends.

Like the operator's demo it keeps no state: everything is derived again from each request.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from typing import Any

from .conversation import content_blocks, strip_app_text, system_text
from .demo_exchange import parse_content

# App-written text in a user turn; conversation.APP_TEXT_RE knows the closed forms, this also drops a
# correction note that never closes.
_APP_EVENT_RE = re.compile(r"<app_event\b[^>]*>.*?</app_event>", re.S)
_OPEN_CORRECTION_RE = re.compile(r"<coach_correction\b[^>]*>.*\Z", re.S)
_KNOWLEDGE_RE = re.compile(r"<knowledge\b[^>]*?\bsource=\"([^\"]+)\"[^>]*>(.*?)</knowledge>", re.S)
_CURRENT_RE = re.compile(r"<current_workout\b[^>]*>(.*?)</current_workout>", re.S)
_ARTIFACT_RE = re.compile(r"<artifact\b[^>]*?\bid=\"([^\"]+)\"[^>]*>(.*?)</artifact>", re.S)
_USER_DATA_RE = re.compile(r"<user_data\b[^>]*>(.*?)</user_data>", re.S)
_WRAPPER_RE = re.compile(r"<tool_result\b([^>]*)>(.*?)(?:</tool_result>|\Z)", re.S)
_ATTR_RE = re.compile(r"(\w+)=\"([^\"]*)\"")
_LINE_RE = re.compile(
    r"^\s*(\d+)[.)]\s+(.+?)\s+\((reps|hold|duration|intervals)\)(?:\s*[-–—:,]?\s*id\s*[=:]\s*([\w-]+))?", re.M)
ART_RE = re.compile(r"\bart_[A-Za-z0-9_-]+")
_NEW_ID_RE = re.compile(r"\bnew_id\s*[=:]\s*\"?([\w-]+)")
_ID_RE = re.compile(r"\bid\s*[=:]\s*\"?([\w-]+)")


@dataclass
class Entry:
    """One exercise of the current workout."""

    name: str
    type: str | None
    id: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)  # the exercise object, when the conversation shows it


@dataclass(frozen=True)
class Step:
    """One tool call answered since the member's words."""

    name: str
    input: dict[str, Any]
    raw: str  # the tool_result content as text
    body: str  # inside the <tool_result> wrapper
    ok: bool
    before: tuple[tuple[str | None, str], ...] = ()  # (id, name) of the workout's exercises before the call

    @property
    def artifact_id(self) -> str | None:
        found = ART_RE.search(self.raw)
        return found.group(0) if found else None


@dataclass
class CoachExchange:
    words: str
    tools: tuple[str, ...]
    steps: tuple[Step, ...]
    workout: list[Entry]
    artifact_id: str | None
    knowledge: dict[str, str]  # source → the latest block's text
    user_data: str

    @classmethod
    def of(cls, body: dict[str, Any]) -> CoachExchange:
        messages: list[dict[str, Any]] = body.get("messages") or []
        tools = tuple(t["name"] for t in body.get("tools") or [] if isinstance(t, dict) and isinstance(t.get("name"), str))
        if (body.get("tool_choice") or {}).get("type") == "none":
            tools = ()
        start = latest_words_index(messages)
        state = _State()
        steps: list[Step] = []
        system = system_text(body)  # only its <user_data>: the prompt itself names the tags it explains
        for i, message in enumerate(messages):
            for block in content_blocks(message):
                kind = block.get("type")
                if kind == "tool_use":
                    state.calls[block.get("id", "")] = (block.get("name", "tool"), block.get("input") or {})
                elif kind == "tool_result" and message.get("role") == "user":
                    step = state.result(block)
                    if start is not None and i > start:
                        steps.append(step)
                elif kind == "text" and message.get("role") == "user":
                    state.text(block.get("text") or "")
        words = words_of(messages[start]) if start is not None else ""
        found = _USER_DATA_RE.search(system)
        user_data = state.user_data or (found.group(1) if found else system)
        return cls(words, tools, tuple(steps), state.workout, state.artifact_id, state.knowledge, user_data)

    def offers(self, name: str) -> bool:
        return name in self.tools

    def did(self, name: str) -> bool:
        return any(s.name == name for s in self.steps)


class _State:
    def __init__(self) -> None:
        self.calls: dict[str, tuple[str, dict[str, Any]]] = {}
        self.workout: list[Entry] = []
        self.artifact_id: str | None = None
        self.knowledge: dict[str, str] = {}
        self.user_data = ""

    def text(self, text: str) -> None:
        """App-written blocks of a user turn, in the order they were written."""
        blocks = [(m.start(), "knowledge", m) for m in _KNOWLEDGE_RE.finditer(text)]
        blocks += [(m.start(), "current", m) for m in _CURRENT_RE.finditer(text)]
        blocks += [(m.start(), "artifact", m) for m in _ARTIFACT_RE.finditer(text)]
        for _, kind, m in sorted(blocks, key=lambda b: b[0]):
            if kind == "knowledge":
                source, inner = html.unescape(m.group(1)), unescape(m.group(2))
                self.knowledge[source] = inner.strip()
                if source.startswith("current_workout"):
                    self._listing(inner, None)
            elif kind == "current":
                self.knowledge["current_workout"] = unescape(m.group(1)).strip()
                self._listing(unescape(m.group(1)), None)
            else:  # the workout as the artifact now holds it (after a generate, swap, adjust or remove)
                self.artifact_id = html.unescape(m.group(1))
                self._listing(unescape(m.group(2)), None)
        for inner in _USER_DATA_RE.findall(text):
            self.user_data = unescape(inner)

    def result(self, block: dict[str, Any]) -> Step:
        name, tool_input = self.calls.get(block.get("tool_use_id", ""), ("tool", {}))
        data, raw = parse_content(block.get("content"))
        wrapper = _WRAPPER_RE.search(raw)
        attrs = dict(_ATTR_RE.findall(wrapper.group(1))) if wrapper else {}
        body = unescape(wrapper.group(2).strip() if wrapper else raw.strip())
        if name == "tool" and attrs.get("tool"):
            name = attrs["tool"]
        if "status" in attrs:
            ok = attrs["status"].lower() in ("success", "ok")
        else:
            ok = not block.get("is_error") and not (isinstance(data, dict) and data.get("success") is False)
        before = tuple((e.id, e.name) for e in self.workout)
        step = Step(name, tool_input, raw, body, ok, before)
        if ok:
            self._apply(step)
        return step

    def _apply(self, step: Step) -> None:
        if step.artifact_id:
            self.artifact_id = step.artifact_id
        if step.name == "generate_workout":
            exercises = (step.input.get("workout") or {}).get("exercises") or []
            self._listing(step.body, exercises, replace=True)
        elif step.name in ("swap_exercise", "remove_exercise", "adjust_exercise"):
            if len(_LINE_RE.findall(step.body)) >= 2:  # the result lists the whole workout as it is now
                self._listing(step.body, None)
                new = step.input.get("new_exercise") or {}
                for entry in self.workout:
                    if new and entry.name.lower() == str(new.get("exercise_name", "")).lower():
                        entry.detail = dict(new)
                index = self.find(str(step.input.get("exercise_id", "")))
                if step.name == "adjust_exercise" and index is not None:
                    entry = self.workout[index]
                    entry.detail = {**entry.detail, **(step.input.get("adjustments") or {})}
                return
            index = self.find(str(step.input.get("exercise_id", "")))
            if index is None:
                return
            entry = self.workout[index]
            if step.name == "remove_exercise":
                del self.workout[index]
            elif step.name == "swap_exercise":
                new = step.input.get("new_exercise") or {}
                ids = [m for m in _NEW_ID_RE.findall(step.body)] or [
                    m for m in _ID_RE.findall(step.body) if m != entry.id and not m.startswith("art_")]
                self.workout[index] = Entry(str(new.get("exercise_name") or entry.name), new.get("exercise_type"),
                                            ids[0] if ids else entry.id, dict(new))
            else:
                entry.detail = {**entry.detail, **(step.input.get("adjustments") or {})}
        elif step.name == "log_workout":
            self.workout = []

    def _listing(self, text: str, exercises: list[Any] | None, replace: bool = False) -> None:
        lines = _LINE_RE.findall(text)
        if not lines and not (replace and exercises):
            return
        known = {e.id: e for e in self.workout if e.id} | {e.name.lower(): e for e in self.workout}
        entries: list[Entry] = []
        if lines:
            for n, name, kind, ident in lines:
                detail: dict[str, Any] = {}
                if exercises:
                    match = next((x for x in exercises if isinstance(x, dict) and x.get("order") == int(n)), None)
                    match = match or next((x for x in exercises if isinstance(x, dict)
                                           and str(x.get("exercise_name", "")).lower() == name.lower()), None)
                    detail = dict(match or {})
                else:
                    previous = known.get(ident or "") or known.get(name.lower())
                    detail = dict(previous.detail) if previous else {}
                entries.append(Entry(name.strip(), kind, ident or None, detail))
        else:
            entries = [Entry(str(x.get("exercise_name", "")), x.get("exercise_type"), None, dict(x))
                       for x in exercises or [] if isinstance(x, dict)]
        self.workout = entries

    def find(self, exercise_id: str) -> int | None:
        for i, entry in enumerate(self.workout):
            if entry.id and entry.id == exercise_id:
                return i
        if exercise_id.isdigit() and 1 <= int(exercise_id) <= len(self.workout):
            return int(exercise_id) - 1
        return None


def unescape(text: str) -> str:
    """The app escapes what it quotes (sometimes twice: a current workout inside a knowledge block)."""
    for _ in range(2):
        text = html.unescape(text)
    return text


def words_of(message: dict[str, Any]) -> str:
    texts = []
    for block in content_blocks(message):
        if block.get("type") == "text" and block.get("text"):
            text = block["text"]
            if text.lstrip().startswith("<coach_correction"):
                continue
            texts.append(text)
    joined = _APP_EVENT_RE.sub("", "\n".join(texts))
    return _OPEN_CORRECTION_RE.sub("", strip_app_text(joined)).strip()


def latest_words_index(messages: list[dict[str, Any]]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user" and words_of(messages[i]):
            return i
    return None


def result_text(step: Step) -> str:
    """A result's own words: the wrapper's body without the reminder lines meant for the model."""
    lines = [ln.strip() for ln in step.body.splitlines() if ln.strip() and not ln.strip().startswith("IMPORTANT")]
    text = " ".join(lines)
    try:
        data = json.loads(step.body)
    except ValueError:
        return text
    if isinstance(data, dict):
        for key in ("error", "message", "summary"):
            if isinstance(data.get(key), str):
                return data[key]
    return text
