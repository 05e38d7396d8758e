"""The merge rules of bm sync, in the order they apply, each with where it is implemented.

Every replica appends only to its own op stream (``<replica>:<seq>``), so the log itself
never conflicts; the rules below decide what the projections show when ops of several
replicas meet.  Each rule is a function of the SET of ops (plus each replica's sequence
order), never of the order in which ops of different replicas arrive: applying the union
of ops in any interleaving that keeps each replica's own order gives the same state and
the same ``bm export``.  tests/test_sync_converge.py checks this with Hypothesis against an
oracle that applies the union in (HLC, op id) order, and shows that a wall-clock LWW and
out-of-order application of one origin's ops each break it.

0. Clocks.  Every op carries a hybrid logical clock ``(wall ms, counter, replica id)``
   (brandmind/clock.py ``HLC``); ``projection.hlc_key`` makes it a string that sorts like
   the tuple, so equal wall times are ordered by counter, then replica id: a total order.
   Receiving an op moves the local clock past it (``replication.receive``: HLC receive
   rule), so an edit made after seeing another's is stamped after it even if the local
   wall clock is behind.  An op stamped more than ``sync_max_skew_ms`` (config, default 5
   minutes) ahead of local time is held (``replication.Held``): set aside, not applied, and
   the local clock does not move; so are its replica's later ops.  A runaway clock would
   otherwise win every LWW register and drag every clock that saw it along.  Held ops are
   applied once within the window (re-checked by every batch and round) or when the user
   accepts them (``bm sync accept``: the clock then moves past them).  A round also compares
   the device's clock with the S3 server's ``Date`` and, beyond the window ahead, pushes none
   of its ops stamped past the server's time plus the window (``engine._clock_check``).

1. Sync state: a version vector per replica (replica -> highest contiguous seq held),
   ``OpLog.version_vector`` (kept in LMDB ``sync``/``vv``), not a vector clock on every op.
   The planner (``plan.py``) compares it with the remote's heads: push what the remote
   lacks, pull what we lack.  Ops are idempotent by id (``replication.receive``); the same
   id with another HLC or kind means two devices share a replica id: ``SyncConflict``.

2. Per-origin order: a replica's ops are applied in its seq order.  An op whose
   predecessor has not arrived is stored (the log accepts it) but held back from the
   projection (``replication.catch_up``, table ``sync_held``) until the gap fills.
   ``bm rebuild`` runs the same function, so a rebuild equals the live projection.

3. Existence of memories, graph nodes and edges: an observed-remove set where add wins
   over a concurrent remove.  Each add makes a fresh id (``m_``/``n_``/``e_``), and
   ``memory.forget`` names the id it observed, so a forget removes exactly that element and
   a concurrent add (a new id) survives; re-adding "the same" memory is a new element,
   which a 2P-set could not do.  Ops aimed at an element that has not arrived yet
   (``memory.retire`` / ``memory.confirm`` / ``memory.merge``, ``kg.edge.retire``) wait in
   ``sync_pending`` and are replayed when it arrives (``converge.aim`` / ``converge.replay``);
   edges and mentions of a removed memory or node are dropped whenever they arrive
   (``converge.edge_is_dead``, the ``kg.mention`` rule in projection.py).

4. ``bm forget`` / purge: remove wins.  ``memory.forget`` tombstones the id (a later add of
   it applies as nothing); ``user.forget`` at HLC H removes every memory, node, bead, block
   op and persona assignment of the user stamped before H, whichever arrives first
   (``projection.apply_sql_side`` user.forget, ``converge.kill_memory`` / ``kill_node`` /
   ``forget_persona_user``, ``projection.apply_log_side`` for beads, ``blocks.forget_user``).
   The log forgets too: a received forget redacts the ops it covers, and ops it covers
   that arrive later are stored redacted (``replication.forget_user_in_log``,
   ``forget_memory_in_log``, ``_remove_wins``), so a replica that was offline never brings
   the data back, and every replica ends with the same redacted log.  Ops stamped after H
   (the user's new life) stay.

5. Scalar fields: last-writer-wins registers by HLC (rule 0's total order, not wall time):
   persona definitions (``personas.apply_op`` persona.define), persona documents (highest
   (version, HLC)), block definitions per field (``blocks._fold``), skills (the highest
   (version, HLC) among adds after the latest remove: ``skills.apply_op``), persona
   assignment (held iff the latest assign HLC > the latest unassign HLC).  Monotone
   fields merge by min/max instead: a fact's ``retired_at`` / ``valid_to`` (min),
   ``superseded_by`` (min id), ``updated_at`` (max), ``confirmations`` (a counter: each op
   adds once), provenance (a set, ordered by the HLC of the op that first brought each
   entry: ``converge.add_provenance``).

6. Beads: an append-only union (one ``bead.add`` per bead id), each user's thread ordered
   by (time, bead id) (``oplog._bead_time_key``; bead ids sort by time); merging never
   rewrites a bead.  The ingest dedup key maps to the smallest bead id holding it
   (``projection.apply_log_side``).

7. Block text: pycrdt (Yrs) text updates, applied per origin strictly in sequence order and
   only once the block's state covers the writer's state vector (``blocks._drain``; pycrdt
   diverges otherwise).  Merged text over the block's limit is kept and flagged, never
   truncated (brandmind/blocks.py).

The apply step (projection.py, converge.py) and the planner (plan.py) are pure functions
of their inputs; the remotes (remote.py, s3.py) own all I/O; the engine (engine.py)
sequences one round.
"""
from __future__ import annotations

RULES = (
    "clocks: HLC total order, receive rule, skew cap",
    "version vectors",
    "per-origin order",
    "observed-remove sets (add wins) for memories, nodes, edges",
    "remove wins for forget and user purge",
    "last-writer-wins by HLC for scalars; min/max/counters/sets for monotone fields",
    "beads: append-only union",
    "block text: CRDT, per origin in sequence order",
)
