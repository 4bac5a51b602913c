"""Side tasks the orchestrator gives a small model besides the agent's own turns: a conversation's
title after its first exchange, and the summary that replaces older messages when a conversation
is compacted.

They are told apart from agent requests by their system prompt (the orchestrator's TITLE_PROMPT
and SUMMARY_PROMPT open with the markers below) and answered deterministically, in the language
the request asks for: a title from the words of the first user message (Hebrew stays Hebrew,
Russian stays Russian), and a summary that lists what the transcript it was given holds — what the
user asked, which tools ran, and the entities their results named.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any, Literal

from . import coach_initializer
from .conversation import system_text, tagged, user_prompt_text
from .turns import Turn

TITLE_MARKER = "You title conversations for Spotter"
SUMMARY_MARKER = "You summarize conversations for Spotter"

Kind = Literal["agent", "title", "summary", "initializer"]

TITLE_WORDS = 5
MAX_ASKED = 10  # the first two requests and the latest eight
MAX_ENTITIES = 15
MAX_BULLETS = 12

_WORD_RE = re.compile(r"[\w'’״׳-]+")
_HEBREW_RE = re.compile(r"[\u0590-\u05FF]")
_CYRILLIC_RE = re.compile(r"[\u0400-\u04FF]")

STOPWORDS = {
    "en": set("a an the to of for in on at and or me my our us we i you is are was were what which who whom how "
              "please can could would show find tell about with do does did any some this that these those "
              "it its be have has there".split()),
    "he": set("את של על עם מה מי איך אני אנחנו לי לנו בבקשה האם יש זה זו זאת גם או אם כמה הוא היא הם".split()),
    "ru": set("и в во на с со по для что кто как я мы мне нам пожалуйста ли это у о об а но или к ко из "
              "покажи найди есть ещё еще".split()),
}

LABELS = {
    "en": ("Summary of the earlier conversation", "The user asked", "Tools used", "Entities"),
    "he": ("סיכום השיחה הקודמת", "המשתמש ביקש", "כלים שהופעלו", "ישויות"),
    "ru": ("Краткое содержание предыдущего разговора", "Пользователь спросил", "Использованные инструменты", "Сущности"),
}

_NAME_KEYS = ("name", "fullName", "full_name", "title", "label")
_ID_KEYS = ("id", "membershipId", "programId", "workoutId", "exerciseId", "classSessionId", "userId")


def kind_of(body: dict[str, Any]) -> Kind:
    system = system_text(body).lstrip()
    if system.startswith(TITLE_MARKER):
        return "title"
    if system.startswith(SUMMARY_MARKER):
        return "summary"
    if system.startswith(coach_initializer.INITIALIZER_MARKER):
        return "initializer"  # the member coach's data-source selection (coach_initializer)
    return "agent"


def respond(body: dict[str, Any], kind: Kind) -> Turn:
    if kind == "initializer":
        return coach_initializer.respond(body)
    prompt = user_prompt_text(body)
    if kind == "title":
        return Turn(text=title_for(tagged(prompt, "first_message")))
    return Turn(text=summary_for(tagged(prompt, "transcript"), tagged(prompt, "previous_summary"), tagged(prompt, "locale")))


def language_of(text: str, locale: str = "") -> str:
    primary = locale.strip().lower().split("-")[0]
    if primary in LABELS:
        return primary
    if _HEBREW_RE.search(text):
        return "he"
    if _CYRILLIC_RE.search(text):
        return "ru"
    return "en"


def title_for(first_message: str) -> str:
    """Up to five words of the message, stopwords and punctuation left out, in its own script."""
    words = _WORD_RE.findall(first_message)
    language = language_of(first_message)
    content = [w for w in words if w.lower() not in STOPWORDS[language]] or words
    title = " ".join(content[:TITLE_WORDS]).strip("-'’ ")
    if not title:
        return LABELS[language][0]
    return title[0].upper() + title[1:]


def summary_for(transcript: str, previous: str = "", locale: str = "") -> str:
    asked: list[str] = []
    tools: Counter[str] = Counter()
    entities: dict[str, None] = {}
    for line in transcript.splitlines():
        role, _, rest = line.partition("] ")
        match role.lstrip("["):
            case "user":
                if rest.strip():
                    asked.append(_clip(rest.strip(), 80))
            case "tool_call":
                tools[rest.split(" ", 1)[0]] += 1
            case "tool_result":
                _, _, payload = rest.partition(" ")
                for entity in _entities(payload):
                    entities.setdefault(entity)
    language = language_of("\n".join(asked) or transcript, locale)
    header, asked_label, tools_label, entities_label = LABELS[language]
    bullets = [line for line in previous.splitlines() if line.startswith("- ")]
    if asked:
        shown = asked if len(asked) <= MAX_ASKED else [*asked[:2], "…", *asked[2 - MAX_ASKED:]]
        bullets.append(f"- {asked_label}: " + "; ".join(a if a == "…" else f"«{a}»" for a in shown))
    if tools:
        bullets.append(f"- {tools_label}: " + ", ".join(f"{n} ×{c}" if c > 1 else n for n, c in tools.most_common()))
    if entities:
        bullets.append(f"- {entities_label}: " + ", ".join(list(entities)[:MAX_ENTITIES]))
    return "\n".join([f"{header}:", *bullets[-MAX_BULLETS:]])


def _entities(payload: str) -> list[str]:
    try:
        data = json.loads(payload)
    except ValueError:
        return []
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            name = next((value[k] for k in _NAME_KEYS if isinstance(value.get(k), str) and value[k].strip()), None)
            ident = next((value[k] for k in _ID_KEYS if isinstance(value.get(k), (str, int))), None)
            if name is not None:
                found.append(f"{name} ({ident})" if ident is not None else name)
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(data)
    return found



def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
