"""Seed 004's sessions on the wire: the session as clients see it, and the human activity bridge's
requests to the orchestrator (which owns the session tables). The bridge accepts only the four
`human.*` event types, each with its own metadata, so an unknown type or a malformed event is
refused at the edge (HTTP 400) and again here (typed error reply), and nothing is stored."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal, Union

from pydantic import Field, field_validator

from .base import Contract, request_endpoint
from .commands import ORCHESTRATOR_DURABLE, Actor

# What a path of the web app can name by id; the bridge records an entity view for these.
EntityType = Literal["member", "program", "workout", "class_session", "task"]
HumanEventType = Literal["human.navigate", "human.entity_view", "human.marker", "human.task_switch"]

MAX_EVENTS_PER_BATCH = 50
MAX_MARKER_CHARS = 1000


class SessionView(Contract):
    """A session as the API shows it."""

    id: str = Field(description="Session id (an operator conversation's id for its transcript).")
    session_type: Literal["agent", "response", "tool", "mixed"] = Field(description="Fixed at creation.")
    status: str = Field(description="One of the 10 statuses of seed 004's machine.")
    source: str = Field(description="Who opened it: human (the activity bridge), operator, coach, …")
    user_id: str | None = Field(default=None, description="Owner.")
    task_id: str | None = Field(default=None, description="The studio task it works on, if any.")
    title: str | None = Field(default=None, description="Display title (the task's title for a human session).")
    started_at: datetime | None = Field(default=None, description="When it started running.")
    completed_at: datetime | None = Field(default=None, description="When it ended.")
    last_sequence: int = Field(default=0, description="Sequence of its newest event.")
    created_at: datetime = Field(description="Created.")
    updated_at: datetime = Field(description="Last change (a new event counts).")


class TaskRef(Contract):
    id: str = Field(description="tasks.id")
    title: str = Field(description="Task title.")
    status: str = Field(description="open or done.")
    due_date: str | None = Field(default=None, description="Due day (ISO), if any.")


class ActiveHumanSession(Contract):
    """`{session, task}`, or `{session: null, task: null}` when the caller is not working on anything."""

    session: SessionView | None = Field(description="The caller's running human session in this organization.")
    task: TaskRef | None = Field(description="Its task.")


# The four human.* events ---------------------------------------------------------------------------

def _uuid_text(value: str) -> str:
    try:
        return str(uuid.UUID(value))
    except (ValueError, AttributeError, TypeError):
        raise ValueError("must be an id (uuid)") from None


class _HumanMeta(Contract):
    at: datetime | None = Field(default=None, description="When it happened in the browser (ISO 8601); "
                                "the server keeps it within the session's lifetime.")


class NavigateMeta(_HumanMeta):
    pathname: str = Field(min_length=1, max_length=512, pattern=r"^/", description="The app path arrived at.")


class EntityViewMeta(_HumanMeta):
    entity_type: EntityType = Field(description="What the page shows.")
    entity_id: str = Field(description="Its id.")
    pathname: str | None = Field(default=None, max_length=512, pattern=r"^/", description="The page's path.")

    _id = field_validator("entity_id")(_uuid_text)


class TaskSwitchMeta(_HumanMeta):
    task_id: str = Field(description="The studio task the person now works on.")

    _id = field_validator("task_id")(_uuid_text)


class TextPart(Contract):
    type: Literal["text"] = "text"
    text: str = Field(min_length=1, max_length=MAX_MARKER_CHARS)


class _HumanEvent(Contract):
    id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.:-]{1,64}$",
                           description="Client id of the event: a retried flush stores it once.")


class Navigate(_HumanEvent):
    type: Literal["human.navigate"] = Field(description="The person arrived on a page.")
    metadata: NavigateMeta


class EntityView(_HumanEvent):
    type: Literal["human.entity_view"] = Field(description="The person opened a studio entity's page.")
    metadata: EntityViewMeta


class Marker(_HumanEvent):
    type: Literal["human.marker"] = Field(description="The person's own note: \"I did X\".")
    content: str | list[TextPart] = Field(description="The note (text, or text parts).")
    metadata: _HumanMeta = Field(default_factory=_HumanMeta)

    @field_validator("content")
    @classmethod
    def _note(cls, value: str | list[TextPart]) -> str | list[TextPart]:
        text = value if isinstance(value, str) else "".join(p.text for p in value)
        if not text.strip():
            raise ValueError("a marker needs a note")
        if len(text) > MAX_MARKER_CHARS:
            raise ValueError(f"a marker's note is at most {MAX_MARKER_CHARS} characters")
        return value

    @property
    def text(self) -> str:
        return (self.content if isinstance(self.content, str) else "".join(p.text for p in self.content)).strip()


class TaskSwitch(_HumanEvent):
    type: Literal["human.task_switch"] = Field(description="The session now works on another task.")
    metadata: TaskSwitchMeta


HumanEvent = Annotated[Union[Navigate, EntityView, Marker, TaskSwitch], Field(discriminator="type")]


# Requests to the orchestrator ----------------------------------------------------------------------

class StartHumanSession(Contract):
    """Start working on a task: ends the caller's running human session in this organization (as
    `completed`) and opens a new one, atomically. Already working on that task: the same session."""

    actor: Actor = Field(description="Caller (staff).")
    task_id: str = Field(description="One of the organization's tasks.")
    trace_id: str = Field(description="Trace id.")

    _id = field_validator("task_id")(_uuid_text)


class StopHumanSession(Contract):
    actor: Actor = Field(description="Caller; must own the session.")
    session_id: str = Field(description="The caller's running human session.")
    trace_id: str = Field(description="Trace id.")

    _id = field_validator("session_id")(_uuid_text)


class HumanSessionChanged(Contract):
    """The session after a start or stop, with its task."""

    session: SessionView = Field(description="The session.")
    task: TaskRef | None = Field(description="Its task.")


class RecordHumanEvents(Contract):
    """Append what the person did. Only from the session's owner, only while it is running."""

    actor: Actor = Field(description="Caller; must own the session.")
    session_id: str = Field(description="The caller's running human session.")
    events: list[HumanEvent] = Field(min_length=1, max_length=MAX_EVENTS_PER_BATCH, description="In the order they happened.")
    trace_id: str = Field(description="Trace id.")

    _id = field_validator("session_id")(_uuid_text)


class RecordedHumanEvents(Contract):
    stored: int = Field(description="Events stored (repeats of a client id, and entity views already "
                        "recorded in this session, are not stored again).")
    last_sequence: int = Field(description="The session's newest sequence.")


START_HUMAN_SESSION = request_endpoint(
    "spotter.sessions.human.start", StartHumanSession, HumanSessionChanged, queue=ORCHESTRATOR_DURABLE,
    description="Start a human session on a task (ending the caller's previous one as completed, atomically).",
)
STOP_HUMAN_SESSION = request_endpoint(
    "spotter.sessions.human.stop", StopHumanSession, HumanSessionChanged, queue=ORCHESTRATOR_DURABLE,
    description="Stop the caller's running human session (completed).",
)
RECORD_HUMAN_EVENTS = request_endpoint(
    "spotter.sessions.human.record", RecordHumanEvents, RecordedHumanEvents, queue=ORCHESTRATOR_DURABLE,
    description="Append human.* events to the caller's running human session; entity views are derived "
    "from paths and kept once per entity.",
)


