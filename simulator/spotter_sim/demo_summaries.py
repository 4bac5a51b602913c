"""Tool results in plain sentences: counts, names, the top few items — short, as a model would answer.

The shapes read here are the tools' outputs (camelCase JSON); anything else falls back to a generic
sentence, so an unknown or changed tool still gets an answer, never a crash.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .demo_exchange import Step

TOP = 5  # items named in a sentence; the rest are counted


def summarise(step: Step) -> str:
    data, action = step.data, step.action
    if step.is_error:
        return _error(action, data, step.raw)
    describe = _BY_NAME.get(step.name) or _BY_ACTION.get(action)
    sentence = describe(data) if describe is not None and isinstance(data, dict) else None
    return sentence or _generic(action, data, step.raw)


def _error(action: str, data: Any, raw: str) -> str:
    code = _first(data, ("code", "error_code", "type")) if data is not None else None
    if code == "rejected_by_user":
        return f"OK, I didn't run {action.replace('_', ' ')}; nothing changed."
    return f"I couldn't complete {action}: {code or raw[:80] or 'unknown error'}."


def _generic(action: str, data: Any, raw: str) -> str:
    items = _items(data)
    if action == "programs_list" and items is not None:
        names = [n for n in (_name(i) for i in items) if n]
        return f"Your programs: {', '.join(names)}." if names else "There are no programs yet."
    if action == "members_search" and items is not None:
        return _members_found(items)
    if action == "create" and isinstance(data, dict) and data.get("title"):
        return f"Created \"{data['title']}\". You can undo it."
    if action == "delete" and isinstance(data, dict) and (data.get("title") or data.get("name")):
        return f"Deleted \"{data.get('title') or data.get('name')}\"."
    if items is not None:
        return f"{action} returned {len(items)} result{_s(items)}."
    if isinstance(data, dict):
        pairs = ", ".join(f"{k}: {v}" for k, v in list(data.items())[:3] if not isinstance(v, (dict, list)))
        return f"{action} returned {pairs}." if pairs else f"{action} returned a result."
    return f"{action} said: {raw[:200]}" if raw else f"{action} returned nothing."


# --- read ----------------------------------------------------------------------------------------


def _context(data: dict[str, Any]) -> str:
    person = next((data[k] for k in ("caller", "user", "me", "staff", "actor") if isinstance(data.get(k), dict)), data)
    name = _name(person) or "signed in"
    role = _first(person, ("role", "role_name")) or _first(data, ("role", "role_name"))
    if role is None and isinstance(person.get("roles"), list) and person["roles"]:
        role = ", ".join(str(r) for r in person["roles"])
    org_value = next((data[k] for k in ("organization", "org", "studio", "tenant") if k in data), None)
    org = _name(org_value) or _first(data, ("org_name", "organization_name", "studio_name")) or "your studio"
    sentence = f"You are {name} ({role or 'member'}) at {org}."
    if isinstance(data.get("now"), str) and isinstance(data.get("weekday"), str):
        sentence += f" It's {data['weekday']}, {data['now'][:10]} there."
    return sentence


def _members_found(items: list[Any]) -> str:
    if not items:
        return "No members matched that search."
    if len(items) == 1:
        return f"Found {_member_sentence(items[0])}."
    names = [n for n in (_name(i) for i in items) if n]
    return f"Found {len(items)} members: {', '.join(names)}."


def _member_detail(data: dict[str, Any]) -> str:
    member = data.get("member") if isinstance(data.get("member"), dict) else data
    sentence = f"Here is {_member_sentence(member)}"
    if isinstance(member.get("status"), str) and member.get("joinedAt"):
        sentence += f"; {member['status']} since {member['joinedAt']}"
    days = member.get("daysSinceLastVisit")
    if isinstance(days, int):
        sentence += ", last visit today" if days == 0 else f", last visit {days} day{_s(days)} ago"
    return sentence + "."


def _picked(data: dict[str, Any]) -> str | None:
    return f"You picked {data['pickedLabel']}." if data.get("pickedLabel") else None


def _exercises(data: dict[str, Any]) -> str | None:
    exercises = _list(data, "exercises")
    if exercises is None:
        return None
    if not exercises:
        return "No exercise in the library matches that."
    total = data.get("total", len(exercises))
    return f"Found {total} exercise{_s(total)}: {_names(exercises, total)}."


def _resolved(data: dict[str, Any]) -> str | None:
    results = _list(data, "results")
    if results is None:
        return None
    names = [r["exercise"]["name"] for r in results if isinstance(r.get("exercise"), dict)]
    sentence = f"Resolved {len(names)} of {len(results)} movements" + (f": {', '.join(names)}." if names else ".")
    if data.get("ambiguous"):
        sentence += f" {data['ambiguous']} need{'s' if data['ambiguous'] == 1 else ''} a choice."
    return sentence


def _hits(data: dict[str, Any]) -> str | None:
    hits = _list(data, "hits")
    if hits is None:
        return None
    if not hits:
        return "Nothing matched that search."
    described = [f"{h.get('label')} ({h.get('kind')}{', ' + h['detail'] if h.get('detail') else ''})"
                 for h in hits[:TOP]]
    if len(hits) == 1:
        return f"Found {described[0]}."
    return f"Found {len(hits)} matches: {'; '.join(described)}."


def _lookup(data: dict[str, Any]) -> str | None:
    kind = data.get("type")
    if kind == "workout":
        when = f" ({', '.join(str(x) for x in (data.get('scheduledFor'), data.get('programName')) if x)})"
        sections = "; ".join(data.get("sections") or []) or data.get("description") or "no movements yet"
        return f"{data.get('title')}{when if when != ' ()' else ''}: {sections}."
    if kind == "program":
        types = ", ".join(data.get("classTypes") or []) or "none"
        return (f"{data.get('name')} is a {data.get('kind')} program with {data.get('workouts')} workouts and "
                f"{data.get('enrolledMembers')} members enrolled; class types: {types}.")
    if kind == "exercise":
        equipment = ", ".join(data.get("equipment") or []) or "no equipment"
        return f"{data.get('name')}: {data.get('modality')}, {equipment}."
    if kind == "member":
        return _member_detail(data)
    return None


def _program_comments(data: dict[str, Any]) -> str | None:
    comments = _list(data, "comments")
    if comments is None:
        return None
    program = data.get("programName") or "that program"
    if not comments:
        return f"No new comments in {program}."
    total, unread = data.get("total", len(comments)), data.get("unread", 0)
    counted = f"{total} new comment{_s(total)}" if total == unread else f"{total} comment{_s(total)} ({unread} unread)"
    lines = [f"{c.get('authorName')} on {c.get('title') or 'a workout'}{_on(c.get('day'))}: \"{_clip(c.get('body'))}\""
             for c in comments[:3]]
    return f"{counted} in {program}. Latest: " + "; ".join(lines) + "."


def _thread(data: dict[str, Any]) -> str | None:
    assignment, comments = data.get("assignment"), _list(data, "comments")
    if not isinstance(assignment, dict) or comments is None:
        return None
    where = f"{assignment.get('title')}{_on(assignment.get('scheduledFor'))}"
    if not comments:
        return f"No comments on {where} yet."
    said = [f"{c.get('authorName')} wrote: \"{_clip(c.get('body'), 200)}\"" for c in comments[:3]]
    more = f" (and {len(comments) - 3} more)" if len(comments) > 3 else ""
    return f"On {where}, " + "; ".join(said) + more + "."


# --- writes --------------------------------------------------------------------------------------


def _workout_created(data: dict[str, Any]) -> str | None:
    if not data.get("title"):
        return None
    parts = []
    for section in data.get("sections") or []:
        moves = ", ".join(_movement(m) for m in section.get("movements") or [])
        parts.append(f"{section.get('format') + ' of ' if section.get('format') else ''}{moves}")
    body = f": {'; '.join(parts)}" if parts else ""
    return f"Created the workout \"{data['title']}\"{body}. You can undo it."


def _program_created(data: dict[str, Any]) -> str | None:
    if not data.get("name"):
        return None
    return f"Created the {data.get('kind', '')} program \"{data['name']}\". You can undo it."


def _assigned(data: dict[str, Any]) -> str | None:
    if not data.get("title"):
        return None
    state = "published" if data.get("published") else "a draft until you publish it"
    return f"Assigned \"{data['title']}\" to {data.get('memberName')} for {data.get('scheduledFor')} ({state})."


def _session_created(data: dict[str, Any]) -> str | None:
    if not data.get("className"):
        return None
    state = "published" if data.get("published") else "not published yet"
    return (f"Scheduled {data['className']} on {str(data.get('startsAt'))[:10]}, {_clock(data.get('startsAt'))}–"
            f"{_clock(data.get('endsAt'))} ({state}, {data.get('capacity')} places). You can undo it.")


def _preview(one: str, many: str) -> Callable[[dict[str, Any]], str | None]:
    def describe(data: dict[str, Any]) -> str | None:
        return f"That selection has {data['count']} {one if data['count'] == 1 else many}." if "count" in data else None
    return describe


def _assignments_published(data: dict[str, Any]) -> str | None:
    if "changed" not in data:
        return None
    already = data.get("count", 0) - data["changed"]
    return f"Published {data['changed']} assignment{_s(data['changed'])}" + (
        f" ({already} were already published)." if already else ".")


def _assignments_deleted(data: dict[str, Any]) -> str | None:
    return f"Deleted {data['count']} assignment{_s(data['count'])}." if "count" in data else None


def _sessions_deleted(data: dict[str, Any]) -> str | None:
    if "deleted" not in data:
        return None
    return f"Deleted {data['deleted']} class{_es(data['deleted'])} (they had {data.get('bookings', 0)} bookings)."


def _sessions_published(data: dict[str, Any]) -> str | None:
    if "published" not in data:
        return None
    already = data.get("alreadyPublished", 0)
    return f"Published {data['published']} class{_es(data['published'])}" + (
        f" ({already} were already published)." if already else ".")


# --- schedule, attendance, analytics ---------------------------------------------------------------


def _day_schedule(data: dict[str, Any]) -> str | None:
    sessions = _list(data, "sessions")
    if sessions is None:
        return None
    day = data.get("date", "that day")
    if not sessions:
        return f"Nothing is scheduled on {day}."
    total = data.get("total", len(sessions))
    listed = [f"{_clock(s.get('startsAt'))} {s.get('className')} ({s.get('booked')}/{s.get('capacity')} booked"
              f"{', not published' if s.get('published') is False else ''}"
              f"{', cancelled' if s.get('cancelled') else ''})" for s in sessions[:8]]
    more = f", and {total - 8} more" if total > 8 else ""
    return f"{total} class{_es(total)} on {day}: " + ", ".join(listed) + more + "."


def _class_types(data: dict[str, Any]) -> str | None:
    types = _list(data, "classTypes")
    if types is None:
        return None
    if not types:
        return "There are no class types yet."
    total = data.get("total", len(types))
    listed = [f"{t.get('name')} ({t.get('programName') or 'no program'}, {t.get('upcomingSessions', 0)} upcoming)"
              for t in types[:8]]
    return f"You have {total} class type{_s(total)}: " + ", ".join(listed) + _more(total, 8) + "."


def _attendance(data: dict[str, Any]) -> str | None:
    if "sessions" not in data:
        return None
    sentence = (f"From {data.get('dateFrom')} to {data.get('dateTo')}: {data['sessions']} classes held, "
                f"{data.get('bookings')} bookings, {data.get('attended')} attended "
                f"({_pct(data.get('attendanceRate'))}), "
                f"{data.get('noShows')} no-shows.")
    busiest = [f"{t.get('className')} {t.get('sessions')} classes at {_pct(t.get('attendanceRate'))}"
               for t in (data.get("byClassType") or [])[:3]]
    return sentence + (f" Most held: {', '.join(busiest)}." if busiest else "")


def _at_risk(data: dict[str, Any]) -> str | None:
    members = _list(data, "members")
    if members is None:
        return None
    if not members:
        return "No active member looks at risk right now."
    total = data.get("total", len(members))
    listed = [f"{m.get('name')} ({', '.join(r.replace('_', ' ') for r in m.get('reasons') or [])})"
              for m in members[:TOP]]
    return (f"{total} member{_s(total)} look{'s' if total == 1 else ''} at risk ({data.get('attendanceDrops', 0)} "
            f"attendance drops, {data.get('paymentIssues', 0)} payment issues): " + ", ".join(listed)
            + _more(total) + ".")


def _revenue(data: dict[str, Any]) -> str | None:
    if "collected" not in data:
        return None
    currency, period = data.get("currency", ""), data.get("period") or {}
    sentence = (f"From {period.get('from')} to {period.get('to')} you collected {data['collected']} {currency} "
                f"from {data.get('payments')} payments ({data.get('payingMembers')} paying members)")
    change = data.get("collectedChange")
    if isinstance(change, (int, float)):
        sentence += f", {'up' if change >= 0 else 'down'} {abs(change):.0%} on the period before"
    sentence += "."
    if data.get("overduePayments"):
        sentence += f" {data['overduePayments']} payments ({data.get('overdue')} {currency}) are overdue."
    if data.get("failedPayments"):
        sentence += f" {data['failedPayments']} failed ({data.get('failed')} {currency})."
    return sentence


def _templates(data: dict[str, Any]) -> str | None:
    templates = _list(data, "templates")
    if templates is None:
        return None
    if not templates:
        return "There are no program templates yet."
    total = data.get("total", len(templates))
    listed = [f"{t.get('name')} ({t.get('programKind')}, {t.get('workoutCount')} workouts "
              f"over {t.get('spanDays')} days)" for t in templates[:TOP]]
    return f"You have {total} template{_s(total)}: " + "; ".join(listed) + _more(total) + "."


def _pending_forms(data: dict[str, Any]) -> str | None:
    pending = _list(data, "assignments")
    if pending is None:
        return None
    if not pending:
        return "Everyone has filled in their forms."
    total = data.get("total", len(pending))
    listed = [f"{a.get('memberName')} — {a.get('formTitle')}{_due(a)}" for a in pending[:TOP]]
    return (f"{total} form{_s(total)} still pending ({data.get('overdueTotal', 0)} overdue): " + "; ".join(listed)
            + _more(total) + ".")


def _due(form: dict[str, Any]) -> str:
    if form.get("overdue"):
        return f" (overdue since {form.get('dueOn')})"
    return f" (due {form['dueOn']})" if form.get("dueOn") else ""


def _tasks(data: dict[str, Any]) -> str | None:
    tasks = _list(data, "tasks")
    if tasks is None:
        return None
    total = data.get("total", len(tasks))
    return f"You have {total} task{_s(total)}" + (f": {_names(tasks, total)}." if tasks else ".")


_BY_NAME: dict[str, Callable[[dict[str, Any]], str | None]] = {
    "workouts__create": _workout_created,
    "programs__create": _program_created,
    "assignments__bulk_preview": _preview("assignment", "assignments"),
    "assignments__bulk_publish": _assignments_published,
    "assignments__bulk_delete": _assignments_deleted,
    "class_sessions__create": _session_created,
    "class_sessions__bulk_preview": _preview("class", "classes"),
    "class_sessions__bulk_delete": _sessions_deleted,
    "class_sessions__bulk_publish": _sessions_published,
    "tasks__list": _tasks,
    "program_templates__list": _templates,
}
# Read actions are named alike on every router that offers them (a catalog may rename `read`).
_BY_ACTION: dict[str, Callable[[dict[str, Any]], str | None]] = {
    "get_current_context": _context,
    "members_get": _member_detail,
    "ask_user_to_pick": _picked,
    "exercises_search": _exercises,
    "exercises_resolve_batch": _resolved,
    "search_anything": _hits,
    "lookup_by_id": _lookup,
    "workout_comments_in_program": _program_comments,
    "workout_comments_for_assignment": _thread,
    "assign_personal": _assigned,
    "attendance_summary": _attendance,
    "list_for_date": _day_schedule,
    "list_for_program": _class_types,
    "at_risk_members": _at_risk,
    "revenue_summary": _revenue,
    "list_pending_for_org": _pending_forms,
}


# --- helpers -------------------------------------------------------------------------------------


def _items(data: Any) -> list[Any] | None:
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        for key in ("items", "results", "data", "programs", "members"):
            if isinstance(data.get(key), list):
                return data[key]
    return None


def _list(data: dict[str, Any], key: str) -> list[dict[str, Any]] | None:
    value = data.get(key)
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else None


def _names(items: list[dict[str, Any]], total: int) -> str:
    return ", ".join(n for n in (_name(i) for i in items[:TOP]) if n) + _more(total)


def _more(total: int, shown: int = TOP) -> str:
    return f" and {total - shown} more" if total > shown else ""


def _name(obj: Any) -> str | None:
    if isinstance(obj, str):
        return obj
    if not isinstance(obj, dict):
        return None
    for key in ("name", "full_name", "display_name", "title"):
        if isinstance(obj.get(key), str):
            return obj[key]
    parts = [obj.get("first_name"), obj.get("last_name")]
    return " ".join(p for p in parts if isinstance(p, str)) or None


def _first(data: Any, keys: tuple[str, ...]) -> str | None:
    """First scalar value under any of `keys`, searching depth-first."""
    if isinstance(data, dict):
        for key in keys:
            value = data.get(key)
            if isinstance(value, (str, int, float)) and not isinstance(value, bool):
                return str(value)
            if isinstance(value, dict):
                named = _name(value)
                if named:
                    return named
        for value in data.values():
            found = _first(value, keys)
            if found:
                return found
    elif isinstance(data, list):
        for value in data:
            found = _first(value, keys)
            if found:
                return found
    return None


def _member_sentence(member: Any) -> str:
    name = _name(member) or "that member"
    if not isinstance(member, dict):
        return name
    plan = _first(member, ("plan", "plan_name", "membership_plan", "membership")) or "no plan"
    status = _first(member, ("paymentStatus", "payment_status", "billing_status", "payment", "status")) or "unknown"
    return f"{name} — {plan}, payment {status}"


def _movement(m: dict[str, Any]) -> str:
    if m.get("distanceM"):
        quantity = f"{m['distanceM']} m "
    elif m.get("reps"):
        quantity = f"{m['reps']} "
    elif m.get("durationS"):
        quantity = f"{m['durationS']} s "
    else:
        quantity = ""
    load = f" @ {m['loadKg']:g} kg" if isinstance(m.get("loadKg"), (int, float)) else ""
    return f"{quantity}{m.get('name')}{load}"


def _clock(iso: Any) -> str:
    return str(iso)[11:16] if isinstance(iso, str) and len(iso) >= 16 else "?"


def _on(day: Any) -> str:
    return f" ({day})" if day else ""


def _clip(text: Any, limit: int = 90) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _pct(rate: Any) -> str:
    return f"{rate:.0%}" if isinstance(rate, (int, float)) else "n/a"


def _s(n: Any) -> str:
    count = len(n) if isinstance(n, list) else n
    return "" if count == 1 else "s"


def _es(n: int) -> str:
    return "" if n == 1 else "es"
