"""The SQLite projection: memories (FTS5 keywords, sqlite-vec vectors) and the knowledge graph.

Everything here is rebuilt from the op log by ``bm rebuild``.  ``meta.applied``
is the arrival number of the last op applied; it is updated in the same
transaction as the rows an op produces, so a crash between the op log commit
and this one is repaired by re-applying the missing ops on the next open.

Migrations are named and run in order, each in its own transaction.
"""
from __future__ import annotations

import importlib.util
import json
import os
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import Any, Callable, Iterator

from .errors import ModelMismatch, StoreCorrupt, StoreMissing
from .oplog import dumps
from .storage import blocks as blocks_schema
from .storage import personas as personas_schema
from .storage import quarantine as quarantine_schema
from .storage import remote_map as remote_map_schema
from .storage import skills as skills_schema
from .storage import converge as converge_schema
from .storage import extract as extract_schema
from .storage import memories as memories_schema
from .storage import expiry as expiry_schema
from .storage import recallsql as recallindex_schema
from .storage import workspace as workspace_schema


def _vec_table(dim: int, name: str = "memories_vec") -> str:
    # user partition + metadata columns let sqlite-vec filter inside the KNN scan; the vectors
    # are int8, one scale per vector (storage/recallsql.py ``quantised``; float before 0017)
    return (f"CREATE VIRTUAL TABLE {name} USING vec0(user_id text partition key, "
            f"embedding {recallindex_schema.VEC_TYPE}[{dim}] distance_metric=cosine, agent_id text, type text, "
            f"created_at integer)")


VEC_BATCH = 16384  # rows a migration holds in memory at once


def _vec_int8(sql: "SQLStore") -> None:
    """Migration 0017: a float32 ``memories_vec`` (stores made before it) becomes the int8
    table, streamed through a plain staging table of int8 rows (sqlite-vec cannot rename its
    tables), ``VEC_BATCH`` rows at a time, inside the migration's transaction."""
    c = sql.conn
    (ddl,) = c.execute("SELECT sql FROM sqlite_master WHERE name = 'memories_vec'").fetchone()
    if "float[" not in ddl.replace(" ", ""):
        return  # made int8 (a store created since)
    dim = int(sql.get_meta("embed_dim") or 0)
    c.execute("CREATE TABLE vec_migrate(rowid INTEGER PRIMARY KEY, user_id TEXT, embedding BLOB, "
              "agent_id TEXT, type TEXT, created_at INTEGER)")
    cur = c.cursor().execute("SELECT rowid, user_id, embedding, agent_id, type, created_at FROM memories_vec")
    while rows := list(islice(cur, VEC_BATCH)):
        _stage(c, rows, dim)
    c.execute("DROP TABLE memories_vec")
    c.execute(_vec_table(dim))
    last = 0
    while rows := c.execute("SELECT rowid, user_id, embedding, agent_id, type, created_at FROM vec_migrate "
                            "WHERE rowid > ? ORDER BY rowid LIMIT ?", (last, VEC_BATCH)).fetchall():
        c.executemany(VEC_INSERT, rows)
        last = rows[-1][0]
    c.execute("DROP TABLE vec_migrate")
    recallindex_schema.new_epoch(sql)


def _stage(c: Any, rows: list[tuple], dim: int) -> None:
    """Quantise a batch of float32 rows into ``vec_migrate`` (a vector of another size, which
    no reader would use, is dropped: the memory then has none, as ``bm doctor`` reports)."""
    import numpy as np

    ok = [r for r in rows if r[2] is not None and len(r[2]) == 4 * dim]
    if not ok:
        return
    q = recallindex_schema.quantise(np.frombuffer(b"".join(r[2] for r in ok), np.float32).reshape(len(ok), dim))
    c.executemany("INSERT INTO vec_migrate VALUES(?,?,?,?,?,?)",
                  [(r[0], r[1], v.tobytes(), r[3], r[4], r[5]) for r, v in zip(ok, q)])


