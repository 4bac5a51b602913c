"""One writer per table (STYLE.md §12), as data: the one owner that may INSERT, UPDATE or DELETE
each table. Any service may read any table; a service that needs another's table changed asks its
owner over a subject. `tests/test_architecture.py` holds the code to this map, and every table a
migration creates must appear here, so a new table cannot land without an owner."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal, get_args

# The five services are named as their package directories under services/. "cli" is the
# `spotter` command (migrations, demo seed, onboarding): it writes, but is not a running service.
Owner = Literal["gateway", "orchestrator", "tool-runner", "billing", "rag", "cli"]
OWNERS: Final[tuple[Owner, ...]] = get_args(Owner)


@dataclass(frozen=True)
class Table:
    name: str
    owner: Owner
    what: str


TABLES: Final[tuple[Table, ...]] = (
    # The agent loop: the conversation, its history and its append-only event log.
    Table("ai_conversations", "orchestrator", "A conversation; its last_event_seq numbers the event log, "
          "its last_message_position the messages (both bumped under the row lock)."),
    Table("ai_messages", "orchestrator", "The model-facing history, replayed into each prompt."),
    Table("ai_turns", "orchestrator", "One user message or resume command and how it ended."),
    Table("ai_conversation_events", "orchestrator", "The SSE event log the gateway replays and streams."),
    # Seed 004's execution record: a session of agent or human work and its append-only events.
    Table("sessions", "orchestrator", "A session: its type, its status on the status machine, who and what."),
    Table("session_events", "orchestrator", "A session's append-only event log, numbered per session."),
    # Tool calls and the studio data they change.
    Table("ai_tool_executions", "tool-runner", "One tool call: claimed once, held for approval (and which pack rule asked for it), result kept."),
    Table("audit_logs", "tool-runner", "Who changed what, written with each write tool's change."),
    Table("programs", "tool-runner", "Studio programs, changed by the programs tools."),
    Table("workouts", "tool-runner", "Studio workouts, changed by the workouts tools."),
    Table("workout_sections", "tool-runner", "A workout's sections, replaced wholesale with it."),
    Table("workout_movements", "tool-runner", "A section's movements, replaced wholesale with it."),
    Table("program_enrollments", "tool-runner", "Members enrolled in programs."),
    Table("tasks", "tool-runner", "The studio's to-do list."),
    Table("assignments", "tool-runner", "Personal (1-on-1) workouts for one member on a day, published or not."),
    Table("workout_comment_reads", "tool-runner", "Which coach has read which comment."),
    Table("class_sessions", "tool-runner", "The timetable: one class at a time, with capacity and coach."),
    Table("bookings", "tool-runner", "Who booked which class and whether they came; cancelled with their class."),
    Table("program_templates", "tool-runner", "Reusable programs: a name and a kind."),
    Table("program_template_workouts", "tool-runner", "A template's workouts, by day from its start."),
    # The member coach (seed 003): a member's own data, written by the coach's tools.
    Table("member_profiles", "tool-runner", "A member's body stats and experience, one row per membership."),
    Table("member_settings", "tool-runner", "A member's units (kg or lb, km or mi)."),
    Table("member_locations", "tool-runner", "Where a member trains and the equipment there; one is current."),
    Table("member_goals", "tool-runner", "A member's training goals and muscles to focus on, by priority."),
    Table("member_preferences", "tool-runner", "What a member asked the coach to keep in mind."),
    Table("member_workout_logs", "tool-runner", "Workouts a member did, as the coach logged them (once per call)."),
    # Money.
    Table("ai_usage_daily", "billing", "Tokens and cost per org, user and day; the spend cap reads it."),
    Table("ai_conversation_usage", "billing", "Lifetime tokens and cost per conversation."),
    # Retrieval.
    Table("ai_cache", "rag", "Cached model answers keyed by model and input hash (embeddings)."),
    Table("rag_documents", "rag", "The hybrid search index: one document per program, workout, exercise, member."),
    # Set up by the `spotter` command; the services only read them.
    Table("schema_migrations", "cli", "Applied migrations and their checksums."),
    Table("organizations", "cli", "Studios (tenants)."),
    Table("users", "cli", "People, across studios."),
    Table("memberships", "cli", "A user's role and plan in one studio."),
    # The studio's own records the agent reads but never changes (the studio app writes them; the
    # demo seed stands in for it here).
    Table("exercises", "cli", "The exercise library: global entries and each studio's own."),
    Table("workout_comments", "cli", "What members say on a workout or an assignment."),
    Table("class_types", "cli", "Kinds of class (Open Gym, WOD, …) with default capacity and length."),
    Table("plans", "cli", "What the studio sells: price, interval, sessions per week."),
    Table("member_plans", "cli", "Which plan a member was on, when."),
    Table("payments", "cli", "What members paid or owe."),
    Table("forms", "cli", "Forms members fill (waiver, PAR-Q, …) by type key."),
    # Seed 002's tool packs, registered and enabled by `spotter packs`; the tool-runner reads them.
    Table("tool_packs", "cli", "An external system's OpenAPI document, base URL, encrypted headers and rules."),
    Table("tool_pack_organizations", "cli", "Which organizations enabled which pack, with their own rules."),
    Table("form_assignments", "cli", "A form sent to a member, pending or completed."),
)

OWNER_BY_TABLE: Final[Mapping[str, Owner]] = MappingProxyType({t.name: t.owner for t in TABLES})

# Every owner is a key, so "owns nothing" (the gateway only reads) is stated, not implied.
TABLES_BY_OWNER: Final[Mapping[Owner, tuple[str, ...]]] = MappingProxyType(
    {owner: tuple(t.name for t in TABLES if t.owner == owner) for owner in OWNERS}
)


def owner_of(table: str) -> Owner:
    """The one writer of `table`; KeyError for a table nobody has been given."""
    try:
        return OWNER_BY_TABLE[table]
    except KeyError:
        raise KeyError(f"table {table!r} has no owner in spotter_shared.ownership") from None
