"""What rag indexes: one document per program, workout, exercise and member, read from the tables
that own them (rag only reads those; it writes its own `rag_documents`).

Each scope is one SELECT producing the same columns (entity_id, organization_id, label, detail,
names, facts, source_updated_at). From them:

- ``body`` — what is searched, four lines: the label; other names (exercise aliases in any
  language, a member's email local part); the detail and facts (description, program, movements,
  modality, muscles…); and the consonant-skeleton keys of the label (phonetic.py) that let a
  Hebrew or Russian spelling of a name find it. Lower case, each line padded with spaces. The
  lexical search reads lines 1 and 2 as names.
- ``passage`` — what is embedded: label, names and facts, without the detail (a member's payment
  status or a workout's date changes often and says nothing about what the entity *is*; leaving it
  out lets the memo answer for a re-index after such a change, and for repeated workouts).
- ``body_hash`` — sha256 of DOC_VERSION and every source column, computed *in SQL*, so the sweep
  finds stale documents inside Postgres without building any body (users and memberships have no
  updated_at; programs, workouts and exercises do, and it is kept as source_updated_at).

Soft-deleted programs, workouts and exercises have no document; a deleted membership neither.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from spotter_shared.contracts.rag import SCOPES, Scope

from spotter_shared.phonetic import name_keys

# Bump when the body or passage composition changes: every document's hash changes with it and the
# sweep rebuilds the index in the background.
DOC_VERSION = 2

_MEMBERS = """
    SELECT m.id AS entity_id, m.organization_id, u.full_name AS label,
           concat_ws(' · ', m.role::text, m.status::text, m.plan, 'payment ' || m.payment_status::text) AS detail,
           ARRAY[split_part(u.email, '@', 1)] AS names,
           ARRAY[m.role::text] AS facts,
           NULL::timestamptz AS source_updated_at
      FROM memberships m JOIN users u ON u.id = m.user_id
"""

_PROGRAMS = """
    SELECT p.id AS entity_id, p.organization_id, p.name AS label,
           concat_ws(' · ', p.kind::text, CASE WHEN NOT p.is_active THEN 'inactive' END, left(p.description, 120)) AS detail,
           ARRAY[]::text[] AS names,
           ARRAY[p.kind::text, p.description] AS facts,
           p.updated_at AS source_updated_at
      FROM programs p
     WHERE p.deleted_at IS NULL
"""

# Movement names: distinct, alphabetical, at most 12 (a chipper lists dozens; the first dozen say
# what the workout is).
_WORKOUTS = """
    SELECT w.id AS entity_id, w.organization_id, w.title AS label,
           concat_ws(' · ', p.name, w.scheduled_for::text) AS detail,
           ARRAY[]::text[] AS names,
           ARRAY[p.name, left(w.description, 300),
                 (SELECT string_agg(mv.name, ', ' ORDER BY mv.name)
                    FROM (SELECT DISTINCT m.name FROM workout_sections s
                            JOIN workout_movements m ON m.section_id = s.id
                           WHERE s.workout_id = w.id ORDER BY m.name LIMIT 12) mv)] AS facts,
           w.updated_at AS source_updated_at
      FROM workouts w LEFT JOIN programs p ON p.id = w.program_id
     WHERE w.deleted_at IS NULL
"""

_EXERCISES = """
    SELECT e.id AS entity_id, e.organization_id, e.name AS label,
           concat_ws(' · ', e.modality::text, nullif(array_to_string(e.equipment, ', '), '')) AS detail,
           e.aliases AS names,
           ARRAY[e.modality::text, array_to_string(e.equipment, ', '), array_to_string(e.muscles, ', '),
                 left(e.description, 300)] AS facts,
           e.updated_at AS source_updated_at
      FROM exercises e
     WHERE e.deleted_at IS NULL
"""

SOURCES: dict[Scope, str] = {"member": _MEMBERS, "program": _PROGRAMS, "workout": _WORKOUTS, "exercise": _EXERCISES}
assert set(SOURCES) == set(SCOPES)

_HASH = (
    f"encode(sha256(convert_to(concat_ws(E'\\x1f', '{DOC_VERSION}', src.organization_id::text, src.label,"
    " coalesce(src.detail, ''), array_to_string(src.names, E'\\x1e'), array_to_string(src.facts, E'\\x1e')),"
    " 'UTF8')), 'hex')"
)


def source_sql(scope: Scope) -> str:
    """The scope's source rows with their body_hash, as a sub-select named ``src``."""
    return f"(SELECT src.*, {_HASH} AS body_hash FROM ({SOURCES[scope]}) src)"


@dataclass(frozen=True)
class Source:
    """One indexable entity as its owner's tables have it now."""

    scope: Scope
    entity_id: uuid.UUID
    organization_id: uuid.UUID | None
    label: str
    detail: str | None
    names: tuple[str, ...]
    facts: tuple[str, ...]
    source_updated_at: datetime | None
    body_hash: str

    @property
    def passage(self) -> str:
        """The text embedded: what the entity is."""
        return "\n".join(line for line in (self.label, _join(self.names), _join(self.facts)) if line)

    @property
    def body(self) -> str:
        """The text searched, four lines: label, names, detail and facts, skeleton keys; lower
        case (the search lower-cases its terms and uses LIKE, cheaper than ILIKE per row), each
        line padded with a space at both ends so that a short word can be matched whole."""
        parts = [p.strip() for p in (self.detail or "").split(" · ") + list(self.facts) if p and p.strip()]
        lines = (self.label, _join(self.names), " · ".join(dict.fromkeys(parts)), " ".join(name_keys(self.label)))
        return "\n".join(f" {line.lower()} " for line in lines)


def _join(parts: Sequence[str]) -> str:
    return " · ".join(p.strip() for p in parts if p and p.strip())


def _source(scope: Scope, row: asyncpg.Record) -> Source:
    return Source(
        scope=scope,
        entity_id=row["entity_id"],
        organization_id=row["organization_id"],
        label=row["label"],
        detail=row["detail"] or None,
        names=tuple(n for n in row["names"] or () if n),
        facts=tuple(f for f in row["facts"] or () if f),
        source_updated_at=row["source_updated_at"],
        body_hash=row["body_hash"],
    )


async def fetch_sources(conn: asyncpg.Connection, scope: Scope, ids: Sequence[uuid.UUID]) -> list[Source]:
    """The entities among `ids` that exist (and are not soft-deleted) now."""
    rows = await conn.fetch(f"SELECT * FROM {source_sql(scope)} s WHERE s.entity_id = ANY($1::uuid[])", list(ids))
    return [_source(scope, r) for r in rows]


def selection(column: str) -> str:
    """SQL for "in the selection" over parameters $1 (one organization, or NULL), $2 (the global
    exercise library too) and $3 (every organization, when $1 is NULL)."""
    return f"(({column} = $1::uuid) OR ($2::bool AND {column} IS NULL) OR ($1::uuid IS NULL AND $3::bool AND {column} IS NOT NULL))"
