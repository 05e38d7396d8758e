"""The SQLite side of the recall index (storage/recallindex.py): the change list that
SQLite triggers keep (``mem_changes``, migration 0014), the epoch that marks replaced vectors,
and the reads an index is built and kept in step from, in one read snapshot.
"""
from __future__ import annotations

import hashlib
import os
import zlib
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ..sqlstore import SQLStore

CHANGES_KEEP = 1 << 20        # mem_changes rows kept (a file further behind is rebuilt)

SCHEMA = (
    "CREATE TABLE mem_changes(seq INTEGER PRIMARY KEY AUTOINCREMENT, mem_rowid INTEGER NOT NULL)",
    "CREATE TRIGGER mem_changes_update AFTER UPDATE ON memories BEGIN "
    "INSERT INTO mem_changes(mem_rowid) VALUES(new.rowid); END",
    "CREATE TRIGGER mem_changes_delete AFTER DELETE ON memories BEGIN "
    "INSERT INTO mem_changes(mem_rowid) VALUES(old.rowid); END",
    "CREATE TRIGGER mem_changes_vector AFTER DELETE ON vec_pending BEGIN "
    "INSERT INTO mem_changes(mem_rowid) VALUES(old.rowid); END",
    f"CREATE TRIGGER mem_changes_prune AFTER INSERT ON mem_changes WHEN new.seq % 4096 = 0 BEGIN "
    f"DELETE FROM mem_changes WHERE seq <= new.seq - {CHANGES_KEEP}; END",
    "INSERT OR REPLACE INTO meta VALUES('recall_epoch', lower(hex(randomblob(8))))",
    "DROP TABLE IF EXISTS vec_late",  # what the in-memory matrix read before this index
)

# A counter of the changes that can take a speaker's name away (a memory deleted, or its
# meta or user changed; not the late vectors mem_changes also lists): the search index keeps
# the speakers and their other names across writes until it moves (storage/search.py ``stamp``).
NAME_SCHEMA = (
    "CREATE TABLE name_changes(n INTEGER NOT NULL)",
    "INSERT INTO name_changes VALUES(0)",
    "CREATE TRIGGER name_changes_update AFTER UPDATE OF meta, user_id ON memories BEGIN "
    "UPDATE name_changes SET n = n + 1; END",
    "CREATE TRIGGER name_changes_delete AFTER DELETE ON memories BEGIN UPDATE name_changes SET n = n + 1; END",
)

ROW_SQL = ("SELECT m.rowid, m.user_id, coalesce(m.agent_id, ''), m.type, m.created_at, m.valid_from, m.valid_to, "
           "m.retired_at, m.importance, m.thread, m.episode, m.speaker, coalesce(m.text, '') FROM memories m")


def epoch(sql: "SQLStore") -> str:
    return sql.get_meta("recall_epoch") or ""


def new_epoch(sql: "SQLStore") -> None:
    """Vectors were replaced (``bm reindex``): every index file of this database is stale."""
    sql.set_meta("recall_epoch", os.urandom(8).hex())


def last_change(sql: "SQLStore") -> tuple[int, int]:
    """(lowest, highest) ``mem_changes`` seq kept."""
    return sql.conn.execute("SELECT coalesce(min(seq), 0), coalesce(max(seq), 0) FROM mem_changes").fetchone()


def changed_rowids(sql: "SQLStore", seq: int) -> list[int]:
    return [r[0] for r in sql.conn.execute("SELECT DISTINCT mem_rowid FROM mem_changes WHERE seq > ?", (seq,))]


def rows_after(sql: "SQLStore", rowid: int) -> list[tuple]:
    return sql.conn.execute(f"{ROW_SQL} WHERE m.rowid > ? ORDER BY m.rowid", (rowid,)).fetchall()


def rows_of(sql: "SQLStore", rowids: list[int]) -> list[tuple]:
    out: list[tuple] = []
    for i in range(0, len(rowids), 900):
        part = rowids[i:i + 900]
        out += sql.conn.execute(f"{ROW_SQL} WHERE m.rowid IN ({','.join('?' * len(part))})", part).fetchall()
    return out


