"""What a new user message asks before its model call: ambient search, only for a message rag would
search (`spotter_shared.terms.searchable`; the parity with rag's own search is tests/rag/test_terms.py).
No servers: the peers are a recorder."""

from __future__ import annotations

import uuid

import pytest

from spotter_orchestrator.turns import FirstQuestions
from spotter_shared.contracts.commands import Actor, SendMessage
from spotter_shared.contracts.rag import AmbientHit

HIT = AmbientHit(scope="member", id=str(uuid.uuid4()), label="Saar Cohen", score=0.9)


class Recorder:
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def ambient(self, organization_id: str, query: str, trace_id: str) -> list[AmbientHit]:
        self.asked.append(query)
        return [HIT]


def send(message: str) -> SendMessage:
    actor = Actor(user_id=str(uuid.uuid4()), organization_id=str(uuid.uuid4()), membership_id=str(uuid.uuid4()), role="owner")
    return SendMessage(command_id=str(uuid.uuid4()), turn_id=str(uuid.uuid4()), conversation_id=str(uuid.uuid4()),
                       actor=actor, trace_id="t", is_new=False, message=message)


@pytest.mark.parametrize("message", ["thanks!", "hello there, how are you today?", "מה שלומך היום? הכל טוב אצלי, תודה רבה"])
async def test_a_message_rag_would_not_search_asks_nothing_and_has_no_hits(message: str) -> None:
    peers = Recorder()
    asked = FirstQuestions.ask(peers, send(message))  # type: ignore[arg-type]
    assert await asked.ambient == [] and peers.asked == []
    asked.drop()


async def test_a_message_with_searchable_words_is_searched() -> None:
    peers = Recorder()
    message = "how is saar cohen doing with his payment plan?"
    asked = FirstQuestions.ask(peers, send(message))  # type: ignore[arg-type]
    assert await asked.ambient == [HIT] and peers.asked == [message]
    asked.drop()
