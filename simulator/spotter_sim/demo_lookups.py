"""What several demo plans need before they can act: a member, a program, today's date at the studio.

Each `need_*` returns either the thing, taken from a tool result of this exchange, or the turn that
gets it (a search, a "which one?" picker, get_current_context). Ids only ever come from tool results.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from .demo_dates import today_in
from .demo_exchange import Exchange
from .turns import Turn

PICKER_MAX = 8  # read__ask_user_to_pick takes 2 to 8 candidates


@dataclass(frozen=True)
class Picked:
    id: str
    name: str


def need_today(ex: Exchange) -> date | Turn:
    context = ex.done("get_current_context")
    if context is None:
        return ex.call("read", "get_current_context", {}, say="Let me check today's date at the studio.")
    return today_in(context.get("now")) or Turn(text="I couldn't tell today's date at the studio.")


def need_member(ex: Exchange, who: str) -> Picked | Turn:
    """The one member `who` names. A whole-name-word match wins over a substring one ("Dani" is Dani
    Rubin, not Daniel); several left → the user picks."""
    search = ex.done("members_search")
    if search is None:
        return ex.call("read", "members_search", {"query": who}, say=f"Let me look up {who}.")
    found = members_of(search.data)
    words = set(who.casefold().split())
    named = [m for m in found if words <= set(str(m.get("name", "")).casefold().split())]
    found = named if len(named) == 1 else found
    if not found:
        return Turn(text=f"No member matches \"{who}\".")
    if len(found) == 1:
        return Picked(str(found[0]["membershipId"]), str(found[0].get("name") or who))
    return picked(ex, "member") or ask(ex, "member", f"Which {who}?", member_candidates(found))


def need_program(ex: Exchange, name: str) -> Picked | Turn:
    """The program `name` names: its exact name (any case), else the one name containing it."""
    listing = ex.done("programs_list")
    if listing is None:
        return ex.call("read", "programs_list", {}, say="Let me find that program.")
    programs = [p for p in listing.get("programs") or [] if isinstance(p, dict) and p.get("id") and p.get("name")]
    key = name.casefold()
    exact = [p for p in programs if p["name"].casefold() == key]
    options = exact or [p for p in programs if key in p["name"].casefold()]
    if len(options) == 1:
        return Picked(str(options[0]["id"]), options[0]["name"])
    if not options:
        names = ", ".join(p["name"] for p in programs) or "none yet"
        return Turn(text=f"There's no program called {name}. Your programs: {names}.")
    candidates = [{"id": str(p["id"]), "label": p["name"], "sublabel": p.get("kind") or "program"} for p in options]
    return picked(ex, "program") or ask(ex, "program", f"Which {name}?", candidates)


def members_of(data: Any) -> list[dict[str, Any]]:
    members = data.get("members") if isinstance(data, dict) else None
    return [m for m in members or [] if isinstance(m, dict) and m.get("membershipId")]


def member_candidates(members: list[dict[str, Any]]) -> list[dict[str, Any]]:
    candidates = []
    for m in members[:PICKER_MAX]:
        candidate = {"id": str(m["membershipId"]), "label": m.get("name") or "?"}
        if m.get("plan") or m.get("email"):
            candidate["sublabel"] = m.get("plan") or m.get("email")
        candidates.append(candidate)
    return candidates


def picked(ex: Exchange, kind: str) -> Picked | None:
    """What the user picked in this exchange's latest picker of `kind`."""
    for step in reversed(ex.steps):
        if (step.action == "ask_user_to_pick" and not step.is_error and step.get("kind") == kind
                and step.get("pickedId")):
            return Picked(str(step.get("pickedId")), str(step.get("pickedLabel") or ""))
    return None


def ask(ex: Exchange, kind: str, prompt: str, candidates: list[dict[str, Any]]) -> Turn:
    """Let the user choose (the app shows a picker); without the picker tool, ask in words."""
    if ex.tool("read", "ask_user_to_pick") is None:
        return Turn(text=f"{prompt} {', '.join(c['label'] for c in candidates)}?")
    return ex.call("read", "ask_user_to_pick", {"kind": kind, "prompt": prompt, "candidates": candidates[:PICKER_MAX]})
