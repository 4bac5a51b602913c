"""The SSE frames the gateway writes: the same bytes sse-starlette wrote (the web app, the CLI and the
tests parse them), checked against sse-starlette's own encoder."""

from __future__ import annotations

import json

import pytest
from sse_starlette.event import ServerSentEvent

from spotter_gateway.sse import frame, ping
from spotter_gateway.streams import LoggedEvent


@pytest.mark.parametrize(
    "data, event, id",
    [
        (json.dumps({"type": "text_delta", "delta": "é \u2028 \n"}, ensure_ascii=False), "text_delta", "12"),
        ("one\ntwo\r\nthree\rfour", None, "3"),
        ("{}", "error", None),
        ("{}", "bad\nname", "1\r\n2"),
    ],
)
def test_a_frame_is_what_sse_starlette_wrote(data: str, event: str | None, id: str | None) -> None:
    assert frame(data, event=event, id=id) == ServerSentEvent(data, event=event, id=id).encode()


def test_a_logged_event_is_encoded_once_with_its_sequence_as_id() -> None:
    event = LoggedEvent(seq=7, turn_id="t", type="text_delta", data={"type": "text_delta", "delta": "hi"})
    assert event.frame == b'id: 7\r\nevent: text_delta\r\ndata: {"type": "text_delta", "delta": "hi"}\r\n\r\n'
    assert event.frame is event.frame


def test_a_ping_is_a_comment() -> None:
    assert ping().startswith(b": ping - ") and ping().endswith(b"\r\n\r\n") and ping().count(b"\r\n") == 2
