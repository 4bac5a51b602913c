"""The global library's Hebrew and Russian names (migration 0009): every exercise has both, no alias
names two exercises, and the migrated library (0007 + 0009) is exactly demo_year's EXERCISES."""

from __future__ import annotations

import re
from importlib import resources

import asyncpg
import pytest

from spotter_cli.demo_year import EXERCISE_NAMES_HE_RU, EXERCISES, STUDIO_EXERCISES

HEBREW = re.compile(r"[\u0590-\u05FF]")
CYRILLIC = re.compile(r"[\u0400-\u04FF]")


def _comparable(name: str) -> str:
    """As read.exercises_resolve_batch compares names: case, hyphens, apostrophes and spacing aside."""
    name = re.sub(r"[-_/]+", " ", name.lower())
    return " ".join(re.sub(r"[^\w\s]", "", name).split())


def _migration_0009() -> str:
    return resources.files("spotter_shared.migrations").joinpath("0009_exercise_names.sql").read_text()


def test_every_exercise_has_a_hebrew_and_a_russian_name() -> None:
    assert set(EXERCISE_NAMES_HE_RU) == {e.name for e in EXERCISES}
    for e in EXERCISES:
        hebrew, russian = EXERCISE_NAMES_HE_RU[e.name]
        assert hebrew and all(HEBREW.search(a) and not CYRILLIC.search(a) for a in hebrew), e.name
        assert russian and all(CYRILLIC.search(a) and not HEBREW.search(a) for a in russian), e.name
        assert e.aliases[-len(hebrew) - len(russian):] == hebrew + russian, e.name
        assert all("," not in a and a == a.strip() for a in e.aliases), e.name


def test_no_name_or_alias_stands_for_two_exercises() -> None:
    owner: dict[str, str] = {}
    clashes = []
    for e in [*EXERCISES, *STUDIO_EXERCISES]:
        for text in {_comparable(n) for n in (e.name, *e.aliases)}:
            if owner.setdefault(text, e.name) != e.name:
                clashes.append((text, owner[text], e.name))
    assert clashes == []


async def test_the_migrated_library_is_exactly_exercises(db_url: str) -> None:
    conn = await asyncpg.connect(db_url)
    try:
        rows = await conn.fetch(
            """SELECT name, modality::text AS modality, equipment, muscles, aliases FROM exercises
                WHERE organization_id IS NULL AND deleted_at IS NULL"""
        )
    finally:
        await conn.close()
    library = {r["name"]: (r["modality"], tuple(r["equipment"]), tuple(r["muscles"]), tuple(r["aliases"])) for r in rows}
    assert library == {e.name: (e.modality, e.equipment, e.muscles, e.aliases) for e in EXERCISES}


async def test_0009_again_changes_nothing_and_never_repeats_an_alias(db_url: str) -> None:
    conn = await asyncpg.connect(db_url)
    try:
        tx = conn.transaction()
        await tx.start()
        try:
            assert await conn.execute(_migration_0009()) == "UPDATE 0"
            # A library whose row lacks the new names but already has one of them (in Hebrew, which has no
            # case: lower() folds Cyrillic only under a UTF-8 LC_CTYPE, which not every database has).
            english = [a for a in EXERCISES[0].aliases if a.isascii()]
            await conn.execute(
                "UPDATE exercises SET aliases = $1 WHERE organization_id IS NULL AND name = 'Back Squat'",
                [*english, "סקוואט"],
            )
            assert await conn.execute(_migration_0009()) == "UPDATE 1"
            aliases = await conn.fetchval(
                "SELECT aliases FROM exercises WHERE organization_id IS NULL AND name = 'Back Squat'"
            )
            hebrew, russian = EXERCISE_NAMES_HE_RU["Back Squat"]
            assert aliases == [*english, "סקוואט", *[a for a in hebrew if a != "סקוואט"], *russian]
            assert await conn.execute(_migration_0009()) == "UPDATE 0"
        finally:
            await tx.rollback()
    finally:
        await conn.close()


@pytest.mark.parametrize("name", ["Back Squat", "Deadlift", "Pull-up", "Push-up", "Plank"])
def test_the_names_coaches_say(name: str) -> None:
    said = {
        "Back Squat": ({"סקוואט", "סקוואט אחורי"}, {"приседания со штангой", "приседания"}),
        "Deadlift": ({"דדליפט"}, {"становая тяга"}),
        "Pull-up": ({"מתח"}, {"подтягивания"}),
        "Push-up": ({"שכיבות סמיכה"}, {"отжимания"}),
        "Plank": ({"פלאנק"}, {"планка"}),
    }[name]
    hebrew, russian = EXERCISE_NAMES_HE_RU[name]
    assert said[0] <= set(hebrew) and said[1] <= set(russian)
