"""Vectors kept once, as int8 (issue 15): quantising is per vector and idempotent, a store
made with float32 vectors (before migration 0017) is rewritten in batches and keeps
finding what it found, and ``bm rebuild`` keeps the same bytes."""
from __future__ import annotations

import numpy as np
import pytest

from brandmind import sqlstore
from brandmind.memory import Memory
from brandmind.storage.recallsql import dequantise, dequantised, quantise, quantised

TEXTS = [f"note {i}: the {w} in the {p} is {c}" for i, (w, p, c) in enumerate(
    (w, p, c) for w in ("kettle", "lamp", "ladder", "violin", "bicycle")
    for p in ("shed", "attic", "hall", "garden") for c in ("red", "blue", "old"))]


def test_quantising_is_per_vector_and_a_dequantised_vector_quantises_to_the_same_bytes():
    rng = np.random.default_rng(7)
    v = rng.standard_normal((200, 384)).astype(np.float32)
    v[:50] *= 1e-3  # small vectors use the whole int8 range too: the scale is per vector
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    q = quantise(v)
    assert q.dtype == np.int8 and (np.abs(q).max(axis=1) == 127).all()
    back = dequantise(q)
    assert np.allclose(np.linalg.norm(back, axis=1), 1, atol=1e-5)
    assert (np.einsum("ij,ij->i", back, v) > 0.999).all()  # the direction survives
    assert np.array_equal(quantise(back), q)  # again: the same bytes
    for row in (v[0], np.zeros(384, np.float32)):
        raw = quantised(row.tobytes())
        assert len(raw) == 384 and quantised(dequantised(raw)) == raw
    assert quantised(np.zeros(384, np.float32).tobytes()) == bytes(384)


def test_the_rotation_is_orthogonal_fixed_and_makes_int8_cosines_closer():
    """Vectors are rotated before they are quantised (a randomised Walsh-Hadamard transform):
    cosines are unchanged, the transform never changes (stored bytes depend on it: every
    device must read them alike), and a vector whose energy sits in few dimensions (the hash
    embedder's) keeps its cosines better than quantised as it is."""
    import hashlib

    from brandmind.storage.recallsql import _matrix, rotate, unrotate

    m = _matrix(384)
    assert np.allclose(m @ m.T, np.eye(384), atol=1e-5)
    rng = np.random.default_rng(3)
    v = rng.standard_normal((50, 384)).astype(np.float32)
    assert np.allclose(unrotate(rotate(v)), v, atol=1e-5)
    assert np.abs(rotate(np.eye(384, dtype=np.float32)[:1])).max() < 0.25  # a spike is spread out
    probe = np.cos(np.arange(384, dtype=np.float32))
    probe /= np.linalg.norm(probe)
    assert hashlib.sha256(quantise(probe).tobytes()).hexdigest()[:16] == "789e850d8ff8b90d"
    assert _matrix(100) is None and np.array_equal(rotate(v[:, :100]), v[:, :100])  # no power-of-two block
    # feature-hashed vectors (the hash embedder's: energy in few buckets, many near ties):
    # the int8 top 10 agrees more often with the float32 top 10 once rotated
    from brandmind.embed.hashing import HashEmbedder

    words = [f"w{i}" for i in range(300)]
    emb = HashEmbedder(384)
    docs = emb.embed_documents([" ".join(rng.choice(words, rng.integers(6, 14))) for _ in range(20000)])
    queries = emb.embed_documents([" ".join(rng.choice(words, rng.integers(3, 7))) for _ in range(100)])

    def agreement(approx):  # recall@10 of ``approx`` against the float32 vectors
        return sum(len(set(np.argsort(-(docs @ q))[:10]) & set(np.argsort(-(approx @ q))[:10]))
                   for q in queries) / 1000

    plain = np.rint(docs * 127 / np.abs(docs).max(axis=1, keepdims=True))  # the same int8 without rotating
    plain /= np.linalg.norm(plain, axis=1, keepdims=True)
    assert agreement(dequantise(quantise(docs))) > agreement(plain) + 0.002


def _make_float32(mem: Memory, vectors: dict[int, bytes]) -> None:
    """Turn the store's vector table back into what stores made before 0017 hold: float32
    vectors (``vectors``: rowid -> float32 bytes) and no record of the migration."""
    c, dim = mem.sql.conn, mem.sql.dim
    rows = c.execute("SELECT rowid, user_id, agent_id, type, created_at FROM memories_vec").fetchall()
    with mem.sql.write():
        c.execute("DROP TABLE memories_vec")
        c.execute(f"CREATE VIRTUAL TABLE memories_vec USING vec0(user_id text partition key, "
                  f"embedding float[{dim}] distance_metric=cosine, agent_id text, type text, created_at integer)")
        c.executemany("INSERT INTO memories_vec(rowid, user_id, embedding, agent_id, type, created_at) "
                      "VALUES(?,?,?,?,?,?)", [(r[0], r[1], vectors[r[0]], *r[2:]) for r in rows])
        c.execute("DELETE FROM migrations WHERE name = '0017_vec_int8'")


