"""The candidate side of recall: the per-store search index (:class:`SearchIndex`) that
finds memories by vector (the recall index, storage/recallindex.py), by keyword (BM25 over
the recall index's postings, storage/kwindex.py; the words: storage/keywords.py) and by filter, with the caches that make repeated searches fast, and
the filters (:class:`Filters`) every candidate passes.  brandmind/recall.py ranks what it finds
(brandmind/scoring.py scores); the Store holds one index (``store.searcher``) and
invalidates it after each write.  The queries recall's ranking needs besides (neighbouring
turns, the newest and most important memories) are here too.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import clock
from ..clock import now_millis, parse_time
from .expiry import access_of, add_access, live_sql
from .indexfile import scrub_names
from . import aliases
from . import graph as kg
from .recallindex import RecallIndex

if TYPE_CHECKING:  # pragma: no cover
    from ..sqlstore import SQLStore


def _marks(items: list) -> str:
    return ",".join("?" * len(items))


ACCESS_BATCH = 256  # memories counted before their counts are written (and on close)

# keyword search: storage/keywords.py (its names re-exported for recall.py and memory.py)
from . import keywords  # noqa: E402
from .keywords import (COMMON_MIN_DOCS, COMMON_SHARE, MAX_POSTINGS,  # noqa: E402,F401
                       STOPWORDS, keyword_query, query_words)


# -- "currently true" / "true as of" ------------------------------------------------------------
def current_sql(alias: str = "m", as_of: str | int | None = None, *, now: int | None = None) -> tuple[str, list]:
    """A WHERE fragment (and its args) keeping the memories true now, or true as of a date.

    Now: not retired by then and not ended (``valid_to`` in the future or unknown).  As of D (world
    time): ``valid_from <= D < valid_to`` (unknown ends are open), minus the memories retired
    as corrections (``retired_at`` set, ``valid_to`` NULL: they were never true).  System time
    is not filtered for --as-of: what bm learned later about D counts."""
    if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", alias):
        raise ValueError(f"bad table alias {alias!r}")
    a = alias
    if as_of is None:
        t = now if now is not None else now_millis()
        return (f"(({a}.retired_at IS NULL OR {a}.retired_at > ?) AND ({a}.valid_to IS NULL OR {a}.valid_to > ?))",
                [t, t])
    d = parse_time(as_of, field="as_of") if not isinstance(as_of, int) else as_of
    return (f"(({a}.valid_from IS NULL OR {a}.valid_from <= ?) AND ({a}.valid_to IS NULL OR {a}.valid_to > ?) "
            f"AND NOT ({a}.retired_at IS NOT NULL AND {a}.valid_to IS NULL))", [d, d])


# -- recall: candidates --------------------------------------------------------------------------
def data_version(sql: "SQLStore") -> int:
    """SQLite's ``data_version``: changes when another connection commits."""
    return sql.conn.execute("PRAGMA data_version").fetchone()[0]


def speakers(sql: "SQLStore", user: str, after: int = 0) -> list[str]:
    """The speakers of the user's conversations (of its rows past rowid ``after``: by rowid,
    "+user_id" keeping SQLite off the user's whole index), sorted."""
    if not after:
        sql_text = "SELECT DISTINCT speaker FROM memories WHERE user_id = ? AND speaker IS NOT NULL"
        return sorted(r[0] for r in sql.conn.execute(sql_text, (user,)))
    return sorted(r[0] for r in sql.conn.execute(
        "SELECT DISTINCT speaker FROM memories WHERE rowid > ? AND +user_id = ? AND speaker IS NOT NULL", (after, user)))


def stamp(sql: "SQLStore") -> tuple[int, int]:
    """(the highest rowid of ``memories``, the count of changes that can take a name away):
    rows past the first are new; the second moves when a memory is deleted or its meta or user
    changes (recallsql.NAME_SCHEMA's triggers; not when a late vector lands)."""
    return sql.conn.execute("SELECT (SELECT coalesce(max(rowid), 0) FROM memories), "
                            "(SELECT n FROM name_changes)").fetchone()


def named_in(text: str, names: list[str]) -> list[str]:
    """The ``names`` (speakers) a text names: the whole name as whole words, or one of its
    words (3+ letters) that no other name has, e.g. "Ann" for "Ann Lee"; a capitalised word
    of 4+ letters one letter off such a word (a typo: "Aqib" for "Akib") counts too."""
    return list(mentions(text, names))


