"""Bulk work: many thousands of ops parsed, stored and applied in one go (sync, ingest).

Such work allocates millions of small dicts and lists and keeps many of them alive for a
while (a pulled batch, its ops as stored, their rows); Python's cyclic collector would
traverse every live container again and again meanwhile: measured on these machines,
parsing a pulled 5,000-op segment took twice as long with it running.  None of this
work makes reference cycles that need collecting before it ends, so the collector is
paused for its duration and runs normally again after.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector inside the block (nesting is fine: only the
    outermost block that paused it turns it back on)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
