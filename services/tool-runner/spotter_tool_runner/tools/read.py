"""The `read` router (seed 000): read-only lookups, staff only, never confirmed.

Every query is scoped to the actor's organization; an id from another organization is "not found".
exercises_search and search_anything ask rag's hybrid search (lexical + semantic, any language) which
entities match, then read, filter and order those rows here; without an answer from rag they search by
name in SQL, as they did before rag could.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Sequence
from datetime import date, datetime, time, tzinfo
from typing import Annotated, Literal

import asyncpg
from pydantic import Field, StringConstraints, model_validator

from spotter_shared.contracts.rag import AmbientHit, Scope, SearchQuery

from ..context import ORG_COLUMNS, ToolContext
from ..declaration import Role, ToolFailure, ToolInput, ToolOutput, ToolRouter
from .common import MEMBERS_HINT, not_found, require_membership, require_program

log = logging.getLogger(__name__)

router = ToolRouter("read")

MembershipStatus = Literal["active", "paused", "cancelled", "pending"]
PaymentStatus = Literal["paid", "due", "overdue", "failed", "none"]


# get_current_context -----------------------------------------------------------------------------


class GetCurrentContextInput(ToolInput):
    pass


class OrganizationInfo(ToolOutput):
    id: uuid.UUID
    name: str
    tier: str
    locale: str
    timezone: str


class CallerInfo(ToolOutput):
    user_id: uuid.UUID
    membership_id: uuid.UUID
    name: str
    email: str
    role: str


class CurrentContext(ToolOutput):
    organization: OrganizationInfo
    caller: CallerInfo
    locale: str = Field(description="Locale to reply in.")
    now: str = Field(description="Current time, ISO 8601 in the organization's timezone.")
    weekday: str = Field(description="Current weekday in the organization's timezone, e.g. Monday.")


@router.read(
    "get_current_context",
    "Who and where the caller is: the organization (name, tier, locale, timezone), the caller's "
    "identity and role, the reply locale, and the current date, time and weekday in the studio's timezone. "
    "Use it to resolve relative dates such as 'tomorrow' or 'next Monday'.",
)
async def get_current_context(ctx: ToolContext, args: GetCurrentContextInput) -> CurrentContext:
    # The org and the caller in one statement (the tool most turns start with).
    row = await ctx.conn.fetchrow(
        f"""SELECT {ORG_COLUMNS}, u.id AS user_id, m.id AS membership_id, u.full_name AS name, u.email, m.role
              FROM organizations o
              LEFT JOIN (memberships m JOIN users u ON u.id = m.user_id) ON m.id = $2 AND m.organization_id = o.id
             WHERE o.id = $1""",
        ctx.organization_id,
        ctx.actor.membership_id,
    )
    org = ctx.known_org(row)
    if row is None or row["membership_id"] is None:
        raise ToolFailure("not_found", "The caller's membership was not found in this organization.")
    local_now = ctx.now.astimezone(org.tz)
    return CurrentContext(
        organization=OrganizationInfo.model_validate(org, from_attributes=True),
        caller=CallerInfo.from_row(row),
        locale=ctx.actor.locale,
        now=local_now.isoformat(timespec="seconds"),
        weekday=local_now.strftime("%A"),
    )


# programs_list -------------------------------------------------------------------------------------


class ProgramsListInput(ToolInput):
    include_inactive: bool = Field(default=False, description="Also list programs that are not active.")


class ProgramItem(ToolOutput):
    id: uuid.UUID
    name: str
    kind: str = Field(description="group, coaching or feed.")
    description: str | None
    is_active: bool


class ProgramsList(ToolOutput):
    programs: list[ProgramItem]


@router.read(
    "programs_list",
    "List the studio's training programs (id, name, kind, description, active flag), ordered by name. "
    "Only active programs unless includeInactive is true.",
)
async def programs_list(ctx: ToolContext, args: ProgramsListInput) -> ProgramsList:
    rows = await ctx.conn.fetch(
        """SELECT id, name, kind, description, is_active
             FROM programs
            WHERE organization_id = $1 AND deleted_at IS NULL AND ($2 OR is_active)
            ORDER BY name, id""",
        ctx.organization_id,
        args.include_inactive,
    )
    return ProgramsList(programs=[ProgramItem.from_row(r) for r in rows])


# members_search ------------------------------------------------------------------------------------


class MembersSearchInput(ToolInput):
    query: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100)] = Field(
        description='Words of a name or email; every word must match (case-insensitive). "*" lists everyone.'
    )
    role: Role | None = Field(default=None, description="Only this role.")
    status: MembershipStatus | None = Field(default=None, description="Only this membership status.")
    payment_status: PaymentStatus | None = Field(default=None, description="Only this payment status.")
    limit: int = Field(default=10, ge=1, le=25, description="Maximum number of members returned.")


class MemberSummary(ToolOutput):
    membership_id: uuid.UUID
    name: str
    email: str
    role: str
    status: str
    plan: str | None
    payment_status: str


class MembersSearchResult(ToolOutput):
    members: list[MemberSummary]
    total: int = Field(description="Number of matches, which may exceed the members returned.")


@router.read(
    "members_search",
    "Search the studio's people (members and staff) by name or email, optionally filtered by role, "
    "membership status and payment status. Returns membershipIds for read__members_get. "
    'Use query "*" to list everyone matching the filters.',
)
async def members_search(ctx: ToolContext, args: MembersSearchInput) -> MembersSearchResult:
    patterns = [f"%{_escape_like(token)}%" for token in args.query.split() if token != "*"]
    rows = await ctx.conn.fetch(
        """SELECT m.id AS membership_id, u.full_name AS name, u.email, m.role, m.status, m.plan, m.payment_status,
                  count(*) OVER () AS total
             FROM memberships m JOIN users u ON u.id = m.user_id
            WHERE m.organization_id = $1
              AND NOT EXISTS (SELECT 1 FROM unnest($2::text[]) AS p(pattern)
                               WHERE NOT (u.full_name ILIKE p.pattern OR u.email ILIKE p.pattern))
              AND ($3::text IS NULL OR m.role::text = $3)
              AND ($4::text IS NULL OR m.status::text = $4)
              AND ($5::text IS NULL OR m.payment_status::text = $5)
            ORDER BY u.full_name, m.id
            LIMIT $6""",
        ctx.organization_id,
        patterns,
        args.role,
        args.status,
        args.payment_status,
        args.limit,
    )
    members = [MemberSummary.from_row(r) for r in rows]
    return MembersSearchResult(members=members, total=rows[0]["total"] if rows else 0)


def _escape_like(text: str) -> str:
    # Backslash is ILIKE's default escape character; the user's % and _ must match literally.
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


# members_get ---------------------------------------------------------------------------------------


class MembersGetInput(ToolInput):
    membership_id: uuid.UUID = Field(description="membershipId from read__members_search.")


class MemberDetail(ToolOutput):
    membership_id: uuid.UUID
    user_id: uuid.UUID
    name: str
    email: str
    phone: str | None
    role: str
    status: str
    plan: str | None
    payment_status: str
    joined_at: date
    last_visit_at: datetime | None
    days_since_last_visit: int | None


@router.read(
    "members_get",
    "Full detail of one member by membershipId: contact, role, status, plan, payment status, "
    "join date and last visit (with days since).",
)
async def members_get(ctx: ToolContext, args: MembersGetInput) -> MemberDetail:
    # This tool's hint has always lacked the final period of the shared one; kept, so its output is unchanged.
    member = await require_membership(ctx, args.membership_id, "Use read__members_search to find the membershipId")
    last_visit: datetime | None = member["last_visit_at"]
    days = None
    if last_visit is not None:
        # Days on the studio's calendar, as people count them: in yesterday evening is "1 day ago" this morning.
        tz = (await ctx.org()).tz
        days = (ctx.now.astimezone(tz).date() - last_visit.astimezone(tz).date()).days
    return MemberDetail.from_row(
        member, membership_id=member["id"], name=member["full_name"], days_since_last_visit=days
    )


# ask_user_to_pick ----------------------------------------------------------------------------------

Label = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=255)]


class PickCandidate(ToolInput):
    id: Label = Field(description="Id of the entity, e.g. a membershipId; returned as pickedId.")
    label: Label = Field(description="What the button says, e.g. the member's full name.")
    sublabel: Label | None = Field(default=None, description="What tells it apart, e.g. plan or email.")
    detail: Annotated[str, StringConstraints(strip_whitespace=True, max_length=500)] | None = Field(
        default=None, description="Optional extra line, e.g. last visit."
    )


class AskUserToPickInput(ToolInput):
    kind: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=32)] = Field(
        description="What is being picked: member, program, workout, exercise, …"
    )
    prompt: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)] = Field(
        description="The question, in the user's language, e.g. 'Which Saar?'."
    )
    candidates: list[PickCandidate] = Field(min_length=2, max_length=8, description="2 to 8 options.")

    @model_validator(mode="after")
    def check_unique_ids(self) -> AskUserToPickInput:
        ids = [c.id for c in self.candidates]
        if len(set(ids)) != len(ids):
            raise ValueError("candidate ids must be unique")
        return self


ask_user_to_pick = router.picker(
    "ask_user_to_pick",
    "Ask the user to choose when several entities match what they said — e.g. two members named Saar: "
    "prompt 'Which Saar?' with one candidate per match (id, label, and a sublabel that tells them apart). "
    "Do not guess between plausible matches. The conversation pauses until the user picks; the result is "
    "{pickedId, pickedLabel, kind}.",
    input=AskUserToPickInput,
)


# The exercise library ------------------------------------------------------------------------------
#
# What a studio sees: the global library (organization_id NULL) and its own entries.
_VISIBLE_EXERCISE = "(e.organization_id IS NULL OR e.organization_id = $1) AND e.deleted_at IS NULL"

# How well an exercise matches the text $2, in [0, 1]: the best trigram similarity, whole or word by
# word, of its name or any alias (pg_trgm ignores case and punctuation: 'Double-Under' = 'double under').
# The one place a query is scored, so that a semantic score (embedding <=> the query's) can later be
# blended in here, and both exercises_search and search_anything rank with it.
_EXERCISE_SCORE = """greatest(
    similarity($2, e.name), word_similarity($2, e.name),
    coalesce((SELECT max(greatest(similarity($2, a), word_similarity($2, a))) FROM unnest(e.aliases) AS a), 0))"""

# The exercise `g` stands for in the studio $1: the studio's own entry of the same name when `g` is a global one
# it shadows (one at most: live names are unique per studio), else `g` itself (a LATERAL subquery giving `id`).
_STANDS_FOR = """(SELECT coalesce((
    SELECT o.id FROM exercises o
     WHERE g.organization_id IS NULL AND o.organization_id = $1 AND o.deleted_at IS NULL
       AND lower(o.name) = lower(g.name)), g.id) AS id)"""

# A global entry the studio has its own entry of the same name for ($1: the studio): the studio's shadows it.
_SHADOWED_GLOBAL = """(e.organization_id IS NULL AND EXISTS (
    SELECT 1 FROM exercises o
     WHERE o.organization_id = $1 AND o.deleted_at IS NULL AND lower(o.name) = lower(e.name)))"""

# Whether it matches at all: the pg_trgm operators (similarity ≥ 0.3, word similarity ≥ 0.6) on the
# name use its trigram index; the aliases are a few per row.
_EXERCISE_MATCH = """(e.name % $2 OR $2 <% e.name
    OR EXISTS (SELECT 1 FROM unnest(e.aliases) AS a WHERE a % $2 OR $2 <% a))"""

Modality = Literal["weightlifting", "gymnastics", "monostructural", "strongman", "mobility", "other"]
SearchText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100)]


class ExercisesSearchInput(ToolInput):
    query: SearchText = Field(
        description="A movement, or what it is like, in any language, e.g. 'squat', 'KB swing', 'a squat variation', "
        "'приседания', 'סקוואט'. '*' lists every exercise matching the filters."
    )
    modality: Modality | None = Field(default=None, description="Only exercises of this modality.")
    equipment: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64)] | None = Field(
        default=None, description="Only exercises that use this equipment, e.g. 'barbell', 'kettlebell', 'rower'."
    )
    limit: int = Field(default=10, ge=1, le=25, description="Maximum number of exercises returned.")


class ExerciseItem(ToolOutput):
    id: uuid.UUID
    name: str
    aliases: list[str]
    modality: str
    equipment: list[str]
    scope: Literal["global", "studio"] = Field(description="global library entry or the studio's own.")
    score: float = Field(
        description="Relevance, 0 to 1: matched by name and meaning, relative to the best hit of the search (1); "
        "matched by name only, the similarity of its name or alias to the query; 1 when listing ('*')."
    )


# How many hybrid hits exercises_search asks rag for: enough to fill a page after shadowed and filtered ones go.
EXERCISE_POOL = 50
FILTERED_POOL = 100

MatchedBy = Literal["name_and_meaning", "name_only"]
MATCHED_BY = (
    "name_and_meaning: in any language, by meaning as well as by name; name_only: by name and alias alone (the "
    "search by meaning was unavailable or found nothing), so an English name may find what other words did not"
)


class ExercisesSearchResult(ToolOutput):
    exercises: list[ExerciseItem]
    total: int = Field(
        description="Number of matches, which may exceed the exercises returned (matched by name and meaning: "
        f"counted among the {EXERCISE_POOL} best, {FILTERED_POOL} with a filter)."
    )
    matched_by: MatchedBy | Literal["listing"] = Field(description=MATCHED_BY + "; listing: '*'.")


# The modality ($3) and equipment ($4) filters of exercises_search, on the exercise `e`.
_EXERCISE_FILTERS = """($3::text IS NULL OR e.modality::text = $3)
   AND ($4::text IS NULL OR EXISTS (SELECT 1 FROM unnest(e.equipment) AS x WHERE lower(x) = lower($4)))"""

_EXERCISE_COLUMNS = """e.id, e.name, e.aliases, e.modality::text AS modality, e.equipment,
       CASE WHEN e.organization_id IS NULL THEN 'global' ELSE 'studio' END AS scope"""

# By name: ranked by _EXERCISE_SCORE ($5: list them all, each scoring 1).
_EXERCISES_BY_NAME = f"""
SELECT {_EXERCISE_COLUMNS},
       CASE WHEN $5 THEN 1 ELSE round({_EXERCISE_SCORE}::numeric, 2) END AS score,
       count(*) OVER () AS total
  FROM exercises e
 WHERE {_VISIBLE_EXERCISE} AND NOT {_SHADOWED_GLOBAL} AND ($5 OR {_EXERCISE_MATCH}) AND {_EXERCISE_FILTERS}
 ORDER BY score DESC, e.organization_id IS NULL, e.name, e.id
 LIMIT $6"""

# The hybrid hits $2 (exercise ids, best first) the studio $1 sees, each as the exercise it stands for there,
# filtered; `rank` is the hit's position in $2.
_EXERCISE_HITS = f"""
SELECT h.rank, {_EXERCISE_COLUMNS}
  FROM unnest($2::uuid[]) WITH ORDINALITY AS h(id, rank)
  JOIN exercises g ON g.id = h.id
 CROSS JOIN LATERAL {_STANDS_FOR} AS s
  JOIN exercises e ON e.id = s.id
 WHERE (g.organization_id IS NULL OR g.organization_id = $1) AND g.deleted_at IS NULL AND {_EXERCISE_FILTERS}
 ORDER BY h.rank"""


@router.read(
    "exercises_search",
    "Search the exercise library (the global library and the studio's own exercises) in English, Hebrew or "
    "Russian, by meaning as well as by name or alias ('a squat variation', 'приседания' and 'סקוואט' find the "
    "squats), tolerant of typos and word order, best match first (the studio's own before global ones of the same "
    "score; a studio exercise hides the global one of the same name); optionally only one modality or equipment. "
    "Returns exercise ids. To turn a workout's movement names into ids use read__exercises_resolve_batch instead.",
)
async def exercises_search(ctx: ToolContext, args: ExercisesSearchInput) -> ExercisesSearchResult:
    listing = args.query == "*"
    found = [] if listing else await _exercises_by_meaning(ctx, args)
    if found:
        return ExercisesSearchResult(exercises=found[: args.limit], total=len(found), matched_by="name_and_meaning")
    rows = await ctx.conn.fetch(
        _EXERCISES_BY_NAME, ctx.organization_id, args.query, args.modality, args.equipment, listing, args.limit
    )
    return ExercisesSearchResult(
        exercises=[ExerciseItem.from_row(r, score=float(r["score"])) for r in rows],
        total=rows[0]["total"] if rows else 0,
        matched_by="listing" if listing else "name_only",
    )


async def _exercises_by_meaning(ctx: ToolContext, args: ExercisesSearchInput) -> list[ExerciseItem]:
    """Rag's hybrid hits as the studio sees them, best first: each exercise once (a shadowed global hit is the
    studio's own entry, at the better of their places), filtered; equal scores put the studio's own first."""
    filtered = args.modality is not None or args.equipment is not None
    hits = await _hybrid_search(ctx, args.query, ["exercise"], FILTERED_POOL if filtered else EXERCISE_POOL)
    if not hits:
        return []
    ids, scores = _hit_ids(hits, "exercise")
    rows = await ctx.conn.fetch(_EXERCISE_HITS, ctx.organization_id, ids, args.modality, args.equipment)
    seen: set[uuid.UUID] = set()
    items = []
    for row in rows:
        if row["id"] not in seen:
            seen.add(row["id"])
            items.append(ExerciseItem.from_row(row, score=scores[row["rank"] - 1]))
    # Stable: otherwise rag's order.
    items.sort(key=lambda e: (-e.score, e.scope == "global"))
    return items


# exercises_resolve_batch ---------------------------------------------------------------------------

# A quantity anywhere in a movement as a coach writes it: "200m", "30", "3x10", "21-15-9", "2k", "15 cal", "1:00",
# "43kg", "(20/14 lb)", "x5". Not a digit inside a word: "C2B", "T2B" and "C2 Row" are names.
_QUANTITY = re.compile(
    r"(?<![a-z\d])[\d.,:/x×*-]*\d[\d.,:/x×*-]*\s*"
    r"(?:m|km|k|mi|cm|in|ft|cal|cals|kg|kgs|lb|lbs|pood|reps?|sec|secs|s|min|mins|x|×|%)?(?![a-z])"
)
_SINGULAR_KEEP = ("ss", "us", "is")

# Trigram similarity a candidate needs to be offered at all, and the lead a fuzzy best match needs
# over the runner-up to be taken without asking. Without that lead, the one close candidate with as many
# words as the input is taken over longer (or shorter) names: "thrustr" is Thruster, not Dumbbell Thruster.
_MIN_SCORE = 0.3
_CLEAR_LEAD = 0.2


def normalise_movement(text: str) -> str:
    """The comparable form of a movement name: lower case, no quantities (wherever they are), hyphens as spaces,
    no other punctuation, each word singular ("200m Double-Unders" → "double under", "30 wall balls (20/14 lb)"
    → "wall ball")."""
    text = _QUANTITY.sub(" ", text.lower().strip())
    text = re.sub(r"[-_/]+", " ", text)
    words = re.sub(r"[^\w\s]", "", text).split()
    return " ".join(_singular(w) for w in words)


def _singular(word: str) -> str:
    if len(word) <= 2 or not word.endswith("s") or word.endswith(_SINGULAR_KEEP):
        return word
    if word.endswith(("sses", "ches", "shes", "xes")):
        return word[:-2]
    return word[:-1]


class ExercisesResolveBatchInput(ToolInput):
    names: list[Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100)]] = Field(
        min_length=1,
        max_length=50,
        description="Movement names as written, quantities included, e.g. ['200m run', 'double unders', 'KB swing'].",
    )


class ExerciseRef(ToolOutput):
    id: uuid.UUID
    name: str


class ExerciseCandidate(ExerciseRef):
    score: float = Field(description="Match quality, 0 to 1.")


class Resolution(ToolOutput):
    input: str = Field(description="The name as given.")
    status: Literal["resolved", "ambiguous", "unknown"]
    match: Literal["exact", "fuzzy"] | None = Field(
        description="exact: the name or an alias equals it once normalised, or an alias stands for some of its "
        "words and the rest are words of the name ('C2B pull-ups'); fuzzy: the clearly best similar name, or the "
        "only close one with as many words as the input."
    )
    exercise: ExerciseRef | None = Field(description="The exercise, when resolved.")
    candidates: list[ExerciseCandidate] = Field(description="2 to 5 options, best first, when ambiguous.")


class ExercisesResolveBatchResult(ToolOutput):
    results: list[Resolution] = Field(description="One per input name, in the same order.")
    resolved: int
    ambiguous: int
    unknown: int


# Up to 10 candidates per distinct normalised name, in one round trip: similar names first, but first of all
# those with an alias among the name's words (an abbreviation: "c2b pull up"), which Python then checks.
# `matched` is the name or alias the score comes from.
_CANDIDATES = f"""
SELECT k.key, c.id, c.name, c.aliases, c.own, c.score, c.matched
  FROM unnest($2::text[]) AS k(key)
 CROSS JOIN LATERAL (
       SELECT e.id, e.name, e.aliases, e.organization_id IS NOT NULL AS own, best.score, best.matched,
              EXISTS (SELECT 1 FROM unnest(e.aliases) AS a WHERE strict_word_similarity(a, k.key) = 1) AS alias_word
         FROM exercises e
        CROSS JOIN LATERAL (
              SELECT t AS matched, similarity(k.key, t) AS score
                FROM unnest(array_prepend(e.name::text, e.aliases)) AS t
               ORDER BY score DESC, t LIMIT 1) AS best
        WHERE {_VISIBLE_EXERCISE}
          AND (e.name % k.key OR k.key % ANY (e.aliases)
               OR EXISTS (SELECT 1 FROM unnest(e.aliases) AS a WHERE a <<% k.key))
        ORDER BY alias_word DESC, best.score DESC, e.name, e.id
        LIMIT 10) AS c
