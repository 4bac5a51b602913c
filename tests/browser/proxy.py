"""A TCP relay between the browser and the gateway that a test can cut, as a dropped Wi-Fi would:
every open connection is reset at once, and new ones are accepted again right after."""

from __future__ import annotations

import asyncio
import contextlib


class CuttableProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.cuts = 0
        self.port = 0
        self._server: asyncio.Server | None = None
        self._open: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        pair = (writer, up_writer)
        self._open.add(pair)
        pumps = [asyncio.create_task(self._pump(reader, up_writer)), asyncio.create_task(self._pump(up_reader, writer))]
        self._tasks.update(pumps)
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in pair:
                w.transport.abort()
            self._open.discard(pair)
            for t in pumps:
                t.cancel()
                self._tasks.discard(t)

    @staticmethod
    async def _pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()

    def cut(self) -> int:
        """Reset every open connection (both sides); returns how many there were."""
        pairs = list(self._open)
        for client, upstream in pairs:
            client.transport.abort()
            upstream.transport.abort()
        self.cuts += 1
        return len(pairs)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        self.cut()
        for t in list(self._tasks):
            t.cancel()
        if self._server is not None:
            await self._server.wait_closed()
