"""One sync round with one remote (:func:`sync_once`) and what ``bm sync status`` shows
(:func:`sync_status`).

A round: read the remote's heads, plan (``plan.py``: pure), push the ops the remote lacks
(ours; others' too when the remote relays), pull the ops we lack and hand them to
``Store.receive_ops`` (which applies the merge rules: brandmind/merge.py).  The remote owns all
I/O; this module only sequences it and keeps records.

The local op log is the durable queue: nothing is removed from it when a push succeeds, so
a failure at any point (the remote down, a timeout after the remote committed, a crash
before the watermark is written) loses nothing: the next round plans from the heads the
remote reports and re-sends what it does not have; a re-sent op that it has is treated as
already pushed (same id, HLC and kind), so nothing is duplicated either.

Records (``<data_dir>/sync_state.json``, per remote, written atomically AFTER the remote
confirmed a push or after pulled ops are stored): watermarks (how far each replica's
stream was pushed / pulled), the remote heads last seen, the last success and the last
error.  They feed ``bm sync status`` without contacting the remote; planning never trusts
them over the remote's own heads.
"""
from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from brandmind.errors import BMError, SyncConflict
from brandmind.replication import held_summary, held_top

from .applier import MIN_OPS as APPLIER_MIN_OPS, Applier
from .handle import store_of
from .plan import plan

PUSH_BATCH = 20000   # ops per push call
PULL_BATCH = 5000   # ops per pull call (and per receive transaction)
STATE_FILE = "sync_state.json"


# -- records ---------------------------------------------------------------------------------------
def state_path(store: Any) -> Path:
    return Path(store.config.paths.data_dir) / STATE_FILE


