"""Building blocks for tool-runner tests: actors, conversations (for the execution FKs), commands."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg

from spotter_shared.contracts.commands import Actor
from spotter_shared.contracts.events import ToolError
from spotter_shared.contracts.tools import ExecuteTool, ToolOutcome
from spotter_shared.studio import Person

from tests.factories import Studio


def actor_of(studio: Studio, person: Person, *, role: str | None = None, locale: str = "en") -> Actor:
    return Actor(
        user_id=person.user_id,
        organization_id=studio.org.id,
        membership_id=person.membership_id,
        role=role or person.role,
        locale=locale,
    )


@dataclass(frozen=True)
class Conversation:
    id: str
    message_id: str
    actor: Actor

    def command(
        self,
        router: str,
        action: str,
        input: dict[str, Any] | None = None,
        *,
        tool_use_id: str | None = None,
        actor: Actor | None = None,
        hold: bool = False,
    ) -> ExecuteTool:
        return ExecuteTool(
            conversation_id=self.id,
            message_id=self.message_id,
            tool_use_id=tool_use_id or f"toolu_{uuid.uuid4().hex[:24]}",
            router=router,
            action=action,
            input=input or {},
            actor=actor or self.actor,
            trace_id=uuid.uuid4().hex,
            hold=hold,
        )


async def new_conversation(pool: asyncpg.Pool, studio: Studio, person: Person | None = None) -> Conversation:
    """A conversation with one assistant message, as the orchestrator stores them before calling us."""
    person = person or studio.owner
    conversation_id, message_id = str(uuid.uuid4()), str(uuid.uuid4())
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(
            """INSERT INTO ai_conversations (id, organization_id, user_id, membership_id, model)
               VALUES ($1, $2, $3, $4, 'test-model')""",
            conversation_id,
            studio.org.id,
            person.user_id,
            person.membership_id,
        )
        await conn.execute(
            """INSERT INTO ai_messages (id, conversation_id, role, content, position)
               VALUES ($1, $2, 'assistant', $3, 1)""",
            message_id,
            conversation_id,
            [{"type": "text", "text": "calling a tool"}],
        )
    return Conversation(id=conversation_id, message_id=message_id, actor=actor_of(studio, person))


async def execution_rows(pool: asyncpg.Pool, conversation_id: str, tool_use_id: str) -> list[asyncpg.Record]:
    return await pool.fetch(
        "SELECT *, status::text AS status_text FROM ai_tool_executions WHERE conversation_id = $1 AND tool_use_id = $2",
        conversation_id,
        tool_use_id,
    )


async def audit_rows(pool: asyncpg.Pool, tool_use_id: str) -> list[asyncpg.Record]:
    return await pool.fetch("SELECT * FROM audit_logs WHERE metadata->>'toolUseId' = $1", tool_use_id)


def succeeded(outcome: ToolOutcome) -> Any:
    """The output of an outcome that must have succeeded (its error otherwise, in the assertion)."""
    assert outcome.status == "succeeded", outcome.error
    return outcome.output


def failed(outcome: ToolOutcome, code: str) -> ToolError:
    assert (outcome.status, outcome.error and outcome.error.code) == ("failed", code), outcome
    return outcome.error
