"""Base types for every NATS contract: frozen camelCase models and the subject catalog."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class Contract(BaseModel):
    """A message on the bus. camelCase on the wire (as the SSE protocol is), snake_case in Python."""

    model_config = ConfigDict(
        frozen=True,
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="ignore",
    )

    def to_bytes(self) -> bytes:
        return self.model_dump_json().encode()


class ErrorReply(Contract):
    """Typed error answer to a request whose payload could not be handled."""

    code: str = Field(description="Stable error code, e.g. invalid_request or internal.")
    message: str = Field(description="Human-readable reason; never contains user text.")


class DeadLetter(Contract):
    """A durable message that could not be handled, parked with its reason."""

    subject: str = Field(description="Subject the message was published on.")
    reason: str = Field(description="Why it was rejected (validation error summary).")
    payload: str = Field(description="The original payload, decoded as UTF-8 with replacement.")
    msg_id: str | None = Field(default=None, description="Its Nats-Msg-Id header, if any.")


Pattern = Literal["request", "command", "event"]

P = TypeVar("P", bound=Contract)
R = TypeVar("R", bound=Contract)


@dataclass(frozen=True)
class Endpoint(Generic[P, R]):
    """One subject and its contract. Services never spell subjects as literals; they use these.

    Generic in its payload and reply, so asking RESERVE returns a `Reservation`
    to the type checker and at run time alike."""

    subject: str
    payload: type[P]
    pattern: Pattern
    description: str
    reply: type[R] | None = None
    queue: str | None = None
    stream: str | None = None


CATALOG: list[Endpoint] = []


def request_endpoint(subject: str, payload: type[P], reply: type[R], *, queue: str, description: str) -> Endpoint[P, R]:
    """Request/reply on core NATS, served by a queue group."""
    return _register(Endpoint(subject, payload, "request", description, reply=reply, queue=queue))


def command_endpoint(subject: str, payload: type[P], *, stream: str, queue: str, description: str) -> Endpoint[P, Contract]:
    """A durable command on a JetStream stream, consumed by one durable consumer (`queue` names it)."""
    return _register(Endpoint(subject, payload, "command", description, queue=queue, stream=stream))


def event_endpoint(subject: str, payload: type[P], *, description: str) -> Endpoint[P, Contract]:
    """A fan-out event on core NATS: every subscriber hears it."""
    return _register(Endpoint(subject, payload, "event", description))


def _register(ep: Endpoint[P, R]) -> Endpoint[P, R]:
    CATALOG.append(ep)
    return ep


ERROR_HEADER = "spotter-error"
TRACE_HEADER = "spotter-trace-id"
DEAD_LETTER_PREFIX = "spotter.dlq"


def dead_letter_subject(subject: str) -> str:
    return f"{DEAD_LETTER_PREFIX}.{subject}"