"""


@router.read(
    "exercises_resolve_batch",
    "Resolve up to 50 movement names, as written in a workout ('200m run', '30 double unders', 'KB swing'), to "
    "exercise ids in one call. Quantities (wherever they are), case, plurals and hyphens are ignored; an alias "
    "may stand for part of the name ('C2B pull-ups'). Of similar names without a clear best, the one with as many "
    "words as the input wins ('thrustr' is Thruster, not Dumbbell Thruster). Each name comes back resolved "
    "(with the exercise), ambiguous (2-5 candidates: ask the user with read__ask_user_to_pick) or unknown.",
)
async def exercises_resolve_batch(ctx: ToolContext, args: ExercisesResolveBatchInput) -> ExercisesResolveBatchResult:
    keys = {name: normalise_movement(name) for name in args.names}
    rows = await ctx.conn.fetch(_CANDIDATES, ctx.organization_id, sorted({k for k in keys.values() if k}))
    by_key: dict[str, list[asyncpg.Record]] = {}
    for row in rows:
        by_key.setdefault(row["key"], []).append(row)
    results = [_resolve(name, by_key.get(keys[name], []), keys[name]) for name in args.names]
    counts = {status: sum(r.status == status for r in results) for status in ("resolved", "ambiguous", "unknown")}
    return ExercisesResolveBatchResult(results=results, **counts)


def _resolve(name: str, candidates: list[asyncpg.Record], key: str) -> Resolution:
    # A studio's own exercise shadows a global one of the same name, and wins an exact tie.
    own = {normalise_movement(c["name"]) for c in candidates if c["own"]}
    candidates = [c for c in candidates if c["own"] or normalise_movement(c["name"]) not in own]
    # An alias standing for part of the name counts only when nothing equals the name outright.
    exact = [c for c in candidates if _equals(key, c)] or [c for c in candidates if _abbreviates(key, c)]
    exact = [c for c in exact if c["own"]] or exact
    if len(exact) == 1:
        return _resolved(name, exact[0], "exact")
    options = exact or sorted((c for c in candidates if c["score"] >= _MIN_SCORE), key=lambda c: -c["score"])
    if not options:
        return Resolution(input=name, status="unknown", match=None, exercise=None, candidates=[])
    best = None if exact else _fuzzy_best(key, options)
    if best is not None:
        return _resolved(name, best, "fuzzy")
    return Resolution(
        input=name,
        status="ambiguous",
        match=None,
        exercise=None,
        candidates=[ExerciseCandidate.from_row(c, score=round(c["score"], 2)) for c in options[:5]],
    )


def _equals(key: str, candidate: asyncpg.Record) -> bool:
    return key in {normalise_movement(n) for n in (candidate["name"], *candidate["aliases"])}


def _abbreviates(key: str, candidate: asyncpg.Record) -> bool:
    """Whether an alias is some of the key's words and the others are words of the name: "c2b pull up" is
    Chest-to-bar Pull-up by its alias C2B."""
    words = key.split()
    name = set(normalise_movement(candidate["name"]).split())
    for alias in {normalise_movement(a) for a in candidate["aliases"]}:
        part = alias.split()
        for start in range(len(words) - len(part) + 1):
            rest = words[:start] + words[start + len(part) :]
            if part and words[start : start + len(part)] == part and rest and set(rest) <= name:
                return True
    return False


def _fuzzy_best(key: str, options: list[asyncpg.Record]) -> asyncpg.Record | None:
    """The fuzzy match to take without asking: the best by a clear lead; else, among the close ones (within the
    lead of the best), the only one whose matched name or alias has as many words as the key."""
    if len(options) == 1 or options[0]["score"] - options[1]["score"] >= _CLEAR_LEAD:
        return options[0]
    close = [c for c in options if options[0]["score"] - c["score"] < _CLEAR_LEAD]
    words = len(key.split())
    same = [c for c in close if len(normalise_movement(c["matched"]).split()) == words]
    return same[0] if len(same) == 1 else None


def _resolved(name: str, row: asyncpg.Record, match: Literal["exact", "fuzzy"]) -> Resolution:
    return Resolution(
        input=name, status="resolved", match=match, exercise=ExerciseRef.from_row(row), candidates=[]
    )


# search_anything -----------------------------------------------------------------------------------

HitKind = Literal["program", "workout", "exercise", "member"]
HIT_KINDS: tuple[HitKind, ...] = ("program", "workout", "exercise", "member")

# What tells hits of each kind apart (`detail`), by name and by meaning alike.
_PROGRAM_DETAIL = "concat_ws(', ', p.kind::text, CASE WHEN NOT p.is_active THEN 'inactive' END)"
_WORKOUT_DETAIL = "concat_ws(', ', w.scheduled_for::text, pr.name)"
_EXERCISE_DETAIL = (
    "concat_ws(', ', e.modality::text, CASE WHEN e.organization_id IS NULL THEN 'global' ELSE 'studio' END)"
)
_MEMBER_DETAIL = "concat_ws(', ', m.role::text, m.status::text, u.email)"

# By name: one statement, one ranked and bounded branch per kind; $3 is the query as an escaped ILIKE pattern,
# so that a plain substring counts even where its trigrams are too few ("wod" in "Monday WOD").
_SEARCH_ANYTHING = f"""
(SELECT 'program' AS kind, p.id, p.name AS label, {_PROGRAM_DETAIL} AS detail,
        greatest(similarity($2, p.name), word_similarity($2, p.name))::real AS score, count(*) OVER () AS total
   FROM programs p
  WHERE 'program' = ANY ($5) AND p.organization_id = $1 AND p.deleted_at IS NULL
    AND (p.name ILIKE $3 OR p.name % $2 OR $2 <% p.name)
  ORDER BY score DESC, p.name, p.id LIMIT $4)
