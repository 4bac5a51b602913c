"""The gateway's edges on the bus, declared at module level so the AsyncAPI document lists them:
the turn commands it publishes, the questions it asks (admission, pin/archive, usage, a search
query's embedding, the human activity bridge, the app's own actions) and the live conversation events it consumes."""

from __future__ import annotations

from typing import Annotated, TypeVar

from faststream.nats import NatsBroker, NatsRouter
from nats.errors import NoRespondersError

from spotter_shared import bus
from spotter_shared.service import FromContext, service_broker
from spotter_shared.settings import CommonSettings
from spotter_shared.contracts.billing import USAGE
from spotter_shared.contracts.commands import (
    ADMIT, CANCEL_SUSPENDED, CONFIRM_TOOL, ORGANIZE_CONVERSATION, PICK_TOOL, SEND_MESSAGE, UNDO,
)
from spotter_shared.contracts.coach import COACH_RUN, COACH_SESSION_CREATE, SESSION_EVENTS, SessionEventOut
from spotter_shared.contracts.events import CONVERSATION_EVENTS, ConversationEvent
from spotter_shared.contracts.base import Contract
from spotter_shared.contracts.rag import EMBED
from spotter_shared.contracts.sessions import RECORD_HUMAN_EVENTS, START_HUMAN_SESSION, STOP_HUMAN_SESSION
from spotter_shared.contracts.tools import APP_ACTION
from spotter_shared.errors import ErrorCode, RemoteError, SpotterError

from .streams import LiveEvents

LIVE = "live"

router = NatsRouter()
send_message = bus.publisher(router, SEND_MESSAGE)
confirm_tool = bus.publisher(router, CONFIRM_TOOL)
pick_tool = bus.publisher(router, PICK_TOOL)
undo_tool = bus.publisher(router, UNDO)
cancel_suspended = bus.publisher(router, CANCEL_SUSPENDED)
admit = bus.requester(router, ADMIT)
organize = bus.requester(router, ORGANIZE_CONVERSATION)
usage = bus.requester(router, USAGE)
embed = bus.requester(router, EMBED)
start_human_session = bus.requester(router, START_HUMAN_SESSION)
stop_human_session = bus.requester(router, STOP_HUMAN_SESSION)
record_human_events = bus.requester(router, RECORD_HUMAN_EVENTS)
app_action = bus.requester(router, APP_ACTION)
coach_run = bus.publisher(router, COACH_RUN)
create_coach_session = bus.requester(router, COACH_SESSION_CREATE)

UNREACHABLE = "The assistant is not reachable right now; try again."

P = TypeVar("P", bound=Contract)
R = TypeVar("R", bound=Contract)


async def ask(requester: bus.Requester[P, R], payload: P, *, trace_id: str, timeout: float = 5.0) -> R:
    """A question to the service that owns the answer, as HTTP sees it: its typed refusal keeps its
    stable code; no answer in time is a 503."""
    try:
        return await requester(payload, timeout=timeout, trace_id=trace_id)
    except RemoteError as exc:
        raise exc.as_spotter() from exc
    except (TimeoutError, NoRespondersError) as exc:
        raise SpotterError(ErrorCode.INTERNAL, UNREACHABLE, status=503) from exc


# Declared for the AsyncAPI document only: at run time a conversation's live events arrive through
# LiveEvents.subscribe, a bare NATS subscription (no queue group: every replica hears every
# conversation) that does nothing at all for a conversation no stream here follows, and for one that
# is followed no more than parse the JSON. Events are ~100 ms batches, and the log in Postgres fills
# any gap, so a lost or unreadable one is harmless.
documented = NatsRouter()


@bus.subscriber(documented, CONVERSATION_EVENTS)
async def on_conversation_event(event: ConversationEvent, live: Annotated[LiveEvents, FromContext(LIVE)]) -> None:
    live.deliver(event)


@bus.subscriber(router, SESSION_EVENTS)
async def on_session_event(event: SessionEventOut, live: Annotated[LiveEvents, FromContext(LIVE)]) -> None:
    live.deliver_session(event)


def create_broker(settings: CommonSettings) -> NatsBroker:
    """The gateway's broker, as it runs."""
    return service_broker("gateway", settings, router)


def documented_broker(settings: CommonSettings) -> NatsBroker:
    """The broker as the AsyncAPI document shows it: with the live events' subscription."""
    return service_broker("gateway", settings, router, documented)
