"""Soak: three replicas write and sync through a remote that fails >= 20% of its requests.

Each round every replica writes (memories, beads, a forget now and then, block appends)
and runs one ``sync_once``.  Two remotes:

* a flaky view of a directory remote (tests/dirremote.py): a failing request either never
  reaches the remote or fails AFTER the remote committed it (a lost reply); a pull may
  come back short;
* SeaweedFS through ``S3Remote``: botocore's before-send hook answers 500/503 or delivers a
  PUT and then times out; bursts at 80% beat botocore's own retries, so rounds fail too.

Then the faults stop and the replicas sync until quiet.  Reported (printed; run with
``-s``): the request failure rate, the sync success rate, lost ops and duplicated ops --
both must be 0 -- and the three stores must export the same state.

Short by default (~15 s for both, part of the suite); longer runs: ``BM_SOAK_ROUNDS=500
BM_SOAK_S3_ROUNDS=100`` (``BM_SOAK_FAIL_RATE``, ``BM_SOAK_SEED``).
"""
from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from pathlib import Path

import pytest

from dirremote import DirRemote, RemoteDown

pytestmark = pytest.mark.soak

ROUNDS = int(os.environ.get("BM_SOAK_ROUNDS", "100"))
FAIL_RATE = float(os.environ.get("BM_SOAK_FAIL_RATE", "0.3"))
SEED = int(os.environ.get("BM_SOAK_SEED", "20240605"))


class Flaky:
    """A remote whose requests fail with probability ``rate``: before reaching the remote,
    or (pushes) after it committed; pulls may come back short."""

    accepts_pushes_for_others = False

    def __init__(self, inner: DirRemote, rng: random.Random, rate: float) -> None:
        self.inner = inner
        self.name = inner.name
        self.rng = rng
        self.rate = rate
        self.on = True
        self.requests = 0
        self.failures = 0
        self.after_commit = 0

    def _fails(self) -> bool:
        self.requests += 1
        if self.on and self.rng.random() < self.rate:
            self.failures += 1
            return True
        return False

    def heads(self) -> dict[str, int]:
        if self._fails():
            raise RemoteDown("injected: heads failed (HTTP 503)")
        return self.inner.heads()

    def push(self, replica: str, ops: list[dict]) -> int:
        if self._fails():
            if self.rng.random() < 0.5:
                raise RemoteDown("injected: push failed before reaching the remote (HTTP 500)")
            self.inner.push(replica, ops)
            self.after_commit += 1
            raise RemoteDown("injected: push timed out after the remote committed it")
        return self.inner.push(replica, ops)

    def pull(self, replica: str, after: int, limit: int | None = None) -> list[dict]:
        if self._fails():
            raise RemoteDown("injected: pull failed (connection reset)")
        ops = self.inner.pull(replica, after, limit)
        if self.on and ops and self.rng.random() < 0.1:
            ops = ops[: self.rng.randrange(len(ops))]  # a short read: a prefix, still in seq order
        return ops


def _sync(mem, remote) -> tuple[bool, dict]:
    from brandmind.errors import BMError
    from brandmind.sync.engine import sync_once

    try:
        report = sync_once(mem, remote)
    except BMError as exc:
        return False, {"errors": [exc.message]}
    return not report.get("errors"), report


def _op_ids(mem) -> list[str]:
    return [op["id"] for op in mem.log.iter_ops()]


def _export(mem) -> list[str]:
    from brandmind.exchange import export_lines

    return list(export_lines(mem))