def load_state(store: Any) -> dict:
    try:
        data = json.loads(state_path(store).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return {}  # a damaged record file only loses history: planning never reads it
    return data if isinstance(data, dict) else {}


@contextmanager
def _locked(store: Any) -> Iterator[None]:
    import fcntl

    path = state_path(store).with_suffix(".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _update_state(store: Any, remote_name: str, change: Callable[[dict], None]) -> None:
    """Read-modify-write one remote's record under a file lock; atomic replace + fsync."""
    path = state_path(store)
    with _locked(store):
        data = load_state(store)
        change(data.setdefault(remote_name, {}))
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(data, fh, sort_keys=True, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)


def _iso_now() -> str:
    from brandmind.clock import iso, now_millis

    return iso(now_millis())


def _error(stage: str, exc: BMError, replica: str | None = None) -> dict:
    out = {"stage": stage, "message": exc.message, "hint": exc.hint, "error": type(exc).__name__}
    if replica:
        out["replica"] = replica
    return out


# -- one round ---------------------------------------------------------------------------------------
def sync_once(store: Any, remote: Any, *, push: bool = True, pull: bool = True,
              fault: Callable[[str], None] | None = None) -> dict:
    """Push and/or pull once.  ``store``: a StoreHandle (sync/handle.py; a Memory gives its
    ``.store``).  Returns ``{"remote", "pushed": {replica: n}, "pulled":
    {replica: n}, "duplicates", "version_vector", "remote_heads", "harvested"? (mirrors:
    ``{"imported", "retired", ...}``), "applier"? (why a big pull's helper process stopped
    early: the round applied the rest itself), "errors": [{"stage",
    "message", "hint", "error", "replica"?}]}``.  Remote and merge errors (BMError) are
    reported, not raised; a SyncConflict ends the round.  ``fault(point)`` is called at
    "before_push", "after_push", "before_watermark" and "after_receive" (tests raise there
    to simulate a crash)."""
    from brandmind.bulk import gc_paused

    with gc_paused():  # a round moves ops by the thousand (brandmind/bulk.py)
        return _round(store_of(store), remote, push=push, pull=pull, fault=fault)


def _round(store: Any, remote: Any, *, push: bool, pull: bool, fault: Callable[[str], None] | None) -> dict:
    report: dict[str, Any] = {"remote": remote.name, "pushed": {}, "pulled": {}, "duplicates": 0,
                              "version_vector": {}, "remote_heads": {}, "errors": []}

    def hook(point: str) -> None:
        if fault is not None:
            fault(point)

    if pull:
        _release_and_harvest(store, remote, report)
    try:
        heads: dict[str, int] | None = {r: int(h) for r, h in dict(remote.heads()).items()}
    except BMError as exc:
        report["errors"].append(_error("heads", exc))
        heads = None
    if heads is not None:
        p = plan(store.log.version_vector(), heads, store.log.replica,
                 push_others=bool(remote.accepts_pushes_for_others))
        limit = _clock_check(store, remote, report)
        stop = _push_all(store, remote, p.push, heads, limit, report, hook) if push else False
        if pull and not stop:
            _pull_all(store, remote, p.pull, heads, report, hook)
        report["remote_heads"] = dict(sorted(heads.items()))
        _name_clock_error(report)
    report["version_vector"] = store.log.version_vector()
    held = held_summary(store.log)
    if held:
        report["held"] = held
    _update_state(store, remote.name, lambda st: _record(st, report, remote, heads is not None))
    return report


def _release_and_harvest(store: Any, remote: Any, report: dict) -> None:
    """Before a pull: held ops that came within the window since the last round go in; a
    mirror (Zep, Graphiti) has no op streams: its pull brings back the facts it made itself,
    as local ops (sync/mirror.py), first, so this round's push covers them too."""
    try:
        released = store.receive_ops([]).get("released", 0)
    except BMError as exc:
        report["errors"].append(_error("release", exc))
    else:
        if released:
            report["released"] = released
    harvest = getattr(remote, "harvest", None)
    if harvest is not None:
        try:
            report["harvested"] = harvest(store)
        except BMError as exc:
            report["errors"].append(_error("harvest", exc))


def _push_all(store: Any, remote: Any, todo: dict, heads: dict, limit: int | None, report: dict,
              hook: Callable[[str], None]) -> bool:
    """Push every stream the plan names; True when a SyncConflict ends the round."""
    own, errors, stop = store.log.replica, report["errors"], False
    for replica, (after, upto) in todo.items():
        if limit is not None and replica == own:  # this device's clock runs ahead
            ok_upto = _stamped_by(store, own, after, upto, limit)
            report["clock"]["not_pushed"] = upto - ok_upto
            if ok_upto <= after:
                continue
            upto = ok_upto
        try:
            sent = _push_stream(store, remote, replica, after, upto, heads, hook)
        except SyncConflict as exc:
            errors.append(_error("push", exc, replica))
            stop = True
            break
        except BMError as exc:
            errors.append(_error("push", exc, replica))
            continue
        if sent:
            report["pushed"][replica] = sent
    notes = getattr(remote, "notes", None)  # what a mirror could not do (sync/mirror.py)
    if notes:
        report["notes"] = list(notes)
        notes.clear()
    return stop


def _pull_all(store: Any, remote: Any, todo: dict, heads: dict, report: dict, hook: Callable[[str], None]) -> None:
    """Pull every stream the plan names; a big pull has a helper process apply the ops while
    the next ones are stored (applier.py)."""
    incoming = sum(heads[r] - after for r, after in todo.items())
    helper = Applier(store) if incoming >= APPLIER_MIN_OPS else None
    try:
        for replica, after in todo.items():
            counts = {"received": 0, "duplicates": 0}
            try:
                _pull_stream(store, remote, replica, after, heads[replica], counts, hook, helper)
            except SyncConflict as exc:
                report["errors"].append(_error("pull", exc, replica))
                break
            except BMError as exc:
                report["errors"].append(_error("pull", exc, replica))
            finally:
                if counts["received"]:
                    report["pulled"][replica] = counts["received"]
                report["duplicates"] += counts["duplicates"]
    finally:
        if helper is not None:
            helper.finish()
            store.catch_up()  # whatever the helper did not get to
            if helper.failure:  # not an error: only slower
                report["applier"] = helper.failure


def _name_clock_error(report: dict) -> None:
    """A clock error is the cause of what follows: named first."""
    clock_error = report.get("clock", {}).get("error")
    if clock_error:
        if report["clock"].get("not_pushed"):
            clock_error["message"] += f" ({report['clock']['not_pushed']} op(s) kept here)"
        report["errors"].insert(0, clock_error)


def _record(st: dict, report: dict, remote: Any, saw_heads: bool) -> None:
    """What the round leaves in the remote's record (``bm sync status``)."""
    now = _iso_now()
    errors = report["errors"]
    if saw_heads:
        st["remote_heads"] = report["remote_heads"]
        st["accepts_pushes_for_others"] = bool(remote.accepts_pushes_for_others)
    st["last_attempt"] = now
    if "clock" in report:
        st["clock"] = {"at": now, "offset_ms": report["clock"]["offset_ms"]}
    if errors:
        st["last_error"] = {"at": now, **errors[0]}
    else:
        st["last_success"] = {"at": now, "pushed": sum(report["pushed"].values()),
                              "pulled": sum(report["pulled"].values())}


def _clock_check(store: Any, remote: Any, report: dict) -> int | None:
    """This device's clock against the remote's (S3: the ``Date`` of its answers).  Beyond
    ``sync_max_skew_ms`` ahead, the ops it stamps would be held by every other device: the
    round pushes none stamped past the server's time plus the window (returned: the limit);
    beyond it behind, the others' ops look stamped in the future here and are held.  Either
    is an error of the round (``report["clock"]["error"]``), naming the fix."""
    from brandmind.clock import CLOCK_HINT, now_millis, span
    from brandmind.errors import ClockSkew

    offset_of = getattr(remote, "clock_offset_ms", None)
    offset = offset_of() if offset_of is not None else None
    if offset is None:
        return None
    window = int(store.config.sync_max_skew_ms)
    info = report["clock"] = {"offset_ms": int(offset), "window_ms": window}
    # local writes refuse to stamp while the clock stays this far off (LogTxn.append)
    store.log.mark_clock(int(offset) if abs(offset) > window else None)
    if abs(offset) <= window:
        return None
    if offset > 0:
        what = (f"this device's clock is {span(offset)} ahead of the S3 server's (remote {remote.name!r}); "
                "ops it stamps now would be held by the other devices, so the ones stamped ahead are "
                "not pushed")
    else:
        what = (f"this device's clock is {span(offset)} behind the S3 server's (remote {remote.name!r}); "
                "the other devices' ops look stamped in the future here and are held (`bm sync status`)")
    info["error"] = _error("clock", ClockSkew(what, hint=CLOCK_HINT))
    return now_millis() - offset + window if offset > 0 else None


def _stamped_by(store: Any, replica: str, after: int, upto: int, limit: int) -> int:
    """The highest seq up to ``upto`` such that no op of ``replica`` after ``after`` up to it
    is stamped past ``limit`` (ms)."""
    while after < upto:
        ops = store.log.ops_of(replica, after, min(PUSH_BATCH, upto - after))
        if not ops:
            break
        for op in ops:
            if int(op["hlc"][0]) > limit:
                return after
            after += 1
    return after


def _push_stream(store: Any, remote: Any, replica: str, after: int, upto: int, heads: dict,
                 hook: Callable[[str], None]) -> int:
    sent = 0
    while after < upto:
        ops = store.log.ops_of(replica, after, min(PUSH_BATCH, upto - after))
        if not ops:
            break
        hook("before_push")
        new_head = int(remote.push(replica, ops))
        hook("after_push")
        heads[replica] = max(heads.get(replica, 0), new_head)
        hook("before_watermark")

        def mark(st: dict, head: int = new_head) -> None:
            marks = st.setdefault("watermarks", {}).setdefault("pushed", {})
            marks[replica] = max(int(marks.get(replica, 0)), head)

        _update_state(store, remote.name, mark)
        if new_head <= after:
            break  # the remote did not move: try again next round
        sent += min(new_head, after + len(ops)) - after
        after = new_head
    return sent


def _pull_stream(store: Any, remote: Any, replica: str, after: int, target: int, counts: dict,
                 hook: Callable[[str], None], helper: Applier | None = None) -> None:
    # ops held here (stamped too far ahead: brandmind/held.py) are not fetched again
    after = held_top(store.log, replica, after)
    # the first pull starts one op early: the op both sides hold must be the same op there
    # (else two devices write under one replica id: receive raises SyncConflict)
    overlap = 1 if after > 0 else 0
    while after < target:
        ops = remote.pull(replica, after - overlap, PULL_BATCH)
        overlap = 0
        if not ops:
            break
        mine = [op for op in ops if str(op.get("id", "")).rpartition(":")[0] == replica]
        got = store.receive_ops(mine, apply=helper is None)
        if helper is not None:
            helper.poke()
        counts["received"] += got["received"]
        counts["duplicates"] += got["duplicates"] + len(ops) - len(mine)
        hook("after_receive")
        head = held_top(store.log, replica, store.log.version_vector().get(replica, 0))

        def mark(st: dict, h: int = head) -> None:
            marks = st.setdefault("watermarks", {}).setdefault("pulled", {})
            marks[replica] = max(int(marks.get(replica, 0)), h)

        _update_state(store, remote.name, mark)
        if head <= after:
            break  # a gap in what came back (a lossy answer): the next round fills it
        after = head


# -- status --------------------------------------------------------------------------------------------
def sync_status(store: Any, remote: Any | None = None) -> dict:
    """``{"replica", "ops", "version_vector", "remotes": {name: {"pending": {replica: n},
    "pending_total", "incoming", "remote_heads", "watermarks", "last_success",
    "last_error", "checked": "live"|"recorded", "clock"?}}, "held": [{"replica", "ops",
    "first_seq", "last_seq", "ahead_ms", "ahead", ...}]}`` (held: ops set aside, stamped too
    far ahead of this device's clock; brandmind/held.py).  Without ``remote`` it reads only this
    device's records (no network); with one it asks that remote for its heads.  ``store``: a
    StoreHandle (a Memory gives its ``.store``)."""
    store = store_of(store)
    state = load_state(store)
    vv = store.log.version_vector()
    own = store.log.replica
    names = set(state) | ({remote.name} if remote is not None else set())
    remotes: dict[str, dict] = {}
    for name in sorted(names):
        st = state.get(name, {})
        heads = {r: int(h) for r, h in (st.get("remote_heads") or {}).items()}
        accepts = bool(st.get("accepts_pushes_for_others", False))
        checked = "recorded"
        last_error = st.get("last_error")
        if remote is not None and name == remote.name:
            accepts = bool(remote.accepts_pushes_for_others)
            try:
                heads = {r: int(h) for r, h in dict(remote.heads()).items()}
                checked = "live"
            except BMError as exc:
                last_error = {"at": _iso_now(), **_error("heads", exc)}
        pending = {r: n - heads.get(r, 0) for r, n in sorted(vv.items())
                   if (r == own or accepts) and n > heads.get(r, 0)}
        # what a pull would bring: past this device's head and past the ops it holds back
        have = {r: held_top(store.log, r, vv.get(r, 0)) for r in heads}
        incoming = {r: h - have[r] for r, h in sorted(heads.items()) if h > have[r]}
        remotes[name] = {"pending": pending, "pending_total": sum(pending.values()), "incoming": incoming,
                         "remote_heads": dict(sorted(heads.items())), "watermarks": st.get("watermarks", {}),
                         "last_success": st.get("last_success"), "last_error": last_error,
                         "last_attempt": st.get("last_attempt"), "checked": checked}
        if st.get("clock"):
            remotes[name]["clock"] = st["clock"]
    return {"replica": own, "ops": store.log.count("ops"), "version_vector": vv, "remotes": remotes,
            "held": held_summary(store.log), "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
