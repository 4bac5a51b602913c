"""Ambient search (seed 000, rag.service.ts): a user's message → a few org-scoped entities that
it probably mentions, ranked by a blended score. Knows nothing about NATS.

Lexical only for now: ILIKE on each term plus pg_trgm word similarity, fused RRF-style. Each
scope is one small query function in ``SCOPES``; workouts and exercises join that list when
their tables exist.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

import asyncpg

from spotter_shared.contracts.rag import AmbientHit, AmbientQuery, AmbientResult
from spotter_shared.errors import ErrorCode, SpotterError

log = logging.getLogger(__name__)

MIN_QUERY_CHARS = 30
MAX_PER_SCOPE = 3
MAX_TOTAL = 5
MAX_TERMS = 8
# Candidate rows fetched per scope before fusion; bounds the work a chatty message can cause.
MAX_ROWS_PER_SCOPE = 50
# pg_trgm word_similarity at or above this counts as a fuzzy match ("saar" ~ "Saar", "crosfit").
FUZZY_MIN = 0.5
# The usual RRF damping constant: rank 1 scores 1/61, rank 2 1/62, …
RRF_K = 60
# A name match says more than a description match or a merely similar spelling.
WEIGHT_NAME, WEIGHT_TEXT, WEIGHT_FUZZY = 1.0, 0.5, 0.5

# Words that never identify an entity: articles, pronouns, auxiliaries and common verbs, calendar
# words, the entity nouns themselves, and their Hebrew counterparts. Calendar words that are also
# common first names (April, June, August, Shani/שני) stay searchable.
STOPWORDS = frozenset(
    """
    a an the this that these those there here some any all each every both other another such
    i me my mine we us our ours you your yours he him his she her hers it its they them their theirs
    who whom whose what which when where why how
    anyone anybody someone somebody everyone everybody anything something everything nothing nobody
    is am are was were be been being do does did doing done have has had having
    can could will would shall should may might must need needs want wants wanted
    please thanks thank hi hello hey ok okay yes no not
    and or but if then than so as at by for from in into of on onto to with without about
    above after before below between during over under up down out off again also just only
    very more most less least much many few too really
    find found show tell give get got list search look lookup see check know let make
    create add update edit change delete remove cancel send move set use using help
    like put keep bring go going come say said
    new old last next first latest recent
    today tomorrow yesterday tonight now morning afternoon evening noon night
    day days week weeks weekly month months monthly year years daily weekend
    monday tuesday wednesday thursday friday saturday sunday
    mon tue tues wed thu thur thurs fri sat sun pm
    january february march july september october november december
    jan feb mar apr jul aug sep sept oct nov dec
    member members program programs workout workouts class classes session sessions
    exercise exercises coach coaches athlete athletes client clients people person
    assignment assignments booking bookings schedule scheduled publish published unpublish
    plan plans payment payments status details detail info information
    name names named called email emails phone number
    """.split()
    + """
    של את על עם זה זו זאת מה מי איך איפה מתי למה כמה אני אתה את הוא היא אנחנו אתם הם הן
    כל לא כן יש אין גם או אם כי רק עוד כבר אבל הזה הזאת שלי שלך שלו שלה שלנו שלהם לי לו לה לנו
    היום מחר אתמול עכשיו בוקר ערב שבוע חודש שנה ראשון שלישי רביעי חמישי שישי שבת
    בבקשה תודה תמצא מצא חפש תחפש תראה הראה תראי ספר תספר תגיד תן תני רוצה צריך אפשר
    חבר חברה חברים מתאמן מתאמנת מתאמנים תכנית תוכנית תכניות תוכניות אימון אימונים שיעור שיעורים
    סשן מפגש מאמן מאמנת תשלום מנוי סטטוס
    """.split()
)

_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class Terms:
    """The searchable words of a message, with their ILIKE patterns."""

    words: tuple[str, ...]

    @property
    def patterns(self) -> list[str]:
        return [f"%{_escape_like(w)}%" for w in self.words]


def _escape_like(word: str) -> str:
    # Backslash is ILIKE's default escape character, so it must be escaped first.
    return word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def extract_terms(text: str) -> Terms:
    words: list[str] = []
    for word in _WORD.findall(text.lower()):
        # \w includes "_" and digits; neither names a member or a program.
        word = word.strip("_")
        if word in STOPWORDS or word in words or not any(c.isalpha() for c in word):
            continue
        # Latin words of one or two letters are noise; Hebrew names are often two letters (דן, טל).
        if len(word) < (3 if word.isascii() else 2):
            continue
        words.append(word)
    return Terms(tuple(words[:MAX_TERMS]))


@dataclass(frozen=True)
class Match:
    """One candidate entity matched by one term."""

    id: str
    label: str
    detail: str | None
    term: str
    name_hit: bool
    text_hit: bool
    similarity: float


@dataclass(frozen=True)
class Scope:
    name: str
    fetch: Callable[[asyncpg.Connection, uuid.UUID, Terms], Awaitable[list[Match]]]


def _matches(rows: Iterable[asyncpg.Record]) -> list[Match]:
    return [
        Match(r["id"], r["label"], r["detail"], r["term"], r["name_hit"], r["text_hit"], float(r["similarity"]))
        for r in rows
    ]


async def _members(conn: asyncpg.Connection, org_id: uuid.UUID, terms: Terms) -> list[Match]:
    # Only the local part of an email: every address in a studio shares its domain.
    rows = await conn.fetch(
        """SELECT m.id::text AS id, u.full_name AS label,
                  concat_ws(' · ', m.role::text, m.status::text, m.plan,
                            'payment ' || m.payment_status::text) AS detail,
                  t.term,
                  (u.full_name ILIKE t.pat OR split_part(u.email, '@', 1) ILIKE t.pat) AS name_hit,
                  false AS text_hit,
                  word_similarity(t.term, u.full_name) AS similarity
           FROM memberships m
           JOIN users u ON u.id = m.user_id
           CROSS JOIN unnest($2::text[], $3::text[]) AS t(term, pat)
           WHERE m.organization_id = $1
             AND (u.full_name ILIKE t.pat OR split_part(u.email, '@', 1) ILIKE t.pat
                  OR word_similarity(t.term, u.full_name) >= $4)
           ORDER BY name_hit DESC, similarity DESC, m.id
           LIMIT $5""",
        org_id, list(terms.words), terms.patterns, FUZZY_MIN, MAX_ROWS_PER_SCOPE,
    )
    return _matches(rows)


async def _programs(conn: asyncpg.Connection, org_id: uuid.UUID, terms: Terms) -> list[Match]:
    rows = await conn.fetch(
        """SELECT p.id::text AS id, p.name AS label,
                  concat_ws(' · ', p.kind::text, left(p.description, 120)) AS detail,
                  t.term,
                  p.name ILIKE t.pat AS name_hit,
                  coalesce(p.description ILIKE t.pat, false) AS text_hit,
                  word_similarity(t.term, p.name) AS similarity
           FROM programs p
           CROSS JOIN unnest($2::text[], $3::text[]) AS t(term, pat)
           WHERE p.organization_id = $1 AND p.deleted_at IS NULL
             AND (p.name ILIKE t.pat OR p.description ILIKE t.pat
                  OR word_similarity(t.term, p.name) >= $4)
           ORDER BY name_hit DESC, text_hit DESC, similarity DESC, p.id
           LIMIT $5""",
        org_id, list(terms.words), terms.patterns, FUZZY_MIN, MAX_ROWS_PER_SCOPE,
    )
    return _matches(rows)


SCOPES: tuple[Scope, ...] = (Scope("member", _members), Scope("program", _programs))


def _rrf(scores: dict[str, float], ranking: list[tuple[str, float]], weight: float) -> None:
    """Add weight/(K + rank) for each (id, similarity) of a ranking sorted best first. Equal
    similarities share a rank, so two equally good matches (two "Saar"s) score the same."""
    rank, previous = 0, None
    for position, (entity_id, similarity) in enumerate(ranking, start=1):
        if similarity != previous:
            rank, previous = position, similarity
        scores[entity_id] += weight / (RRF_K + rank)


def fuse(scope: str, matches: list[Match]) -> list[AmbientHit]:
    """Reciprocal-rank fusion of one ranking per term and kind of match (name, text) plus one
    fuzzy ranking; returns the scope's best hits, best first."""
    scores: dict[str, float] = defaultdict(float)
    for term in dict.fromkeys(m.term for m in matches):
        mine = sorted((m for m in matches if m.term == term), key=lambda m: -m.similarity)
        _rrf(scores, [(m.id, m.similarity) for m in mine if m.name_hit], WEIGHT_NAME)
        _rrf(scores, [(m.id, m.similarity) for m in mine if m.text_hit and not m.name_hit], WEIGHT_TEXT)
    best: dict[str, float] = defaultdict(float)
    for m in matches:
        best[m.id] = max(best[m.id], m.similarity)
    _rrf(scores, sorted(((i, s) for i, s in best.items() if s >= FUZZY_MIN), key=lambda p: -p[1]), WEIGHT_FUZZY)

    first = {m.id: m for m in reversed(matches)}
    ranked = sorted(scores, key=lambda i: (-scores[i], first[i].label, i))[:MAX_PER_SCOPE]
    return [
        AmbientHit(scope=scope, id=i, label=first[i].label, detail=first[i].detail or None, score=round(scores[i], 6))
        for i in ranked
    ]


