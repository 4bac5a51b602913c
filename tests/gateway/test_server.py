"""The gateway's uvicorn Server: its main loop wakes once a second (each round refreshing the Date
header, as uvicorn's every tenth 100 ms round does), not ten times, and a stop wakes it at once."""

from __future__ import annotations

import signal
import socket
import threading
import time
from email.utils import parsedate_to_datetime

import httpx
import pytest
import uvicorn
from sse_starlette.sse import AppStatus
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from spotter_gateway.main import Server

TIMEOUT = 10.0


async def hello(_: object) -> PlainTextResponse:
    return PlainTextResponse("hello")


def test_the_main_loop_ticks_once_a_second_with_the_date_and_stops_when_told(monkeypatch: pytest.MonkeyPatch) -> None:
    # uvicorn's handle_exit, as sse-starlette patches it, sets its process-wide flag that ends every SSE
    # stream: put back after this test, or every later test's streams in this process would end at once.
    monkeypatch.setattr(AppStatus, "should_exit", False)
    app = Starlette(routes=[Route("/", hello)])
    server = Server(uvicorn.Config(app, log_level="warning"))
    ticks: list[int] = []
    on_tick = server.on_tick

    async def recorded(counter: int) -> bool:
        ticks.append(counter)
        return await on_tick(counter)

    server.on_tick = recorded  # type: ignore[method-assign]
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + TIMEOUT
    while len(ticks) < 3:  # about two seconds
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start or tick"
        time.sleep(0.05)

    response = httpx.get(f"http://127.0.0.1:{sock.getsockname()[1]}/")
    assert response.text == "hello"
    assert abs(time.time() - parsedate_to_datetime(response.headers["date"]).timestamp()) < 3

    # Every round is one that refreshes the header (uvicorn's own loop: 0, 1, 2, … ten a second).
    assert ticks[:3] == [0, 10, 20]

    server.handle_exit(signal.SIGTERM, None)  # what the signal handler calls, from another thread here
    thread.join(TIMEOUT)
    assert not thread.is_alive()
    assert server.should_exit