def test_the_frozen_rotation_rounds_are_the_seeded_ones_and_rotate_is_the_matrix():
    """The sizes in ``FROZEN_DIMS`` read their sign flips and permutations from the package's
    ``rotation.bin`` (numpy may change what a seeded generator draws: NEP 19); they are the
    generator's (numpy 2.4), a size not in the file gets them from the generator, and
    ``rotate`` (the transform applied to the rows, a query's) equals the rows times the matrix
    (the stored bytes' rotation) to float32 rounding."""
    from brandmind.storage import recallsql
    from brandmind.storage.recallsql import FROZEN_DIMS, _matrix, _rounds, rotate, seeded_rounds

    assert recallsql.FROZEN_FILE.stat().st_size == sum(3 * (2 * d + d // 8) for d in FROZEN_DIMS)
    for dim in (*FROZEN_DIMS, 64, 96):
        signs, perms = _rounds(dim)
        want_signs, want_perms = seeded_rounds(dim)
        assert np.array_equal(signs, want_signs) and np.array_equal(perms, want_perms), dim
        assert (np.sort(perms, axis=1) == np.arange(dim)).all() and set(np.unique(signs)) == {-1.0, 1.0}
    rng = np.random.default_rng(5)
    for dim in (384, 768, 64):
        v = rng.standard_normal((7, dim)).astype(np.float32)
        assert np.allclose(rotate(v), (v @ _matrix(dim)).astype(np.float32), rtol=0, atol=1e-5), dim


def test_distinct_and_outside_are_numpys_unique_and_setdiff1d():
    """The recall path's set helpers (storage/indexfile.py), written without what ``np.unique``
    imports on first use, give numpy's answers on random inputs with repeats and negatives."""
    from brandmind.storage.indexfile import distinct, outside

    rng = np.random.default_rng(11)
    for _ in range(500):
        a = rng.integers(-5, 40, rng.integers(0, 30))
        b = rng.integers(-5, 40, rng.integers(0, 30))
        assert np.array_equal(distinct(a), np.unique(a))
        assert np.array_equal(outside(a, b), np.setdiff1d(a, b))


def test_a_float32_store_is_migrated_in_batches_and_finds_what_it_found(store, monkeypatch):
    with Memory() as mem:
        for i, t in enumerate(TEXTS):
            mem.remember(t, user="ann" if i % 4 else "bo", agent="a1" if i % 5 == 0 else None)
        mem.forget(mem.recall("violin attic blue", user="ann", k=1)[0]["id"])
        texts = dict(mem.sql.conn.execute("SELECT rowid, text FROM memories").fetchall())
        floats = {r: np.asarray(mem.embedder.embed_documents([t])[0], np.float32).tobytes() for r, t in texts.items()}
        _make_float32(mem, floats)
        assert "float[384]" in mem.sql.conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'memories_vec'").fetchone()[0]
        questions = ["which kettle is in the shed", "the old ladder in the hall", "a red bicycle in the garden"]
        before = {q: [h["id"] for h in mem.recall(q, user="ann", k=3)] for q in questions}
    monkeypatch.setattr(sqlstore, "VEC_BATCH", 7)  # several batches
    with Memory() as mem:
        c = mem.sql.conn
        assert "int8[384]" in c.execute("SELECT sql FROM sqlite_master WHERE name = 'memories_vec'").fetchone()[0]
        assert c.execute("SELECT 1 FROM sqlite_master WHERE name = 'vec_migrate'").fetchone() is None
        stored = dict(c.execute("SELECT rowid, embedding FROM memories_vec").fetchall())
        assert stored == {r: quantised(b) for r, b in floats.items()}  # every vector, quantised
        assert c.execute("SELECT count(*) FROM memories_vec WHERE user_id = 'bo' AND agent_id = 'a1'"
                         ).fetchone()[0] == sum(1 for i in range(len(TEXTS)) if i % 4 == 0 and i % 5 == 0)
        assert {q: [h["id"] for h in mem.recall(q, user="ann", k=3)] for q in questions} == before
        assert all(d["ok"] for d in mem.admin.doctor() if d["check"] in ("memory index", "recall index"))
        mem.remember("the brass trumpet is in the cellar", user="ann")  # written as int8 from now on
        assert mem.recall("brass trumpet cellar", user="ann", k=1)[0]["text"] == "the brass trumpet is in the cellar"


def test_rebuild_keeps_the_same_int8_bytes(store):
    with Memory() as mem:
        for t in TEXTS[:20]:
            mem.remember(t)
        read = "SELECT m.id, v.embedding FROM memories_vec v JOIN memories m ON m.rowid = v.rowid"
        before = dict(mem.sql.conn.execute(read).fetchall())
        assert len(before) == 20 and all(len(b) == 384 for b in before.values())
        mem.admin.rebuild()
        assert dict(mem.sql.conn.execute(read).fetchall()) == before


@pytest.mark.parametrize("reader", ["user_vectors", "vectors_of"])
def test_readers_get_float32_unit_vectors(store, reader):
    from brandmind.storage import memories, recallsql

    with Memory() as mem:
        m = mem.remember("the kettle is in the shed")
        want = np.asarray(mem.embedder.embed_documents([m["text"]])[0], np.float32)
        rowid = mem.sql.conn.execute("SELECT rowid FROM memories WHERE id = ?", (m["id"],)).fetchone()[0]
        got = (list(memories.user_vectors(mem.sql, mem.store.user(None))) if reader == "user_vectors"
               else recallsql.vectors_of(mem.sql, [rowid]))
        (r, raw), = got
        v = np.frombuffer(raw, np.float32)
        assert r == rowid and len(v) == mem.sql.dim
        assert abs(np.linalg.norm(v) - 1) < 1e-5 and float(v @ want) > 0.999
