"""The demo policy's intents: what the user's words ask for, and the tool calls that answer it.

An intent is a few patterns and a plan. The plan gets the exchange so far and returns the next turn —
a tool call computed from the results it already has, or a plain answer — or None when nothing is left
to call (the policy then sums up the last results). Intents are tried in order; the first that matches
wins, so the specific ones come before the broad ones ("find a squat variation" before "find X").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import demo_plans as plans
from .demo_dates import WEEKDAYS
from .demo_exchange import Exchange
from .demo_plans import Plan
from .turns import Turn

_DAY = r"today|tomorrow|(?:on\s+|next\s+)?(?:" + "|".join(WEEKDAYS) + r")|\d{4}-\d{2}-\d{2}"
_TIME = r"\d{1,2}(?::\d{2})?\s*(?:am|pm)?"
_BULK_VERB = r"\b(?P<verb>delete|remove|clear|publish)\s+(?:all\s+)?(?:of\s+)?(?:the\s+)?"


@dataclass(frozen=True)
class Intent:
    name: str
    patterns: tuple[re.Pattern[str], ...]
    plan: Plan
    needs: tuple[str, ...] = ()  # tools (`router__action`) every run calls; a missing one is said up front

    def match(self, text: str) -> re.Match[str] | None:
        return next((m for m in (p.search(text) for p in self.patterns) if m), None)

    def start(self, match: re.Match[str], ex: Exchange) -> Turn | None:
        return ex.lacking(*self.needs) or self.plan(match, ex)


def _re(*patterns: str, flags: int = re.I) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, flags) for p in patterns)


INTENTS: tuple[Intent, ...] = (
    Intent("create_task",
           _re(r"\b(?:create|add)\s+(?:a\s+)?task\s+(?:called\s+|named\s+)?(?P<title>.*\w.*)"),
           plans.create_task, ("tasks__create",)),
    Intent("delete_task",
           _re(r"\b(?:delete|remove)\s+(?:the\s+)?task\s+(?:called\s+|named\s+)?(?P<title>.*\w.*)"),
           plans.delete_task, ("tasks__list", "tasks__delete")),
    Intent("who_am_i",
           _re(r"\bwho\s+am\s+i\b"),
           plans.once("read", "get_current_context"), ("read__get_current_context",)),
    Intent("build_workout",
           _re(r"\b(?:build|create|make|write)\s+(?:me\s+)?(?:an?\s+)?(?:new\s+)?workout\b"
               r"(?:\s+(?:called|named)\s+[\"“']?(?P<title>[^\"”':—–]+?)[\"”']?)?"
               r"\s*(?::|—|–|\s-\s)\s*(?P<body>.*\w.*)$"),
           plans.build_workout, ("workouts__create",)),
    Intent("create_program",
           _re(r"\b(?:create|add|make|start|set\s+up)\s+(?:a\s+)?(?:new\s+)?(?:(?P<kind>group|coaching|feed)\s+)?"
               r"program(?:me)?\s+(?:called\s+|named\s+)?(?P<name>.*\w.*)"),
           plans.create_program, ("programs__create",)),
    Intent("bulk_classes",
           _re(rf"{_BULK_VERB}(?P<when>[\w\s-]+?)(?:'s|’s|')\s+(?:classes|sessions|schedule)\b",
               rf"{_BULK_VERB}(?:classes|sessions)\s+(?:for|on|of|from|in)\s+(?P<when>[^?.!]+)"),
           plans.bulk("class_sessions"), ("read__get_current_context", "class_sessions__bulk_preview")),
    Intent("bulk_assignments",
           _re(rf"{_BULK_VERB}(?P<when>[\w\s-]+?)(?:'s|’s|')\s+assignments\b",
               rf"{_BULK_VERB}assignments\s+(?:for|on|of|from|in)\s+(?P<when>[^?.!]+)"),
           plans.bulk("assignments"), ("read__get_current_context", "assignments__bulk_preview")),
    Intent("assign_personal",
           _re(rf"\bassign\s+(?P<who>[\w\s'-]+?)\s+(?:a|an|the)\s+(?P<what>[\w\s-]+?)\s+(?P<when>{_DAY})\b",
               rf"\bassign\s+(?:a|an|the)\s+(?P<what>[\w\s-]+?)\s+to\s+(?P<who>[\w\s'-]+?)\s+(?P<when>{_DAY})\b"),
           plans.assign_personal,
           ("read__members_search", "read__get_current_context", "assignments__assign_personal")),
    Intent("schedule_class",
           _re(rf"\bschedule\s+(?:an?\s+)?(?P<name>[\w\s'-]+?)\s+(?:class\s+|session\s+)?(?:(?:for|on)\s+)?"
               rf"(?:(?P<when>{_DAY})\s+)?(?:at\s+|from\s+)?(?P<start>{_TIME})\s*(?:-|–|—|to|until)\s*"
               rf"(?P<end>{_TIME})(?P<rest>.*)$"),
           plans.schedule_class, ("read__get_current_context", "class_sessions__create")),
    Intent("schedule_class_times",  # a class without its times: ask for them
           _re(rf"\bschedule\s+(?:an?\s+)?(?P<name>(?!(?:for|on)\b)[\w\s'-]+?)\s+(?:(?:for|on)\s+)?(?P<when>{_DAY})\b"),
           plans.ask_times),
    Intent("class_types",
           _re(r"\bclass[- ]types?\b|\b(?:kinds?|types?)\s+of\s+class(?:es)?\b"),
           plans.class_types, ("class_types__list_for_program",)),
    Intent("templates",
           _re(r"\btemplates?\b"),
           plans.once("program_templates", "list", say="Let me list your program templates."),
           ("program_templates__list",)),
    Intent("member_said",
           _re(r"\bwhat\s+did\s+(?P<who>[\w\s'-]+?)\s+(?:say|write|comment|post|note)\s+"
               r"(?:on|about|in|for|under)\s+(?:the\s+)?(?P<day>\w+)(?:'s|’s)?\s+(?P<what>[^?.!]*\w)"),
           plans.member_said, ("read__members_search", "read__get_current_context", "assignments__bulk_preview",
                               "read__workout_comments_for_assignment")),
    Intent("program_comments",
           _re(r"\bcomments?\b[^?.!]*?\b(?:in|on|for|from)\s+(?:the\s+)?(?P<program>[^?.!]*\w)"),
           plans.program_comments, ("read__programs_list", "read__workout_comments_in_program")),
    Intent("member_detail",
           _re(r"(?:\b(?:show|tell|give|get|check)\s+(?:me\s+)?|\bwhat(?:'s|’s|\s+is|\s+are)\s+)?"
               r"(?P<who>[\w-]+(?:\s+[\w-]+)?)(?:'s|’s)\s+(?:current\s+)?"
               r"(?:plan|payments?|membership|details|profile|status|account|info)\b"),
           plans.member_detail, ("read__members_search", "read__members_get")),
    Intent("attendance",
           _re(r"\b(?:attendance|no[- ]shows?|show[- ]?rate|turnout|check[- ]ins?)\b"),
           plans.over_period("bookings", "attendance_summary", "dateFrom", "dateTo"),
           ("bookings__attendance_summary",)),
    Intent("at_risk",
           _re(r"\bat[- ]risk\b|\bchurn|\bmight\s+(?:leave|quit|cancel)\b|\bslipping\b"),
           plans.once("analytics", "at_risk_members"), ("analytics__at_risk_members",)),
    Intent("revenue",
           _re(r"\b(?:revenue|income|takings|earnings|sales)\b|\bhow\s+much\s+(?:did|have)\s+we\s+(?:make|made|earn)"),
           plans.over_period("analytics", "revenue_summary", "from", "to"), ("analytics__revenue_summary",)),
    Intent("pending_forms",
           _re(r"\bforms?\b|\bwaivers?\b|\bpar-?q\b"),
           plans.once("forms", "list_pending_for_org", plans.overdue_only), ("forms__list_pending_for_org",)),
    Intent("day_schedule",
           (*_re(r"\bwhat(?:'s|’s|\s+is)\s+on\b",
                 rf"\b(?:schedule|timetable|classes|sessions)\b.*\b(?:{_DAY}|tonight|yesterday)\b",
                 r"\b(?:which|what|any)\s+classes\b",
                 r"\bthe\s+(?:schedule|timetable)\b"),
            re.compile("סשן|מפגש|שיעור|לו[״\"”'׳]?ז")),  # Hebrew: session, meeting, class, schedule
           plans.day_schedule, ("class_sessions__list_for_date",)),
    Intent("exercise_search",
           _re(r"\b(?:find|search(?:\s+for)?|look\s+up|show\s+me|suggest|give\s+me|any)\s+(?:me\s+)?"
               r"(?:an?\s+|some\s+|other\s+)?(?P<query>[\w\s-]*\w)\s+"
               r"(?:variations?|alternatives?|exercises?|movements?|substitutes?|progressions?|options?)\b"),
           plans.once("read", "exercises_search", plans.query_input), ("read__exercises_search",)),
    Intent("find_kind",
           _re(r"\b(?:find|search(?:\s+for)?|look\s+up)\s+(?:the\s+|a\s+)?(?P<kind>workout|wod|program|exercise)s?\s+"
               r"(?:called\s+|named\s+)?(?P<query>.*\w.*)"),
           plans.find_kind, ("read__search_anything",)),
    Intent("find",
           _re(r"\b(?:find|search(?:\s+for)?|look\s+up)\s+(?:the\s+)?(?:members?\s+)?(?P<query>.*\w.*)"),
           plans.find, ("read__members_search",)),
    Intent("programs",
           _re(r"program"),
           plans.once("read", "programs_list"), ("read__programs_list",)),
)

def match(text: str) -> tuple[Intent, re.Match[str]] | None:
    for intent in INTENTS:
        found = intent.match(text)
        if found:
            return intent, found
    return None
