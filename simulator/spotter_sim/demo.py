"""The deterministic demo "model" used when no script matches.

It recognises an intent in the latest user text (demo_intents), calls only tools that the request
offers (names are `{router}__{action}`), chains the next call from the results it already has — a
search, then "which one?", then the detail — and summarises tool results in plain sentences
(demo_summaries). Dates come from read__get_current_context, never from the machine clock.
"""

from __future__ import annotations

from typing import Any

from . import demo_intents
from .conversation import ambient_item_count
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
    if found and not ex.steps:  # the words are new (an assistant prefill may follow them)
        intent, match = found
        first = intent.start(match, ex)
        if first is not None:
            return first
    return Turn(text=_greeting(body, ex))


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
