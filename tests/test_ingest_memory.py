"""A bulk ingest keeps its memory bounded: the op log's memory map is unmapped every few
batches (``OpLog.release_pages``; brandmind/ingesting.py ``RELEASE_EVERY``), which must not
change what is stored.  Issue 15: building 1M memories showed the whole LMDB file (GBs) as RSS.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from brandmind import ingesting
from brandmind.memory import Memory
from brandmind.oplog import OpLog


def _mapped_kb(path: Path) -> int:
    """Resident KB of this process's maps of ``path`` (from /proc/self/smaps)."""
    target, inside, total = str(path.resolve()), False, 0
    with open("/proc/self/smaps") as fh:
        for line in fh:
            head = line.split()
            if head and "-" in head[0] and len(head) >= 5 and ":" in head[3]:  # a mapping's first line
                inside = line.rstrip("\n").endswith(target)
            elif inside and head[0] == "Rss:":
                total += int(head[1])
    return total


def _messages(n: int) -> list[dict]:
    return [{"id": f"t{i}", "role": "user", "speaker": "Ann", "content": f"turn {i} about topic {i % 17}",
             "ts": f"2024-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}Z", "thread": f"th{i % 3}"} for i in range(n)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps")
def test_release_pages_unmaps_the_log_and_reads_stay_correct(store: Path) -> None:
    with Memory() as mem:
        mem.ingest(_messages(300))
        log = mem.store.log
        data = log.path / "data.mdb"
        with log.read() as txn:  # fault in every page of the ops
            before = {k: v for k, v in txn.cursor(db=log.db["ops"])}
        assert len(before) == 600 and _mapped_kb(data) > 0
        assert log.release_pages() > 0
        assert _mapped_kb(data) == 0
        with log.read() as txn:  # the pages come back, unchanged
            assert {k: v for k, v in txn.cursor(db=log.db["ops"])} == before
        assert _mapped_kb(data) > 0


def test_bulk_ingest_releases_every_few_batches_and_stores_everything(store: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = OpLog.release_pages
    monkeypatch.setattr(OpLog, "release_pages", lambda self: calls.append(1) or real(self))
    monkeypatch.setattr(ingesting, "BATCH", 10)
    monkeypatch.setattr(ingesting, "RELEASE_EVERY", 3)
    with Memory() as mem:
        report = mem.ingest(iter(_messages(95)))  # a generator: streamed in batches of 10
        assert report["ingested"] == 95 and report["duplicates"] == 0
        assert len(calls) == 9 // 3  # 9 full batches, then the last 5 messages
        assert mem.ingest(_messages(95))["duplicates"] == 95  # dedup keys read back after releases
        hits = mem.recall("turn 42 about topic 8", k=3)
        assert hits and hits[0]["text"].endswith("turn 42 about topic 8")