VEC_INSERT = memories_schema.VEC_INSERT


def _base_schema(dim: int) -> list[str]:
    return [
        """CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)""",
        """CREATE TABLE memories(
            rowid INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            text TEXT NOT NULL,
            type TEXT NOT NULL,
            user_id TEXT NOT NULL,
            agent_id TEXT,                -- NULL: the user's global memory
            importance REAL NOT NULL,
            created_at INTEGER NOT NULL,  -- epoch ms (world time of the memory)
            updated_at INTEGER NOT NULL,
            valid_from INTEGER,
            valid_to INTEGER,
            source TEXT NOT NULL,         -- remember | ingest | import
            provenance TEXT NOT NULL,     -- JSON list of {bead, meta}
            meta TEXT NOT NULL,           -- JSON object
            op_id TEXT NOT NULL
        )""",
        "CREATE INDEX memories_user ON memories(user_id, agent_id, created_at)",
        """CREATE VIRTUAL TABLE memories_fts USING fts5(
            text, content='memories', content_rowid='rowid', tokenize='porter unicode61')""",
        _vec_table(dim),
        # ids forgotten (remove wins: a later add of the same id is ignored) and users forgotten
        # as of an HLC (adds stamped before it are ignored)
        "CREATE TABLE tombstones(id TEXT PRIMARY KEY, hlc TEXT NOT NULL)",
        """CREATE TABLE kg_nodes(
            id TEXT PRIMARY KEY, user_id TEXT NOT NULL, type TEXT NOT NULL, name TEXT NOT NULL,
            labels TEXT NOT NULL, meta TEXT NOT NULL, created_at INTEGER NOT NULL)""",
        "CREATE INDEX kg_nodes_name ON kg_nodes(user_id, name)",
        """CREATE TABLE kg_edges(
            id TEXT PRIMARY KEY, src TEXT NOT NULL, dst TEXT NOT NULL, predicate TEXT NOT NULL,
            weight REAL NOT NULL, evidence TEXT NOT NULL, meta TEXT NOT NULL,
            created_at INTEGER NOT NULL)""",
        "CREATE INDEX kg_edges_src ON kg_edges(src)",
        "CREATE INDEX kg_edges_dst ON kg_edges(dst)",
        """CREATE TABLE kg_mentions(
            node_id TEXT NOT NULL, memory_id TEXT NOT NULL, PRIMARY KEY(node_id, memory_id))""",
        "CREATE INDEX kg_mentions_memory ON kg_mentions(memory_id)",
    ]


