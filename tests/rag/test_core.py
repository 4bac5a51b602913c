"""AmbientSearch against a real, migrated Postgres: seed 000's rules for ambient RAG."""

from __future__ import annotations

import asyncpg
import pytest

from spotter_rag.core import MAX_PER_SCOPE, MAX_TOTAL, AmbientSearch, Match, extract_terms, fuse
from spotter_shared.contracts.rag import AmbientQuery
from spotter_shared.errors import SpotterError
from tests.factories import Studio, make_studio

SAAR_QUESTION = "can you find saar and tell me about their payment plan"

MEMBERS = [
    {"full_name": "Saar Cohen", "plan": "Unlimited", "payment_status": "paid"},
    {"full_name": "Saar Levi", "plan": "3x/week", "payment_status": "overdue"},
    {"full_name": "Sarah Klein", "plan": "2x/week", "payment_status": "due"},
    {"full_name": "Noa Mizrahi", "plan": "Unlimited", "payment_status": "paid"},
    {"full_name": "Itai Friedman", "plan": "Drop-in"},
    {"full_name": "דן כהן", "plan": "Unlimited"},
]


@pytest.fixture(scope="module")
async def studio(pool: asyncpg.Pool) -> Studio:
    s = await make_studio(pool, extra_members=MEMBERS, programs=["CrossFit", "Olympic Lifting", "Mobility & Recovery", "Kettlebell Basics"])
    await pool.execute("UPDATE programs SET deleted_at = now() WHERE id = $1", s.programs["Kettlebell Basics"])
    return s


@pytest.fixture(scope="module")
async def other(pool: asyncpg.Pool) -> Studio:
    # Another studio with its own Saar and look-alike programs: must never leak into the first.
    return await make_studio(pool, extra_members=[{"full_name": "Saar Shamir"}], programs=["Olympic Lifting", "Saar Strength"])


@pytest.fixture(scope="module")
def search(pool: asyncpg.Pool) -> AmbientSearch:
    return AmbientSearch(pool)


async def find(search: AmbientSearch, studio: Studio, text: str):
    return await search.find(AmbientQuery(organization_id=studio.org.id, query=text))


async def test_short_query_is_skipped(search, studio) -> None:
    result = await find(search, studio, "find saar please")
    assert result.hits == [] and result.skipped == "too_short"


async def test_finds_both_saars_within_the_caps(search, studio, other) -> None:
    result = await find(search, studio, SAAR_QUESTION)
    members = [h for h in result.hits if h.scope == "member"]
    assert result.skipped is None
    assert {h.label for h in members} >= {"Saar Cohen", "Saar Levi"}
    assert {h.id for h in members} >= {studio.people["Saar Cohen"].membership_id, studio.people["Saar Levi"].membership_id}
    # Equally good matches score the same and come in label order.
    assert [h.label for h in members[:2]] == ["Saar Cohen", "Saar Levi"]
    assert members[0].score == members[1].score
    assert len(members) <= MAX_PER_SCOPE and len(result.hits) <= MAX_TOTAL
    assert "overdue" in next(h.detail for h in members if h.label == "Saar Levi")
    assert [h.score for h in result.hits] == sorted((h.score for h in result.hits), reverse=True)


async def test_finds_a_program_by_name(search, studio, other) -> None:
    result = await find(search, studio, "what time does the olympic lifting class start on thursday?")
    programs = [h for h in result.hits if h.scope == "program"]
    assert programs and programs[0].label == "Olympic Lifting"
    assert programs[0].id == studio.programs["Olympic Lifting"]
    assert programs[0].detail.startswith("group")


async def test_fuzzy_spelling_still_matches(search, studio) -> None:
    result = await find(search, studio, "did anyone sign up for crosfit this morning at all")
    assert [h.label for h in result.hits if h.scope == "program"][:1] == ["CrossFit"]


