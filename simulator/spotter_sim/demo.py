"""The deterministic demo "model" used when no script matches.

It recognises an intent in the latest user text (demo_intents), calls only tools that the request
offers (names are `{router}__{action}`), chains the next call from the results it already has — a
search, then "which one?", then the detail — and summarises tool results in plain sentences
(demo_summaries). Dates come from read__get_current_context, never from the machine clock.
"""

from __future__ import annotations

import html
import re
from typing import Any

from . import demo_intents
from .conversation import ambient_item_count, ambient_items, caller_locale, recent_activity
from .demo_exchange import Exchange
from .demo_summaries import summarise
from .turns import Turn

# The greeting offers the first few whose tools the request has (a coach hears no revenue example).
GREETING_EXAMPLES = (
    "who am I?", "find Saar", "show me Dani's plan + payment status", "what's on the schedule today?",
    "schedule open gym tomorrow 13:00–14:00 published", "build a workout: 3 rounds — 200m run, 30 double-unders",
    "any new comments in coaching?", "how is revenue?", "which members are at risk?", "how was attendance this month?",
    "who hasn't filled their forms?", "add a task call the plumber",
)
GREETING_SHOWN = 8


def respond(body: dict[str, Any]) -> Turn:
    ex = Exchange.of(body)
    found = demo_intents.match(ex.text) if ex.text else None
    if ex.answering:
        # A failed call or a batch of several ends the plan: the user hears how it went.
        if found and len(ex.answering) == 1 and not ex.answering[0].is_error:
            intent, match = found
            following = intent.plan(match, ex)
            if following is not None:
                return following
        return Turn(text=" ".join(summarise(step) for step in ex.answering))
    if not found and not ex.steps and _ASKS_ACTIVITY.search(ex.text or ""):
        return Turn(text=_activity_answer(recent_activity(body)))
    if found and not ex.steps:  # the words are new (an assistant prefill may follow them)
        intent, match = found
        first = intent.start(match, ex)
        if first is not None:
            return first
    seen = ambient_items(body)
    if seen and not ex.answering:
        return Turn(text=_from_context(seen, _language(ex.text) or caller_locale(body)))
    return Turn(text=_greeting(body, ex))


# What the demo says when it recognises no request but the turn's ambient context named things:
# the entities a real model would now work with, in the caller's language.
_CONTEXT_LEAD = {
    "en": "From your message I can see: {items}. What would you like to do with them?",
    "he": "מההודעה שלך אני מזהה: {items}. מה תרצה לעשות איתם?",
    "ru": "В вашем сообщении я вижу: {items}. Что с ними сделать?",
}
_SCOPE_NAMES = {
    "en": {"member": "member", "exercise": "exercise", "program": "program", "workout": "workout"},
    "he": {"member": "מתאמן", "exercise": "תרגיל", "program": "תוכנית", "workout": "אימון"},
    "ru": {"member": "участник", "exercise": "упражнение", "program": "программа", "workout": "тренировка"},
}


# "What was I doing?", "what am I working on?": answered from the app's <recent-activity> block.
_ASKS_ACTIVITY = re.compile(
    r"\bwhat\s+(?:was|am|have)\s+i\s+(?:been\s+)?(?:doing|working\s+on|up\s+to)\b|\bwhere\s+was\s+i\b", re.I)
_WORKING_ON = re.compile(r"Working on: \*\*(?P<task>.+?)\*\* \((?P<detail>[^)]*)\)")
_EVENT = re.compile(r"^- (?P<at>\d\d:\d\d) (?P<what>.+)$", re.M)


def _activity_answer(block: str | None) -> str:
    """What a model would make of the block: the task, then the last few things done, newest last."""
    if block is None:
        return ("I can't see a task you're working on. Pick one under \"What are you working on?\" in the "
                "sidebar and I'll keep track of the pages you visit and the notes you leave.")
    found = _WORKING_ON.search(block)
    task = html.unescape(found["task"]) if found else "a task"
    started = found["detail"].split(";", 1)[-1].strip() if found else ""
    events = [(m["at"], _plain(m["what"])) for m in _EVENT.finditer(block)][-5:]
    lead = f"You're working on {task}" + (f" ({started})." if started else ".")
    if not events:
        return lead + " Nothing recorded since you started."
    return lead + " Lately: " + "; ".join(f"{at} {what}" for at, what in events) + "."


def _plain(line: str) -> str:
    line = re.sub(r", id [0-9a-fA-F-]+\)", ")", html.unescape(line)).replace("**", "")
    return re.sub(r'^marker "(.*)"$', r'noted "\1"', line)


def _language(text: str | None) -> str | None:
    """The language a reply follows, as a model would: the script the user wrote in, if telling."""
    if not text:
        return None
    if any("\u0590" <= c <= "\u05ff" for c in text):
        return "he"
    if any("\u0400" <= c <= "\u04ff" for c in text):
        return "ru"
    return None


def _from_context(items: list[tuple[str, str]], locale: str) -> str:
    lang = locale if locale in _CONTEXT_LEAD else "en"
    names = _SCOPE_NAMES[lang]
    listed = ", ".join(f"{label} ({names.get(scope, scope)})" for scope, label in items)
    return _CONTEXT_LEAD[lang].format(items=listed)


def _greeting(body: dict[str, Any], ex: Exchange) -> str:
    usable = [f"\"{example}\"" for example in GREETING_EXAMPLES if _works(example, ex)][:GREETING_SHOWN]
    text = "Hi! I'm Spotter, your studio assistant."
    if usable:
        text += f" Try {', '.join(usable)} — or just ask."
    else:
        text += " I can't use any studio tools in this conversation, but I'm happy to talk."
    count = ambient_item_count(body)
    if count is not None:
        text += f" I can see {count} item{'s' if count != 1 else ''} in your current context."
    return text


def _works(example: str, ex: Exchange) -> bool:
    found = demo_intents.match(example)
    return found is not None and ex.lacking(*found[0].needs) is None