MIGRATIONS: list[tuple[str, Any]] = [
    ("0001_base", _base_schema),
    # document frequency of each indexed term, for recall to skip words found everywhere
    ("0002_fts_vocab", lambda dim: ["CREATE VIRTUAL TABLE memories_vocab USING fts5vocab(memories_fts, 'row')"]),
    # bi-temporal facts (see brandmind/facts.py): system time next to the world time
    # (valid_from/valid_to), the structured triple of a fact, and who replaced it
    ("0003_bitemporal", lambda dim: _bitemporal_schema()),
    # conversation structure for recall: a raw turn's thread, episode (a run of turns with
    # no long gap, see ingest) and speaker, read from its meta; virtual, so nothing is stored twice
    ("0004_turns", lambda dim: _turn_schema()),
    # recall takes the user's most important memories as candidates (dropped by 0019)
    ("0005_importance", lambda dim: ["CREATE INDEX memories_importance ON memories(user_id, importance)"]),
    # core memory blocks: merged CRDT state and text, define and update ops (brandmind/blocks.py)
    ("0006_blocks", lambda dim: _blocks_schema()),
    # personas, who holds them, and the agents' persona documents (brandmind/personas.py)
    ("0007_personas", lambda dim: _personas_schema()),
    # skills (brandmind/skills.py) and the workspace's file index (brandmind/workspace.py)
    ("0008_skills", lambda dim: _skills_schema()),
    # sync: ops waiting for their target, per-replica apply order, add HLCs (brandmind/storage/converge.py)
    ("0009_sync", lambda dim: _sync_schema()),
    # mirror remotes (Zep, Graphiti: brandmind/sync/mirror.py): which remote object each local
    # memory / graph edge became, per remote.  Device-local (not from the op log): kept by
    # `bm rebuild` (copy_device_local), lost with a deleted index (re-sends are upserts)
    ("0010_remote_map", lambda dim: list(remote_map_schema.SCHEMA)),
    # a forgotten memory's words leave the keyword index at once (FTS5 removes them from
    # its segments instead of adding a delete marker; secure_delete zeroes the freed pages)
    ("0011_fts_secure_delete", lambda dim: [
        "INSERT INTO memories_fts(memories_fts, rank) VALUES('secure-delete', 1)"]),
    # ops of the log that are not applied: refused when pulled, or failing their check or
    # their apply (a log written by an older bm); listed by `bm doctor` (brandmind/opcheck.py)
    ("0012_quarantine", lambda dim: list(quarantine_schema.SCHEMA)),
    # memories accepted with their vector made later (brandmind/backlog.py, Store.deferring_vectors)
    ("0013_vec_pending", lambda dim: list(memories_schema.PENDING_SCHEMA)),
    # every memory changed or removed, and every vector made late, for the recall index
    ("0014_recall_changes", lambda dim: list(recallindex_schema.SCHEMA)),
    # forgetting on a schedule: a memory's expiry (--ttl) and pin, and the device-local access
    # counts recall may rank on (brandmind/expiry.py, brandmind/storage/expiry.py)
    ("0015_expiry", lambda dim: list(expiry_schema.SCHEMA)),
    # which turns an extractor has read (brandmind/extract/run.py): a re-run does not resend them
    ("0016_extract_state", lambda dim: list(extract_schema.SCHEMA)),
    # vectors kept as int8, one scale per vector (a quarter of float32; recall@10 against
    # float32 measured by scripts/bench_speed.py): a float32 table is rewritten in batches
    ("0017_vec_int8", lambda dim: [_vec_int8]),
    # a count of the changes that can take a speaker's name away: the search index keeps the
    # speakers' names across the writes of an agent loop until it moves (storage/search.py)
    ("0018_name_changes", lambda dim: list(recallindex_schema.NAME_SCHEMA)),
    # 0005's index: no query reads it since recall takes the important memories from the recall
    # index's columns (storage/recallindex.py); ~27 MB and one more B-tree per insert at 1M
    ("0019_drop_importance_index", lambda dim: ["DROP INDEX IF EXISTS memories_importance"]),
]

# tables that hold this device's own state, not a projection of the op log
DEVICE_LOCAL_TABLES = ("remote_map", "memory_access", "extract_state")


def copy_device_local(src: "SQLStore", dst: "SQLStore") -> None:
    """Carry the device-local tables over to a rebuilt index (``Memory.rebuild``)."""
    for table in DEVICE_LOCAL_TABLES:
        names = [r[1] for r in src.conn.execute(f"PRAGMA table_info({table})")]
        if not names:
            continue
        rows = src.conn.execute(f"SELECT {', '.join(names)} FROM {table}").fetchall()
        if rows:
            with dst.write():
                dst.conn.executemany(f"INSERT OR REPLACE INTO {table}({', '.join(names)}) "
                                     f"VALUES({', '.join('?' * len(names))})", rows)


def _sync_schema() -> list[str]:
    return list(converge_schema.SCHEMA)


def _personas_schema() -> list[str]:
    return list(personas_schema.SCHEMA)


def _skills_schema() -> list[str]:
    return [*skills_schema.SCHEMA, *workspace_schema.SCHEMA]


def _blocks_schema() -> list[str]:
    return blocks_schema.schema()


