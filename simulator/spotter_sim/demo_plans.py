"""The demo policy's plans: given the exchange so far, the next turn — a tool call computed from the
results already there, or a plain answer — or None once nothing is left to call (the policy then sums up
the last results). Ids sent are always taken from tool results of the exchange, never made up.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .demo_dates import When
from .demo_exchange import Exchange
from .demo_lookups import ask, member_candidates, members_of, need_member, need_program, need_today, picked
from .demo_workout_text import WorkoutText, parse_workout
from .turns import Turn

Plan = Callable[[re.Match[str], Exchange], Turn | None]

# Words before a name that are not part of it ("find Saar's plan", "how is Dani's payment").
_STOP_WORDS = {"me", "is", "are", "was", "the", "about", "how", "what", "of", "for", "us", "find", "look", "up", "pull",
               "open", "show", "check", "get"}


def clean(value: str | None) -> str:
    return (value or "").strip(" ?.!\"'“”")


def query_input(m: re.Match[str]) -> dict[str, Any]:
    return {"query": clean(m["query"])}


def overdue_only(m: re.Match[str]) -> dict[str, Any]:
    return {"overdueOnly": True} if re.search(r"\boverdue\b", m.string, re.I) else {}


def once(router: str, action: str, build: Callable[[re.Match[str]], dict[str, Any]] | None = None,
         say: str | None = None) -> Plan:
    """A plan of one call."""
    def plan(m: re.Match[str], ex: Exchange) -> Turn | None:
        return None if ex.steps else ex.call(router, action, build(m) if build else {}, say=say)
    return plan


# --- tasks ---------------------------------------------------------------------------------------


def create_task(m: re.Match[str], ex: Exchange) -> Turn | None:
    return None if ex.steps else ex.call("tasks", "create", {"title": clean(m["title"])})


def delete_task(m: re.Match[str], ex: Exchange) -> Turn | None:
    listing = ex.done("list", "tasks")
    if listing is None:
        return ex.call("tasks", "list", {})
    if ex.done("delete", "tasks"):
        return None
    name = clean(m["title"])
    tasks = [t for t in listing.get("tasks") or [] if isinstance(t, dict) and t.get("id")]
    match = next((t for t in tasks if name.lower() in str(t.get("title", "")).lower()), None)
    if match is None:
        return Turn(text=f"I couldn't find a task called {name}.")
    return ex.call("tasks", "delete", {"id": match["id"]})


# --- members, programs, search --------------------------------------------------------------------


def find(m: re.Match[str], ex: Exchange) -> Turn | None:
    """Members first (a name is usually a person); several → "Which Saar?" → the pick's detail;
    nobody → search everything ("find Murph" is a workout)."""
    query = clean(m["query"])
    search = ex.done("members_search")
    if search is None:
        return ex.call("read", "members_search", {"query": query})
    found = members_of(search.data)
    if len(found) >= 2:
        if ex.tool("read", "ask_user_to_pick") is None:
            return None
        choice = picked(ex, "member")
        if choice is None:
            return ask(ex, "member", f"Which {query}?", member_candidates(found))
        return None if ex.done("members_get") else ex.call("read", "members_get", {"membershipId": choice.id})
    if found or not isinstance(search.get("members"), list) or ex.tool("read", "search_anything") is None:
        return None
    return _search_anything(ex, query, None)


def find_kind(m: re.Match[str], ex: Exchange) -> Turn | None:
    kind = "workout" if m["kind"].lower() == "wod" else m["kind"].lower()
    return _search_anything(ex, clean(m["query"]), [kind])


def _search_anything(ex: Exchange, query: str, kinds: list[str] | None) -> Turn | None:
    """search_anything, then the detail of the one hit."""
    search = ex.done("search_anything")
    if search is None:
        return ex.call("read", "search_anything", {"query": query} | ({"kinds": kinds} if kinds else {}),
                       say=f"Let me search everything for {query}.")
    hits = [h for h in search.get("hits") or [] if isinstance(h, dict) and h.get("id") and h.get("kind")]
    if len(hits) != 1 or ex.done("lookup_by_id") or ex.tool("read", "lookup_by_id") is None:
        return None
    hit = hits[0]
    return ex.call("read", "lookup_by_id", {"type": hit["kind"], "id": hit["id"]},
                   say=f"Found {hit.get('label')}; let me open it.")


def member_detail(m: re.Match[str], ex: Exchange) -> Turn | None:
    member = need_member(ex, _who(m["who"]))
    if isinstance(member, Turn):
        return member
    if ex.done("members_get"):
        return None
    return ex.call("read", "members_get", {"membershipId": member.id}, say=f"Let me open {member.name}'s details.")


def _who(words: str) -> str:
    """The name in "show me Dani" / "is Saar Levi": leading filler words dropped."""
    kept = words.split()
    while len(kept) > 1 and kept[0].lower() in _STOP_WORDS:
        kept.pop(0)
    return " ".join(kept)


def create_program(m: re.Match[str], ex: Exchange) -> Turn | None:
    kind = {"kind": m["kind"].lower()} if m["kind"] else {}
    return None if ex.steps else ex.call("programs", "create", {"name": clean(m["name"])} | kind)


def program_comments(m: re.Match[str], ex: Exchange) -> Turn | None:
    program = need_program(ex, re.sub(r"\s+program$", "", clean(m["program"]), flags=re.I))
    if isinstance(program, Turn):
        return program
    if ex.done("workout_comments_in_program"):
        return None
    unread = {"unreadOnly": True} if re.search(r"\b(?:new|unread)\b", m.string, re.I) else {}
    return ex.call("read", "workout_comments_in_program", {"programId": program.id} | unread,
                   say=f"Let me read the comments in {program.name}.")


def member_said(m: re.Match[str], ex: Exchange) -> Turn | None:
    """A member's comment on a day's personal assignment: the member, today, that day's assignment
    (assignments__bulk_preview lists a member's assignments by day), then its thread."""
    when = When.find(m["day"])
    if when is None:
        return Turn(text=f"Which day's {clean(m['what'])} do you mean?")
    member = need_member(ex, _who(m["who"]))
    if isinstance(member, Turn):
        return member
    today = need_today(ex)
    if isinstance(today, Turn):
        return today
    day = when.day(today, past=True).isoformat()
    listing = ex.done("bulk_preview", "assignments")
    if listing is None:
        return ex.call("assignments", "bulk_preview", {"fromDate": day, "toDate": day, "membershipId": member.id},
                       say=f"Let me find {member.name}'s assignment on {day}.")
    if ex.done("workout_comments_for_assignment"):
        return None
    items = [i for i in listing.get("items") or [] if isinstance(i, dict) and i.get("id") and i.get("date") == day]
    what = clean(m["what"]).lower()
    items.sort(key=lambda i: what not in str(i.get("title", "")).lower())  # stable: the titled one first
    if not items:
        return Turn(text=f"{member.name} has no personal assignment on {day}.")
    return ex.call("read", "workout_comments_for_assignment", {"assignmentId": items[0]["id"]},
                   say=f"Let me read the comments on {items[0].get('title') or 'it'}.")


def class_types(m: re.Match[str], ex: Exchange) -> Turn | None:
    under = re.match(r"\s*(?:do\s+we\s+have\s+|are\s+there\s+)?(?:for|in|of|under)\s+(?:the\s+)?(?P<program>[^?.!]*\w)",
                     m.string[m.end():], re.I)
    if ex.done("list_for_program", "class_types"):
        return None
    if under is None:
        return ex.call("class_types", "list_for_program", {}, say="Let me list the class types.")
    program = need_program(ex, re.sub(r"\s+program$", "", under["program"], flags=re.I))
    if isinstance(program, Turn):
        return program
    return ex.call("class_types", "list_for_program", {"programId": program.id}, say=f"Class types of {program.name}:")


# --- workouts ------------------------------------------------------------------------------------


def build_workout(m: re.Match[str], ex: Exchange) -> Turn | None:
    """Resolve the movements against the library, ask about an ambiguous one, then create one section."""
    if ex.done("create", "workouts"):
        return None
    parsed = parse_workout(m["body"])
    if not parsed.movements:
        return Turn(text="Which movements should it have? For example: 3 rounds — 200m run, 30 double-unders.")
    resolve = ex.done("exercises_resolve_batch")
    if resolve is None and ex.tool("read", "exercises_resolve_batch"):
        return ex.call("read", "exercises_resolve_batch", {"names": [mv.written for mv in parsed.movements]},
                       say="Let me match those movements to the exercise library.")
    names = _movement_names(ex, parsed, resolve.get("results") if resolve else None)
    if isinstance(names, Turn):
        return names
    title = clean(m["title"]) or (f"{parsed.format}: " if parsed.format else "") + ", ".join(names)
    movements = [mv.as_input(n) for mv, n in zip(parsed.movements, names)]
    section: dict[str, Any] = {"name": "Metcon", "movements": movements}
    if parsed.format:
        section["format"] = parsed.format
    return ex.call("workouts", "create", {"title": title[:255], "sections": [section]}, say=f"Creating \"{title}\".")


def _movement_names(ex: Exchange, parsed: WorkoutText, results: Any) -> list[str] | Turn:
    """The library's name of each movement; for an ambiguous one the user's pick, asked in turn."""
    if not isinstance(results, list) or len(results) != len(parsed.movements):
        return [mv.name for mv in parsed.movements]
    picks = [s for s in ex.steps if s.action == "ask_user_to_pick" and not s.is_error and s.get("kind") == "exercise"]
    names: list[str] = []
    for movement, result in zip(parsed.movements, results):
        result = result if isinstance(result, dict) else {}
        exercise, candidates = result.get("exercise"), result.get("candidates") or []
        options = [{"id": str(c["id"]), "label": c["name"]} for c in candidates if isinstance(c, dict) and c.get("id")
                   and c.get("name")]
        if result.get("status") == "resolved" and isinstance(exercise, dict) and exercise.get("name"):
            names.append(exercise["name"])
        elif result.get("status") == "ambiguous" and len(options) >= 2:
            if not picks:
                return ask(ex, "exercise", f"Which {movement.name.lower()}?", options)
            names.append(str(picks.pop(0).get("pickedLabel") or movement.name))
        else:
            names.append(movement.name)
    return names


# --- assignments and the schedule -----------------------------------------------------------------


def assign_personal(m: re.Match[str], ex: Exchange) -> Turn | None:
    if ex.done("assign_personal"):
        return None
    member = need_member(ex, _who(m["who"]))
    if isinstance(member, Turn):
        return member
    today = need_today(ex)
    if isinstance(today, Turn):
        return today
    when = When.find(m["when"])
    day = (when.day(today) if when else today).isoformat()
    what = clean(m["what"])
    title = what[:1].upper() + what[1:]
    published = {"published": True} if re.search(r"\bpublish", m.string, re.I) else {}
    assignment = {"membershipId": member.id, "scheduledFor": day, "title": title} | published
    return ex.call("assignments", "assign_personal", assignment, say=f"Assigning {what} to {member.name} on {day}.")


# The two bulk routers name their selection's dates differently.
_SELECTIONS = {"class_sessions": ("dateFrom", "dateTo", "class", "classes"),
               "assignments": ("fromDate", "toDate", "assignment", "assignments")}


def bulk(router: str) -> Plan:
    """Preview the selection, then run the bulk action bound to it by its selectionToken; the app asks
    the user before a destructive or always-confirmed action runs."""
    first_key, last_key, one, many = _SELECTIONS[router]

    def plan(m: re.Match[str], ex: Exchange) -> Turn | None:
        verb = "publish" if m["verb"].lower() == "publish" else "delete"
        action = f"bulk_{verb}"
        if ex.done(action, router):
            return None
        when = When.find(m["when"])
        if when is None:
            return Turn(text=f"Which days? For example \"{verb} next week's {many}\".")
        if not ex.steps and (lacking := ex.lacking(f"{router}__{action}")):
            return lacking
        today = need_today(ex)
        if isinstance(today, Turn):
            return today
        preview = ex.done("bulk_preview", router)
        if preview is None:
            first, last = when.span(today)
            drafts = {"published": False} if verb == "publish" else {}
            return ex.call(router, "bulk_preview", {first_key: first.isoformat(), last_key: last.isoformat()} | drafts,
                           say=f"Let me see which {many} that is.")
        count, token = preview.get("count"), preview.get("selectionToken")
        span = f"from {preview.input.get(first_key)} to {preview.input.get(last_key)}"
        if not count:
            which = f"unpublished {many}" if verb == "publish" else many
            return Turn(text=f"There are no {which} {span}; nothing to {verb}.")
        if not token:
            return None
        return ex.call(router, action, {**preview.input, "selectionToken": token},
                       say=f"That's {count} {one if count == 1 else many} {span}; I'll {verb} them once you approve.")
    return plan


def schedule_class(m: re.Match[str], ex: Exchange) -> Turn | None:
    if ex.done("create", "class_sessions"):
        return None
    today = need_today(ex)
    if isinstance(today, Turn):
        return today
    when = When.find(m["when"] or "") or When.find(m["rest"])
    name = " ".join(w[:1].upper() + w[1:] for w in clean(m["name"]).split())
    rest = m["rest"].lower()
    published = bool(re.search(r"\bpublish", rest)) and not re.search(r"\bunpublish|\bdraft", rest)
    return ex.call("class_sessions", "create", {
        "className": name, "date": (when.day(today) if when else today).isoformat(),
        "startTime": _hhmm(m["start"]), "endTime": _hhmm(m["end"]), "published": published,
    }, say=f"Scheduling {name}.")


def ask_times(m: re.Match[str], ex: Exchange) -> Turn | None:
    name = " ".join(w[:1].upper() + w[1:] for w in clean(m["name"]).split())
    example = f"schedule {name.lower()} {m['when']} 13:00–14:00"
    return Turn(text=f"What time should {name} start and end? For example: {example}.")


def _hhmm(text: str) -> str:
    match = re.fullmatch(r"(\d{1,2})(?::(\d{2}))?\s*(am|pm)?", text.strip(), re.I)
    if match is None:
        return text
    hour, minute, half = int(match[1]), int(match[2] or 0), (match[3] or "").lower()
    hour = hour % 12 + (12 if half == "pm" else 0) if half else hour
    return f"{hour:02d}:{minute:02d}"


def day_schedule(m: re.Match[str], ex: Exchange) -> Turn | None:
    if ex.done("list_for_date", "class_sessions"):
        return None
    when = When.find(m.string)
    if when is None or when.is_today:
        return ex.call("class_sessions", "list_for_date", {}, say="Let me check today's schedule.")
    today = need_today(ex)
    if isinstance(today, Turn):
        return today
    day = when.day(today).isoformat()
    return ex.call("class_sessions", "list_for_date", {"date": day}, say=f"Let me check the schedule for {day}.")


# --- numbers -------------------------------------------------------------------------------------


def over_period(router: str, action: str, first_key: str, last_key: str) -> Plan:
    """One read over the period the words name ("this month"), or the tool's default period."""
    def plan(m: re.Match[str], ex: Exchange) -> Turn | None:
        if ex.done(action, router):
            return None
        when = When.find(m.string)
        if when is None:
            return ex.call(router, action, {})
        today = need_today(ex)
        if isinstance(today, Turn):
            return today
        first, last = when.span_so_far(today)
        return ex.call(router, action, {first_key: first.isoformat(), last_key: last.isoformat()})
    return plan