# -- the stored vectors: int8, one scale per vector, of the vector rotated ---------------------
# ``memories_vec.embedding`` is ``int8[dim]`` (migration 0017): the vector times a fixed
# orthogonal ``rotate`` (a randomised Walsh-Hadamard transform), times 127 / its largest
# |component|, rounded.  The rotation spreads each vector's energy over every dimension, so the
# largest component, which sets the int8 step, is small: recall@10 of a full scan of the int8
# cosines against one of the float32 ones went 0.990 -> 0.996 (bench_speed's 100,000 MiniLM
# vectors) and 0.974 -> 0.986 (its 1,000,000 hash-embedder vectors, whose energy sits in few
# buckets), in a probe over its stores' original vectors.  Cosines are unchanged by it: the
# recall index keeps these bytes as they are and rotates the query instead.  Writers hand float32 bytes to :func:`quantised`;
# readers other than the recall index get float32 unit vectors back from :func:`dequantised`
# (every embedder returns unit vectors and every use is a cosine, so the scale is not kept).
# Quantising a dequantised vector gives the same bytes again (``bm rebuild`` takes vectors from
# the old index).  The transform is sign flips, permutations from a fixed seed (PCG64: the same
# on every platform) and additions, so every device rotates alike.
VEC_TYPE = "int8"
ROTATION_SEED = 20_261_128
ROTATION_ROUNDS = 3