UNION ALL
(SELECT 'workout', w.id, w.title, {_WORKOUT_DETAIL},
        greatest(similarity($2, w.title), word_similarity($2, w.title))::real AS score, count(*) OVER ()
   FROM workouts w LEFT JOIN programs pr ON pr.id = w.program_id AND pr.deleted_at IS NULL
  WHERE 'workout' = ANY ($5) AND w.organization_id = $1 AND w.deleted_at IS NULL
    AND (w.title ILIKE $3 OR w.title % $2 OR $2 <% w.title)
  ORDER BY score DESC, w.scheduled_for DESC NULLS LAST, w.id LIMIT $4)
UNION ALL
(SELECT 'exercise', e.id, e.name, {_EXERCISE_DETAIL}, {_EXERCISE_SCORE}::real AS score, count(*) OVER ()
   FROM exercises e
  WHERE 'exercise' = ANY ($5) AND {_VISIBLE_EXERCISE} AND (e.name ILIKE $3 OR {_EXERCISE_MATCH})
  ORDER BY score DESC, e.name, e.id LIMIT $4)
UNION ALL
(SELECT 'member', m.id, u.full_name, {_MEMBER_DETAIL},
        greatest(similarity($2, u.full_name), word_similarity($2, u.full_name),
                 CASE WHEN u.email ILIKE $3 THEN 0.9 ELSE 0 END)::real AS score, count(*) OVER ()
   FROM memberships m JOIN users u ON u.id = m.user_id
  WHERE 'member' = ANY ($5) AND m.organization_id = $1
    AND (u.full_name ILIKE $3 OR u.email ILIKE $3 OR $2 <% u.full_name)
  ORDER BY score DESC, u.full_name, m.id LIMIT $4)