def mentions(text: str, names: list[str]) -> dict[str, list[str]]:
    """name -> the words of ``text`` (lower case) that name it, for the ``names`` it names
    (:func:`named_in`)."""
    low = text.lower()
    words = set(re.findall(r"\w+", low))
    caps = {w.lower() for w in re.findall(r"(?<!\w)[A-Z]\w{3,}", text)}
    out: dict[str, list[str]] = {}
    for name, whole, name_words, own in _name_table(tuple(names)):
        if whole.search(low):
            out[name] = list(name_words)
            continue
        said = [w for w in own if w in words] + [c for c in caps for w in own if len(w) >= 4 and _one_off(w, c)]
        if said:
            out[name] = said
    return out


@lru_cache(maxsize=64)
def _name_table(names: tuple[str, ...]) -> list[tuple[str, "re.Pattern[str]", tuple[str, ...], tuple[str, ...]]]:
    """Per name (in order): the whole name as a pattern of whole words, its words, and its
    words of 3+ letters that no other name has and that are no stopword (what :func:`mentions`
    matches; made once per list of names: a store's speakers change rarely)."""
    owners: dict[str, set[str]] = {}
    for name in names:
        for part in re.findall(r"\w{3,}", name.lower()):
            owners.setdefault(part, set()).add(name)
    return [(name, re.compile(r"(?<!\w)" + re.escape(name.lower()) + r"(?!\w)"), tuple(re.findall(r"\w+", name.lower())),
             tuple(w for w in re.findall(r"\w{3,}", name.lower()) if owners[w] == {name} and w not in STOPWORDS))
            for name in names]


def in_own_words(text: str, names: list[str]) -> str:
    """``text`` as the one speaker it names would say it ("what does Ann like?" -> "what
    does I like?", "Ann's" -> "my"), their turns being their own words; with several named,
    the text without their names.  The text itself when it names none (:func:`mentions`)."""
    said = mentions(text, names)
    words = {w for ws in said.values() for w in ws}
    if not words:
        return text
    name = r"(?<!\w)(?:" + "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True)) + ")"
    if len(said) == 1:
        text = re.sub(name + r"['’]s?(?!\w)", "my", text, flags=re.IGNORECASE)
        out = re.sub(name + r"(?!\w)", "I", text, flags=re.IGNORECASE)
    else:
        out = re.sub(name + r"(?:['’]s?)?(?!\w)", "", text, flags=re.IGNORECASE)
    out = re.sub(r"\s+", " ", out).strip()
    return out if re.search(r"\w", out) else text