def _turn_schema() -> list[str]:
    turn = "json_extract(meta, '$.kind') = 'turn'"
    return [
        f"ALTER TABLE memories ADD COLUMN thread TEXT GENERATED ALWAYS AS "
        f"(CASE WHEN {turn} THEN json_extract(meta, '$.thread') END) VIRTUAL",
        f"ALTER TABLE memories ADD COLUMN episode TEXT GENERATED ALWAYS AS "
        f"(CASE WHEN {turn} THEN json_extract(meta, '$.episode') END) VIRTUAL",
        f"ALTER TABLE memories ADD COLUMN speaker TEXT GENERATED ALWAYS AS "
        f"(CASE WHEN {turn} THEN json_extract(meta, '$.speaker') END) VIRTUAL",
        "CREATE INDEX memories_turns ON memories(user_id, thread, created_at) WHERE thread IS NOT NULL",
        "CREATE INDEX memories_speakers ON memories(user_id, speaker) WHERE speaker IS NOT NULL",
    ]


def _bitemporal_schema() -> list[str]:
    return [
        "ALTER TABLE memories ADD COLUMN recorded_at INTEGER",   # HLC wall ms of the memory.add op
        "ALTER TABLE memories ADD COLUMN retired_at INTEGER",    # no longer believed since (NULL: current)
        "ALTER TABLE memories ADD COLUMN subject TEXT",          # structured facts only
        "ALTER TABLE memories ADD COLUMN predicate TEXT",
        "ALTER TABLE memories ADD COLUMN object TEXT",
        "ALTER TABLE memories ADD COLUMN superseded_by TEXT",    # id of the memory that replaced it
        "ALTER TABLE memories ADD COLUMN confirmations INTEGER NOT NULL DEFAULT 0",
        # rows from before the migration: their add op's time is not known here
        "UPDATE memories SET recorded_at = updated_at WHERE recorded_at IS NULL",
        "CREATE INDEX memories_fact ON memories(user_id, subject, predicate)",
        "ALTER TABLE kg_edges ADD COLUMN valid_from INTEGER",
        "ALTER TABLE kg_edges ADD COLUMN valid_to INTEGER",
        "ALTER TABLE kg_edges ADD COLUMN recorded_at INTEGER",
        "ALTER TABLE kg_edges ADD COLUMN retired_at INTEGER",
        "UPDATE kg_edges SET recorded_at = created_at WHERE recorded_at IS NULL",
    ]


def vec_extension_path() -> str:
    """The sqlite-vec loadable extension the ``sqlite_vec`` package ships (its
    ``loadable_path()``), found without importing the package: its ``__init__`` imports
    sqlite3 and numpy.typing, ~4 ms of a cold `bm recall`."""
    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or spec.origin is None:
        raise ImportError("No module named 'sqlite_vec'", name="sqlite_vec")
    return os.path.normpath(os.path.join(os.path.dirname(spec.origin), "vec0"))


