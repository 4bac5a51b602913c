"""Days and periods named in the user's words ("tomorrow", "next week", "Monday's"), resolved against
the studio's today — which the policy takes from read__get_current_context, never from the machine clock."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")

_ENGLISH = re.compile(
    r"\b(?P<phrase>today|tonight|tomorrow|yesterday|(?:this|next|last)\s+(?:week|month)|\d{4}-\d{2}-\d{2}|"
    r"(?:(?P<rel>next|last|this|on)\s+)?(?P<day>" + "|".join(WEEKDAYS) + r"))\b",
    re.I,
)
# Hebrew: a prefix letter (ב, ל, ש, …) may be glued to the word, so no word boundaries here.
_HEBREW = (
    ("השבוע הבא", "next week"), ("השבוע שעבר", "last week"), ("החודש", "this month"), ("השבוע", "this week"),
    ("מחר", "tomorrow"), ("אתמול", "yesterday"), ("היום", "today"),
)


@dataclass(frozen=True)
class When:
    """A day or period phrase, normalised: today, tomorrow, yesterday, this/next/last week or month,
    a weekday (optionally next/last), or an ISO date."""

    phrase: str

    @classmethod
    def find(cls, text: str) -> When | None:
        match = _ENGLISH.search(text)
        if match:
            phrase = " ".join(match.group("phrase").lower().split())
            return cls("today" if phrase == "tonight" else phrase.removeprefix("on ").removeprefix("this "))
        return next((cls(english) for hebrew, english in _HEBREW if hebrew in text), None)

    @property
    def is_today(self) -> bool:
        return self.phrase == "today"

    def day(self, today: date, *, past: bool = False) -> date:
        """The day it names. A weekday is the coming one after today ("next Monday" too), or with `past`
        (or "last Monday") the latest one before today: "Monday's WOD" in a question is a Monday that has been."""
        fixed = {"today": 0, "tomorrow": 1, "yesterday": -1}
        if self.phrase in fixed:
            return today + timedelta(days=fixed[self.phrase])
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", self.phrase):
            return date.fromisoformat(self.phrase)
        rel, _, name = self.phrase.rpartition(" ")
        if name in WEEKDAYS:
            ahead = (WEEKDAYS.index(name) - today.weekday()) % 7
            if rel == "last" or (past and rel != "next"):
                return today - timedelta(days=(7 - ahead) % 7 or 7)
            return today + timedelta(days=ahead or 7)
        return self.span(today)[0]

    def span(self, today: date) -> tuple[date, date]:
        """First and last day (both included): a week runs Monday to Sunday, a month is the calendar month."""
        monday = today - timedelta(days=today.weekday())
        month = today.replace(day=1)
        previous_month = (month - timedelta(days=1)).replace(day=1)
        next_month = (month + timedelta(days=32)).replace(day=1)
        spans = {
            "week": (monday, monday + timedelta(days=6)),
            "next week": (monday + timedelta(days=7), monday + timedelta(days=13)),
            "last week": (monday - timedelta(days=7), monday - timedelta(days=1)),
            "month": (month, next_month - timedelta(days=1)),
            "last month": (previous_month, month - timedelta(days=1)),
            "next month": (next_month, (next_month + timedelta(days=32)).replace(day=1) - timedelta(days=1)),
        }
        if self.phrase in spans:
            return spans[self.phrase]
        day = self.day(today)
        return day, day

    def span_so_far(self, today: date) -> tuple[date, date]:
        """The span, cut at today: what has happened of "this month"."""
        first, last = self.span(today)
        return first, min(last, today) if first <= today else last


def today_in(now: str) -> date | None:
    """The local day of get_current_context's `now` (ISO 8601 in the studio's timezone)."""
    try:
        return datetime.fromisoformat(now).date()
    except (TypeError, ValueError):
        return None