"""

# By meaning: the live rows of the organization $1 among the hybrid hits ($2 kinds, $3 ids, best first), each
# with its position in them (`rank`); an exercise hit is the exercise it stands for in the studio.
_ANYTHING_HITS = f"""
WITH h AS (SELECT * FROM unnest($2::text[], $3::uuid[]) WITH ORDINALITY AS h(kind, id, rank))
SELECT h.rank, 'program' AS kind, p.id, p.name AS label, {_PROGRAM_DETAIL} AS detail
  FROM h JOIN programs p ON p.id = h.id
 WHERE h.kind = 'program' AND p.organization_id = $1 AND p.deleted_at IS NULL
UNION ALL
SELECT h.rank, 'workout', w.id, w.title, {_WORKOUT_DETAIL}
  FROM h JOIN workouts w ON w.id = h.id LEFT JOIN programs pr ON pr.id = w.program_id AND pr.deleted_at IS NULL
 WHERE h.kind = 'workout' AND w.organization_id = $1 AND w.deleted_at IS NULL
UNION ALL
SELECT h.rank, 'exercise', e.id, e.name, {_EXERCISE_DETAIL}
  FROM h JOIN exercises g ON g.id = h.id CROSS JOIN LATERAL {_STANDS_FOR} AS s JOIN exercises e ON e.id = s.id
 WHERE h.kind = 'exercise' AND (g.organization_id IS NULL OR g.organization_id = $1) AND g.deleted_at IS NULL
