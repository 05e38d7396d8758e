"""The in-memory vector matrix follows writes of other processes: appends rows after
their adds, reloads after their deletes (a stale matrix would return forgotten memories)."""
from __future__ import annotations

import subprocess
import sys

from brandmind.memory import Memory


def _in_other_process(code: str) -> str:
    script = "from brandmind.memory import Memory\nmem = Memory()\n" + code
    return subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_matrix_extends_on_other_writers_adds_and_reloads_on_their_deletes(store) -> None:
    with Memory() as mem:
        for i in range(30):
            mem.remember(f"note number {i} about gardening and tomatoes")
        mem.recall("gardening")
        mem.recall("tomatoes")  # the second search in a process loads the matrix
        matrix = mem.store.searcher.matrix
        assert matrix is not None and len(matrix.rowids) == 30

        new_id = _in_other_process("print(mem.remember('the zebra migration crosses the river')['id'])")
        hits = mem.recall("zebra migration river", k=3)
        assert hits[0]["id"] == new_id and "vector" in hits[0]["signals"]
        assert mem.store.searcher.matrix is matrix, "an add elsewhere must extend, not reload"
        assert len(matrix.rowids) == 31

        _in_other_process(f"mem.forget({new_id!r})")
        hits = mem.recall("zebra migration river", k=40)
        assert new_id not in {h["id"] for h in hits}
        assert mem.store.searcher.matrix is not matrix, "a delete elsewhere must reload"
        assert len(mem.store.searcher.matrix.rowids) == 30


def test_keyword_search_skips_words_found_in_most_memories(store) -> None:
    with Memory() as mem:
        for i in range(40):
            mem.remember(f"Ann: message {i} about the weather and the garden")
        tea = mem.remember("Ann: I only drink green tea in the morning")
        hits = mem.recall("Ann green tea", k=10)
        keyword_hits = [h["id"] for h in hits if "keyword" in h["signals"]]
        # "ann" is in every memory: it must not turn every memory into a keyword hit
        assert keyword_hits == [tea["id"]]
        assert hits[0]["id"] == tea["id"]
        # a query made only of such words still gets vector results
        assert mem.recall("Ann", k=5)
        # below COMMON_MIN_DOCS every word counts
    with Memory() as mem:
        mem.forget_many([m["id"] for m in mem.list_memories(limit=1000)][:35])
        hits = mem.recall("Ann green tea", k=10)
        assert len([h for h in hits if "keyword" in h["signals"]]) > 1


def test_keyword_search_keeps_its_rarest_words_within_a_postings_budget(store, monkeypatch) -> None:
    import brandmind.storage.search as search

    with Memory() as mem:
        mem.ingest([{"role": "user", "content": f"note {i} about the weather" + (" and the garden" if i < 5 else "")}
                    for i in range(80)])
        mem.remember("tulip bulbs go in the garden in autumn")  # "garden": 6 of 81, under the 10% share
        monkeypatch.setattr(search, "MAX_POSTINGS", 4)
        # "garden" (6 memories) would overflow the budget once "tulip" (1) is in: it is dropped
        assert mem.store.searcher.selective_words("tulip garden") == ["tulip"]
        monkeypatch.setattr(search, "MAX_POSTINGS", 20_000)
        assert mem.store.searcher.selective_words("tulip garden") == ["tulip", "garden"]
        # the rarest word always stays, even alone over the budget
        monkeypatch.setattr(search, "MAX_POSTINGS", 0)
        assert mem.store.searcher.selective_words("garden weather") == ["garden"]
