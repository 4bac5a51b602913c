"""Term extraction in English, Hebrew and Russian, and the consonant-skeleton keys that let a
name written in one script find its spelling in another, and which messages ambient search
searches at all. Pure functions: no servers."""

from __future__ import annotations

import uuid

import pytest

from spotter_rag.core import HybridSearch
from spotter_shared.phonetic import name_keys, query_patterns, skeletons
from spotter_shared.terms import extract_terms, like_pattern, name_pattern, searchable


def words(text: str) -> list[str]:
    return [t.word for t in extract_terms(text)]


def test_english_intent_words_and_stopwords_are_stripped() -> None:
    assert words("can you find saar and tell me about their payment plan") == ["saar"]
    assert words("Show me Saar's workouts on Monday 13:00 pm, the CrossFit class") == ["saar", "crossfit"]
    assert words("I'm looking for a squat variation for someone with bad knees") == ["squat", "knees"]
    assert words("can you please tell me what we have for today and tomorrow at 10 am?") == []


def test_hebrew_stopwords_also_behind_a_prefix() -> None:
    assert words("תמצא לי בבקשה את סער כהן ומה מצב התשלום שלו") == ["סער", "כהן"]
    # "והיום" is ו + היום, "בשבוע" is ב + שבוע: calendar words behind a prefix.
    assert words("מה עם דן והיום בשבוע הבא") == ["דן"]
    assert words("מה שלומך היום? הכל טוב אצלי, תודה רבה על העזרה") == []


def test_russian_stopwords_and_intent_words() -> None:
    assert words("Найди, пожалуйста, Саара Коэна и скажи, оплатил ли он") == ["саара", "коэна"]
    assert words("добавь в завтрашнюю тренировку приседания со штангой") == ["приседания", "штангой"]
    assert words("Привет, как дела? У меня всё хорошо, спасибо за помощь") == []


def test_variants_strip_hebrew_prefixes_and_russian_or_english_endings() -> None:
    (squat,) = extract_terms("ובסקוואט")
    assert squat.variants == ("ובסקוואט", "בסקוואט", "סקוואט")
    # Never down to two letters: "כהן" is a name, not כ + "הן".
    assert extract_terms("כהן")[0].variants == ("כהן",)
    assert extract_terms("Коэном")[0].variants == ("коэном", "коэн")
    assert extract_terms("приседаний")[0].variants == ("приседаний", "приседан")
    assert extract_terms("squats")[0].variants == ("squats", "squat")


def test_like_wildcards_are_literal_and_short_words_match_whole() -> None:
    assert extract_terms("a_b 100% __ x")[0].word == "a_b"
    assert like_pattern("o_k%") == "%o\\_k\\%%"
    assert like_pattern("דן") == "% דן %"
    assert name_pattern("saar") == "% saar%"
    assert name_pattern("bar") == "% bar %"
    assert name_pattern("pull-up") == "% pull up%"


@pytest.mark.parametrize(
    ("spellings", "key"),
    [
        (("Saar", "סער", "Саар", "Саара"), "sr"),
        (("Cohen", "כהן", "Коэн", "Коэна"), "kn"),
        (("Levi", "לוי", "Леви"), "lb"),
        (("Katz", "כץ", "Кац"), "kc"),
        (("Michael", "מיכאל", "Михаил"), "mkl"),
        (("Friedman", "פרידמן", "Фридман"), "prdmn"),
        (("CrossFit", "קרוספיט", "кроссфит"), "krspt"),
        (("squat", "סקוואט", "сквот"), "skbt"),
    ],
)
def test_one_name_one_skeleton_in_every_script(spellings: tuple[str, ...], key: str) -> None:
    for spelling in spellings:
        assert key in skeletons(spelling), spelling


def test_keys_only_look_across_scripts() -> None:
    assert name_keys("Saar Cohen") == ["9lsr9", "9lkn9"]
    # A Hebrew word looks for Latin and Cyrillic spellings, never for Hebrew ones (those match as text).
    assert query_patterns("סער") == ["%9lsr9%", "%9csr9%"]
    # One consonant says nothing.
    assert skeletons("Noa") == [] and query_patterns("איתי") == []


def test_russian_case_endings_leave_a_stem_that_matches_a_names_word_start() -> None:
    # "становую тягу" (accusative) must find the alias "становая тяга".
    deadlift, pull = extract_terms("становую тягу")
    assert deadlift.variants == ("становую", "станов") and deadlift.stems == ("станов",)
    assert pull.variants == ("тягу", "тяг") and pull.stems == ("тяг",)
    for word, stem in [("гирей", "гир"), ("гантелями", "гантел"), ("штангами", "штанг"), ("отжиманиях", "отжиман"),
                       ("жимом", "жим"), ("выпадов", "выпад"), ("берпи", "берп"), ("становой", "станов")]:
        assert extract_terms(word)[0].variants == (word, stem), word
    # A three-letter stem matches by the start of a word; a three-letter word as typed only whole.
    assert name_pattern("тяг", stem=True) == "% тяг%"
    assert name_pattern("тяг") == "% тяг %"
    # English keeps four letters at least: "reps" stays whole.
    assert extract_terms("reps")[0].variants == ("reps",)


def test_a_hebrew_word_with_a_geresh_stays_whole_and_keys_as_j_ch_zh() -> None:
    assert words("תשלח לקנג'י טנקה תזכורת") == ["לקנג'י", "טנקה", "תזכורת"]
    kenji = extract_terms("לקנג'י")[0]
    assert kenji.variants == ("לקנג'י", "קנג'י")
    assert "%9lknj9%" in kenji.phonetic and "knj" in skeletons("Kenji")
    # The Hebrew geresh (׳) too, and ch / zh.
    assert words("ג׳ורג׳ צ'רלי ז'קלין") == ["ג׳ורג׳", "צ'רלי", "ז'קלין"]
    assert skeletons("צ'רלי") == ["crl", "krl"] and "krl" in skeletons("Charlie") and "crl" in skeletons("Чарли")
    assert skeletons("ז'ניה") == skeletons("Zhenya") == ["sn"]


class _NoPool:
    """A pool a search that gets as far as Postgres asks for: the test hears that it did."""

    def acquire(self) -> None:
        raise LookupError("searched")


@pytest.mark.parametrize("message", [
    "ok do it", "thanks!", "hello there, how are you today?", "can you please tell me what we have for today?",
    "מה שלומך היום? הכל טוב אצלי, תודה רבה על העזרה", "Привет! Как у тебя дела сегодня, всё хорошо?",
    "any ideas for kettlebell swings and rowing intervals", "תמצא לי בבקשה את סער כהן ומה מצב התשלום שלו",
    "Покажи программу Саара Коэна на эту неделю", "     saar                          ",
])
async def test_searchable_is_what_ambient_search_searches(message: str) -> None:
    """The orchestrator asks rag for ambient context only when `searchable` says rag would search:
    the same answer as rag's own ambient search, which either skips the message or goes to Postgres."""
    search = HybridSearch(_NoPool(), None)  # type: ignore[arg-type]
    try:
        result = await search.ambient(uuid.uuid4(), message)
    except LookupError:
        searched = True
    else:
        assert result.hits == [] and result.skipped in ("too_short", "no_terms")
        searched = False
    assert searchable(message) is searched
