"""The demo policy's reading of words: days and periods, and a workout as a coach types it."""

from __future__ import annotations

from datetime import date

import pytest

from spotter_sim.demo_dates import When, today_in
from spotter_sim.demo_workout_text import parse_workout

WEDNESDAY = date(2031, 2, 5)


@pytest.mark.parametrize(("text", "past", "day"), [
    ("today", False, "2031-02-05"), ("tonight", False, "2031-02-05"), ("tomorrow", False, "2031-02-06"),
    ("yesterday", False, "2031-02-04"), ("on Friday", False, "2031-02-07"), ("next monday", False, "2031-02-10"),
    ("Wednesday", False, "2031-02-12"),  # a weekday ahead is never today
    ("Monday's WOD", True, "2031-02-03"), ("wednesday", True, "2031-01-29"), ("last Friday", False, "2031-01-31"),
    ("on 2031-03-01", False, "2031-03-01"), ("מחר", False, "2031-02-06"), ("בלו״ז היום", False, "2031-02-05"),
])
def test_days(text: str, past: bool, day: str):
    when = When.find(text)
    assert when is not None and when.day(WEDNESDAY, past=past).isoformat() == day


@pytest.mark.parametrize(("text", "span", "so_far"), [
    ("next week's classes", ("2031-02-10", "2031-02-16"), ("2031-02-10", "2031-02-16")),
    ("this week", ("2031-02-03", "2031-02-09"), ("2031-02-03", "2031-02-05")),
    ("last week", ("2031-01-27", "2031-02-02"), ("2031-01-27", "2031-02-02")),
    ("this month", ("2031-02-01", "2031-02-28"), ("2031-02-01", "2031-02-05")),
    ("last month", ("2031-01-01", "2031-01-31"), ("2031-01-01", "2031-01-31")),
    ("tomorrow", ("2031-02-06", "2031-02-06"), ("2031-02-06", "2031-02-06")),
    ("השבוע הבא", ("2031-02-10", "2031-02-16"), ("2031-02-10", "2031-02-16")),
])
def test_periods(text: str, span: tuple[str, str], so_far: tuple[str, str]):
    when = When.find(text)
    assert when is not None
    assert tuple(d.isoformat() for d in when.span(WEDNESDAY)) == span
    assert tuple(d.isoformat() for d in when.span_so_far(WEDNESDAY)) == so_far


def test_no_day_named():
    assert When.find("how is revenue?") is None
    assert today_in("2031-02-05T23:30:00-05:00") == date(2031, 2, 5)  # the studio's day, not UTC's
    assert today_in("not a time") is None


@pytest.mark.parametrize(("text", "format_", "movements"), [
    ("3 rounds — 200m run, 30 double-unders", "3 rounds",
     [{"name": "Run", "distanceM": 200}, {"name": "Double-unders", "reps": 30}]),
    ("AMRAP 12: 10 thrusters @ 40kg, 15 pull-ups and 1:00 plank", "AMRAP 12",
     [{"name": "Thrusters", "reps": 10, "loadKg": 40.0}, {"name": "Pull-ups", "reps": 15}, {"name": "Plank", "durationS": 60}]),
    ("For time - 21 wall balls; 1k row + 15 cal bike", "For time",
     [{"name": "Wall balls", "reps": 21}, {"name": "Row", "distanceM": 1000}, {"name": "Bike", "notes": "15 cal"}]),
    ("5 muscle-ups, 30 sec hollow hold", None, [{"name": "Muscle-ups", "reps": 5}, {"name": "Hollow hold", "durationS": 30}]),
])
def test_workout_text(text: str, format_: str | None, movements: list[dict]):
    parsed = parse_workout(text)
    assert parsed.format == format_
    assert [m.as_input() for m in parsed.movements] == movements
