"""The gateway's edges on the bus, declared at module level so the AsyncAPI document lists them:
the turn commands it publishes, the questions it asks (admission, pin/archive, usage, a search
query's embedding) and the live conversation events it consumes."""

from __future__ import annotations

from typing import Annotated

from faststream.nats import NatsBroker, NatsRouter

from spotter_shared import bus
from spotter_shared.service import FromContext, service_broker
from spotter_shared.settings import CommonSettings
from spotter_shared.contracts.billing import USAGE
from spotter_shared.contracts.commands import (
    ADMIT, CANCEL_SUSPENDED, CONFIRM_TOOL, ORGANIZE_CONVERSATION, PICK_TOOL, SEND_MESSAGE, UNDO,
)
from spotter_shared.contracts.events import CONVERSATION_EVENTS, ConversationEvent
from spotter_shared.contracts.rag import EMBED

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


# No queue group: every replica hears every conversation and hands each event to the streams it
# serves. Events are ~40 ms batches, and the log in Postgres fills any gap, so a lost one is harmless.
@bus.subscriber(router, CONVERSATION_EVENTS)
async def on_conversation_event(event: ConversationEvent, live: Annotated[LiveEvents, FromContext(LIVE)]) -> None:
    live.deliver(event)


def create_broker(settings: CommonSettings) -> NatsBroker:
    """The gateway's broker; the AsyncAPI document is generated from it too."""
    return service_broker("gateway", settings, router)
