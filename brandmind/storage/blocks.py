"""The blocks repository: the tables of core memory blocks (migration ``0006_blocks``) and
every SQL statement about them.  What a block is and how its ops merge: brandmind/blocks.py
and brandmind/blockrules.py.

``blocks``         the merged state of each block: its pycrdt doc, its text, its definition
``block_defs``     every ``block.define`` op (folded per field, LWW by HLC)
``block_updates``  every ``block.update`` op; ``applied`` = 1 once it is in the block's doc

Also here, so that the op checks (brandmind/opcheck.py) can use them: the block record's
scopes, fields and limit range, its id (derived from scope, owner and label) and the
checks of a label and of a persona handle.
"""
from __future__ import annotations

import hashlib
import re
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from ..errors import InvalidInput

if TYPE_CHECKING:  # pragma: no cover
    from ..sqlstore import SQLStore

SCOPES = ("user", "agent", "persona")
FIELDS = ("description", "limit", "read_only")  # a definition's fields (merged per field)
MAX_LIMIT = 100_000
PERSONA_SUFFIX = "_service_experience"

_LABEL = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]{0,99}$")
_HANDLE = re.compile(r"^[a-z0-9]+(?:_[a-z0-9]+)*$")


# -- the record ----------------------------------------------------------------------------------
def block_id(scope: str, user: str | None, agent: str | None, persona: str | None, label: str) -> str:
    """``"k_" + sha256(scope, owner, label)[:24]``: two replicas defining the same block
    get the same id."""
    owner = persona if scope == "persona" else (f"{user}\0{agent}" if scope == "agent" else user)
    digest = hashlib.sha256(f"{scope}\0{owner}\0{label}".encode()).hexdigest()
    return "k_" + digest[:24]


def validate_label(label: Any) -> str:
    if not isinstance(label, str) or not _LABEL.match(label):
        raise InvalidInput(f"invalid block label {label!r}",
                           hint="a label is 1-100 letters, digits, '_' or '-', starting with a letter, "
                                "e.g. human, agent_persona, project_notes")
    return label


def validate_handle(handle: Any) -> str:
    if not isinstance(handle, str) or not _HANDLE.match(handle) or len(handle) > 80:
        raise InvalidInput(f"invalid persona handle {handle!r}",
                           hint="a handle is <industry>_<role> in lower case, e.g. qsr_real_estate")
    return handle


# -- schema (sqlstore.MIGRATIONS "0006_blocks") -------------------------------------------------
def schema() -> list[str]:
    return [
        """CREATE TABLE blocks(
            id TEXT PRIMARY KEY,
            scope TEXT NOT NULL,            -- user | agent | persona
            user_id TEXT,                   -- owner (user and agent scopes)
            agent_id TEXT,                  -- agent scope
            persona TEXT,                   -- persona scope: the handle
            label TEXT NOT NULL,
            description TEXT NOT NULL,
            char_limit INTEGER NOT NULL,
            read_only INTEGER NOT NULL,
            created_hlc TEXT NOT NULL,      -- smallest HLC of its defines
            state BLOB NOT NULL,            -- the merged pycrdt doc (doc.get_update())
            value TEXT NOT NULL,            -- its text
            over_limit INTEGER NOT NULL,    -- length(value) > char_limit (after a merge)
            updated_at INTEGER,             -- wall ms of the applied update with the greatest HLC
            updated_by TEXT                 -- its writer
        )""",
        "CREATE INDEX blocks_owner ON blocks(user_id, agent_id)",
        "CREATE INDEX blocks_persona ON blocks(persona)",
        # every define op (folded per field, LWW by HLC)
        """CREATE TABLE block_defs(
            block_id TEXT NOT NULL, op_id TEXT NOT NULL, hlc TEXT NOT NULL, scope TEXT NOT NULL,
            user_id TEXT, payload TEXT NOT NULL, PRIMARY KEY(block_id, op_id))""",
        # every update op: applied = 1 when it is in the block's doc, 0 while it waits for
        # an earlier seq of its origin or for its deps
        """CREATE TABLE block_updates(
            block_id TEXT NOT NULL, origin INTEGER NOT NULL, seq INTEGER NOT NULL,
            op_id TEXT NOT NULL, hlc TEXT NOT NULL, scope TEXT NOT NULL, user_id TEXT,
            agent_id TEXT, data BLOB NOT NULL, deps BLOB NOT NULL, applied INTEGER NOT NULL,
            PRIMARY KEY(block_id, origin, seq))""",
        "CREATE INDEX block_updates_user ON block_updates(user_id, scope)",
        "CREATE INDEX block_defs_user ON block_defs(user_id, scope)",
    ]


# -- reads -----------------------------------------------------------------------------------------
def row(sql: "SQLStore", bid: str) -> dict | None:
    """The ``blocks`` row of ``bid`` as a dict (None: no such block)."""
    rows = list(sql.rows("SELECT * FROM blocks WHERE id=?", (bid,)))
    return rows[0] if rows else None