UNION ALL
SELECT h.rank, 'member', m.id, u.full_name, {_MEMBER_DETAIL}
  FROM h JOIN memberships m ON m.id = h.id JOIN users u ON u.id = m.user_id
 WHERE h.kind = 'member' AND m.organization_id = $1
 ORDER BY rank
"""

# Hits per kind search_anything asks rag for: twice what it shows, for hits of rows deleted since they were indexed.
ANYTHING_POOL = 2


class SearchAnythingInput(ToolInput):
    query: SearchText = Field(
        description="A name or title, part of one, or what it is about, in any language, e.g. 'Murph', 'Saar', "
        "'coaching', 'ריצה'."
    )
    kinds: list[HitKind] | None = Field(
        default=None, min_length=1, description="Only these kinds; all four when omitted."
    )
    limit: int = Field(default=5, ge=1, le=5, description="Maximum hits per kind.")


class Hit(ToolOutput):
    kind: HitKind
    id: uuid.UUID = Field(description="programId, workoutId, exerciseId or membershipId.")
    label: str
    detail: str = Field(description="What tells it apart: program kind, workout day and program, modality, role.")
    score: float = Field(
        description="Relevance, 0 to 1: matched by name and meaning, relative to the best hit of the search (1); "
        "matched by name only, the similarity of its name to the query."
    )


class HitTotals(ToolOutput):
    program: int = 0
    workout: int = 0
    exercise: int = 0
    member: int = 0


class SearchAnythingResult(ToolOutput):
    hits: list[Hit] = Field(description="Best hits of each kind, best first within a kind.")
    totals: HitTotals = Field(
        description="Matches per kind, which may exceed the hits returned (matched by name and meaning: counted "
        f"among the {ANYTHING_POOL} × limit best)."
    )
    matched_by: MatchedBy = Field(description=MATCHED_BY + ".")


@router.read(
    "search_anything",
    "Find anything in one call, in English, Hebrew or Russian, by meaning as well as by name: programs (name), "
    "workouts (title), exercises (name or alias) and members or staff (name or email), at most 5 of each kind, "
    "best first. Each hit has its kind and id; use read__lookup_by_id for the detail of one.",
)
async def search_anything(ctx: ToolContext, args: SearchAnythingInput) -> SearchAnythingResult:
    kinds = list(args.kinds or HIT_KINDS)
    # An email address is an identifier to look up, not words to understand.
    found = None if "@" in args.query else await _anything_by_meaning(ctx, args.query, kinds, args.limit)
    if found is not None:
        return found
    rows = await ctx.conn.fetch(
        _SEARCH_ANYTHING,
        ctx.organization_id,
        args.query,
        f"%{_escape_like(args.query)}%",
        args.limit,
        kinds,
    )
    totals = {r["kind"]: r["total"] for r in rows}
    return SearchAnythingResult(
        hits=[Hit.from_row(r, score=round(r["score"], 2)) for r in rows],
        totals=HitTotals(**totals),
        matched_by="name_only",
    )


async def _anything_by_meaning(
    ctx: ToolContext, query: str, kinds: list[HitKind], limit: int
) -> SearchAnythingResult | None:
    """Rag's hybrid hits the organization has, grouped by kind in HIT_KINDS order, best first within a kind, at
    most `limit` of each; each entity once, at its best place. None when there are none."""
    hits = await _hybrid_search(ctx, query, kinds, limit * ANYTHING_POOL)
    if not hits:
        return None
    kept = [(h, i) for h, i in _hits_with_ids(hits) if h.scope in HIT_KINDS]
    scores = _relevance([h for h, _ in kept])
    rows = await ctx.conn.fetch(_ANYTHING_HITS, ctx.organization_id, [h.scope for h, _ in kept], [i for _, i in kept])
    by_kind: dict[str, list[Hit]] = {kind: [] for kind in HIT_KINDS}
    seen: set[tuple[str, uuid.UUID]] = set()
    for row in rows:
        if (row["kind"], row["id"]) not in seen:
            seen.add((row["kind"], row["id"]))
            by_kind[row["kind"]].append(Hit.from_row(row, score=scores[row["rank"] - 1]))
    if not seen:
        return None
    return SearchAnythingResult(
        hits=[hit for kind in HIT_KINDS for hit in by_kind[kind][:limit]],
        totals=HitTotals(**{kind: len(found) for kind, found in by_kind.items()}),
        matched_by="name_and_meaning",
    )


# rag's hybrid search --------------------------------------------------------------------------------


async def _hybrid_search(ctx: ToolContext, query: str, scopes: list[Scope], limit: int) -> list[AmbientHit]:
    """Rag's hybrid hits for `query` in `scopes` (at most `limit` of each, best first within a scope), or none
    when there is no answer: no rag here, rag down, slow or refusing. The caller then searches by name."""
    if ctx.search is None:
        return []
    try:
        result = await ctx.search(
            SearchQuery(organization_id=ctx.organization_id, query=query, scopes=scopes, limit=limit)
        )
    except Exception as exc:  # noqa: BLE001 — any failure of the search by meaning leaves the search by name
        log.warning("hybrid search unavailable, searching %s by name (trace %s): %r", scopes, ctx.trace_id, exc)
        return []
    return [h for h in result.hits if h.scope in scopes]


def _hits_with_ids(hits: Sequence[AmbientHit]) -> list[tuple[AmbientHit, uuid.UUID]]:
    """Each hit with its id as a UUID; a hit whose id is none (rag's mistake) is left out."""
    kept = []
    for hit in hits:
        try:
            kept.append((hit, uuid.UUID(hit.id)))
        except ValueError:
            log.warning("hybrid search hit with a malformed %s id %r left out", hit.scope, hit.id)
    return kept


def _relevance(hits: Sequence[AmbientHit]) -> list[float]:
    """Each hit's fused score relative to the best one's, in [0, 1] (rag's reciprocal-rank fusion scores have no
    scale of their own)."""
    best = max((h.score for h in hits), default=0.0)
    if best <= 0:
        return [0.0 for _ in hits]
    return [round(max(h.score / best, 0.0), 2) for h in hits]


def _hit_ids(hits: Sequence[AmbientHit], scope: Scope) -> tuple[list[uuid.UUID], list[float]]:
    """The ids of the hits of `scope`, best first, and their relevance."""
    kept = [(h, i) for h, i in _hits_with_ids(hits) if h.scope == scope]
    return [i for _, i in kept], _relevance([h for h, _ in kept])


# lookup_by_id --------------------------------------------------------------------------------------

LookupType = Literal["program", "workout", "exercise", "member", "class_session", "assignment"]


class LookupByIdInput(ToolInput):
    type: LookupType = Field(description="What the id is of (the kind of a read__search_anything hit).")
    id: uuid.UUID = Field(description="Its id; for a member, the membershipId.")


class ProgramLookup(ToolOutput):
    type: Literal["program"] = "program"
    id: uuid.UUID
    name: str
    kind: str
    description: str | None
    is_active: bool
    workouts: int = Field(description="Number of workouts in the program.")
    last_workout_on: date | None = Field(description="Latest day a workout is scheduled for.")
    enrolled_members: int
    class_types: list[str]


class WorkoutLookup(ToolOutput):
    type: Literal["workout"] = "workout"
    id: uuid.UUID
    title: str
    kind: str
    description: str | None
    scheduled_for: date | None
    program_id: uuid.UUID | None
    program_name: str | None
    sections: list[str] = Field(description="Each section as 'name (format): movements'.")
    comments: int


class ExerciseLookup(ToolOutput):
    type: Literal["exercise"] = "exercise"
    id: uuid.UUID
    name: str
    aliases: list[str]
    modality: str
    equipment: list[str]
    muscles: list[str]
    description: str | None
    scope: Literal["global", "studio"]


class AssignmentRef(ToolOutput):
    id: uuid.UUID
    title: str
    scheduled_for: date


class MemberLookup(MemberDetail):
    type: Literal["member"] = "member"
    programs: list[str] = Field(description="Programs the member is enrolled in.")
    recent_assignments: list[AssignmentRef] = Field(description="The 5 latest personal assignments.")


class ClassSessionLookup(ToolOutput):
    type: Literal["class_session"] = "class_session"
    id: uuid.UUID
    class_type: str
    program_name: str | None
    coach_membership_id: uuid.UUID | None
    coach_name: str | None
    starts_at: str = Field(description="ISO 8601 in the studio's timezone.")
    ends_at: str
    capacity: int
    published: bool
    cancelled_at: str | None
    cancel_reason: str | None
    notes: str | None
    booked: int
    waitlisted: int
    checked_in: int


class AssignmentLookup(ToolOutput):
    type: Literal["assignment"] = "assignment"
    id: uuid.UUID
    title: str
    scheduled_for: date
    membership_id: uuid.UUID
    member_name: str
    coach_membership_id: uuid.UUID | None
    coach_name: str | None
    program_id: uuid.UUID | None
    program_name: str | None
    workout_id: uuid.UUID | None
    workout_title: str | None
    notes: str | None
    published: bool
    comments: int
    unread_comments: int = Field(description="Comments the caller has not read.")


_LOOKUP_HINTS: dict[str, str] = {
    "program": "Use read__programs_list or read__search_anything to find the programId.",
    "workout": "Use read__search_anything to find the workoutId.",
    "exercise": "Use read__exercises_search to find the exerciseId.",
    "member": MEMBERS_HINT,
    "class_session": "Use class_sessions__list_for_date to find the session id.",
    "assignment": "Use read__lookup_by_id on the member (recentAssignments) to find the assignment id.",
}

_PROGRAM = """
SELECT p.id, p.name, p.kind::text AS kind, p.description, p.is_active,
       (SELECT count(*) FROM workouts w WHERE w.program_id = p.id AND w.deleted_at IS NULL) AS workouts,
       (SELECT max(w.scheduled_for) FROM workouts w WHERE w.program_id = p.id AND w.deleted_at IS NULL)
           AS last_workout_on,
       (SELECT count(*) FROM program_enrollments pe WHERE pe.program_id = p.id) AS enrolled_members,
       ARRAY(SELECT ct.name FROM class_types ct WHERE ct.program_id = p.id AND ct.deleted_at IS NULL
              ORDER BY ct.name) AS class_types
  FROM programs p
 WHERE p.id = $1 AND p.organization_id = $2 AND p.deleted_at IS NULL
"""

_WORKOUT = """
SELECT w.id, w.title, w.kind::text AS kind, w.description, w.scheduled_for, w.program_id, p.name AS program_name,
       ARRAY(SELECT s.name || coalesce(' (' || s.format || ')', '') || coalesce(': ' || (
                    SELECT string_agg(m.name, ', ' ORDER BY m.position) FROM workout_movements m
                     WHERE m.section_id = s.id), '')
               FROM workout_sections s WHERE s.workout_id = w.id ORDER BY s.position) AS sections,
       (SELECT count(*) FROM workout_comments c WHERE c.workout_id = w.id AND c.deleted_at IS NULL) AS comments
  FROM workouts w LEFT JOIN programs p ON p.id = w.program_id AND p.deleted_at IS NULL
 WHERE w.id = $1 AND w.organization_id = $2 AND w.deleted_at IS NULL
"""

_EXERCISE = f"""
SELECT e.id, e.name, e.aliases, e.modality::text AS modality, e.equipment, e.muscles, e.description,
       CASE WHEN e.organization_id IS NULL THEN 'global' ELSE 'studio' END AS scope
  FROM exercises e
 WHERE e.id = $2 AND {_VISIBLE_EXERCISE}
"""

_MEMBER_EXTRAS = """
SELECT ARRAY(SELECT p.name FROM program_enrollments pe JOIN programs p ON p.id = pe.program_id
              WHERE pe.membership_id = $1 AND p.deleted_at IS NULL ORDER BY p.name) AS programs,
       ARRAY(SELECT jsonb_build_object('id', a.id, 'title', a.title, 'scheduled_for', a.scheduled_for)
               FROM assignments a WHERE a.membership_id = $1 AND a.deleted_at IS NULL
              ORDER BY a.scheduled_for DESC, a.id LIMIT 5) AS recent_assignments
"""

_CLASS_SESSION = """
SELECT s.id, ct.name AS class_type, p.name AS program_name, s.coach_membership_id, u.full_name AS coach_name,
       s.starts_at, s.ends_at, s.capacity, s.published, s.cancelled_at, s.cancel_reason, s.notes,
       count(b.id) FILTER (WHERE b.status = 'booked') AS booked,
       count(b.id) FILTER (WHERE b.status = 'waitlisted') AS waitlisted,
       count(b.id) FILTER (WHERE b.checked_in_at IS NOT NULL) AS checked_in
  FROM class_sessions s
  JOIN class_types ct ON ct.id = s.class_type_id
  LEFT JOIN programs p ON p.id = ct.program_id AND p.deleted_at IS NULL
  LEFT JOIN memberships cm ON cm.id = s.coach_membership_id
  LEFT JOIN users u ON u.id = cm.user_id
  LEFT JOIN bookings b ON b.session_id = s.id
 WHERE s.id = $1 AND s.organization_id = $2 AND s.deleted_at IS NULL
 GROUP BY s.id, ct.name, p.name, u.full_name
"""

# A comment is read by the caller when a read row says so, or when the caller wrote it.
_ASSIGNMENT = """
SELECT a.id, a.title, a.scheduled_for, a.membership_id, mu.full_name AS member_name,
       a.coach_membership_id, cu.full_name AS coach_name, a.program_id, p.name AS program_name,
       a.workout_id, w.title AS workout_title, a.notes, a.published,
       (SELECT count(*) FROM workout_comments c WHERE c.assignment_id = a.id AND c.deleted_at IS NULL) AS comments,
       (SELECT count(*) FROM workout_comments c
         WHERE c.assignment_id = a.id AND c.deleted_at IS NULL AND c.author_membership_id <> $3
           AND NOT EXISTS (SELECT 1 FROM workout_comment_reads r
                            WHERE r.comment_id = c.id AND r.coach_membership_id = $3)) AS unread_comments
  FROM assignments a
  JOIN memberships mm ON mm.id = a.membership_id JOIN users mu ON mu.id = mm.user_id
  LEFT JOIN memberships cm ON cm.id = a.coach_membership_id LEFT JOIN users cu ON cu.id = cm.user_id
  LEFT JOIN programs p ON p.id = a.program_id AND p.deleted_at IS NULL
  LEFT JOIN workouts w ON w.id = a.workout_id AND w.deleted_at IS NULL
 WHERE a.id = $1 AND a.organization_id = $2 AND a.deleted_at IS NULL
"""

Lookup = (
    ProgramLookup | WorkoutLookup | ExerciseLookup | MemberLookup | ClassSessionLookup | AssignmentLookup
)


@router.read(
    "lookup_by_id",
    "Detail of one entity by type and id, e.g. after read__search_anything: a program (workouts, enrolled "
    "members, class types), workout (sections and movements, comment count), exercise, member (as "
    "read__members_get, plus programs and latest personal assignments), class_session (coach, times, bookings) "
    "or assignment (member, coach, workout, comment and unread counts).",
)
async def lookup_by_id(ctx: ToolContext, args: LookupByIdInput) -> Lookup:
    if args.type == "member":
        return await _lookup_member(ctx, args.id)
    query, params = {
        "program": (_PROGRAM, (args.id, ctx.organization_id)),
        "workout": (_WORKOUT, (args.id, ctx.organization_id)),
        "exercise": (_EXERCISE, (ctx.organization_id, args.id)),
        "class_session": (_CLASS_SESSION, (args.id, ctx.organization_id)),
        "assignment": (_ASSIGNMENT, (args.id, ctx.organization_id, ctx.actor.membership_id)),
    }[args.type]
    row = await ctx.conn.fetchrow(query, *params)
    if row is None:
        raise not_found(args.type.replace("_", " "), args.id, _LOOKUP_HINTS[args.type])
    if args.type == "class_session":
        tz = (await ctx.org()).tz
        return ClassSessionLookup.from_row(
            row,
            starts_at=_local(row["starts_at"], tz),
            ends_at=_local(row["ends_at"], tz),
            cancelled_at=_local(row["cancelled_at"], tz),
        )
    model: type[ToolOutput] = {
        "program": ProgramLookup,
        "workout": WorkoutLookup,
        "exercise": ExerciseLookup,
        "assignment": AssignmentLookup,
    }[args.type]
    return model.from_row(row)


async def _lookup_member(ctx: ToolContext, membership_id: uuid.UUID) -> MemberLookup:
    detail = await members_get(ctx, MembersGetInput(membership_id=membership_id))
    extras = await ctx.conn.fetchrow(_MEMBER_EXTRAS, membership_id)
    return MemberLookup(
        **detail.model_dump(),
        programs=extras["programs"],
        recent_assignments=[AssignmentRef.model_validate(a) for a in extras["recent_assignments"]],
    )


def _local(moment: datetime | None, tz: tzinfo) -> str | None:
    """A stored UTC time as the studio reads it."""
    return None if moment is None else moment.astimezone(tz).isoformat(timespec="seconds")


# workout comments ----------------------------------------------------------------------------------

# Whether the caller ($3) has read comment c: a read row for the caller's membership, or the caller wrote it
# (a coach's own reply is never "new" to them).
_READ_BY_CALLER = """(c.author_membership_id = $3 OR EXISTS (
    SELECT 1 FROM workout_comment_reads r WHERE r.comment_id = c.id AND r.coach_membership_id = $3))"""

# Comments on the program's workouts and on its personal assignments (a coaching program's comments are on
# assignments), newest first; a comment whose workout or assignment was deleted is gone with it.
_PROGRAM_COMMENTS = f"""
SELECT c.id, c.body, c.created_at, c.author_membership_id, u.full_name AS author_name, am.role::text AS author_role,
       c.workout_id, c.assignment_id,
       CASE WHEN c.assignment_id IS NULL THEN 'workout' ELSE 'assignment' END AS on_,
       coalesce(a.title, w.title) AS title, coalesce(a.scheduled_for, w.scheduled_for) AS day,
       {_READ_BY_CALLER} AS read,
       count(*) OVER () AS total,
       count(*) FILTER (WHERE NOT {_READ_BY_CALLER}) OVER () AS unread
  FROM workout_comments c
  JOIN memberships am ON am.id = c.author_membership_id
  JOIN users u ON u.id = am.user_id
  LEFT JOIN workouts w ON w.id = c.workout_id AND w.deleted_at IS NULL
  LEFT JOIN assignments a ON a.id = c.assignment_id AND a.deleted_at IS NULL
 WHERE c.organization_id = $1 AND c.deleted_at IS NULL
   AND CASE WHEN c.assignment_id IS NULL THEN w.program_id = $2
            ELSE a.id IS NOT NULL AND (a.program_id = $2 OR w.program_id = $2) END
   AND ($4::timestamptz IS NULL OR c.created_at >= $4)
   AND NOT ($5 AND {_READ_BY_CALLER})
 ORDER BY c.created_at DESC, c.id
 LIMIT $6
"""


class CommentsInProgramInput(ToolInput):
    program_id: uuid.UUID = Field(description="programId from read__programs_list.")
    unread_only: bool = Field(default=False, description="Only comments the caller has not read yet.")
    since: date | None = Field(default=None, description="Only comments from this day on (studio time), YYYY-MM-DD.")
    limit: int = Field(default=20, ge=1, le=50, description="Maximum number of comments returned.")


class ThreadComment(ToolOutput):
    id: uuid.UUID
    author_membership_id: uuid.UUID
    author_name: str
    author_role: str
    body: str
    created_at: str = Field(description="ISO 8601 in the studio's timezone.")
    read: bool = Field(description="Whether the caller has read it (their own comments count as read).")


class ProgramComment(ThreadComment):
    on: Literal["workout", "assignment"] = Field(description="A program workout or a personal assignment.")
    workout_id: uuid.UUID | None
    assignment_id: uuid.UUID | None = Field(description="For read__workout_comments_for_assignment.")
    title: str | None = Field(description="Title of the workout or assignment.")
    day: date | None = Field(description="Day the workout or assignment is scheduled for.")


class CommentsInProgram(ToolOutput):
    program_id: uuid.UUID
    program_name: str
    comments: list[ProgramComment]
    total: int = Field(description="Comments matching, which may exceed those returned.")
    unread: int = Field(description="How many of the matching comments the caller has not read.")


@router.read(
    "workout_comments_in_program",
    "Recent comments members and coaches left on one program's workouts and personal assignments, newest "
    "first, with the workout or assignment (title, day), author, text and whether the caller has read it. "
    "unreadOnly lists only those the caller has not read; since limits to comments from that day on.",
)
async def workout_comments_in_program(ctx: ToolContext, args: CommentsInProgramInput) -> CommentsInProgram:
    program = await require_program(ctx, args.program_id)
    tz = (await ctx.org()).tz
    since = datetime.combine(args.since, time.min, tzinfo=tz) if args.since else None
    rows = await ctx.conn.fetch(
        _PROGRAM_COMMENTS,
        ctx.organization_id,
        args.program_id,
        ctx.actor.membership_id,
        since,
        args.unread_only,
        args.limit,
    )
    return CommentsInProgram(
        program_id=program["id"],
        program_name=program["name"],
        comments=[ProgramComment.from_row(r, on=r["on_"], created_at=_local(r["created_at"], tz)) for r in rows],
        total=rows[0]["total"] if rows else 0,
        unread=rows[0]["unread"] if rows else 0,
    )


THREAD_LIMIT = 200

_THREAD = f"""
SELECT c.id, c.author_membership_id, u.full_name AS author_name, am.role::text AS author_role, c.body, c.created_at,
       {_READ_BY_CALLER} AS read, count(*) OVER () AS total
  FROM workout_comments c
  JOIN memberships am ON am.id = c.author_membership_id
  JOIN users u ON u.id = am.user_id
 WHERE c.assignment_id = $2 AND c.organization_id = $1 AND c.deleted_at IS NULL
 ORDER BY c.created_at, c.id
 LIMIT {THREAD_LIMIT}
"""


class CommentsForAssignmentInput(ToolInput):
    assignment_id: uuid.UUID = Field(
        description="Id of the personal assignment (read__workout_comments_in_program or the member's "
        "recentAssignments in read__lookup_by_id)."
    )


class AssignmentThread(ToolOutput):
    assignment: AssignmentLookup
    comments: list[ThreadComment] = Field(description=f"Oldest first, at most {THREAD_LIMIT}.")
    total: int


@router.read(
    "workout_comments_for_assignment",
    "The whole comment thread of one personal assignment, oldest first: the assignment (member, coach, title, "
    "day, workout) and each comment with its author, text, time and whether the caller has read it.",
)
async def workout_comments_for_assignment(ctx: ToolContext, args: CommentsForAssignmentInput) -> AssignmentThread:
    assignment = await lookup_by_id(ctx, LookupByIdInput(type="assignment", id=args.assignment_id))
    tz = (await ctx.org()).tz
    rows = await ctx.conn.fetch(_THREAD, ctx.organization_id, args.assignment_id, ctx.actor.membership_id)
    return AssignmentThread(
        assignment=assignment,
        comments=[ThreadComment.from_row(r, created_at=_local(r["created_at"], tz)) for r in rows],
        total=rows[0]["total"] if rows else 0,
    )
