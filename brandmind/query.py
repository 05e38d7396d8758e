"""Recall as users ask for it: a query and its filters in, the best memories out.

``recall(store, query, ...)`` validates the request, reads time words of the query relative to
``now``, embeds the query (as the speaker it names would say it: ``embedded_text``) and asks
the Searcher (brandmind/recall.py) for the best rows: of every scope of the user, or, with an ``agent``, that agent's own memories and the user's global
ones ranked apart and merged (``recall_agent_k`` + ``recall_global_k``, config 5 + 3, or ``k``
split in that ratio, one scope filling in when the other runs short).  Only currently true
memories, or those true ``as_of`` a date.  An explicit ``now`` is also the moment asked about:
memories dated after it do not exist yet, and facts retired after it were still current.
``recall_batch`` runs one query per line with defaults.  Reads never write (but for the
device-local access counts while ``weight_access`` is on: batched, storage/search.py).

The query is embedded in a thread of its own while the Searcher finds the keyword candidates
(onnxruntime lets go of the GIL while it runs).
"""
from __future__ import annotations

import operator
import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from . import clock, validate
from .clock import now_millis, parse_time
from .errors import BMError, InvalidInput, ModelMismatch, UsageError
from .recall import Query, Weights, searcher
from .storage.memories import briefs_by_rowid, memory_out, rows_by_rowid
from .storage.search import Filters, in_own_words
from .timewords import find_windows

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from .store import Store


def check_k(k: Any) -> int | None:
    """``k`` as a whole number from 1 to 1000 (None stays None); UsageError otherwise."""
    if k is None:
        return None
    k_in = k
    try:  # whole numbers only (a batch line may carry "k": "abc", 2.5 or true)
        k = operator.index(k) if not isinstance(k, bool) else None
    except TypeError:
        k = None
    if k is None or not 1 <= k <= 1000:
        raise UsageError(f"k must be a whole number from 1 to 1000, got {k_in!r}", hint="e.g. -k 10")
    return k


def until_ms(until: int | None, now_ms: int, now: Any) -> int | None:
    """The recall window's end: with an explicit ``now``, nothing dated after it (exclusive end)."""
    if now is None:
        return until
    return now_ms + 1 if until is None else min(until, now_ms + 1)


def filters(store: "Store", *, user: str | None, agent: str | None, types: Iterable[str], since: Any,
            until: Any, now: Any, as_of: Any) -> Filters:
    now_ms = parse_time(now, field="now") if now is not None else now_millis()
    return Filters(
        user=store.user(user), agent=validate.name(agent, what="agent") if agent is not None else None,
        types=tuple(validate.memory_type(t) for t in types),
        since=parse_time(since, field="since"), until=until_ms(parse_time(until, field="until"), now_ms, now),
        now=now_ms, as_of=parse_time(as_of, field="as_of") if as_of is not None else None)


def recall(store: "Store", query: str | bytes, *, k: int | None = None, user: str | None = None,
           agent: str | None = None, types: Iterable[str] = (), since: str | int | None = None,
           until: str | int | None = None, now: str | int | None = None,
           as_of: str | int | None = None, explain: bool = True, brief: bool = False) -> list[dict]:
    """The memories that best answer ``query``, best first (see the module docstring); each
    with the ``signals`` that put it there unless ``explain`` is False (``bm context``), and
    only the fields a context block shows when ``brief`` (``memories.briefs_by_rowid``)."""
    return prepare(store, query, k=k, user=user, agent=agent, types=types, since=since, until=until, now=now,
                   as_of=as_of, explain=explain, brief=brief)()


def prepare(store: "Store", query: str | bytes, *, k: int | None = None, user: str | None = None,
            agent: str | None = None, types: Iterable[str] = (), since: str | int | None = None,
            until: str | int | None = None, now: str | int | None = None,
            as_of: str | int | None = None, explain: bool = True,
            brief: bool = False) -> Callable[[], list[dict]]:
    """``recall`` in two steps: the request checked (its errors raised here) and the query's
    embedding started; returns what finishes it (the search, the rows).  A caller with other
    work does it in between, while the query is embedded (build_context: the core blocks and
    the recent turns)."""
    query = validate.text(query, what="query")
    k = check_k(k)
    f = filters(store, user=user, agent=agent, types=types, since=since, until=until, now=now, as_of=as_of)
    weights = Weights.from_config(store.config)
    text, named = store.searcher.speakers_named(query, f.user) if weights.speaker else (query, [])
    qvec = Later(query_vector, store, embedded_text(text, named, weights))
    base = Query(text, qvec, f, k or 10, weights,
                 tuple(find_windows(query, f.now)), f.now, explain, speakers=tuple(named))

    def finish() -> list[dict]:
        hits = searcher(store).search(base) if f.agent is None else _scopes(store, base, k)
        rows = (briefs_by_rowid if brief else rows_by_rowid)(store.sql, [h["rowid"] for h in hits])
        out = []
        for h in hits:
            row = rows.get(h["rowid"])
            if row is not None:
                item = row if brief else memory_out(row)
                item["score"] = round(h["score"], 6)
                if explain:
                    item["signals"] = h["signals"]
                out.append(item)
        if weights.access:  # counted only while the signal is on: reads write nothing by default
            store.searcher.note_access([item["id"] for item in out], clock.now_millis())
        return out
    return finish