class AmbientSearch:
    def __init__(self, pool: asyncpg.Pool, *, budget_s: float = 0.6, statement_timeout_ms: int = 450) -> None:
        self._pool = pool
        self._budget_s = budget_s
        self._statement_timeout_ms = int(statement_timeout_ms)

    async def find(self, query: AmbientQuery) -> AmbientResult:
        try:
            org_id = uuid.UUID(query.organization_id)
        except ValueError:
            raise SpotterError(ErrorCode.INVALID_REQUEST, "organizationId: not a UUID") from None
        if len(query.query.strip()) < MIN_QUERY_CHARS:
            return AmbientResult(hits=[], skipped="too_short")
        terms = extract_terms(query.query)
        if not terms.words:
            return AmbientResult(hits=[], skipped="no_terms")
        try:
            # The caller's budget is 800 ms end to end; answering late is worth nothing, so the
            # search gives up first and says so instead of leaving the caller to time out.
            async with asyncio.timeout(self._budget_s):
                per_scope = await self._search(org_id, terms)
        except (TimeoutError, asyncpg.QueryCanceledError):
            log.warning("ambient search over budget (%d terms)", len(terms.words))
            return AmbientResult(hits=[], skipped="timeout")
        hits = [hit for scope_hits in per_scope for hit in scope_hits]
        hits.sort(key=lambda h: -h.score)  # stable: ties keep scope order
        return AmbientResult(hits=hits[:MAX_TOTAL])

    async def _search(self, org_id: uuid.UUID, terms: Terms) -> list[list[AmbientHit]]:
        async with self._pool.acquire() as conn, conn.transaction(readonly=True):
            # SET LOCAL: the timeout dies with this transaction, never leaking to the pooled connection.
            await conn.execute(f"SET LOCAL statement_timeout = {self._statement_timeout_ms}")
            return [fuse(scope.name, await scope.fetch(conn, org_id, terms)) for scope in SCOPES]
