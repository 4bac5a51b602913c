"""A service's long-running background job (a daily snapshot, a periodic sweep): started once with
the service, cancelled when it stops."""

from __future__ import annotations

import asyncio
import contextlib


class BackgroundJob:
    name = "background"

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        raise NotImplementedError