def exists(sql: "SQLStore", bid: str) -> bool:
    return sql.conn.execute("SELECT 1 FROM blocks WHERE id=?", (bid,)).fetchone() is not None


def existing(sql: "SQLStore", ids: Iterable[str]) -> set[str]:
    """Which of ``ids`` are blocks."""
    ids = list(ids)
    marks = ",".join("?" * len(ids))
    return {r[0] for r in sql.conn.execute(f"SELECT id FROM blocks WHERE id IN ({marks})", ids)}


def value(sql: "SQLStore", bid: str) -> str | None:
    """The text of block ``bid`` (None: no such block)."""
    found = sql.conn.execute("SELECT value FROM blocks WHERE id=?", (bid,)).fetchone()
    return found[0] if found else None


def all_rows(sql: "SQLStore") -> Iterator[dict]:
    """Every block, by id."""
    return iter(sql.rows("SELECT * FROM blocks ORDER BY id"))


def user_rows(sql: "SQLStore", user: str) -> list[dict]:
    """The user-scope blocks of ``user``."""
    return list(sql.rows("SELECT * FROM blocks WHERE scope='user' AND user_id=?", (user,)))


def agent_rows(sql: "SQLStore", user: str, agent: str) -> list[dict]:
    """The agent-scope blocks of ``agent`` for ``user``."""
    return list(sql.rows("SELECT * FROM blocks WHERE scope='agent' AND user_id=? AND agent_id=?", (user, agent)))


def owned_rows(sql: "SQLStore", user: str, agent: str | None = None) -> list[dict]:
    """The user's blocks and their agents' (only ``agent``'s when given)."""
    if agent is None:
        return list(sql.rows("SELECT * FROM blocks WHERE user_id=? AND scope IN ('user', 'agent')", (user,)))
    return list(sql.rows("SELECT * FROM blocks WHERE user_id=? AND (scope='user' OR "
                         "(scope='agent' AND agent_id=?))", (user, agent)))


def last_seq(sql: "SQLStore", bid: str, origin: int) -> int:
    """The greatest seq of ``origin``'s updates of the block (0: none)."""
    return sql.conn.execute("SELECT coalesce(max(seq), 0) FROM block_updates WHERE block_id=? AND origin=?",
                            (bid, origin)).fetchone()[0]


@contextmanager
def read_txn(sql: "SQLStore") -> Iterator[None]:
    """One SQLite read transaction (reads that must see the same projection)."""
    sql.conn.execute("BEGIN")
    try:
        yield
    finally:
        sql.conn.execute("COMMIT")


def over_limit(sql: "SQLStore") -> list[tuple[str, str, int]]:
    """(label, owner, characters over) of the blocks over their limit, by label."""
    return list(sql.conn.execute("SELECT label, coalesce(user_id, persona), length(value) - char_limit "
                                 "FROM blocks WHERE over_limit ORDER BY label"))


def counts(sql: "SQLStore") -> tuple[int, int]:
    """(blocks, updates waiting to be applied)."""
    c = sql.conn
    return (c.execute("SELECT count(*) FROM blocks").fetchone()[0],
            c.execute("SELECT count(*) FROM block_updates WHERE applied=0").fetchone()[0])


# -- the projection's writes (brandmind/blockrules.py) ----------------------------------------------
def add_define(sql: "SQLStore", bid: str, op_id: str, hk: str, scope: str, user: str | None,
               payload: str) -> None:
    sql.conn.execute("INSERT OR IGNORE INTO block_defs VALUES(?,?,?,?,?,?)", (bid, op_id, hk, scope, user, payload))


def add_update(sql: "SQLStore", bid: str, origin: int, seq: int, op_id: str, hk: str, scope: str,
               user: str | None, agent: str | None, data: bytes, deps: bytes) -> None:
    """Keep an update op, not applied yet (a replay of a kept one changes nothing)."""
    sql.conn.execute("INSERT OR IGNORE INTO block_updates VALUES(?,?,?,?,?,?,?,?,?,?,0)",
                     (bid, origin, seq, op_id, hk, scope, user, agent, data, deps))


def defines(sql: "SQLStore", bid: str) -> list[tuple[str, str]]:
    """(hlc, payload JSON) of the block's define ops, ascending HLC."""
    return list(sql.conn.execute("SELECT hlc, payload FROM block_defs WHERE block_id=? ORDER BY hlc, op_id",
                                 (bid,)))


def drop(sql: "SQLStore", bid: str) -> None:
    """Remove the block's row; its updates wait (applied = 0) for a define again."""
    sql.conn.execute("DELETE FROM blocks WHERE id=?", (bid,))
    unapply(sql, bid)