def _one_off(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` differ by one letter replaced, added or dropped."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b)) == 1
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return any(long_[:i] + long_[i + 1:] == short for i in range(len(long_)))


def rowids_of(sql: "SQLStore", ids: list[str]) -> dict[str, int]:
    """memory id -> rowid, of the memories ``ids`` that exist."""
    out: dict[str, int] = {}
    for i in range(0, len(ids), 900):
        part = ids[i:i + 900]
        out.update(sql.conn.execute(f"SELECT id, rowid FROM memories WHERE id IN ({_marks(part)})", part).fetchall())
    return out


def ids_of(sql: "SQLStore", rowids: list[int]) -> dict[int, str]:
    """rowid -> memory id, of the rowids that exist."""
    return dict(sql.conn.execute(f"SELECT rowid, id FROM memories WHERE rowid IN ({_marks(rowids)})", rowids).fetchall())


@dataclass
class Filters:
    user: str
    agent: str | None = None      # with scope None: None = every scope of the user, else that agent + global
    types: tuple[str, ...] = ()
    since: int | None = None      # epoch ms, inclusive
    until: int | None = None      # epoch ms, exclusive
    scope: str | None = None      # "agent": only the agent's own memories; "global": only the user's global ones
    now: int | None = None        # what "currently true" is relative to (default: the clock)
    as_of: int | None = None      # world time: what was true then, instead of what is true now
    everything: bool = False      # retired and ended memories too (what `forget --match` sees)

    def sql(self, alias: str = "m") -> tuple[str, list[Any]]:
        where, args = [f"{alias}.user_id = ?"], [self.user]
        if self.scope == "global":
            where.append(f"{alias}.agent_id IS NULL")
        elif self.scope == "agent":
            where.append(f"{alias}.agent_id = ?")
            args.append(self.agent)
        elif self.agent is not None:
            where.append(f"({alias}.agent_id = ? OR {alias}.agent_id IS NULL)")
            args.append(self.agent)
        if self.types:
            where.append(f"{alias}.type IN ({','.join('?' * len(self.types))})")
            args.extend(self.types)
        if self.since is not None:
            where.append(f"{alias}.created_at >= ?")
            args.append(self.since)
        if self.until is not None:
            where.append(f"{alias}.created_at < ?")
            args.append(self.until)
        if not self.everything:
            frag, fargs = current_sql(alias, self.as_of, now=self.now)
            where.append(frag)
            args.extend(fargs)
            frag, fargs = live_sql(alias, clock.now_millis())  # not expired (--ttl): the real clock
            where.append(frag)
            args.extend(fargs)
        return " AND ".join(where), args

    def vec_sql(self) -> tuple[str, list[Any]]:
        """The part of the filters sqlite-vec can apply inside its KNN scan."""
        where, args = ["user_id = ?"], [self.user]
        if self.scope == "global":
            where.append("agent_id = ''")
        elif self.scope == "agent":
            where.append("agent_id = ?")
            args.append(self.agent)
        elif self.agent is not None:
            where.append("agent_id IN (?, '')")
            args.append(self.agent)
        if self.types:
            where.append(f"type IN ({','.join('?' * len(self.types))})")
            args.extend(self.types)
        if self.since is not None:
            where.append("created_at >= ?")
            args.append(self.since)
        if self.until is not None:
            where.append("created_at < ?")
            args.append(self.until)
        return " AND ".join(where), args


class SearchIndex:
    """Candidates of every lookup signal, with their caches; one per open store."""

    def __init__(self, sql: SQLStore) -> None:
        self.sql = sql
        self.index: RecallIndex | None = None
        self.index_path = sql.path.with_name("recall.idx")  # beside memory.sqlite
        self._data_version: int | None = None
        # user -> (top rowid read, speakers); (user, word) -> (top rowid read, speaker or None):
        # kept across writes, brought up to date from the rows added since; dropped whole when
        # a change or delete moves ``name_changes`` (:meth:`_names_stamp`)
        self._speakers: dict[str, tuple[int, list[str]]] = {}
        self._aliases: dict[tuple[str, str], tuple[int, str | None]] = {}
        self._name_changes: int | None = None
        self._stale = True
        self._graph_empty: tuple[int, bool] | None = None
        self._access: dict[str, list[int]] = {}  # id -> [hits, last ms] not written yet

    def invalidate(self) -> None:
        """Called after this process wrote: the next search brings the index up to date
        (SQLite's data_version only moves for other connections' commits)."""
        self._stale = True
        self._graph_empty = None

    def close(self) -> None:
        """Write the access counts, and the recall index file if this process caught up well beyond it."""
        self.flush_access()
        self.save_index()

    # -- access counts (recall's ``weight_access`` signal: counted only while it is on) ----
    def note_access(self, ids: list[str], now: int) -> None:
        """Recall returned ``ids``: counted here, written in batches (:meth:`flush_access`)."""
        for memory_id in ids:
            entry = self._access.setdefault(memory_id, [0, 0])
            entry[0] += 1
            entry[1] = max(entry[1], now)
        if len(self._access) >= ACCESS_BATCH:
            self.flush_access()

    def flush_access(self) -> int:
        """Add the counts kept here to the ``memory_access`` table; returns how many memories.
        Dropped if SQLite is busy or read-only (a ranking hint, not data)."""
        import apsw

        if not self._access or self.sql.conn.in_transaction:
            return 0
        counts, self._access = self._access, {}
        try:
            with self.sql.write():
                add_access(self.sql, {i: (n, t) for i, (n, t) in counts.items()})
        except (apsw.BusyError, apsw.ReadOnlyError):
            return 0
        return len(counts)

    def access(self, rowids: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """``(hits, last ms)`` of the memories ``rowids``, as arrays in their order."""
        got = access_of(self.sql, rowids)
        hits, last = np.zeros(len(rowids)), np.zeros(len(rowids), np.int64)
        for j, rowid in enumerate(rowids):
            mid, n, t = got.get(rowid, ("", 0, 0))
            extra = self._access.get(mid, (0, 0))
            hits[j], last[j] = n + extra[0], max(t, extra[1])
        return hits, last

    def save_index(self, lock: Any = None) -> bool:
        """Write the recall index file if this process caught up well beyond it (``lock``:
        held only while rows are chosen and bookkept, see ``RecallIndex.save``)."""
        return self.index.save(lock) if self.index is not None else False

    def forgotten(self, *, names: bool = False) -> None:
        """After a forget: the recall index catches up now, which overwrites the forgotten
        memories' vectors in its file (if it has one; else nothing holds them); ``names``
        (a user forgotten): its dictionaries of names too, and a new file is written
        without that user's."""
        if self.index is None and not self.index_path.exists():
            return
        index = self.recall_index()
        if names:
            scrub_names(self.index_path)
            index.build()

    # -- vector candidates -------------------------------------------------------
    def recall_index(self) -> RecallIndex:
        """The store's recall index (storage/recallindex.py), up to date with SQLite."""
        version = data_version(self.sql)
        if self.index is None:
            self.index = RecallIndex(self.sql, self.index_path)
            self._stale = True
        if self._stale or version != self._data_version:
            self.index.refresh()
            self._data_version, self._stale = version, False
        return self.index

    def vector_candidates(self, q: np.ndarray, f: Filters, n: int) -> list[tuple[int, float]]:
        """The ``n`` memories passing ``f`` nearest to ``q``: ``(rowid, cosine)``, best first."""
        index = self.recall_index()
        pos, sims = index.nearest(q, index.mask(f), n)
        return list(zip(index.cols["rowid"][pos].tolist(), sims.tolist()))

    # -- keyword candidates ------------------------------------------------------
    def selective_words(self, query: str, cap: int | None = -1) -> list[str]:
        """The query's words that keyword search uses (storage/keywords.py ``keep_words``;
        ``cap``: the postings budget, -1 ``MAX_POSTINGS``, None none)."""
        return self.recall_index().keyword_words(query, keywords.MAX_POSTINGS if cap == -1 else cap)

    def keyword_candidates(self, query: str, f: Filters, n: int) -> list[tuple[int, float]]:
        """The best ``n`` keyword hits passing ``f``: ``(rowid, -bm25)``, best first (the
        recall index's postings, storage/kwindex.py)."""
        index = self.recall_index()
        pos, score = index.keywords(query, index.mask(f), n)
        return list(zip(index.cols["rowid"][pos].tolist(), score.tolist()))

    def graph_empty(self) -> bool:
        """Whether the knowledge graph is empty (cached until SQLite changes)."""
        version = data_version(self.sql)
        if self._graph_empty is None or self._graph_empty[0] != version:
            self._graph_empty = (version, kg.is_empty(self.sql))
        return self._graph_empty[1]

    def speakers_named(self, text: str, user: str) -> tuple[str, list[str]]:
        """``text`` with each name its speakers are called by written as the speaker's
        ("Kate" -> "Emi": storage/aliases.py), and the speakers of the user's conversations
        that it names (:func:`named_in`)."""
        top = self._names_stamp()
        names = self._speaker_names(user, top)
        for word, speaker in self._aliases_in(text, user, names, top).items():
            text = re.sub(r"(?<!\w)" + re.escape(word) + r"(?!\w)", lambda _m, name=speaker: name, text)
        return text, named_in(text, names)

    def aliases_in(self, text: str, user: str) -> dict[str, str]:
        """word -> speaker, for the words of ``text`` that name a speaker of the user's
        conversations as the conversation calls them (storage/aliases.py)."""
        top = self._names_stamp()
        return self._aliases_in(text, user, self._speaker_names(user, top), top)

    def _aliases_in(self, text: str, user: str, names: list[str], top: int) -> dict[str, str]:
        """:meth:`aliases_in`, given the user's speakers and the stamp read for this query."""
        if not names:
            return {}
        said = {w for ws in mentions(text, names).values() for w in ws}
        out = {}
        for word in aliases.candidates(text, said):
            key = (user, word)
            hit = self._aliases.get(key)
            if hit is not None and hit[0] != top and not aliases.said_since(self.sql, word, hit[0]):
                hit = self._aliases[key] = (top, hit[1])  # only rows without the word were added
            if hit is None or hit[0] != top:
                if len(self._aliases) > 256:
                    self._aliases.clear()
                hit = self._aliases[key] = (top, aliases.speaker_called(self.sql, self.recall_index(), user, word))
            if hit[1] is not None:
                out[word] = hit[1]
        return out

    def _speaker_names(self, user: str, top: int) -> list[str]:
        """The user's speakers, kept across writes: rows added since add theirs (an agent
        loop writes a turn before each query); a change or delete makes the list anew.
        ``top``: :meth:`_names_stamp`, read once for the query."""
        cached = self._speakers.get(user)
        if cached is not None and cached[0] != top:
            more = [n for n in speakers(self.sql, user, after=cached[0]) if n not in cached[1]]
            cached = self._speakers[user] = (top, sorted(cached[1] + more) if more else cached[1])
        if cached is None:
            if len(self._speakers) > 64:
                self._speakers.clear()
                self._aliases.clear()
            cached = self._speakers[user] = (top, speakers(self.sql, user))
        return cached[1]

    def _names_stamp(self) -> int:
        """The highest rowid now; when a memory was deleted or its meta or user changed since
        the last call, every cached speaker and name is dropped first (none of a forgotten
        speaker's is kept in a process)."""
        top, changes = stamp(self.sql)
        if changes != self._name_changes:
            self._speakers.clear()
            self._aliases.clear()
            _name_table.cache_clear()
            self._name_changes = changes
        return top