def _soak(stores: dict, remotes: dict, rng: random.Random, rounds: int, *, faults, remote_ids,
          before_sync=lambda i: None) -> dict:
    """Rounds of writes + one sync per replica with ``faults(True)``, then ``faults(False)``
    and syncs until quiet; checks and returns the report.  ``remote_ids()``: every op id
    the remote holds (one entry per stored copy)."""
    names = list(stores)
    received = {n: 0 for n in names}
    attempts = successes = written = 0
    kinds: Counter = Counter()
    t0 = time.monotonic()
    faults(True)
    for rnd in range(rounds):
        for n in names:
            mem = stores[n]
            for i in range(rng.randint(1, 3)):
                mem.remember(f"{n} fact {rnd}.{i}: {rng.choice(['tea', 'maps', 'jazz', 'rain'])}")
                written += 1
            mem.ingest([json.dumps({"id": f"{n}-{rnd}", "role": "user", "speaker": n,
                                    "content": f"{n} says hello in round {rnd}"})])
            if rnd % 3 == 2:
                mem.blocks.append(f"notes-{rnd // 60}", f"{n} was here in round {rnd}")  # < the limit
            if rng.random() < 0.25:
                rows = mem.list_memories(limit=50)
                if rows:
                    mem.forget(rng.choice(rows)["id"])
            before_sync(attempts)
            ok, report = _sync(mem, remotes[n])
            attempts += 1
            successes += ok
            for err in report.get("errors") or []:
                text = err.get("message", str(err)) if isinstance(err, dict) else str(err)
                kinds[text.split(":")[0][:60]] += 1
            received[n] += sum((report.get("pulled") or {}).values())
    # quiet: no more faults, sync until nothing moves
    faults(False)
    moved = 1
    for _ in range(6):
        moved = 0
        for n in names:
            ok, report = _sync(stores[n], remotes[n])
            assert ok, report
            got = sum((report.get("pulled") or {}).values())
            received[n] += got
            moved += got + sum((report.get("pushed") or {}).values())
        if not moved:
            break
    assert moved == 0, "the replicas did not go quiet"

    union: set[str] = set()
    per_store = {}
    for n in names:
        ids = _op_ids(stores[n])
        assert len(ids) == len(set(ids))
        per_store[n] = set(ids)
        union |= set(ids)
    lost = sum(len(union - ids) for ids in per_store.values())
    own = {n: sum(1 for i in per_store[n] if i.startswith(stores[n].log.replica + ":")) for n in names}
    # every foreign op was taken in exactly once (re-deliveries are not counted as received)
    duplicated = sum(received[n] - (len(union) - own[n]) for n in names)
    stored = remote_ids()
    remote_dups = len(stored) - len(set(stored))
    remote_missing = len(union - set(stored))
    vvs = [stores[n].log.version_vector() for n in names]
    exports = [_export(stores[n]) for n in names]
    report = {"rounds": rounds, "replicas": len(names), "ops": len(union), "memories_written": written,
              "sync_attempts": attempts, "sync_success_rate": round(successes / attempts, 3),
              "lost_ops": lost, "duplicated_ops": duplicated + remote_dups, "remote_missing": remote_missing,
              "seconds": round(time.monotonic() - t0, 1), "errors_seen": dict(kinds.most_common(4))}
    assert lost == 0 and duplicated == 0 and remote_dups == 0 and remote_missing == 0, report
    assert vvs[0] == vvs[1] == vvs[2]
    assert exports[0] == exports[1] == exports[2]
    assert len(exports[0]) > rounds  # not trivially equal
    return report


def test_soak_three_replicas_through_a_flaky_remote(tmp_path: Path) -> None:
    from brandmind.memory import Memory

    rng = random.Random(SEED)
    shared = DirRemote(tmp_path / "remote", name="flaky")
    names = ["laptop", "desktop", "server"]
    stores = {n: Memory(tmp_path / n, create=True) for n in names}
    remotes = {n: Flaky(DirRemote(tmp_path / "remote", name="flaky"), random.Random(rng.random()), FAIL_RATE)
               for n in names}

    def faults(on: bool) -> None:
        for r in remotes.values():
            r.on = on

    def remote_ids() -> list[str]:
        return [op["id"] for rep in (p.name for p in (tmp_path / "remote" / "ops").iterdir())
                for op in shared.stored(rep)]

    try:
        report = _soak(stores, remotes, rng, ROUNDS, faults=faults, remote_ids=remote_ids)
    finally:
        for mem in stores.values():
            mem.close()
    requests = sum(r.requests for r in remotes.values())
    failed = sum(r.failures for r in remotes.values())
    report = {"remote": "directory (tests/dirremote.py)", **report, "requests": requests,
              "request_failure_rate": round(failed / requests, 3),
              "failed_after_commit": sum(r.after_commit for r in remotes.values())}
    print("\nsoak:", json.dumps(report))
    assert failed / requests >= 0.2
    assert 0 < report["sync_success_rate"] < 1


