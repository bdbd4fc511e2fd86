"""What each pipeline stage cost, in wall-clock seconds, and the lap clock that measures it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True, kw_only=True)
class StageTimings:
    """Wall-clock seconds per stage; a stage that did not run took 0.0. ``read`` is the one read
    that ranks and prunes together (the one-read flow, where ``rerank`` and ``compress`` stay
    0.0)."""

    retrieve: float = 0.0
    rerank: float = 0.0
    compress: float = 0.0
    read: float = 0.0
    cache: float = 0.0
    generate: float = 0.0
    total: float = 0.0


@dataclass(slots=True)
class Clock:
    """A lap timer: each :meth:`lap` is the seconds since the previous one (or since made)."""

    started: float = field(default_factory=time.perf_counter)

    def lap(self) -> float:
        now = time.perf_counter()
        seconds, self.started = now - self.started, now
        return seconds


__all__ = ["Clock", "StageTimings"]
