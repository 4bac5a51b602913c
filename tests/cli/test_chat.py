"""`spotter chat`'s answers to confirmation and picker cards when input has ended (a script, `-m` with
stdin closed): the card is left open, nothing is sent, and no traceback."""

from __future__ import annotations

import pytest

from spotter_cli.chat import _answer_pending


class NoClient:
    """Fails the test if the chat sends anything."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"the chat sent something ({name}) with no answer given")


async def ended(prompt: str) -> None:
    return None


@pytest.mark.parametrize("event", [
    {"type": "confirmation_pending", "toolUseId": "t1", "router": "write", "action": "members_delete"},
    {"type": "disambiguation_pending", "toolUseId": "t2", "candidates": [{"id": "a", "label": "Saar A"}, {"id": "b", "label": "Saar B"}]},
])
async def test_a_card_is_left_open_when_input_has_ended(event: dict, capsys: pytest.CaptureFixture[str]) -> None:
    state = {"conversation_id": "c1", "pending": event}
    await _answer_pending(NoClient(), "o1", state, ended)  # type: ignore[arg-type]
    assert state["pending"] is None  # nothing more to ask here; the card stays open on the server
    assert "the card stays open" in capsys.readouterr().out