S3_ROUNDS = int(os.environ.get("BM_SOAK_S3_ROUNDS", "15"))


def test_soak_three_replicas_through_flaky_s3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same through SeaweedFS: botocore's before-send hook fails >= 20% of the HTTP
    requests with 500/503, or delivers a PUT and then times out (the server committed);
    bursts at 80% beat botocore's 5 attempts, so whole sync rounds fail too."""
    from seaweed import SKIP_REASON, start_seaweed, weed_path

    if weed_path() is None:
        pytest.skip(SKIP_REASON)
    import botocore.exceptions
    import botocore.retries.standard
    import urllib3
    from botocore.awsrequest import AWSResponse

    from brandmind.memory import Memory
    from brandmind.sync.config import make_s3
    from brandmind.crypto import Keyring
    from brandmind.sync.s3 import open_remote

    # botocore's retries without their sleeps: the faults are injected, waiting only slows the test
    monkeypatch.setattr(botocore.retries.standard.ExponentialBackoff, "delay_amount", lambda self, ctx: 0.001)
    server = start_seaweed(tmp_path / "s3")
    for k in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(k)
    for k, v in server.env().items():
        monkeypatch.setenv(k, v)
    rng = random.Random(SEED + 1)
    fault_rng = random.Random(SEED + 2)
    http = urllib3.PoolManager()
    stats = {"requests": 0, "faulty_phase": 0, "failed": 0, "after_commit": 0, "on": False, "rate": FAIL_RATE}

    def flaky(request, **_):
        stats["requests"] += 1
        if not stats["on"]:
            return None
        stats["faulty_phase"] += 1
        if fault_rng.random() >= stats["rate"]:
            return None
        stats["failed"] += 1
        if request.method == "PUT" and fault_rng.random() < 0.3:
            body = request.body.read() if hasattr(request.body, "read") else request.body
            http.request("PUT", request.url, body=body, headers=dict(request.headers))
            stats["after_commit"] += 1
            raise botocore.exceptions.ReadTimeoutError(endpoint_url=request.url)
        status, code = fault_rng.choice([(503, "ServiceUnavailable"), (500, "InternalError")])
        payload = f"<?xml version='1.0'?><Error><Code>{code}</Code><Message>injected</Message></Error>".encode()

        class Raw:
            def stream(self, **_):
                yield payload

        return AWSResponse("http://injected", status, {"Content-Type": "application/xml"}, Raw())

    names = ["laptop", "desktop", "server"]
    stores: dict = {}
    try:
        bucket = server.new_bucket("soak")
        cfg = make_s3("origin", bucket=bucket, endpoint_url=server.endpoint)
        for n in names:
            stores[n] = Memory(tmp_path / n, create=True)
        key = Keyring(stores[names[0]].paths.data_dir).active().export_text()
        for n in names[1:]:
            Keyring(stores[n].paths.data_dir).import_key(key)
        remotes = {n: open_remote(stores[n], cfg) for n in names}
        for r in remotes.values():
            r.client.meta.events.register("before-send.s3", flaky)

        def faults(on: bool) -> None:
            stats["on"] = on

        def bursts(i: int) -> None:  # every fourth round of three syncs a burst at 80%
            stats["rate"] = 0.8 if (i // 3) % 4 == 3 else FAIL_RATE

        def remote_ids() -> list[str]:
            reader = open_remote(stores[names[0]], cfg)
            heads = reader.heads()
            return [op["id"] for rep in heads for op in reader.pull(rep, 0)]

        report = _soak(stores, remotes, rng, S3_ROUNDS, faults=faults, remote_ids=remote_ids,
                       before_sync=bursts)
    finally:
        for mem in stores.values():
            mem.close()
        server.stop()
    report = {"remote": "SeaweedFS (S3Remote, botocore before-send faults)", **report,
              "http_requests": stats["faulty_phase"],
              "http_failure_rate": round(stats["failed"] / stats["faulty_phase"], 3),
              "failed_after_commit": stats["after_commit"]}
    print("\nsoak:", json.dumps(report))
    assert stats["failed"] >= 0.2 * stats["faulty_phase"]
    assert 0 < report["sync_success_rate"] < 1