class Later:
    """``fn(*args)`` run in a thread of its own (the query's embedding: onnxruntime lets go of
    the GIL); ``result()`` waits for it and raises its error.  A thread per query (~0.1 ms):
    nothing outlives the call, nothing to remake after a fork, and no concurrent.futures (it
    imports logging: ~15 ms of a cold `bm recall`)."""

    def __init__(self, fn: Callable[..., Any], *args: Any) -> None:
        self._out: Any = None
        self._err: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn, args), name="bm-embed-query", daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[..., Any], args: tuple) -> None:
        try:
            self._out = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller by result()
            self._err = exc

    def result(self) -> Any:
        self._thread.join()
        if self._err is not None:
            raise self._err
        return self._out


def query_vector(store: "Store", text: str) -> "np.ndarray":
    """The query's vector (float32), of the store's dimension (ModelMismatch otherwise)."""
    import numpy as np

    qvec = np.asarray(store.embedder.embed_query(text), dtype=np.float32)
    if qvec.shape != (store.sql.dim,):
        raise ModelMismatch(f"query vector is {qvec.shape[-1]}-d, the store's are {store.sql.dim}-d",
                            hint="run `bm reindex`")
    return qvec


def embedded_text(query: str, named: list[str], weights: Weights) -> str:
    """What the query's vector is made of: the query as the speaker it names (``named``)
    would say it (search.in_own_words: "what does Ann like?" -> "what does I like?"), when
    the speaker signal ranks that speaker's turns: a turn is stored as "Ann: I like ...", and
    the name in the query pulls its vector towards every turn that says the name ("hi Ann!")
    rather than towards what is asked about."""
    if not weights.speaker:
        return query
    return in_own_words(query, named)


def _scopes(store: "Store", base: Query, k: int | None) -> list[dict]:
    """The agent's own top memories and the user's global ones, merged by score."""
    a_k, g_k = store.config.recall_agent_k, store.config.recall_global_k
    if k is not None:
        a_k = min(k, round(k * a_k / (a_k + g_k))) if a_k + g_k else k
        g_k = k - a_k
    total = a_k + g_k
    f = base.filters
    ranker = searcher(store)
    own = ranker.search(replace(base, k=total, filters=replace(f, scope="agent")))
    shared = ranker.search(replace(base, k=total, filters=replace(f, scope="global")))
    take_a = min(len(own), a_k + max(0, g_k - len(shared)))
    take_g = min(len(shared), total - take_a)
    merged = own[:take_a] + shared[:take_g]
    return sorted(merged, key=lambda h: (-h["score"], h["rowid"]))


def recall_batch(store: "Store", queries: Iterable[dict], *, user: str | None = None,
                 agent: str | None = None, now: str | int | None = None, k: int | None = None,
                 types: Iterable[str] = (), since: str | int | None = None,
                 until: str | int | None = None, as_of: str | int | None = None,
                 min_score: float | None = None) -> Iterator[dict]:
    """For each ``{"query", "k"?, "id"?, "user"?, "agent"?, "type"?, "since"?, "until"?,
    "now"?, "as_of"?, "min_score"?}``, ``{"id", "results"}`` (or ``{"id", "error"}`` for
    that query alone).  The keyword arguments are the defaults of every query; a key
    of the line wins over its default."""
    for n, q in enumerate(queries, 1):
        qid = q.get("id", n) if isinstance(q, dict) else n
        try:
            if not isinstance(q, dict) or "query" not in q:
                raise InvalidInput("each batch line needs a \"query\"",
                                   hint='e.g. {"id": 1, "query": "where does Ann live?", "k": 5}')
            line_types = q.get("type") or types or ()
            if not isinstance(line_types, (str, list, tuple)):
                raise InvalidInput('"type" is a memory type or a list of them',
                                   hint='e.g. "type": "fact" or "type": ["fact", "decision"]')
            results = recall(store, q["query"], k=q.get("k", k), user=q.get("user", user),
                             agent=q.get("agent", agent),
                             types=[line_types] if isinstance(line_types, str) else line_types,
                             since=q.get("since", since), until=q.get("until", until),
                             now=q.get("now", now), as_of=q.get("as_of", as_of))
            floor = q.get("min_score", min_score)
            if floor is not None:
                if isinstance(floor, bool) or not isinstance(floor, (int, float)) or floor != floor:
                    raise InvalidInput(f"min_score must be a number, got {floor!r}", hint='e.g. "min_score": 0.5')
                results = [r for r in results if r["score"] >= floor]
            yield {"id": qid, "results": results}
        except BMError as exc:
            yield {"id": qid, "error": exc.message, "hint": exc.hint}
