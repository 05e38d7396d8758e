"""``brandmind.Memory``: the one object the CLI (and any agent) talks to.

It owns the op log (LMDB), the SQLite projection, the blob store and the
embedder.  Every write appends ops first, then applies them to SQLite (see
projection.py); every read goes to the projections.

The facade loads the sub-APIs and the write-side features (ingest, extract, context,
forget, the workspace) when first used (``# lazy:`` imports, the one place the library
defers its own modules): a cold ``bm recall`` then loads only the store and the query path.
"""
from __future__ import annotations

import os
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from . import beads, validate
from . import query as query_mod
from .clock import new_id, now_millis, parse_time
from .config import Config
from .errors import BMError, NotFound, UsageError
from .oplog import OpLog
from .ops import Kind
from .recall import Searcher
from .storage.search import Filters, keyword_query
from .sqlstore import SQLStore
from .storage import memories
from .storage.forget import match_memories
from .storage.expiry import has_expired
from .storage import workspace as workspace_repo
from . import clock
from .storage.memories import memory_out
from .store import Store

if TYPE_CHECKING:  # pragma: no cover
    from .admin import Admin
    from .blocks import Blocks
    from .facts import Facts
    from .graph import Graph
    from .personas import Personas
    from .skills import Skills



class Memory:
    """A bm store.  Use as a context manager or call close()."""

    def __init__(self, home: str | os.PathLike[str] | None = None, *, config: Config | None = None,
                 embedder: Any = None, create: bool = False, check_model: bool = True,
                 repair: bool = False) -> None:
        """Open the store (``create`` makes it if missing).  ``repair`` moves an unreadable
        SQLite index aside and starts an empty one, which the op log refills (`bm rebuild`)."""
        self.store = Store(config or Config.load(home), embedder=embedder, create=create,
                           check_model=check_model, repair=repair)
        if has_expired(self.sql, clock.now_millis()):  # --ttl: what expired goes on the next open
            self.forget_expired()

    @classmethod
    def over(cls, store: Store) -> "Memory":
        """A Memory on a Store that is already open (the daemon's resident store); closing
        it closes that store."""
        mem = cls.__new__(cls)
        mem.store = store
        return mem

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
        from .admin import Admin  # lazy: loaded by the calls that need it, not by every cold `bm recall`
        return Admin(self.store)

    @cached_property
    def blocks(self) -> Blocks:
        """Core memory blocks: list, get, set, append, replace, define, core, shared ...
        (brandmind/blocks.py); shared-block writes are PII-guarded with the writer's
        private terms (brandmind/privacy.py)."""
        from .blocks import Blocks  # lazy: loaded by the calls that need it, not by every cold `bm recall`
        from .privacy import gather_private_terms
        return Blocks(self.store, private_terms=lambda user: gather_private_terms(self.store, user))

    @cached_property
    def personas(self) -> Personas:
        """Persona cohorts, who holds them, detection and the agents' persona documents:
        available, get, define, assign, unassign, held, holders, detect, doc, put_doc ...
        (brandmind/personas.py)."""
        from .personas import Personas  # lazy: loaded by the calls that need it, not by every cold `bm recall`
        return Personas(self.store)

    @cached_property
    def skills(self) -> Skills:
        """Skills (procedural memory): add, list, get, remove, match, import_dir
        (brandmind/skills.py)."""
        from .skills import Skills  # lazy: loaded by the calls that need it, not by every cold `bm recall`
        return Skills(self.store)

    @cached_property
    def graph(self) -> Graph:
        """The knowledge graph: add_node, node, add_edge, find_node, list_nodes, remove_node,
        merge_nodes, link (typed links between memories), neighbors (brandmind/graph.py)."""
        from .graph import Graph  # lazy: loaded by the calls that need it, not by every cold `bm recall`
        return Graph(self.store)

    @cached_property
    def facts(self) -> Facts:
        """Bi-temporal facts: add, add_many (with reconciliation), history (brandmind/facts.py)."""
        from .facts import Facts  # lazy: loaded by the calls that need it, not by every cold `bm recall`
        return Facts(self.store)

    def receive_ops(self, ops: Iterable[dict], *, now_ms: int | None = None, apply: bool = True) -> dict:
        """Store ops pulled from another replica (sync) and apply them (``Store.receive_ops``)."""
        return self.store.receive_ops(ops, now_ms=now_ms, apply=apply)

    # -- memories -------------------------------------------------------------
    def remember(self, text: str | bytes, *, type: str = "fact", user: str | None = None,
                 agent: str | None = None, importance: float = 0.5, meta: dict | None = None,
                 ts: str | int | None = None, extract: bool = False, ttl: Any = None,
                 pin: bool = False) -> dict:
        """Store one memory; returns it as recall would.  ``ttl`` ("2s", "90m", "12h", "30d",
        "2w", seconds or a timedelta): it expires that long from now, and ``pin``: it never
        does (brandmind/expiry.py).  ``extract``: then also extract
        atomic facts from the text (config ``extractor``; "I" is the user) and store them
        with reconciliation; the returned memory gets the report under ``"extract"`` (see
        :meth:`extract`).  While the store defers vectors (``store.deferring_vectors()``: the
        daemon) the vector is made later and the extraction queued (``"extract": {"queued": 1}``;
        see brandmind/backlog.py)."""
        text = validate.text(text, limit=self.config.max_memory_chars)
        payload = {
            "id": new_id("m"), "text": text, "type": validate.memory_type(type),
            "user": self.store.user(user),
            "agent": validate.name(agent, what="agent") if agent is not None else None,
            "importance": validate.importance(importance), "meta": validate.meta(meta),
            "source": "remember", "provenance": [], "valid_from": None, "valid_to": None,
        }
        payload["ts"] = parse_time(ts, field="ts") if ts is not None else now_millis()
        if ttl is not None:
            from .expiry import expiry_of  # lazy: only --ttl needs it
            payload["expires_at"] = expiry_of(ttl)
        deferred = self.store.deferring  # backlog: the vector (and the extraction) come later
        vec = None if deferred else self.store.embed_docs([text])[0]
        with self.log.write() as t:
            t.append(Kind.MEMORY_ADD, payload)
            if pin:
                t.append(Kind.MEMORY_PIN, {"id": payload["id"], "user": payload["user"], "pinned": True})
            if extract and deferred:  # queued with the memory it is about (brandmind/backlog.py)
                t.queue_job({"kind": "extract_memory", "memory": payload["id"], "user": payload["user"],
                             "agent": payload["agent"]})
        self.store.catch_up(vectors={text: vec.tobytes()} if vec is not None else None)
        if extract and deferred:
            return {**self.get(payload["id"]), "extract": {**_queued_report(), "queued": 1}}
        if extract:
            from .extract import Turn  # lazy: only `remember --extract` needs the extractors
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
        from .extract.run import as_turns, extract_turns  # lazy: loaded by the calls that need it, not by every cold `bm recall`
        user = self.store.user(user)
        agent = validate.name(agent, what="agent") if agent is not None else None
        default_ts = parse_time(ts, field="ts") if ts is not None else now_millis()
        return extract_turns(self.store, as_turns(turns, user=user, ts=default_ts), user=user, agent=agent,
                             dry_run=dry_run)

    def get(self, memory_id: str) -> dict:
        row = memories.row(self.sql, memory_id)
        if row is None:
            raise NotFound(f"no memory {memory_id!r}", hint="list ids with `bm memories list`")
        return memory_out(row)

    def list_memories(self, *, user: str | None = None, agent: str | None = None,
                      type: str | None = None, limit: int = 50, offset: int = 0,
                      all_users: bool = False) -> list[dict]:
        if int(limit) < 1 or int(offset) < 0:
            raise UsageError(f"--limit must be at least 1 and --offset at least 0 (got {limit}, {offset})",
                             hint="e.g. --limit 50 --offset 100")
        rows = memories.listed(self.sql, user=None if all_users else self.store.user(user), agent=agent,
                               type=validate.memory_type(type) if type is not None else None,
                               limit=int(limit), offset=int(offset))
        return [memory_out(r) for r in rows]

    def recall(self, query: str | bytes, *, k: int | None = None, user: str | None = None,
               agent: str | None = None, types: Iterable[str] = (), since: str | int | None = None,
               until: str | int | None = None, now: str | int | None = None,
               as_of: str | int | None = None) -> list[dict]:
        """The memories that best answer ``query``, best first: ``k`` (default 10) of the
        user's, or with ``agent`` that agent's own and the user's global ones merged; only
        currently true memories, or those true ``as_of`` a date; time words read relative to
        ``now``.  See brandmind/query.py (how) and brandmind/recall.py (ranking)."""
        return query_mod.recall(self.store, query, k=k, user=user, agent=agent, types=types, since=since,
                                until=until, now=now, as_of=as_of)

    def recall_batch(self, queries: Iterable[dict], *, user: str | None = None,
                     agent: str | None = None, now: str | int | None = None, k: int | None = None,
                     types: Iterable[str] = (), since: str | int | None = None,
                     until: str | int | None = None, as_of: str | int | None = None,
                     min_score: float | None = None) -> Iterator[dict]:
        """One ``{"id", "results"}`` (or ``{"id", "error"}``) per query line; the keyword
        arguments are the defaults of every line (brandmind/query.py ``recall_batch``)."""
        return query_mod.recall_batch(self.store, queries, user=user, agent=agent, now=now, k=k, types=types,
                                      since=since, until=until, as_of=as_of, min_score=min_score)

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
        from .context import build_context  # lazy: loaded by the calls that need it, not by every cold `bm recall`
        return build_context(self.store, query, budget=budget, user=user, agent=agent, now=now,
                             as_of=as_of, format=format, recent=recent, margin=margin, thread=thread)

    def consolidate(self, *, user: str | None = None, threshold: float = 0.92, dry_run: bool = False,
                    include_turns: bool = False) -> dict:
        """Merge near-duplicate current memories of ``user`` (same scope and type, cosine
        >= ``threshold`` plus a text check) into their oldest member with ``memory.merge``
        ops; raw turns are left alone unless ``include_turns``.  Returns ``{"user",
        "threshold", "dry_run", "groups": [{"kept", "merged", "texts"}], "merged"}``;
        ``dry_run`` stores nothing.  See brandmind/consolidate.py."""
        from . import consolidate as consolidation  # lazy: loaded by the calls that need it, not by every cold `bm recall`
        return consolidation.consolidate(self.store, user=user, threshold=threshold, dry_run=dry_run,
                                         include_turns=include_turns)

    # -- explicit memory: the user's workspace of files (brandmind/workspace.py) ------------
    def workspace(self, user: str | None = None) -> Any:
        """The user's workspace (``ls``, ``cat``, ``write``, ``append``, ``rm``, ``mv``,
        ``find``, ``index``); notes and profile files are indexed for recall."""
        from .workspace import Workspace  # lazy: loaded by the calls that need it, not by every cold `bm recall`
        return Workspace(self.store, user)

    def refresh_workspace(self, user: str | None = None) -> dict | None:
        """``workspace(user).refresh()`` (files edited on disk behind bm's back), without
        loading the workspace's code when there is nothing it could find: no workspace on
        disk (nor on S3), no file the user's workspace indexed (a cold `bm recall` saves ~10 ms)."""
        if self.store.config.workspace == "local" and not (self.store.paths.data_dir / "workspace").exists():
            who = self.store.user(user)
            if not workspace_repo.stat_cache(self.store.sql, who) and not workspace_repo.file_chunks(self.store.sql, who):
                return None
        return self.workspace(user).refresh()

    # -- forgetting -----------------------------------------------------------
    def forget(self, memory_id: str) -> dict:
        """Forget a memory and the turns it came from (brandmind/forgetting.py)."""
        from .forgetting import forget_ids  # lazy: loaded by the calls that need it, not by every cold `bm recall`
        item = self.get(memory_id)
        forget_ids(self.store, [memory_id])
        return item

    def forget_user(self, user: str) -> dict:
        """Forget everything of one user: memories, beads, graph nodes, core blocks (their
        edits of shared persona blocks stay, without their name: see brandmind/blocks.py)."""
        from .forgetting import forget_user_ops  # lazy: loaded by the calls that need it, not by every cold `bm recall`
        from .workspace import forget_user_files
        user = validate.name(user, what="user")
        counts = self.admin.stats(user=user)["counts"]
        forget_user_ops(self.store, user)
        counts["files"] = forget_user_files(self.store, user)  # the workspace (its chunks went above)
        self.sql.truncate_wal()
        return counts

    # -- forgetting on a schedule (brandmind/expiry.py) ------------------------------
    def pin(self, memory_id: str, pinned: bool = True) -> dict:
        """Pin a memory (``pinned=False``: unpin): never expired, never taken by
        :meth:`forget_older_than`; :meth:`forget` still forgets it."""
        from .expiry import set_pinned  # lazy: loaded by the calls that need it, not by every cold `bm recall`
        item = self.get(memory_id)
        set_pinned(self.store, memory_id, item["user"], pinned)
        return self.get(memory_id)

    def unpin(self, memory_id: str) -> dict:
        return self.pin(memory_id, False)

    def forget_expired(self, *, dry_run: bool = False) -> dict:
        """Forget what expired (done on open and by the daemon anyway): ``{"memories",
        "beads", "nodes"}`` forgotten (``dry_run``: the expired memories, nothing forgotten)."""
        from .expiry import forget_expired  # lazy: loaded by the calls that need it, not by every cold `bm recall`
        return forget_expired(self.store, dry_run=dry_run)

    def forget_older_than(self, age: Any, *, user: str | None = None, dry_run: bool = False) -> dict:
        """Forget the user's memories dated more than ``age`` ago ("30d", "12h", ...) and their
        turns, except pinned ones: ``{"before", "memories", "beads", "nodes"}``."""
        from .expiry import forget_older_than  # lazy: loaded by the calls that need it, not by every cold `bm recall`
        return forget_older_than(self.store, age, user=self.store.user(user), dry_run=dry_run)

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
        from .forgetting import forget_ids  # lazy: loaded by the calls that need it, not by every cold `bm recall`
        for memory_id in ids:
            self.get(memory_id)
        bead_ids = list(bead_ids)
        for bead_id in bead_ids:
            self.get_bead(bead_id)
        return forget_ids(self.store, list(ids), bead_ids)

    def forget_matching(self, query: str, *, user: str | None = None) -> dict:
        """What ``bm forget --match`` does once confirmed: the user's memories and turns holding
        every word of ``query`` forgotten (with what they came from or gave), and the sentences
        saying it taken out of their blocks and notes/profile files: ``{"forgotten", "beads",
        "blocks", "files"}`` (``files`` also lists, ``kept``, the drafts that still say it)."""
        found = [m["id"] for m in self.match(query, user=user)]
        done = self.forget_many(found, [b["id"] for b in self.match_beads(query, user=user)])
        return {"forgotten": done["memories"], "beads": done["beads"],
                "blocks": self.scrub_blocks(query, user=user), "files": self.scrub_files(query, user=user)}

    def scrub_blocks(self, query: str, *, user: str | None = None, dry_run: bool = False) -> list[dict]:
        """Take every sentence holding every word of ``query`` out of the user's own core blocks
        (what ``forget --match`` does to them: brandmind/forgetting.py): ``[{"label", "agent",
        "sentences"}]`` of the blocks that held one."""
        from .forgetting import scrub_blocks  # lazy: loaded by the calls that need it, not by every cold `bm recall`
        return scrub_blocks(self.blocks, validate.text(query, what="query"), self.store.user(user), dry_run=dry_run)

    def scrub_files(self, query: str, *, user: str | None = None, dry_run: bool = False) -> list[dict]:
        """The same for the user's workspace files (brandmind/forgetting.py ``scrub_files``): the
        notes and profile files lose the sentences; drafts and system files are listed."""
        from .forgetting import scrub_files  # lazy: loaded by the calls that need it, not by every cold `bm recall`
        query = validate.text(query, what="query")
        if self.store.config.workspace == "local" and not (self.store.paths.data_dir / "workspace").exists():
            return []  # no workspace: none made by looking
        return scrub_files(self.workspace(user), query, dry_run=dry_run)

    def match_beads(self, query: str, *, user: str | None = None, limit: int = 1000) -> list[dict]:
        """The user's beads holding every word of ``query`` as :meth:`match` finds memories
        (stems, stopwords dropped): what ``forget --match`` removes beside the memories (a turn
        kept only as a bead, e.g. `bm beads add`)."""
        from .forgetting import matcher  # lazy: loaded by the calls that need it, not by every cold `bm recall`
        match = matcher(self.sql, validate.text(query, what="query"))
        out: list[dict] = []
        for bead_id in self.log.bead_ids(self.store.user(user), None) if match else ():
            bead = self.get_bead(bead_id)
            if match(bead["content"]):
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
               extract: bool = False, dry_run: bool = False, agent: str | None = None,
               ttl: Any = None) -> dict:
        """Store each JSONL message as a bead plus a raw-turn memory indexed for recall.
        ``ttl``: both expire that long from now (see :meth:`remember`).

        Messages provably seen before (by id, else by an explicit ts with thread, role,
        speaker and content) are not stored again; a message with neither is always new.
        Nor is one whose turn was forgotten since it was stored (counted as ``forgotten``,
        a key of the report only when some were): an agent re-sending its history does not
        bring back what its user had forgotten.  One re-sent with its id and another text
        replaces its turn (an edit: ``edited``, also counted in ``ingested``).
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
        While the store defers vectors (``store.deferring_vectors()``: the daemon), the
        vectors are made later and the extraction is queued with each batch of turns
        (``extract: {"queued": jobs}``; see brandmind/backlog.py).
        """
        from . import ingesting  # lazy: loaded by the calls that need it, not by every cold `bm recall`
        from .expiry import expiry_of
        expires_at = expiry_of(ttl)
        user = self.store.user(user)
        agent = validate.name(agent, what="agent") if agent is not None else None
        if dry_run:
            from .extract.run import dry_run_ingest  # lazy: only dry runs and extraction need it

            return dry_run_ingest(self.store, lines, user=user, skip_bad=skip_bad, extract=extract)
        queue = None
        if extract and self.store.deferring:  # backlog: the extraction is queued with the turns
            queue = {"kind": "extract_ingest", "user": user, "agent": agent}
        report = ingesting.ingest(self.store, lines, user=user, skip_bad=skip_bad,
                                  progress=progress, extract=extract, queue=queue, expires_at=expires_at)
        if queue is not None:
            report.pop("_beads", None)
            report.pop("_fresh", None)
            report.update(_queued_report(), extract={"queued": report.pop("_jobs", 0)})
        elif extract:
            from .extract.run import extract_after_ingest  # lazy: only extraction needs it

            extract_after_ingest(self.store, report, user=user, agent=agent)
        return report

    # -- other tools' exports (brandmind/importers.py) --------------------------------------------
    def import_from(self, kind: str, source: str | os.PathLike[str] | bytes, *, user: str | None = None,
                    dry_run: bool = False, extract: bool = False,
                    progress: Callable[[dict], None] | None = None) -> dict:
        """Import a ChatGPT or Claude export (conversations.json or the .zip) as turns (``ingest``),
        a Mem0 dump or Basic Memory's memory.json as memories and graph (``bm import`` records),
        from ``source`` (a path, or the file's bytes).  The whole file is checked first: a bad
        one stores nothing.  Ids come from the source's, so a re-import stores nothing new.
        Returns ``{"from", "dry_run", "found", "skipped", "new", "duplicates"}`` (with
        ``extract``, conversations only: ingest's ``facts``, ``llm``, ``extract`` too)."""
        from . import importers  # lazy: loaded by the calls that need it, not by every cold `bm recall`
        kind, user = importers.check_kind(kind), self.store.user(user)
        if extract and kind not in importers.CONVERSATIONS:
            raise UsageError(f"--extract applies to conversations, not to a {kind} import",
                             hint="drop --extract: Mem0 and Basic Memory hold facts already")
        export = importers.read_export(kind, source)
        report = importers.new_report(export, dry_run=dry_run)
        if kind in importers.CONVERSATIONS:
            done = self.ingest(export.messages, user=user, dry_run=dry_run, extract=extract, progress=progress)
            report["new"]["turns"] = done["would_ingest" if dry_run else "ingested"]
            report["duplicates"] = done["duplicates"]
            report.update({k: done[k] for k in ("facts", "llm", "extract") if k in done})
            return report
        fresh = importers.count_new(self.store, importers.records(self.store, export, user=user), report)
        if fresh and not dry_run:
            from .exchange import import_lines  # lazy: the checked, all-or-nothing path of `bm import`
            import_lines(self.store, importers.as_lines(fresh), batch=len(fresh) + 1)
        return report


def _queued_report() -> dict:
    """The counts of an extraction that was queued (brandmind/backlog.py): nothing yet."""
    return {"facts": {"added": 0, "confirmed": 0, "updated": 0, "contradicted": 0},
            "llm": {"calls": 0, "tokens": 0, "capped": False}}
