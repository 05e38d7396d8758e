"""``brandmind.Memory``: the one object the CLI (and any agent) talks to.

It owns the op log (LMDB), the SQLite projection, the blob store and the
embedder.  Every write appends ops first, then applies them to SQLite (see
projection.py); every read goes to the projections.
"""
from __future__ import annotations

import operator
import os
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from . import beads, validate
from . import consolidate as consolidation
from .admin import Admin
from .blocks import Blocks
from .clock import iso, new_id, now_millis, parse_time
from .config import Config
from .errors import BMError, InvalidInput, NotFound, StoreCorrupt, StoreMissing, UsageError
from .facts import Facts
from .forgetting import forget_ids, forget_user_ops
from .graph import Graph
from .ingest import known_bead, message_key, read_messages
from .oplog import BlobStore, OpLog
from .opcheck import problem
from .ops import Kind
from .personas import Personas
from .privacy import gather_private_terms
from .projection import apply_log_side, apply_sql_side, hlc_key
from .recall import Filters, Searcher, keyword_query
from .skills import Skills
from .sqlstore import SQLStore
from .storage.forget import match_memories
from .storage.memories import memory_out
from .store import Progress, Store

INGEST_BATCH = 256


class Memory:
    """A bm store.  Use as a context manager or call close()."""

    def __init__(self, home: str | os.PathLike[str] | None = None, *, config: Config | None = None,
                 embedder: Any = None, create: bool = False, check_model: bool = True,
                 repair: bool = False) -> None:
        """Open the store (``create`` makes it if missing).  ``repair`` moves an unreadable
        SQLite index aside and starts an empty one, which the op log refills (`bm rebuild`)."""
        self.store = Store(config or Config.load(home), embedder=embedder, create=create,
                           check_model=check_model, repair=repair)

    # -- the store's parts (brandmind/store.py) -------------------------------------
    @property
    def config(self) -> Config:
        return self.store.config

    @property
    def paths(self) -> Any:
        return self.store.paths

    @property
    def log(self) -> OpLog:
        return self.store.log

    @property
    def blobs(self) -> Any:
        return self.store.blobs

    @property
    def sql(self) -> SQLStore:
        return self.store.sql

    @property
    def searcher(self) -> Searcher:
        """Recall's ranking over the store's search index (``store.searcher``)."""
        return Searcher(self.store.searcher)

    @property
    def embedder(self) -> Any:
        return self.store.embedder

    @property
    def embedder_name(self) -> str:
        return self.store.embedder_name

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.store.close()

    # -- sub-APIs (one cached property each: mem.blocks, mem.personas, mem.skills, mem.graph, mem.facts)
    @cached_property
    def admin(self) -> Admin:
        """rebuild, reindex, stats, users, doctor (brandmind/admin.py)."""
        return Admin(self.store)

    @cached_property
    def blocks(self) -> Blocks:
        """Core memory blocks: list, get, set, append, replace, define, core, shared ...
        (brandmind/blocks.py); shared-block writes are PII-guarded with the writer's
        private terms (brandmind/privacy.py)."""
        return Blocks(self.store, private_terms=lambda user: gather_private_terms(self.store, user))

    @cached_property
    def personas(self) -> Personas:
        """Persona cohorts, who holds them, detection and the agents' persona documents:
        available, get, define, assign, unassign, held, holders, detect, doc, put_doc ...
        (brandmind/personas.py)."""
        return Personas(self.store)

    @cached_property
    def skills(self) -> Skills:
        """Skills (procedural memory): add, list, get, remove, match, import_dir
        (brandmind/skills.py)."""
        return Skills(self.store)

    @cached_property
    def graph(self) -> Graph:
        """The knowledge graph: add_node, node, add_edge, find_node, list_nodes, remove_node,
        merge_nodes, link (typed links between memories), neighbors (brandmind/graph.py)."""
        return Graph(self.store)

    @cached_property
    def facts(self) -> Facts:
        """Bi-temporal facts: add, add_many (with reconciliation), history (brandmind/facts.py)."""
        return Facts(self.store)

    def receive_ops(self, ops: Iterable[dict], *, now_ms: int | None = None, apply: bool = True) -> dict:
        """Store ops pulled from another replica (sync) and apply them (``Store.receive_ops``)."""
        return self.store.receive_ops(ops, now_ms=now_ms, apply=apply)

    # -- memories -------------------------------------------------------------
    def remember(self, text: str | bytes, *, type: str = "fact", user: str | None = None,
                 agent: str | None = None, importance: float = 0.5, meta: dict | None = None,
                 ts: str | int | None = None, extract: bool = False) -> dict:
        """Store one memory; returns it as recall would.  ``extract``: then also extract
        atomic facts from the text (config ``extractor``; "I" is the user) and store them
        with reconciliation; the returned memory gets the report under ``"extract"`` (see
        :meth:`extract`)."""
        text = validate.text(text, limit=self.config.max_memory_chars)
        payload = {
            "id": new_id("m"), "text": text, "type": validate.memory_type(type),
            "user": self.store.user(user),
            "agent": validate.name(agent, what="agent") if agent is not None else None,
            "importance": validate.importance(importance), "meta": validate.meta(meta),
            "source": "remember", "provenance": [], "valid_from": None, "valid_to": None,
        }
        payload["ts"] = parse_time(ts, field="ts") if ts is not None else now_millis()
        vec = self.store.embed_docs([text])[0]
        with self.log.write() as t:
            t.append(Kind.MEMORY_ADD, payload)
            t.cache_vector(self.sql.model, text, vec.tobytes())
        self.store.catch_up()
        if extract:
            from .extract import Turn
            from .extract.run import extract_turns

            try:
                report = extract_turns(self.store, [Turn(text, None, payload["ts"], None, payload["user"])],
                                       user=payload["user"], agent=payload["agent"],
                                       meta={"source_memory": payload["id"]})
            except BMError as exc:
                exc.message += f" — the memory {payload['id']} was stored, but no facts were extracted"
                raise
            return {**self.get(payload["id"]), "extract": report}
        return self.get(payload["id"])

    def extract(self, turns: Any, *, user: str | None = None, agent: str | None = None,
                ts: str | int | None = None, dry_run: bool = False) -> dict:
        """Extract atomic facts from ``turns`` with the configured extractor (config
        ``extractor``: rules, the offline default, or llm) and store them with
        reconciliation (``mem.facts.add_many``).  ``turns``: a text, or a list of texts or
        ``{"text", "speaker"?, "ts"?, "bead"?}`` dicts or ``brandmind.extract.Turn``;
        "I" is the turn's speaker (the user when it has none); ``ts`` (default now) is the
        time of turns without one, against which "yesterday" is read.

        Returns ``{"extractor", "turns", "found", "facts": {"added", "confirmed", "updated",
        "contradicted"}, "llm": {"calls", "tokens", "capped"}, "skipped_turns", "bad_chunks",
        "bad_facts"}``.  ``dry_run`` stores nothing and calls no LLM: ``llm`` is the estimate
        and, for the rules, ``would_extract`` lists the facts.  See brandmind/extract/run.py."""
        from .extract.run import as_turns, extract_turns

        user = self.store.user(user)
        agent = validate.name(agent, what="agent") if agent is not None else None
        default_ts = parse_time(ts, field="ts") if ts is not None else now_millis()
        return extract_turns(self.store, as_turns(turns, user=user, ts=default_ts), user=user, agent=agent,
                             dry_run=dry_run)

    def get(self, memory_id: str) -> dict:
        rows = list(self.sql.rows("SELECT * FROM memories WHERE id=?", (memory_id,)))
        if not rows:
            raise NotFound(f"no memory {memory_id!r}", hint="list ids with `bm memories list`")
        return memory_out(rows[0])

    def list_memories(self, *, user: str | None = None, agent: str | None = None,
                      type: str | None = None, limit: int = 50, offset: int = 0,
                      all_users: bool = False) -> list[dict]:
        if int(limit) < 1 or int(offset) < 0:
            raise UsageError(f"--limit must be at least 1 and --offset at least 0 (got {limit}, {offset})",
                             hint="e.g. --limit 50 --offset 100")
        where, args = ["1"], []
        if not all_users:
            where.append("user_id = ?")
            args.append(self.store.user(user))
        if agent is not None:
            where.append("agent_id = ?")
            args.append(agent)
        if type is not None:
            where.append("type = ?")
            args.append(validate.memory_type(type))
        rows = self.sql.rows(f"SELECT * FROM memories WHERE {' AND '.join(where)} "
                             "ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?",
                             (*args, int(limit), int(offset)))
        return [memory_out(r) for r in rows]

    def recall(self, query: str | bytes, *, k: int | None = None, user: str | None = None,
               agent: str | None = None, types: Iterable[str] = (), since: str | int | None = None,
               until: str | int | None = None, now: str | int | None = None,
               as_of: str | int | None = None) -> list[dict]:
        """The memories that best answer ``query``, best first (see brandmind/recall.py).

        Without ``agent``: the user's memories of every scope, ``k`` (default 10) of them.
        With ``agent``: that agent's own memories and the user's global ones, ranked
        apart and merged: ``recall_agent_k`` + ``recall_global_k`` of them (config, 5 + 3),
        or ``k`` split in that ratio, one scope filling in when the other runs short.
        Only currently true memories, or those true ``as_of`` a date.  Time words in the
        query ("last Tuesday") are read relative to ``now`` (default: the clock); an explicit
        ``now`` is also the moment asked about: memories dated after it do not exist yet, and
        facts retired after it were still current."""
        from .recall import Query, Weights
        from .timewords import find_windows

        query = validate.text(query, what="query")
        if k is not None:
            k_in = k
            try:  # whole numbers only (a batch line may carry "k": "abc", 2.5 or true)
                k = operator.index(k) if not isinstance(k, bool) else None
            except TypeError:
                k = None
            if k is None or not 1 <= k <= 1000:
                raise UsageError(f"k must be a whole number from 1 to 1000, got {k_in!r}", hint="e.g. -k 10")
        now_ms = parse_time(now, field="now") if now is not None else now_millis()
        filters = Filters(
            user=self.store.user(user),
            agent=validate.name(agent, what="agent") if agent is not None else None,
            types=tuple(validate.memory_type(t) for t in types),
            since=parse_time(since, field="since"), until=_until(parse_time(until, field="until"), now_ms, now),
            now=now_ms, as_of=parse_time(as_of, field="as_of") if as_of is not None else None)
        # reads do not write: no workspace refresh here (it is explicit, see brandmind/workspace.py)
        qvec = np.asarray(self.embedder.embed_query(query), dtype=np.float32)
        if qvec.shape != (self.sql.dim,):
            from .errors import ModelMismatch

            raise ModelMismatch(f"query vector is {qvec.shape[-1]}-d, the store's are {self.sql.dim}-d",
                                hint="run `bm reindex`")
        base = Query(query, qvec, filters, k or 10, Weights.from_config(self.config),
                     tuple(find_windows(query, now_ms)), now_ms)
        if filters.agent is None:
            hits = self.searcher.search(base)
        else:
            hits = self._recall_scopes(base, k)
        if not hits:
            return []
        by_rowid = {r["rowid"]: r for r in self.sql.rows(
            f"SELECT * FROM memories WHERE rowid IN ({','.join('?' * len(hits))})",
            tuple(h["rowid"] for h in hits))}
        out = []
        for h in hits:
            row = by_rowid.get(h["rowid"])
            if row is None:
                continue
            item = memory_out(row)
            item["score"] = round(h["score"], 6)
            item["signals"] = h["signals"]
            out.append(item)
        return out

    def _recall_scopes(self, base: Any, k: int | None) -> list[dict]:
        """The agent's own top memories and the user's global ones, merged by score."""
        from dataclasses import replace

        a_k, g_k = self.config.recall_agent_k, self.config.recall_global_k
        if k is not None:
            a_k = min(k, round(k * a_k / (a_k + g_k))) if a_k + g_k else k
            g_k = k - a_k
        total = a_k + g_k
        f = base.filters
        own = self.searcher.search(replace(base, k=total, filters=replace(f, scope="agent")))
        shared = self.searcher.search(replace(base, k=total, filters=replace(f, scope="global")))
        take_a = min(len(own), a_k + max(0, g_k - len(shared)))
        take_g = min(len(shared), total - take_a)
        merged = own[:take_a] + shared[:take_g]
        return sorted(merged, key=lambda h: (-h["score"], h["rowid"]))

    def recall_batch(self, queries: Iterable[dict], *, user: str | None = None,
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
                results = self.recall(q["query"], k=q.get("k", k), user=q.get("user", user),
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

    # -- context for an agent, consolidation (brandmind/context.py, brandmind/consolidate.py) --
    def context(self, query: str | bytes, *, budget: int = 2000, user: str | None = None,
                agent: str | None = None, now: str | int | None = None,
                as_of: str | int | None = None, format: str = "text", recent: int = 20,
                margin: float = 0.0, thread: str | None = None) -> dict:
        """The block an agent puts in its prompt, fitted to ``budget`` tokens: core memory
        blocks (when the store has them), the memories recall finds for ``query``, and the
        last ``recent`` beads of the user's thread (up to ``now`` / ``as_of`` if given).

        Returns ``{"text", "tokens", "budget", "margin", "limit", "format", "tokenizer",
        "sections": {"core", "memories", "recent"}, "dropped": {...}}``; ``tokens`` is the
        count of ``text`` itself (brandmind/tokens.py: the embedded model's WordPiece
        tokenizer), never above ``budget * (1 - margin)``.  ``format="json"``: ``text`` is
        the sections as compact JSON.  See brandmind/context.py for how the set is chosen.
        """
        from .context import build_context

        return build_context(self.store, query, recall=self.recall, budget=budget, user=user, agent=agent, now=now,
                             as_of=as_of, format=format, recent=recent, margin=margin, thread=thread)

    def consolidate(self, *, user: str | None = None, threshold: float = 0.92, dry_run: bool = False,
                    include_turns: bool = False) -> dict:
        """Merge near-duplicate current memories of ``user`` (same scope and type, cosine
        >= ``threshold`` plus a text check) into their oldest member with ``memory.merge``
        ops; raw turns are left alone unless ``include_turns``.  Returns ``{"user",
        "threshold", "dry_run", "groups": [{"kept", "merged", "texts"}], "merged"}``;
        ``dry_run`` stores nothing.  See brandmind/consolidate.py."""
        return consolidation.consolidate(self.store, user=user, threshold=threshold, dry_run=dry_run,
                                         include_turns=include_turns)

    # -- explicit memory: the user's workspace of files (brandmind/workspace.py) ------------
    def workspace(self, user: str | None = None) -> Any:
        """The user's workspace (``ls``, ``cat``, ``write``, ``append``, ``rm``, ``mv``,
        ``find``, ``index``); notes and profile files are indexed for recall."""
        from .workspace import Workspace

        return Workspace(self.store, user)

    # -- forgetting -----------------------------------------------------------
    def forget(self, memory_id: str) -> dict:
        """Forget a memory and the turns it came from (brandmind/forgetting.py)."""
        item = self.get(memory_id)
        forget_ids(self.store, [memory_id])
        return item

    def forget_user(self, user: str) -> dict:
        """Forget everything of one user: memories, beads, graph nodes, core blocks (their
        edits of shared persona blocks stay, without their name: see brandmind/blocks.py)."""
        user = validate.name(user, what="user")
        counts = self.admin.stats(user=user)["counts"]
        forget_user_ops(self.store, user)
        from .workspace import forget_user_files

        counts["files"] = forget_user_files(self.store, user)  # the workspace (its chunks went above)
        self.sql.truncate_wal()
        return counts

    def match(self, query: str, *, user: str | None = None, agent: str | None = None,
              limit: int = 1000) -> list[dict]:
        """Memories containing every word of ``query`` (what ``forget --match`` removes)."""
        query = validate.text(query, what="query")
        fts = keyword_query(query, op="AND")
        if fts is None:
            return []
        f = Filters(user=self.store.user(user), agent=agent, everything=True)
        where, args = f.sql("m")
        return [memory_out(r) for r in match_memories(self.sql, fts, where, args, limit)]

    def forget_many(self, ids: list[str], bead_ids: Iterable[str] = ()) -> dict:
        """Forget memories (ids) and beads, with the turns and memories they came from or
        gave (brandmind/forgetting.py): ``{"memories": [ids], "beads": [ids]}``."""
        for memory_id in ids:
            self.get(memory_id)
        bead_ids = list(bead_ids)
        for bead_id in bead_ids:
            self.get_bead(bead_id)
        return forget_ids(self.store, list(ids), bead_ids)

    def match_beads(self, query: str, *, user: str | None = None, limit: int = 1000) -> list[dict]:
        """The user's beads containing every word of ``query`` (what ``forget --match``
        removes beside the memories: a turn kept only as a bead, e.g. `bm beads add`)."""
        import re

        words = re.findall(r"\w+", validate.text(query, what="query").casefold())
        if not words:
            return []
        out = []
        for bead_id in self.log.bead_ids(self.store.user(user), None):
            bead = self.get_bead(bead_id)
            have = set(re.findall(r"\w+", bead["content"].casefold()))
            if all(w in have for w in words):
                out.append(bead)
                if len(out) >= limit:
                    break
        return out

    # -- beads (brandmind/beads.py) ------------------------------------------------
    def add_bead(self, content: str | bytes, *, role: str = "user", speaker: str | None = None,
                 user: str | None = None, thread: str | None = None, source: str = "cli",
                 turn_id: str | None = None, importance: float = 0.5, spans: list | None = None,
                 meta: dict | None = None, ts: str | int | None = None) -> dict:
        """Store one turn as a bead; returns it."""
        return beads.add_bead(self.store, content, role=role, speaker=speaker, user=user, thread=thread,
                              source=source, turn_id=turn_id, importance=importance, spans=spans,
                              meta=meta, ts=ts)

    def get_bead(self, bead_id: str) -> dict:
        return beads.get_bead(self.store, bead_id)

    def beads_tail(self, n: int = 20, *, user: str | None = None, thread: str | None = None) -> list[dict]:
        """The last n beads of the user's thread, oldest first (the short-term window)."""
        return beads.beads_tail(self.store, n, user=user, thread=thread)

    # -- ingest -------------------------------------------------------------------
    def ingest(self, lines: Iterable[str | bytes | dict], *, user: str | None = None,
               skip_bad: bool = False, progress: Callable[[dict], None] | None = None,
               extract: bool = False, dry_run: bool = False, agent: str | None = None) -> dict:
        """Store each JSONL message as a bead plus a raw-turn memory indexed for recall.

        Messages provably seen before (by id, else by an explicit ts with thread, role,
        speaker and content) are not stored again; a message with neither is always new.
        A bad line stops the ingest with its line number, after committing the lines before
        it (``skip_bad`` reports it and goes on).  Every batch is one op-log transaction and
        one SQLite transaction: nothing is ever half-stored.

        ``extract``: once the messages are stored, extract atomic facts from them (config
        ``extractor``) and store those with reconciliation; the report gains ``facts``
        ({"added", "confirmed", "updated", "contradicted"}), ``llm`` ({"calls", "tokens",
        "capped"}) and ``extract`` (the rest, see brandmind/extract/run.py).  If the
        extractor fails (e.g. Ollama is down) the messages stay stored and no fact is.
        ``dry_run`` stores nothing and calls no LLM: it reports what would be ingested and,
        with ``extract``, the estimated LLM calls and tokens (rules: the facts found).
        """
        user = self.store.user(user)
        agent = validate.name(agent, what="agent") if agent is not None else None
        if dry_run:
            from .extract.run import dry_run_ingest

            return dry_run_ingest(self.store, lines, user=user, skip_bad=skip_bad, extract=extract)
        report: dict[str, Any] = {"ingested": 0, "duplicates": 0, "bad": [], "lines": 0}
        if extract:  # the bead ids of the messages stored (and found stored) by this ingest
            report["_beads"], report["_fresh"] = [], []
        batch: list[dict] = []

        def stop_at_bad_line(exc: InvalidInput) -> None:
            self._ingest_batch(batch, user, report)
            exc.message += (f" — {report['ingested']} message(s) before it were stored"
                            + (f", {report['duplicates']} already known" if report["duplicates"] else ""))
            exc.hint = "fix the line and re-run the same command: stored messages are not stored twice; or pass --skip-bad"

        for msg in read_messages(lines, report, skip_bad=skip_bad, on_bad=stop_at_bad_line):
            batch.append(msg)
            if len(batch) >= INGEST_BATCH:
                self._ingest_batch(batch, user, report)
                batch = []
                if progress:
                    progress(report)
        self._ingest_batch(batch, user, report)
        if progress:
            progress(report)
        if extract:
            from .extract.run import extract_after_ingest

            extract_after_ingest(self.store, report, user=user, agent=agent)
        return report

    def _ingest_batch(self, batch: list[dict], user: str, report: dict) -> None:
        if not batch:
            return
        limit = self.config.max_memory_chars
        # drop messages seen before (in the store, or earlier in this batch)
        fresh, keys = [], set()
        with self.log.bead_keys() as seen:  # one read of ingest's dedup keys (OpLog.bead_keys)
            for msg in batch:
                key = message_key(user, msg)  # None: nothing proves it was seen, so it is new
                known = known_bead(seen, user, msg)
                if key is not None and (key in keys or known):
                    report["duplicates"] += 1
                    if known and "_beads" in report:
                        report["_beads"].append(known)
                    continue
                keys.add(key)
                fresh.append((key, msg))
        if not fresh:
            return
        texts = []
        for _, msg in fresh:
            body = msg["content"] if len(msg["content"]) <= limit else msg["content"][:limit]
            texts.append(f"{msg['speaker']}: {body}" if msg["speaker"] else body)
        vecs = self.store.embed_docs(texts)
        now = now_millis()
        episodes: dict[str, tuple[int, str]] = {}
        with self.log.write() as t:
            stored = 0
            for (key, msg), text, vec in zip(fresh, texts, vecs):
                if key is not None and t.bead_for_key(key):  # another process stored it meanwhile
                    report["duplicates"] += 1
                    if "_beads" in report:
                        report["_beads"].append(t.bead_for_key(key))
                    continue
                ts = msg["ts"] if msg["ts"] is not None else now
                bead = beads.bead_payload(
                    self.store, msg["content"], user=user, role=msg["role"], speaker=msg["speaker"], ts=ts,
                    thread=msg["thread"], source="ingest", turn_id=msg["id"], importance=0.5,
                    spans=None, meta=msg["meta"], key=key)
                op = t.append(Kind.BEAD_ADD, {"bead": bead})
                apply_log_side(t, op)
                meta = {"kind": "turn", "role": msg["role"], "thread": bead["thread"],
                        "episode": self._episode(user, bead["thread"], ts, episodes)}
                if msg["speaker"]:
                    meta["speaker"] = msg["speaker"]
                if len(msg["content"]) > limit:
                    meta["truncated"] = True
                t.append(Kind.MEMORY_ADD, {
                    "id": new_id("m", ts), "text": text, "type": "episode", "user": user,
                    "agent": None, "importance": 0.5, "ts": ts, "valid_from": None,
                    "valid_to": None, "source": "ingest", "meta": meta,
                    "provenance": [{"bead": bead["id"], "turn_id": msg["id"], "meta": msg["meta"]}],
                })
                t.cache_vector(self.sql.model, text, vec.tobytes())
                stored += 1
                if "_beads" in report:
                    report["_beads"].append(bead["id"])
                    report["_fresh"].append(bead["id"])
        self.store.catch_up()
        report["ingested"] += stored

    def _episode(self, user: str, thread: str, ts: int, last: dict[str, tuple[int, str]]) -> str:
        """The episode a turn belongs to: that of the turn before it in the thread when the
        pause since is at most ``episode_gap_minutes``, else a new one named by its start.
        ``last`` carries the previous turn of each thread through an ingest."""
        prev = last.get(thread)
        if prev is None or ts < prev[0]:
            row = self.sql.conn.execute(
                "SELECT created_at, episode FROM memories WHERE user_id = ? AND thread = ? AND created_at <= ? "
                "ORDER BY created_at DESC, rowid DESC LIMIT 1", (user, thread, ts)).fetchone()
            prev = (row[0], row[1]) if row and row[1] else None
        episode = prev[1] if prev and ts - prev[0] <= self.config.episode_gap_minutes * 60_000 else iso(ts)
        last[thread] = (ts, episode)
        return episode


def _until(until_ms: int | None, now_ms: int, now: Any) -> int | None:
    """The recall window's end: with an explicit ``now``, nothing dated after it (exclusive end)."""
    if now is None:
        return until_ms
    return now_ms + 1 if until_ms is None else min(until_ms, now_ms + 1)