def unapply(sql: "SQLStore", bid: str) -> None:
    sql.conn.execute("UPDATE block_updates SET applied=0 WHERE block_id=?", (bid,))


def create(sql: "SQLStore", bid: str, first: dict, fields: dict, created_hlc: str, state: bytes) -> None:
    """A new block row, empty, from its first define ``first`` and the merged ``fields``."""
    sql.conn.execute("INSERT INTO blocks VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,NULL,NULL)",
                     (bid, first["scope"], first.get("user"), first.get("agent"), first.get("persona"),
                      first["label"], fields["description"], int(fields["limit"]),
                      int(bool(fields["read_only"])), created_hlc, state, "", 0))


def redefine(sql: "SQLStore", bid: str, fields: dict, created_hlc: str) -> None:
    """Set the merged definition of an existing block (and its over-limit flag)."""
    sql.conn.execute("UPDATE blocks SET description=?, char_limit=?, read_only=?, created_hlc=?, "
                     "over_limit = (length(value) > ?) WHERE id=?",
                     (fields["description"], int(fields["limit"]), int(bool(fields["read_only"])), created_hlc,
                      int(fields["limit"]), bid))


def state(sql: "SQLStore", bid: str) -> tuple[bytes, str] | None:
    """(doc state, text) of the block (None: no such block)."""
    found = sql.conn.execute("SELECT state, value FROM blocks WHERE id=?", (bid,)).fetchone()
    return (found[0], found[1]) if found else None


def waiting(sql: "SQLStore", bid: str) -> list[tuple[int, int, bytes, bytes]]:
    """(origin, seq, data, deps) of the block's updates not applied yet, by origin and seq."""
    return list(sql.conn.execute("SELECT origin, seq, data, deps FROM block_updates "
                                 "WHERE block_id=? AND applied=0 ORDER BY origin, seq", (bid,)))


def applied_seqs(sql: "SQLStore", bid: str) -> dict[int, int]:
    """origin -> the greatest seq of its applied updates of the block."""
    return dict(sql.conn.execute("SELECT origin, max(seq) FROM block_updates WHERE block_id=? AND applied=1 "
                                 "GROUP BY origin", (bid,)).fetchall())


def mark_applied(sql: "SQLStore", bid: str, done: Iterable[tuple[int, int]]) -> None:
    sql.conn.executemany("UPDATE block_updates SET applied=1 WHERE block_id=? AND origin=? AND seq=?",
                         [(bid, o, s) for o, s in done])


def last_applied(sql: "SQLStore", bid: str) -> tuple[str, str | None] | None:
    """(hlc, writer) of the block's applied update with the greatest HLC."""
    found = sql.conn.execute("SELECT hlc, user_id FROM block_updates WHERE block_id=? AND applied=1 "
                             "ORDER BY hlc DESC, op_id DESC LIMIT 1", (bid,)).fetchone()
    return (found[0], found[1]) if found else None


def set_state(sql: "SQLStore", bid: str, state: bytes, value: str, updated_at: int | None,
              updated_by: str | None) -> None:
    """Store the block's doc and text (and whether the text is over the limit)."""
    sql.conn.execute("UPDATE blocks SET state=?, value=?, over_limit = (? > char_limit), updated_at=?, "
                     "updated_by=? WHERE id=?", (state, value, len(value), updated_at, updated_by, bid))


# -- forgetting a user (user.forget at HLC key ``hk``) -----------------------------------------------
def drop_owned_before(sql: "SQLStore", user: str, hk: str) -> list[str]:
    """Delete the define and update ops of the user's own blocks stamped before ``hk``;
    returns the ids of the blocks they belonged to."""
    c = sql.conn
    owned = sorted({r[0] for r in c.execute(
        "SELECT block_id FROM block_defs WHERE user_id=? AND scope != 'persona' AND hlc < ? "
        "UNION SELECT block_id FROM block_updates WHERE user_id=? AND scope != 'persona' AND hlc < ?",
        (user, hk, user, hk))})
    c.execute("DELETE FROM block_defs WHERE user_id=? AND scope != 'persona' AND hlc < ?", (user, hk))
    c.execute("DELETE FROM block_updates WHERE user_id=? AND scope != 'persona' AND hlc < ?", (user, hk))
    return owned


def anonymise_before(sql: "SQLStore", user: str, hk: str) -> list[str]:
    """Take the user's name off their edits of shared persona blocks stamped before ``hk``;
    returns the ids of those blocks."""
    c = sql.conn
    shared = sorted({r[0] for r in c.execute(
        "SELECT block_id FROM block_updates WHERE user_id=? AND scope = 'persona' AND hlc < ?", (user, hk))})
    c.execute("UPDATE block_updates SET user_id=NULL, agent_id=NULL WHERE user_id=? AND scope='persona' AND hlc < ?",
              (user, hk))
    return shared
