"""Hybrid logical clock and id helpers.

An HLC timestamp is ``(wall_ms, counter, replica)``: it never goes backwards on
one replica even if the wall clock does, and it orders events across replicas
(ties broken by replica id), which is what last-writer-wins registers need.
"""
from __future__ import annotations

import os
import threading
import time
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import NamedTuple

from .errors import InvalidInput

_B32 = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lower-case


class HLC(NamedTuple):
    wall_ms: int
    counter: int
    replica: str

    def tick(self, now_ms: int | None = None) -> "HLC":
        """The next timestamp for a local event."""
        now = now_ms if now_ms is not None else now_millis()
        if now > self.wall_ms:
            return HLC(now, 0, self.replica)
        return HLC(self.wall_ms, self.counter + 1, self.replica)

    def encode(self) -> list:
        return [self.wall_ms, self.counter, self.replica]

    @classmethod
    def decode(cls, value: list) -> "HLC":
        return cls(int(value[0]), int(value[1]), str(value[2]))


def hlc_key(hlc: list) -> str:
    """A string that sorts like the HLC tuple (wall ms, counter, replica)."""
    return f"{int(hlc[0]):015d}.{int(hlc[1]):08d}.{hlc[2]}"


def now_millis() -> int:
    return time.time_ns() // 1_000_000 + _TEST_SHIFT_MS


def _test_shift() -> int:
    # TEST ONLY: BM_TEST_CLOCK_SHIFT_MS moves this process's clock (the end-to-end tests of a
    # device with a wrong clock run `bm` with it); never set it for real use
    try:
        return int(os.environ.get("BM_TEST_CLOCK_SHIFT_MS") or 0)
    except ValueError:
        return 0


_TEST_SHIFT_MS = _test_shift()


# what to do about a device clock that is wrong (sync: the S3 server's Date disagrees)
CLOCK_HINT = ("fix this device's system clock (e.g. `sudo timedatectl set-ntp true`), then `bm sync now`; "
              "nothing is lost: its ops stay in the local log until then")


def skewed_by(mark: dict | None, now_ms: int | None = None) -> int | None:
    """How far this device's clock is still off, by a sync round's mark ``{"offset_ms",
    "wall_ms", "mono_ms"}`` (its clock minus the server's, and its own wall clock and
    monotonic clock then): None once the wall clock has been set since (it no longer moves
    with the monotonic clock, which no clock change touches) or the machine restarted."""
    if not mark:
        return None
    now = now_ms if now_ms is not None else now_millis()
    elapsed = time.monotonic() * 1000 - mark["mono_ms"]
    if elapsed < 0 or abs(now - (mark["wall_ms"] + elapsed)) > SKEW_TOLERANCE_MS:
        return None
    return int(mark["offset_ms"])


SKEW_TOLERANCE_MS = 60_000  # a wall-clock step larger than this since the mark: the clock was set


def span(ms: int | float) -> str:
    """A duration for people: ``850 ms``, ``42 s``, ``1h02m``, ``3d04h``, ``10.0 years``."""
    ms = abs(int(ms))
    if ms < 1000:
        return f"{ms} ms"
    s = ms // 1000
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 2 * 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s < 365 * 86400:
        return f"{s // 86400}d{s % 86400 // 3600:02d}h"
    return f"{s / (365.25 * 86400):.1f} years"


_last_id: list[int] = [-1, 0]  # (ms, random part) of the last id made in this process
_id_lock = threading.Lock()


def new_id(prefix: str, ms: int | None = None) -> str:
    """A sortable unique id: prefix, 10 base32 chars of time, 12 of randomness.

    Ids made in one process for the same millisecond sort in the order they were made
    (the random part of the next one is the last one's plus one, as in monotonic ULIDs),
    so beads added within one millisecond keep their order in the thread.
    """
    ms = ms if ms is not None else now_millis()
    with _id_lock:
        if ms == _last_id[0] and _last_id[1] + 1 < 1 << 60:
            r = _last_id[1] + 1
        else:
            r = int.from_bytes(os.urandom(8), "big") >> 5  # 59 bits: room to count up
        _last_id[0], _last_id[1] = ms, r
    return encode_id(prefix, ms, r)


def encode_id(prefix: str, ms: int, r: int) -> str:
    """``<prefix>_`` + 10 base-32 digits of ``ms`` + 12 of ``r``: ids sort by time."""
    t = ""
    for _ in range(10):
        t = _B32[ms & 31] + t
        ms >>= 5
    rnd = ""
    for _ in range(12):
        rnd = _B32[r & 31] + rnd
        r >>= 5
    return f"{prefix}_{t}{rnd}"


@lru_cache(maxsize=16384)  # recall's results convert the same few stamps again and again
def iso(ms: int | None) -> str | None:
    """Epoch milliseconds as an ISO 8601 UTC string (``None`` stays ``None``)."""
    if ms is None:
        return None
    dt = _EPOCH + timedelta(milliseconds=int(ms))  # exact: no float rounding of far dates
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(value: str | int | float | None, *, field: str = "time") -> int | None:
    """Epoch ms from an ISO 8601 date/datetime, epoch seconds/ms, or ``None``.

    Naive datetimes are taken as UTC.  Raises InvalidInput on anything else.
    """
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise InvalidInput(f"{field} must be a date, got {value!r}",
                           hint="use ISO 8601, e.g. 2024-05-01 or 2024-05-01T09:30:00Z")
    if isinstance(value, (int, float)):
        if value != value or value in (float("inf"), float("-inf")):  # NaN, Infinity from JSON
            raise InvalidInput(f"{field} must be a date, got {value!r}",
                               hint="use ISO 8601, e.g. 2024-05-01 or 2024-05-01T09:30:00Z")
        # seconds before year 5138, milliseconds after
        ms = int(value * 1000) if abs(value) < 1e11 else int(value)
    else:
        text = str(value).strip()
        try:
            if text.endswith("Z"):
                text = text[:-1] + "+00:00"
            dt = datetime.fromisoformat(text)
        except ValueError:
            raise InvalidInput(f"cannot read {field} {value!r} as a date",
                               hint="use ISO 8601, e.g. 2024-05-01 or 2024-05-01T09:30:00Z") from None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=timezone.utc)
        ms = (dt - _EPOCH) // timedelta(milliseconds=1)  # exact, unlike timestamp() * 1000
    # a time iso() cannot print would break every later read of what it is stored with
    if not MIN_MS <= ms <= MAX_MS:
        raise InvalidInput(f"{field} {value!r} is out of range",
                           hint="give a date from year 1 to 9999, e.g. 2024-05-01")
    return ms


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
MIN_MS = -62_135_596_800_000  # 0001-01-01T00:00:00Z
MAX_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
