"""A wall clock that tests can move forward.

Cache entries expire in minutes or hours; tests cannot wait that long, so the
simulator reads time only through a `SimClock`, which adds an adjustable offset.
"""

from __future__ import annotations

import time
from typing import Callable


class SimClock:
    def __init__(self, source: Callable[[], float] = time.time) -> None:
        self._source = source
        self._offset = 0.0

    def now(self) -> float:
        return self._source() + self._offset

    def advance(self, seconds: float) -> float:
        """Move time forward (never backward) and return the new `now()`."""
        if seconds < 0:
            raise ValueError("the clock only moves forward")
        self._offset += seconds
        return self.now()