async def test_other_orgs_rows_never_appear(search, studio, other) -> None:
    mine = {p.membership_id for p in (studio.owner, studio.admin, studio.coach, studio.member, *studio.people.values())}
    mine |= set(studio.programs.values())
    for text in (SAAR_QUESTION, "anything new about saar strength or olympic lifting?"):
        result = await find(search, studio, text)
        assert result.hits and {h.id for h in result.hits} <= mine
    theirs = await find(search, other, SAAR_QUESTION)
    assert [h.label for h in theirs.hits if h.scope == "member"] == ["Saar Shamir"]


async def test_soft_deleted_programs_are_not_found(search, studio) -> None:
    result = await find(search, studio, "who is coaching kettlebell basics next week?")
    assert "Kettlebell Basics" not in {h.label for h in result.hits}


async def test_stopword_only_query_finds_nothing_without_error(search, studio) -> None:
    result = await find(search, studio, "can you please tell me what we have for today and tomorrow at 10 am?")
    assert result.hits == [] and result.skipped == "no_terms"


async def test_like_wildcards_in_the_query_are_literal(search, studio) -> None:
    # Unescaped, "sa_r" would be a pattern matching "Saar".
    result = await find(search, studio, "is there anyone called sa_r in the records, thanks")
    assert not [h for h in result.hits if h.label.startswith("Saar")]


async def test_hebrew_names_are_searchable(search, studio) -> None:
    result = await find(search, studio, "תמצא לי בבקשה את דן ומה המנוי שלו")
    assert [h.label for h in result.hits if h.scope == "member"] == ["דן כהן"]


async def test_over_budget_search_answers_timeout(pool, studio) -> None:
    result = await AmbientSearch(pool, budget_s=0).find(AmbientQuery(organization_id=studio.org.id, query=SAAR_QUESTION))
    assert result.hits == [] and result.skipped == "timeout"
    # The pool is still healthy afterwards.
    assert len((await AmbientSearch(pool).find(AmbientQuery(organization_id=studio.org.id, query=SAAR_QUESTION))).hits) >= 2


async def test_organization_id_must_be_a_uuid(search) -> None:
    with pytest.raises(SpotterError) as err:
        await search.find(AmbientQuery(organization_id="demo-gym", query=SAAR_QUESTION))
    assert err.value.code == "invalid_request"


def test_extract_terms() -> None:
    assert extract_terms(SAAR_QUESTION).words == ("saar",)
    assert extract_terms("Show me Saar's workouts on Monday 13:00 pm, the CrossFit class").words == ("saar", "crossfit")
    assert extract_terms("מה עם דן היום").words == ("דן",)
    assert extract_terms("a_b 100% __ x").words == ("a_b",)
    assert extract_terms("50%_zumba").patterns == ["%zumba%"]
    assert extract_terms("find 100\\% o_k_ay").patterns == ["%o\\_k\\_ay%"]


def test_fuse_prefers_name_matches_and_caps_each_scope() -> None:
    def m(i: str, name_hit: bool, text_hit: bool, sim: float) -> Match:
        return Match(i, f"label {i}", None, "term", name_hit, text_hit, sim)

    hits = fuse("program", [m("desc", False, True, 0.1), m("name", True, False, 1.0), m("fuzzy", False, False, 0.6), m("d2", False, True, 0.0)])
    assert len(hits) == MAX_PER_SCOPE
    assert [h.id for h in hits][:2] == ["name", "desc"]
    assert hits[0].score > hits[1].score


def test_fuse_gives_equal_matches_equal_scores() -> None:
    matches = [Match(i, label, None, "saar", True, False, 1.0) for i, label in (("2", "Saar Levi"), ("1", "Saar Cohen"))]
    hits = fuse("member", matches + [Match("3", "Sarai Ben", None, "saar", True, False, 0.6)])
    assert [h.label for h in hits] == ["Saar Cohen", "Saar Levi", "Sarai Ben"]
    assert hits[0].score == hits[1].score > hits[2].score
