"""Reciprocal-rank fusion of the lexical and semantic rankings, and the evidence an entity needs
to be a hit at all. Pure functions: no servers."""

from __future__ import annotations

import pytest

from spotter_rag.core import FUZZY_MIN, MAX_NAMED_PER_TERM, MAX_PER_SCOPE, RRF_K, Match, Neighbour, fuse


def m(i: str, *, term: int = 0, name: bool = False, text: bool = False, key: bool = False, short_key: bool = False,
      sim: float = 0.0, named: int = 1) -> Match:
    return Match(i, f"label {i}", None, term, name, text, key, short_key, sim, named)


def test_name_matches_beat_text_matches_and_each_scope_is_capped() -> None:
    hits = fuse("program", [m("desc", text=True, sim=0.1), m("name", name=True, sim=1.0), m("fuzzy", sim=0.7),
                            m("d2", text=True)])
    assert len(hits) == MAX_PER_SCOPE
    assert [h.id for h in hits][:2] == ["name", "desc"]
    assert hits[0].score > hits[1].score


def test_equal_matches_score_the_same_and_come_in_label_order() -> None:
    matches = [Match(i, label, None, 0, True, False, False, False, 1.0) for i, label in (("2", "Saar Levi"), ("1", "Saar Cohen"))]
    hits = fuse("member", matches + [Match("3", "Sarai Ben", None, 0, True, False, False, False, 0.7)])
    assert [h.label for h in hits] == ["Saar Cohen", "Saar Levi", "Sarai Ben"]
    assert hits[0].score == hits[1].score > hits[2].score


def test_a_semantic_neighbour_alone_needs_the_floor() -> None:
    near = [Neighbour("close", "Romanian Deadlift", None, 0.86), Neighbour("far", "Box Jump", None, 0.83)]
    hits = fuse("exercise", [], near, floor=0.84)
    assert [h.id for h in hits] == ["close"]
    assert hits[0].score == round(1 / (RRF_K + 1), 6)


def test_semantic_rank_orders_lexical_candidates_even_below_the_floor() -> None:
    matches = [m("a", name=True, sim=1.0), m("b", name=True, sim=1.0)]
    near = [Neighbour("b", "label b", None, 0.80), Neighbour("a", "label a", None, 0.78)]
    assert [h.id for h in fuse("member", matches, near, floor=0.88)] == ["b", "a"]


def test_a_lone_two_consonant_key_is_not_evidence_but_two_are() -> None:
    # "סער כהן": sr and kn each match many names; both together point at one.
    matches = [m("saar-cohen", term=0, short_key=True), m("saar-cohen", term=1, short_key=True),
               m("sarah", term=0, short_key=True), m("chen", term=1, short_key=True), m("michal", term=2, key=True)]
    assert {h.id for h in fuse("member", matches)} == {"saar-cohen", "michal"}
    assert fuse("member", matches)[0].id == "saar-cohen"


def test_strict_mode_drops_unspecific_terms_and_lone_description_words() -> None:
    # "time" names hundreds of "… for time" workouts; one description word is not enough either.
    common = [m(f"w{i}", name=True, sim=1.0, named=MAX_NAMED_PER_TERM + 1) for i in range(3)]
    described = [m("open-gym", text=True), m("olympic", term=0, text=True), m("olympic", term=1, text=True)]
    assert fuse("workout", common, strict=True) == []
    assert [h.id for h in fuse("workout", common)] == ["w0", "w1", "w2"]
    assert [h.id for h in fuse("program", described, strict=True)] == ["olympic"]
    assert {h.id for h in fuse("program", described)} == {"open-gym", "olympic"}


def test_fuzzy_similarity_counts_from_its_threshold() -> None:
    assert [h.id for h in fuse("program", [m("crossfit", sim=FUZZY_MIN)])] == ["crossfit"]
    assert fuse("program", [m("crossfit", sim=FUZZY_MIN - 0.01)]) == []


def test_search_weights_scale_a_terms_rankings() -> None:
    # The whole query (term 0) at full weight outranks one of its words (term 1) at half.
    matches = [m("phrase", term=0, name=True), m("word", term=1, name=True)]
    hits = fuse("member", matches, weights=[1.0, 0.5], limit=10)
    assert [h.id for h in hits] == ["phrase", "word"]
    assert hits[0].score - hits[1].score == pytest.approx(0.5 / (RRF_K + 1), abs=1e-5)


def test_matching_more_of_the_query_ranks_higher() -> None:
    # "dan cohen": the Hebrew-named דן כהן matches both words through name keys, Saar Cohen one of
    # them by spelling (with its trigram similarity).
    matches = [m("saar-cohen", term=1, name=True, sim=1.0),
               m("dan-cohen", term=0, short_key=True), m("dan-cohen", term=1, short_key=True)]
    assert [h.id for h in fuse("member", matches)] == ["dan-cohen", "saar-cohen"]