def _hadamard(v: Any, block: int) -> Any:
    """The orthonormal Walsh-Hadamard transform of each ``block`` of each row (its own inverse)."""
    import numpy as np

    n, dim = v.shape
    y = v.reshape(n, dim // block, block)
    h = 1
    while h < block:
        y = y.reshape(n, dim // block, block // (2 * h), 2, h)
        y = np.stack([y[..., 0, :] + y[..., 1, :], y[..., 0, :] - y[..., 1, :]], axis=-2)
        h *= 2
    return (y.reshape(n, dim) / np.float32(np.sqrt(block))).astype(np.float32)


# The sign flips and permutations of every round, for the usual embedding sizes, as the seeded
# generator made them with numpy 2.4 (``python scripts/freeze_rotation.py`` wrote the file;
# tests/test_vec_int8.py checks it against the generator).  Stored vectors depend on them, and
# numpy does not promise that ``Generator.integers`` and ``permutation`` give the same numbers in
# every release (NEP 19); reading them also spares a cold `bm recall` importing numpy.random and
# building the matrix (~20 ms).  Other sizes use the generator.
FROZEN_DIMS = (256, 384, 512, 768, 1024, 1536, 3072)
FROZEN_FILE = Path(__file__).resolve().parent.parent / "data" / "rotation.bin"


def seeded_rounds(dim: int) -> tuple[Any, Any]:
    """The rounds' sign flips (float32 +-1, rounds x dim) and permutations (rounds x dim) as
    the seeded generator makes them."""
    import numpy as np

    rng = np.random.default_rng(ROTATION_SEED + dim)
    signs, perms = [], []
    for _ in range(ROTATION_ROUNDS):
        signs.append(rng.integers(0, 2, dim) * 2 - 1)
        perms.append(rng.permutation(dim))
    return np.array(signs, np.float32), np.array(perms, np.int64)


@lru_cache(maxsize=8)
def _rounds(dim: int) -> tuple[Any, Any]:
    """:func:`seeded_rounds`, from ``FROZEN_FILE`` for the sizes it holds: per size, in
    ``FROZEN_DIMS`` order, the permutations as uint16 then the signs as bits (1: +1)."""
    import numpy as np

    if dim not in FROZEN_DIMS:
        return seeded_rounds(dim)
    offset = sum(ROTATION_ROUNDS * (2 * d + d // 8) for d in FROZEN_DIMS[:FROZEN_DIMS.index(dim)])
    raw = np.fromfile(FROZEN_FILE, np.uint8, ROTATION_ROUNDS * (2 * dim + dim // 8), offset=offset)
    perms = raw[:2 * ROTATION_ROUNDS * dim].view("<u2").reshape(ROTATION_ROUNDS, dim).astype(np.int64)
    bits = np.unpackbits(raw[2 * ROTATION_ROUNDS * dim:]).reshape(ROTATION_ROUNDS, dim)
    return bits.astype(np.float32) * 2 - 1, perms


def _transform(v: Any) -> Any:
    """float32 rows ``v`` rotated: ``ROTATION_ROUNDS`` rounds of seeded sign flips, a seeded
    permutation and a Walsh-Hadamard transform on blocks of the largest power of two dividing
    the size; unchanged when that block is under 16."""
    dim = v.shape[1]
    block = dim & -dim
    if block < 16:
        return v
    signs, perms = _rounds(dim)
    for r in range(ROTATION_ROUNDS):
        v = _hadamard((v * signs[r])[:, perms[r]], block)
    return v


@lru_cache(maxsize=8)
def _matrix(dim: int) -> Any:
    """The rotation of ``dim``-d rows as a float64 matrix (``rotate(v) = v @ M``): the
    transform of the identity's rows; None (no rotation) when its block is under 16."""
    import numpy as np

    if (dim & -dim) < 16:
        return None
    return _transform(np.eye(dim, dtype=np.float32)).astype(np.float64)


@lru_cache(maxsize=8)
def _walsh(block: int) -> Any:
    """The orthonormal Walsh-Hadamard matrix of size ``block`` (Sylvester's construction)."""
    import numpy as np

    h = np.ones((1, 1), np.float32)
    while len(h) < block:
        h = np.block([[h, h], [h, -h]])
    return h / np.float32(np.sqrt(block))


def rotate(vectors: Any) -> Any:
    """Rows of ``vectors`` (float32) times the store's fixed rotation (see above): the rounds
    of :func:`_transform`, each block's Walsh-Hadamard transform as one product with its
    matrix (a query: 0.03 ms, where the butterfly stages took 0.33 and the full rotation matrix
    takes 14 ms to make).  It agrees with :func:`_transform` to float32 rounding; the bytes a
    store keeps come from :func:`_matrix` (:func:`quantise`), so they do not depend on it."""
    import numpy as np

    v = np.atleast_2d(np.asarray(vectors, np.float32))
    n, dim = v.shape
    block = dim & -dim
    if block < 16:
        return v
    signs, perms = _rounds(dim)
    walsh = _walsh(block)
    for r in range(ROTATION_ROUNDS):
        v = (((v * signs[r])[:, perms[r]]).reshape(-1, block) @ walsh).reshape(n, dim)
    return v.astype(np.float32, copy=False)


def unrotate(vectors: Any) -> Any:
    """The inverse of :func:`rotate` (the matrix is orthogonal: its transpose)."""
    import numpy as np

    v = np.atleast_2d(np.asarray(vectors, np.float32))
    m = _matrix(v.shape[1])
    return v if m is None else (v @ m.T).astype(np.float32)


def quantise(vectors: Any) -> Any:
    """Rows of float32 ``vectors``, rotated, as int8 rows (per row: x 127 / max|v|, rounded;
    a zero row stays zero)."""
    import numpy as np

    # in float64: one row alone and the same row in a batch (other BLAS kernels, other sums)
    # round to the same bytes
    v = np.atleast_2d(np.asarray(vectors, np.float32)).astype(np.float64)
    m = _matrix(v.shape[1])
    v = v if m is None else v @ m
    top = np.abs(v).max(axis=1, keepdims=True) if v.size else np.ones((len(v), 1))
    scale = np.divide(127.0, top, out=np.zeros_like(top), where=top > 0)
    return np.clip(np.rint(v * scale), -127, 127).astype(np.int8)


def quantised(vector: bytes) -> bytes:
    """float32 bytes -> the int8 bytes ``memories_vec`` keeps (:func:`quantise`)."""
    import numpy as np

    return quantise(np.frombuffer(vector, np.float32)).tobytes()


def dequantise(stored: Any) -> Any:
    """int8 rows -> float32 unit rows, rotated back (a zero row stays zero)."""
    import numpy as np

    v = unrotate(np.atleast_2d(np.asarray(stored, np.int8)).astype(np.float32))
    norm = np.linalg.norm(v, axis=1, keepdims=True)
    return np.divide(v, norm, out=np.zeros_like(v), where=norm > 0)


def dequantised(stored: bytes) -> bytes:
    """The int8 bytes of ``memories_vec`` -> float32 bytes of a unit vector."""
    import numpy as np

    return dequantise(np.frombuffer(stored, np.int8)).tobytes()


def stored_vectors_of(sql: "SQLStore", rowids: list[int], chunk: int = 900) -> list[tuple[int, bytes]]:
    """``(rowid, int8 bytes)`` of those rowids that have a vector, ``chunk`` rowids a query."""
    out: list[tuple[int, bytes]] = []
    for i in range(0, len(rowids), chunk):
        part = rowids[i:i + chunk]
        out += sql.conn.execute(f"SELECT rowid, embedding FROM memories_vec WHERE rowid IN "
                                f"({','.join('?' * len(part))})", part).fetchall()
    return out


def vectors_of(sql: "SQLStore", rowids: list[int], chunk: int = 900) -> list[tuple[int, bytes]]:
    """``(rowid, float32 unit vector bytes)`` of those rowids that have a vector."""
    return [(rowid, dequantised(raw)) for rowid, raw in stored_vectors_of(sql, rowids, chunk)]


def neighbours_of(sql: "SQLStore", rowids: list[int]) -> list[tuple[int, int | None, int | None]]:
    """(rowid, the turn before it, the turn after it) in its user's thread, by the rows stored now."""
    out: list[tuple] = []
    for i in range(0, len(rowids), 400):
        part = rowids[i:i + 400]
        out += sql.conn.execute(
            "SELECT m.rowid, "
            "(SELECT p.rowid FROM memories p WHERE p.user_id = m.user_id AND p.thread = m.thread "
            " AND (p.created_at, p.rowid) < (m.created_at, m.rowid) "
            " ORDER BY p.created_at DESC, p.rowid DESC LIMIT 1), "
            "(SELECT n.rowid FROM memories n WHERE n.user_id = m.user_id AND n.thread = m.thread "
            " AND (n.created_at, n.rowid) > (m.created_at, m.rowid) "
            " ORDER BY n.created_at, n.rowid LIMIT 1) "
            f"FROM memories m WHERE m.thread IS NOT NULL AND m.rowid IN ({','.join('?' * len(part))})",
            part).fetchall()
    return out


def all_rows(sql: "SQLStore") -> Any:
    return sql.conn.execute(f"{ROW_SQL} ORDER BY m.rowid")


def all_vectors(sql: "SQLStore") -> Any:
    """``(rowid, int8 bytes)`` of every stored vector (what the recall index keeps as is)."""
    return sql.conn.execute("SELECT rowid, embedding FROM memories_vec")


def turn_order(sql: "SQLStore") -> Any:
    """``(rowid, user, thread)`` of every turn, in thread order (the turns index)."""
    return sql.conn.execute("SELECT rowid, user_id, thread FROM memories WHERE thread IS NOT NULL "
                            "ORDER BY user_id, thread, created_at, rowid")


def memory_total(sql: "SQLStore") -> int:
    return sql.conn.execute("SELECT count(*) FROM memories").fetchone()[0]


class ReadSnapshot:
    """One read transaction (a savepoint, so it also nests inside a caller's transaction)."""

    def __init__(self, sql: "SQLStore") -> None:
        self.conn = sql.conn

    def __enter__(self) -> None:
        self.conn.execute("SAVEPOINT recall_index")

    def __exit__(self, *exc: Any) -> None:
        self.conn.execute("RELEASE recall_index")


def text_key(text: str) -> int:
    """A 64-bit key of a memory's text with case and spacing ignored: recall shows one
    memory per key (equal keys: the same text, but for a 2**-64 chance)."""
    norm = " ".join(text.lower().split()).encode()  # = re.sub(r"\s+", " ", ...).strip(), ~5x faster
    return int.from_bytes(hashlib.blake2b(norm, digest_size=8).digest(), "little")


def episode_key(user: str, thread: str | None, episode: str | None) -> int:
    """A 64-bit key of a turn's episode (equal keys: the same episode of the same thread)."""
    if thread is None:
        return 0
    raw = f"{user}\0{thread}\0{episode or ''}".encode()
    return ((zlib.crc32(raw) << 31) ^ zlib.adler32(raw)) or 1