class SQLStore:
    def __init__(self, path: Path, *, model: str, dim: Callable[[], int], create: bool = False,
                 check_model: bool = True) -> None:
        """Open (or create) the index.  ``dim`` is only called to create a new one, so
        opening a store never loads the embedding model; vector sizes are checked
        when vectors are made."""
        import apsw

        self.path = path
        self.no_pending = False  # set by replication.catch_up under its write lock (converge.replay)
        if not path.exists() and not create:
            raise StoreMissing(f"no memory index at {path}",
                               hint="run `bm rebuild` to rebuild it from the op log, or `bm init`")
        try:
            conn = apsw.Connection(str(path))
            conn.enable_load_extension(True)
            conn.load_extension(vec_extension_path())
            conn.enable_load_extension(False)
            conn.set_busy_timeout(30_000)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            # forgotten text is overwritten in the file, not just unlinked from the b-tree
            conn.execute("PRAGMA secure_delete=ON")
            self.conn = conn
            self._migrate(model, dim)
            stored_model = self.get_meta("embed_model")
            stored_dim = int(self.get_meta("embed_dim") or 0)
        except apsw.Error as exc:
            raise StoreCorrupt(f"cannot read the memory index {path}: {exc}",
                               hint="run `bm rebuild` to rebuild it from the op log (`bm doctor` checks the rest)") from None
        self.model, self.dim = stored_model, stored_dim
        if check_model and stored_model != model:
            conn.close()
            raise ModelMismatch(
                f"this store's vectors come from {stored_model} ({stored_dim}-d), "
                f"but the configured embedder is {model}",
                hint=f"run `bm reindex` to re-embed everything with {model}, "
                     "or set `embedder` back in `bm config`")

    def close(self) -> None:
        self.conn.close()

    @contextmanager
    def write(self) -> Iterator[None]:
        """A write transaction that takes the lock up front (no deferred upgrade deadlocks)."""
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            c.execute("ROLLBACK")
            raise
        else:
            c.execute("COMMIT")

    # -- schema -----------------------------------------------------------
    def _migrate(self, model: str, dim: Callable[[], int]) -> None:
        c = self.conn
        c.execute("CREATE TABLE IF NOT EXISTS migrations(name TEXT PRIMARY KEY, applied_at TEXT)")
        done = {r[0] for r in c.execute("SELECT name FROM migrations")}
        if all(name in done for name, _ in MIGRATIONS):
            return
        size = int(dim())
        for name, make in MIGRATIONS:
            if name in done:
                continue
            with self.write():  # one transaction per migration
                if c.execute("SELECT 1 FROM migrations WHERE name=?", (name,)).fetchone():
                    continue  # another process got there first
                for stmt in make(size):
                    stmt(self) if callable(stmt) else c.execute(stmt)
                if name == "0001_base":
                    c.execute("INSERT INTO meta VALUES('embed_model', ?), ('embed_dim', ?)", (model, str(size)))
                c.execute("INSERT INTO migrations VALUES(?, datetime('now'))", (name,))

    def get_meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta VALUES(?,?)", (key, value))

    def bulk(self) -> None:
        """Many rows are about to be added (a pull, a rebuild): 16 MiB of page cache for the
        rest of this connection (2 MiB by default; one sqlite-vec chunk alone is 1.5 MiB, so
        bulk adds kept re-reading pages), instead of for every short-lived command."""
        self.conn.execute("PRAGMA cache_size=-16384")

    def applied(self) -> int:
        return int(self.get_meta("applied") or 0)

    # -- memories -----------------------------------------------------------
    def insert_memory(self, m: dict, vector: bytes | None) -> None:
        """Insert a memory, its keywords and its vector (None: a ``vec_pending`` row, the
        backlog makes the vector later: brandmind/backlog.py)."""
        c = self.conn
        c.execute(
            """INSERT INTO memories(id, text, type, user_id, agent_id, importance, created_at,
               updated_at, valid_from, valid_to, source, provenance, meta, op_id,
               recorded_at, subject, predicate, object, hlc, expires_at)
               VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)""",
            (m["id"], m["text"], m["type"], m["user"], m.get("agent"), float(m["importance"]),
             m["ts"], m.get("updated", m["ts"]), m.get("valid_from"), m.get("valid_to"),
             m["source"], dumps(m.get("provenance", [])).decode(), dumps(m.get("meta", {})).decode(), m["op_id"],
             m.get("recorded_at", m.get("updated", m["ts"])), m.get("subject"), m.get("predicate"),
             m.get("object"), m.get("hlc"), m.get("expires_at")))
        rowid = c.last_insert_rowid()
        c.execute("INSERT INTO memories_fts(rowid, text) VALUES(?,?)", (rowid, m["text"]))
        if vector is None:
            c.execute("INSERT INTO vec_pending(rowid) VALUES(?)", (rowid,))
        else:
            c.execute(VEC_INSERT, (rowid, m["user"], recallindex_schema.quantised(vector), m.get("agent") or "",
                                   m["type"], m["ts"]))

    def truncate_wal(self) -> None:
        """Checkpoint and empty the WAL file (it keeps old page images: a forgotten text's
        too).  Best effort: a reader in another process may keep part of it for now."""
        import apsw

        try:
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except apsw.BusyError:
            pass

    def delete_memory(self, memory_id: str) -> str | None:
        """Remove a memory from every projection; returns its op id (None if absent)."""
        c = self.conn
        # its mentions, typed links to and from it, and the graph edges it alone is the
        # evidence of (also when the row is absent: a rebuild skips a redacted add)
        c.execute("DELETE FROM kg_mentions WHERE memory_id=?", (memory_id,))
        c.execute("DELETE FROM kg_edges WHERE src=? OR dst=? OR evidence=?",
                  (memory_id, memory_id, json.dumps([memory_id])))
        row = c.execute("SELECT rowid, text, op_id FROM memories WHERE id=?", (memory_id,)).fetchone()
        if not row:
            return None
        rowid, text, op_id = row
        c.execute("INSERT INTO memories_fts(memories_fts, rowid, text) VALUES('delete', ?, ?)", (rowid, text))
        c.execute("DELETE FROM vec_pending WHERE rowid=?", (rowid,))
        c.execute("DELETE FROM memories_vec WHERE rowid=?", (rowid,))
        c.execute("DELETE FROM memories WHERE rowid=?", (rowid,))
        expiry_schema.drop_access(self, memory_id)
        return op_id

    def memory_ids(self, where: str = "1", args: tuple = ()) -> list[str]:
        return [r[0] for r in self.conn.execute(f"SELECT id FROM memories WHERE {where}", args)]

    def rows(self, sql: str, args: tuple | dict = ()) -> Iterator[dict]:
        cur = self.conn.execute(sql, args)
        names = None
        for row in cur:
            if names is None:
                names = [d[0] for d in cur.getdescription()]
            yield dict(zip(names, row))

    def replace_vectors(self, vectors: Iterator[tuple[dict, bytes]], model: str, dim: int) -> None:
        """Swap every vector for one of another model (used by reindex); call inside a transaction.

        ``vectors`` yields (memory row with rowid, user_id, agent_id, type, created_at; vector).
        """
        c = self.conn
        c.execute("DROP TABLE memories_vec")
        c.execute(_vec_table(dim))
        for row, vec in vectors:
            c.execute(VEC_INSERT, (row["rowid"], row["user_id"], recallindex_schema.quantised(vec),
                                   row["agent_id"] or "", row["type"], row["created_at"]))
        # the memories given a vector here wait no more
        c.execute("DELETE FROM vec_pending WHERE rowid IN (SELECT rowid FROM memories_vec_rowids)")
        self.set_meta("embed_model", model)
        self.set_meta("embed_dim", str(dim))
        self.model, self.dim = model, dim
        recallindex_schema.new_epoch(self)  # every recall index file of this database is stale

    def integrity(self) -> list[str]:
        problems = []
        res = self.conn.execute("PRAGMA integrity_check").fetchall()
        if res != [("ok",)]:
            problems.append("SQLite integrity_check: " + "; ".join(r[0] for r in res[:5]))
        n_mem = self.conn.execute("SELECT count(*) FROM memories").fetchone()[0]
        n_vec = self.conn.execute("SELECT count(*) FROM memories_vec").fetchone()[0]
        n_wait = self.conn.execute("SELECT count(*) FROM vec_pending").fetchone()[0]
        if n_mem != n_vec + n_wait:
            problems.append(f"{n_mem} memories but {n_vec} vectors"
                            + (f" and {n_wait} waiting for one (`bm queue`)" if n_wait else ""))
        both = self.conn.execute("SELECT count(*) FROM vec_pending p JOIN memories_vec_rowids v "
                                 "ON v.rowid = p.rowid").fetchone()[0]
        if both:
            problems.append(f"{both} memories both have a vector and wait for one")
        try:
            self.conn.execute("INSERT INTO memories_fts(memories_fts, rank) VALUES('integrity-check', 1)")
        except Exception as exc:  # apsw.Error; the message is the finding
            problems.append(f"keyword index: {exc}")
        return problems
