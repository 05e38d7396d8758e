"""When the sync daemon (sync/daemon.py) runs a step: a monotonic clock that counts through
sleep, the retry backoff, and :class:`Schedule` (pure: the caller passes the clock; tested
with a fake one)."""
from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Callable

BACKOFF_BASE = 5.0             # first retry delay ceiling, doubled per failure
MIN_RETRY = 1.0                # never retry sooner than this


def clock() -> float:
    """Seconds on a monotonic clock that keeps counting while the machine is suspended
    (CLOCK_BOOTTIME on Linux; plain monotonic elsewhere)."""
    boottime = getattr(time, "CLOCK_BOOTTIME", None)
    if boottime is not None:
        return time.clock_gettime(boottime)
    return time.monotonic()



def backoff_delay(failures: int, *, base: float = BACKOFF_BASE, cap: float = 900.0,
                  rand: Callable[[], float] = random.random) -> float:
    """Seconds to wait after ``failures`` failures in a row: full jitter over a capped
    exponential ceiling, ``uniform(0, min(cap, base * 2**(failures-1)))``, at least
    :data:`MIN_RETRY` (and never above ``cap``).  0 when nothing failed."""
    if failures <= 0:
        return 0.0
    ceiling = min(cap, base * 2.0 ** min(failures - 1, 60))
    return min(max(cap, MIN_RETRY), max(MIN_RETRY, rand() * ceiling))


@dataclass
class Schedule:
    """When one remote is due for a push and a pull (pure: the caller passes the clock).

    ``due`` says what to do now; ``done`` records how a step went.  Intervals run from the
    END of the step that satisfied them, so however long a step took or the machine slept,
    the next tick is one interval later: missed ticks are skipped, not replayed."""

    push_interval: float
    pull_interval: float
    push_after_ops: int
    backoff_cap: float = 900.0
    backoff_base: float = BACKOFF_BASE
    next_push: float = 0.0
    next_pull: float = 0.0
    retry_at: float = 0.0
    failures: int = 0

    @classmethod
    def starting(cls, now: float, *, push_interval: float, pull_interval: float, push_after_ops: int,
                 backoff_cap: float = 900.0, backoff_base: float = BACKOFF_BASE) -> "Schedule":
        """A schedule whose first push and pull are due at ``now`` (a sync at start)."""
        return cls(push_interval, pull_interval, push_after_ops, backoff_cap, backoff_base,
                   next_push=now, next_pull=now)

    def due(self, now: float, new_ops: int) -> tuple[bool, bool]:
        """(push?, pull?) at ``now`` with ``new_ops`` local ops since the last push."""
        if now < self.retry_at:
            return False, False
        push = now >= self.next_push or new_ops >= self.push_after_ops
        pull = now >= self.next_pull
        return push, pull

    def done(self, now: float, *, pushed: bool, pulled: bool, ok: bool,
             rand: Callable[[], float] = random.random) -> None:
        """Record a step that ended at ``now``.  A failed step leaves its work due and
        blocks every step of this remote until the backoff delay has passed."""
        if ok:
            self.failures = 0
            self.retry_at = 0.0
            if pushed:
                self.next_push = now + self.push_interval
            if pulled:
                self.next_pull = now + self.pull_interval
        else:
            self.failures += 1
            self.retry_at = now + backoff_delay(self.failures, base=self.backoff_base,
                                                cap=self.backoff_cap, rand=rand)

    def wake_at(self) -> float:
        """The earliest time a step can become due by the clock alone."""
        return max(min(self.next_push, self.next_pull), self.retry_at)

    def backing_off(self, now: float) -> bool:
        return now < self.retry_at

