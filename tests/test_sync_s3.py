"""Sync through a real S3 server (SeaweedFS `weed mini`, one per module, a bucket per test).

* three stores (three BM_HOMEs, `bm` subprocesses) edit concurrently and converge through
  `bm sync now` rounds to identical `bm export`s; no object in the bucket holds plaintext;
* a wrong key, a copied store (replica id clash) and a misconfigured remote fail with one
  clear `Error:` line;
* faults injected through botocore event hooks (5xx, a timeout after the server committed,
  409 on the compare-and-swap, a crash between the upload and the head/watermark) lose
  nothing and duplicate nothing.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import BM_CMD, Result, assert_error  # noqa: E402
from seaweed import SKIP_REASON, start_seaweed, weed_path  # noqa: E402

pytestmark = pytest.mark.skipif(weed_path() is None, reason=SKIP_REASON)


@pytest.fixture(scope="module")
def sw(tmp_path_factory):
    server = start_seaweed(tmp_path_factory.mktemp("seaweed"))
    yield server
    server.stop()
    assert not server.alive()


@pytest.fixture
def aws_env(sw, monkeypatch):
    """This process's boto3 chain points at the test server's credentials."""
    for k in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(k)
    for k, v in sw.env().items():
        monkeypatch.setenv(k, v)
    return sw


@pytest.fixture
def fast_retries(monkeypatch):
    """botocore's own retries, without its sleeps (up to 1, 2, 4 s...): the faults here are
    injected, the waiting would only slow the tests."""
    import botocore.retries.standard

    monkeypatch.setattr(botocore.retries.standard.ExponentialBackoff, "delay_amount", lambda self, ctx: 0.001)


# -- helpers ------------------------------------------------------------------------------------------------
class Device:
    """One store (its own BM_HOME) driven through `bm` subprocesses."""

    def __init__(self, home: Path, sw, **env: str) -> None:
        self.home = home
        self.env = {**os.environ, **sw.env(), "BM_HOME": str(home), "BM_EMBEDDER": "hash", **env}

    def start(self, *args: object, input: str | None = None) -> subprocess.Popen:
        proc = subprocess.Popen([*BM_CMD, *map(str, args)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=self.env)
        proc._bm_stdin = (input or "").encode()  # type: ignore[attr-defined]
        return proc

    @staticmethod
    def finish(proc: subprocess.Popen) -> Result:
        out, err = proc.communicate(proc._bm_stdin, timeout=120)  # type: ignore[attr-defined]
        return Result(proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))

    def run(self, *args: object, input: str | None = None) -> Result:
        return self.finish(self.start(*args, input=input))

    def ok(self, *args: object, input: str | None = None) -> Result:
        res = self.run(*args, input=input)
        assert res.code == 0, res
        return res

    def export(self) -> list[str]:
        lines = self.ok("export").out.splitlines()
        return sorted(line for line in lines if '"kind":"header"' not in line)


def parallel(*calls: tuple) -> list[Result]:
    """Run (device, args...) calls at the same time; all must succeed."""
    procs = [dev.start(*args) for dev, *args in calls]
    results = [Device.finish(p) for p in procs]
    for res, call in zip(results, calls):
        assert res.code == 0, (call[1:], res)
    return results


def sync(dev: Device) -> dict:
    res = dev.ok("sync", "now", "--json")
    out = res.json()
    assert out["ok"] and not any(r["errors"] for r in out["remotes"]), out
    return out


def set_up(sw, root: Path, n: int, bucket: str, prefix: str = "team/bm") -> list[Device]:
    devices = [Device(root / f"dev{i}", sw) for i in range(n)]
    parallel(*((dev, "init") for dev in devices))
    parallel(*((dev, "remote", "add", "s3", "--bucket", bucket, "--prefix", prefix, "--endpoint-url", sw.endpoint)
               for dev in devices))
    key = root / "sync.key"
    res = devices[0].ok("sync", "key", "export", "-o", key)
    assert "Warning" in res.err and key.stat().st_mode & 0o777 == 0o600
    for res in parallel(*((dev, "sync", "key", "import", key, "--json") for dev in devices[1:])):
        assert res.json()["changed"] is True and res.json()["key_id"] in key.read_text()
    return devices


def sync_all(*devices: Device) -> list[dict]:
    """`bm sync now` on every device at the same time."""
    outs = [res.json() for res in parallel(*((dev, "sync", "now", "--json") for dev in devices))]
    for out in outs:
        assert out["ok"] and not any(r["errors"] for r in out["remotes"]), out
    return outs


# -- end to end: three devices ----------------------------------------------------------------------------
def test_three_devices_converge_and_the_bucket_holds_no_plaintext(sw, tmp_path):
    bucket = sw.new_bucket()
    a, b, c = set_up(sw, tmp_path, 3, bucket)
    shown = a.ok("sync", "key", "show", "--json").json()
    assert not shown["created"] and shown["key_id"] and "bm-sync-key" not in json.dumps(shown)

    secrets_ = {"userids": ["zq-ann-7731", "zq-bob-4412"],
                "texts": ["Ann keeps her spare key under the blue flowerpot",
                          "Bob's locker code is 8841-quartz",
                          "Ann prefers oolong tea after midnight",
                          "Carol is allergic to walnuts and pecans"],
                "blocks": ["Writes in short sentences, hates emoji zqblock1",
                           "Works night shifts at the observatory zqblock2",
                           "Collects antique barometers zqblock3"],
                "bead": "zqbead " + "the long transcript of the lighthouse meeting " * 8}
    # round 1: every device writes at the same time
    r = parallel((a, "remember", secrets_["texts"][0], "--user", "zq-ann-7731", "--json"),
                 (b, "remember", secrets_["texts"][1], "--user", "zq-bob-4412", "--json"),
                 (c, "block", "append", "human", secrets_["blocks"][0], "--user", "zq-ann-7731"))
    mem_a0, mem_b0 = r[0].json()["id"], r[1].json()["id"]
    # a large bead goes to the blob store on c (threshold lowered), and must travel as a blob
    Device(c.home, sw, BM_BLOB_THRESHOLD="100").ok("beads", "add", secrets_["bead"], "--user", "zq-ann-7731")
    sync_all(a, b, c)  # concurrently: the heads.json compare-and-swap sees real races
    sync_all(a, b, c)  # every push of the first round is done: everyone pulls everything
    # round 2: concurrent forgets and edits of the same block, made offline
    r = parallel((a, "forget", mem_b0, "--yes"),
                 (b, "remember", secrets_["texts"][2], "--user", "zq-ann-7731", "--json"),
                 (c, "remember", secrets_["texts"][3], "--user", "zq-bob-4412", "--json"))
    parallel((a, "block", "append", "human", secrets_["blocks"][1], "--user", "zq-ann-7731"),
             (b, "block", "append", "human", secrets_["blocks"][2], "--user", "zq-ann-7731"),
             (c, "forget", mem_a0, "--yes"))  # a's memory, forgotten on c
    sync_all(a, b, c)
    sync_all(a, b, c)
    exports = [sorted(line for line in res.out.splitlines() if '"kind":"header"' not in line)
               for res in parallel((a, "export"), (b, "export"), (c, "export"))]
    assert exports[0] == exports[1] == exports[2]
    text = "\n".join(exports[0])
    assert secrets_["texts"][0] not in text and secrets_["texts"][1] not in text  # forgotten: gone everywhere
    for s in (secrets_["texts"][2], secrets_["texts"][3], *secrets_["blocks"]):
        assert s in text
    assert secrets_["bead"] in text  # the blob came along
    assert (b.home / "data" / "blobs").is_dir()
    block = json.loads(next(line for line in exports[0] if '"label":"human"' in line))
    assert all(s in block["value"] for s in secrets_["blocks"])
    status = a.ok("sync", "status", "--json").json()  # without the daemon, without the network
    assert len(status["version_vector"]) == 3 and status["remotes"]["origin"]["pending_total"] == 0
    assert status["remotes"]["origin"]["last_success"] and status["remotes"]["origin"]["checked"] == "recorded"

    # every object in the bucket: no plaintext, in names or bodies
    objects = sw.objects(bucket)
    assert any(k.startswith("team/bm/ops/") for k in objects) and "team/bm/heads.json" in objects
    assert any(k.startswith("team/bm/blobs/") for k in objects)
    needles = [*secrets_["userids"], *secrets_["texts"], *secrets_["blocks"], "zqbead", "lighthouse",
               "Ann", "default", "memory.add", "human"]
    for key, body in objects.items():
        assert body[:4] == b"bmS3", key
        for needle in needles:
            for form in {needle.encode(), needle.encode("utf-16-le"), json.dumps(needle).encode()}:
                assert form not in body and needle not in key, (needle, key)


def test_wrong_key_and_bad_remote_fail_with_one_clear_line(sw, tmp_path):
    bucket = sw.new_bucket()
    (a,) = set_up(sw, tmp_path, 1, bucket, prefix="")
    d = Device(tmp_path / "stranger", sw)  # a device that never imported the store's key
    parallel((a, "remember", "Ann lives in Lisbon"), (d, "init"))
    parallel((a, "sync", "now"),
             (d, "remote", "add", "s3", "--bucket", bucket, "--endpoint-url", sw.endpoint))
    made = a.ok("sync", "snapshot", "--json").json()
    assert made[0]["ops"] == 1 and made[0]["remote"] == "origin"
    a.ok("remember", "Ann moved to Porto")
    parallel((a, "sync", "now"), (d, "stats", "--json"))
    line = assert_error(d.run("sync", "now"), 1, "this store's sync key cannot decrypt", "bm sync key import")
    assert f"s3://{bucket}/" in line
    # nothing half-written, here or there
    assert d.export() == [] and not [k for k in sw.objects(bucket) if d.ok("stats", "--json").json()["replica"] in k]
    # after importing the key it works: the empty store starts from the snapshot, then pulls the rest
    key = a.ok("sync", "key", "export").out
    d.ok("sync", "key", "import", "-", input=key)
    out = sync(d)["remotes"][0]
    assert out["bootstrap"]["ops"] == 1 and sum(out["pulled"].values()) == 1
    assert d.export() == a.export()
    # bad input and bad remotes: each one clean line
    parallel((d, "remote", "add", "s3", "gone", "--bucket", "bm-no-such-bucket-zz", "--endpoint-url", sw.endpoint))
    d.ok("remote", "add", "s3", "badcreds", "--bucket", bucket, "--endpoint-url", sw.endpoint)
    bad = Device(d.home, sw, AWS_SECRET_ACCESS_KEY="wrong")
    # credentials from a named profile instead of the environment
    creds = tmp_path / "aws-credentials"
    creds.write_text(f"[bmtest]\naws_access_key_id = {sw.access_key}\naws_secret_access_key = {sw.secret_key}\n")
    d.ok("remote", "add", "s3", "prof", "--bucket", bucket, "--endpoint-url", sw.endpoint, "--profile", "bmtest")
    d.ok("remote", "add", "s3", "noprof", "--bucket", bucket, "--endpoint-url", sw.endpoint, "--profile", "nope")
    by_profile = Device(d.home, sw, AWS_SHARED_CREDENTIALS_FILE=str(creds))
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        by_profile.env.pop(k)
    calls = [((d, "sync", "key", "import", "-"), "bm-sync-key:1:abc:zzzz", "damaged"),
             ((d, "remote", "add", "s3", "x", "--bucket", "No_Such"), None, "bucket"),
             ((d, "remote", "add", "s3", "--bucket", bucket), None, "already exists"),
             ((d, "sync", "now", "--remote", "gone"), None, "does not exist"),
             ((d, "sync", "now", "--remote", "nope"), None, "no remote named"),
             ((bad, "sync", "now", "--remote", "badcreds"), None, "access denied"),
             ((d, "sync", "now", "--bootstrap"), None, "empty"),
             ((by_profile, "sync", "now", "--remote", "noprof"), None, "profile 'nope' is not configured"),
             ((by_profile, "remote", "test", "prof", "--json"), None, None),
             ((d, "remote", "test", "origin", "--json"), None, None),
             ((d, "remote", "list", "--json"), None, None)]
    procs = [dev.start(*args, input=stdin) for (dev, *args), stdin, _ in calls]
    results = [Device.finish(proc) for proc in procs]
    for res, ((_, *args), _, word) in zip(results, calls):
        if word:
            assert_error(res, 2 if "--bootstrap" in args else 1, word)
    for res in results[-3:]:
        assert res.code == 0, res
    probes, listed = [r.json() for r in results[-3:-1]], {r["name"]: r for r in results[-1].json()}
    for probe in probes:
        assert probe["ok"] and probe["if_none_match"] and probe["if_match"] and probe["round_trip"]
    assert not [k for k in sw.objects(bucket) if "probe" in k]
    assert set(listed) == {"origin", "gone", "badcreds", "prof", "noprof"}
    assert listed["origin"]["endpoint_url"] == sw.endpoint and listed["prof"]["profile"] == "bmtest"
    d.ok("remote", "remove", "gone")
    assert_error(d.run("remote", "remove", "gone"), 1, "no remote named")


def test_a_copied_store_is_detected_as_a_replica_id_clash(aws_env, tmp_path):
    from brandmind.sync.config import add_remote, make_s3
    from brandmind.sync.engine import sync_once

    sw = aws_env
    bucket = sw.new_bucket()
    with _mem(tmp_path / "a") as a:
        add_remote(a.paths.data_dir, make_s3(None, bucket=bucket, prefix="f", endpoint_url=sw.endpoint))
        a.remember("first note")
        assert not sync_once(a, _remote(a, sw, bucket))["errors"]
    shutil.copytree(tmp_path / "a", tmp_path / "copy")  # the same replica id (and key) twice
    with _mem(tmp_path / "a") as a, _mem(tmp_path / "copy") as a2:
        a.remember("written on the original")
        a2.remember("written on the copy")
        assert not sync_once(a, _remote(a, sw, bucket))["errors"]
        want = _export(a)
    res = Device(tmp_path / "copy", sw).run("sync", "now")
    assert_error(res, 1, "two devices share replica id", "fresh BM_HOME")
    with _mem(tmp_path / "a") as a, _mem(tmp_path / "copy") as a2:
        assert "written on the original" not in "\n".join(_export(a2))  # nothing pulled into the copy
        assert _export(a) == want
        # the copy also cannot push over the original's ops (same name: 412, different ops)
        from brandmind.errors import SyncConflict

        replica = a2.log.replica
        for heads, after in (({replica: 1}, 1), ({}, 0)):  # the 412 path; the overlap check
            rem = _remote(a2, sw, bucket)
            rem.store = None  # skip the up-front check
            rem._heads = heads
            with pytest.raises(SyncConflict, match="two devices share replica id"):
                rem.push(replica, a2.log.ops_of(replica, after))
        # the overlap left two segments over op 2: a reader refuses to pick one
        reader = _remote(a, sw, bucket)
        reader.store = None  # a third device reading the stream
        with pytest.raises(SyncConflict, match=f"two different ops {replica}:2"):
            reader.pull(replica, 0)


# -- in-process: fault injection through botocore event hooks --------------------------------------------
def _mem(home: Path):
    from brandmind.memory import Memory

    return Memory(home, create=True)


def _remote(mem, sw, bucket: str, **kw):
    from brandmind.sync.config import make_s3
    from brandmind.sync.s3 import open_remote

    return open_remote(mem, make_s3("origin", bucket=bucket, prefix="f", endpoint_url=sw.endpoint), **kw)


def _share_key_from(ring, dst) -> None:
    from brandmind.crypto import Keyring

    Keyring(dst.paths.data_dir).import_key(ring.active().export_text())


def _share_key(src, dst) -> None:
    from brandmind.crypto import Keyring

    text = Keyring(src.paths.data_dir).active().export_text()
    Keyring(dst.paths.data_dir).import_key(text)


def _response(status: int, code: str):
    from botocore.awsrequest import AWSResponse

    body = f"<?xml version='1.0'?><Error><Code>{code}</Code><Message>injected</Message></Error>".encode()

    class Raw:
        def stream(self, **_):
            yield body

    return AWSResponse("http://injected", status, {"Content-Type": "application/xml"}, Raw())


def _export(mem) -> list[str]:
    from brandmind.exchange import export_lines

    return sorted(line for line in export_lines(mem) if '"kind":"header"' not in line)


def _ops_once(mem) -> None:
    """Every op in the log exactly once, and the version vector covers them all."""
    ids = [op["id"] for op in mem.log.iter_ops()]
    assert len(ids) == len(set(ids))
    assert sum(mem.log.version_vector().values()) == len(ids)


def test_5xx_faults_and_flaky_rounds_lose_and_duplicate_nothing(aws_env, fast_retries, tmp_path):
    from brandmind.errors import BMError
    from brandmind.sync.engine import sync_once

    sw = aws_env
    bucket = sw.new_bucket()
    rng = random.Random(5)
    stats = {"requests": 0, "injected": 0}
    rate = [0.3]

    def flaky(request, **_):
        stats["requests"] += 1
        if rng.random() < rate[0]:
            stats["injected"] += 1
            return _response(*rng.choice([(503, "ServiceUnavailable"), (500, "InternalError")]))
        return None

    with _mem(tmp_path / "a") as a, _mem(tmp_path / "b") as b:
        _share_key(a, b)
        remotes = {}
        for name, mem in (("a", a), ("b", b)):
            remotes[name] = _remote(mem, sw, bucket)
            remotes[name].client.meta.events.register("before-send.s3", flaky)
        rounds = ok = 0
        for i in range(12):
            rate[0] = 0.3 if i % 2 else 0.75  # at 0.75 botocore's 5 attempts often all fail
            a.remember(f"note {i} from a")
            b.remember(f"note {i} from b")
            if i % 3 == 0:
                a.blocks.append("human", f"line {i} from a")
            for name, mem in (("a", a), ("b", b)):
                rounds += 1
                try:
                    report = sync_once(mem, remotes[name])
                    ok += not report["errors"]
                except BMError:
                    pass
                _ops_once(mem)
        rate[0] = 0.0
        for name, mem in (("a", a), ("b", b), ("a", a)):
            assert not sync_once(mem, remotes[name])["errors"]
        print(f"\nflaky S3 ({stats['injected']}/{stats['requests']} requests failed with 500/503): "
              f"{ok}/{rounds} sync rounds succeeded; lost ops: 0")
        assert stats["injected"] >= 0.2 * stats["requests"]
        assert 0 < ok < rounds  # some rounds failed (and stopped cleanly), some got through
        assert _export(a) == _export(b)
        assert a.log.version_vector() == b.log.version_vector()
        _ops_once(a)
        _ops_once(b)
        assert len([line for line in _export(a) if '"kind":"memory"' in line]) == 24


def test_timeout_after_the_server_committed_is_recognised_as_already_pushed(aws_env, fast_retries, tmp_path):
    import botocore.exceptions
    import urllib3

    from brandmind.sync.engine import sync_once

    sw = aws_env
    bucket = sw.new_bucket()
    http = urllib3.PoolManager()
    hits = []

    def commit_then_timeout(request, **_):
        """Deliver the request for real, then pretend the answer never came."""
        if request.method == "PUT" and request.url.split("?")[0].endswith(".seg") and not hits:
            body = request.body.read() if hasattr(request.body, "read") else request.body
            resp = http.request("PUT", request.url, body=body, headers=dict(request.headers))
            hits.append(resp.status)
            raise botocore.exceptions.ReadTimeoutError(endpoint_url=request.url)
        return None

    with _mem(tmp_path / "a") as a, _mem(tmp_path / "b") as b:
        _share_key(a, b)
        for i in range(30):
            a.remember(f"timeout note {i}")
        ra = _remote(a, sw, bucket)
        ra.client.meta.events.register("before-send.s3", commit_then_timeout)
        report = sync_once(a, ra)
        assert hits == [200] and not report["errors"], report
        assert ra.stats["already_pushed"] == 1  # botocore's retry got 412, the segment was ours
        segs = [k for k in sw.objects(bucket) if k.endswith(".seg")]
        assert len(segs) == 1
        rb = _remote(b, sw, bucket)
        assert not sync_once(b, rb)["errors"]
        assert _export(a) == _export(b)
        _ops_once(b)


def test_crash_between_upload_and_watermark_repushes_as_already_pushed(aws_env, tmp_path, monkeypatch):
    from brandmind.sync import s3
    from brandmind.sync.engine import sync_once

    sw = aws_env
    bucket = sw.new_bucket()

    class Crash(BaseException):
        pass

    with _mem(tmp_path / "a") as a, _mem(tmp_path / "b") as b:
        _share_key(a, b)
        for i in range(12):
            a.remember(f"crash note {i}")
        # the process dies after the segment upload, before heads.json and the watermark
        with monkeypatch.context() as m:
            m.setattr(s3.S3Remote, "cas", lambda self, *a, **k: (_ for _ in ()).throw(Crash()))
            with pytest.raises(Crash):
                sync_once(a, _remote(a, sw, bucket))
        objects = sw.objects(bucket)
        assert [k for k in objects if k.endswith(".seg")] and "f/heads.json" not in objects
        # on restart: the heads come from the listing; an explicit re-push of the same ops
        # (as if the remote's heads were stale) meets the 412 and is recognised as ours
        rem = _remote(a, sw, bucket)
        replica = a.log.replica
        assert rem.heads() == {replica: 12}
        rem._heads = {}
        assert rem.push(replica, a.log.ops_of(replica, 0)) == 12
        assert rem.stats["already_pushed"] == 1
        # ... also after a forget redacted one of the pushed ops locally
        a.forget(a.list_memories()[0]["id"])
        rem2 = _remote(a, sw, bucket)
        rem2.heads()
        rem2._heads = {}
        rem2.push(replica, a.log.ops_of(replica, 0, 12))
        assert rem2.stats["already_pushed"] == 1
        assert not sync_once(a, _remote(a, sw, bucket))["errors"]
        assert not sync_once(b, _remote(b, sw, bucket))["errors"]
        assert _export(a) == _export(b)
        _ops_once(a)
        _ops_once(b)
        assert len([k for k in sw.objects(bucket) if k.endswith(".seg")]) == 2


def test_cas_conflicts_on_heads_are_retried(aws_env, tmp_path):
    from brandmind.sync.engine import sync_once

    sw = aws_env
    bucket = sw.new_bucket()
    injected = []

    def conflict(request, **_):
        if request.method == "PUT" and "heads.json" in request.url and len(injected) < 3:
            injected.append(409 if len(injected) % 2 else 412)
            return _response(injected[-1], "ConditionalRequestConflict" if injected[-1] == 409
                             else "PreconditionFailed")
        return None

    with _mem(tmp_path / "a") as a, _mem(tmp_path / "b") as b:
        _share_key(a, b)
        a.remember("cas one")
        b.remember("cas two")
        ra, rb = _remote(a, sw, bucket), _remote(b, sw, bucket)
        ra.client.meta.events.register("before-send.s3", conflict)
        # a's and b's pushes run at the same time: both heads must end up in heads.json
        errors = []

        def go(mem, rem):
            try:
                sync_once(mem, rem, pull=False)
            except Exception as exc:  # pragma: no cover - shown on failure
                errors.append(exc)

        threads = [threading.Thread(target=go, args=args) for args in ((a, ra), (b, rb))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors and len(injected) == 3
        heads = _remote(a, sw, bucket).read_doc("heads.json")[0]["heads"]
        assert heads == {a.log.replica: 1, b.log.replica: 1}


# -- S3Remote on its own (no store): segments, heads, the 412 rule -----------------------------------------
def _ops(replica: str, first: int, last: int, tag: str = "") -> list[dict]:
    return [{"id": f"{replica}:{i}", "hlc": [1_700_000_000_000 + i, 0, replica], "kind": "memory.add",
             "payload": {"id": f"m_{replica}_{i}", "text": f"op {i} {tag}"}} for i in range(first, last + 1)]


def _bare(sw, bucket: str, tmp_path: Path, **kw):
    from brandmind.sync.config import make_s3
    from brandmind.crypto import Keyring
    from brandmind.sync.s3 import S3Remote

    return S3Remote(make_s3("origin", bucket=bucket, prefix="p", endpoint_url=sw.endpoint),
                    Keyring(tmp_path / "keys"), **kw)


def test_segments_heads_and_pulls(aws_env, tmp_path):
    sw = aws_env
    bucket = sw.new_bucket()
    rem = _bare(sw, bucket, tmp_path, segment_ops=40, segment_bytes=3000)
    assert rem.heads() == {}
    assert rem.push("r_a", _ops("r_a", 1, 100)) == 100
    assert rem.push("r_b", _ops("r_b", 1, 7)) == 7
    segs = sorted(k for k in sw.objects(bucket) if "/ops/r_a/" in k)
    assert segs[0] == "p/ops/r_a/000000000001-" + segs[0][-16:] and len(segs) >= 3  # split by count/bytes
    fresh = _bare(sw, bucket, tmp_path)
    assert fresh.heads() == {"r_a": 100, "r_b": 7}
    assert fresh.pull("r_a", 0) == _ops("r_a", 1, 100)
    assert fresh.pull("r_a", 57, 5) == _ops("r_a", 58, 62)
    assert fresh.pull("r_a", 100) == [] and fresh.pull("r_c", 0) == []
    # overlapping push: only the new part is written; a gap is refused
    assert rem.push("r_a", _ops("r_a", 90, 120)) == 120
    from brandmind.errors import BMError, SyncConflict

    with pytest.raises(BMError, match="holds only up to 120"):
        rem.push("r_a", _ops("r_a", 130, 131))
    # a segment uploaded without its heads.json update (a crash) still counts
    other = _bare(sw, bucket, tmp_path)
    other.heads()
    from brandmind.sync import s3

    orig = s3.S3Remote.cas
    s3.S3Remote.cas = lambda self, *a, **k: None
    try:
        other.push("r_a", _ops("r_a", 121, 125))
    finally:
        s3.S3Remote.cas = orig
    assert _bare(sw, bucket, tmp_path).read_doc("heads.json")[0]["heads"]["r_a"] == 120
    assert _bare(sw, bucket, tmp_path).heads()["r_a"] == 125
    # the same ops again under the same name: already pushed; different ones: a clash
    again = _bare(sw, bucket, tmp_path)
    again._heads = {}
    assert again.push("r_b", _ops("r_b", 1, 7)) == 7 and again.stats["already_pushed"] == 1
    clash = _bare(sw, bucket, tmp_path)
    clash._heads = {}
    with pytest.raises(SyncConflict, match="two devices share replica id r_b"):
        clash.push("r_b", _ops("r_b", 1, 7, tag="other device"))
    # the same seqs under other boundaries (two devices pushing at once): also a clash
    racer = _bare(sw, bucket, tmp_path)
    racer._heads = {}
    with pytest.raises(SyncConflict):
        racer.push("r_b", _ops("r_b", 1, 3, tag="other device"))
    with pytest.raises(SyncConflict, match="two different ops r_b:1"):  # readers do not pick one
        _bare(sw, bucket, tmp_path).pull("r_b", 0)
    assert fresh.pull("r_a", 0) == _ops("r_a", 1, 125)  # other streams are fine


def test_a_remote_of_another_store_is_refused_before_anything_is_written(aws_env, tmp_path):
    sw = aws_env
    bucket = sw.new_bucket()
    _bare(sw, bucket, tmp_path / "one").push("r_a", _ops("r_a", 1, 3))
    from brandmind.crypto import SyncKeyError

    stranger = _bare(sw, bucket, tmp_path / "two")
    with pytest.raises(SyncKeyError, match="cannot decrypt"):
        stranger.push("r_z", _ops("r_z", 1, 2))
    assert not [k for k in sw.objects(bucket) if "r_z" in k]


# -- snapshots -------------------------------------------------------------------------------------------
def test_a_new_device_starts_from_a_snapshot(aws_env, tmp_path):
    from brandmind.errors import UsageError
    from brandmind.sync import snapshot
    from brandmind.crypto import Keyring
    from brandmind.sync.engine import sync_once

    sw = aws_env
    bucket = sw.new_bucket()
    with _mem(tmp_path / "a") as a:
        for i in range(40):
            a.remember(f"snapshot note {i} zqsnap")
        gone = a.remember("the forgotten zqgone secret")["id"]
        a.forget(gone)
        a.blocks.append("human", "likes quince zqblock")
        a.config.blob_threshold, old = 100, a.config.blob_threshold
        a.add_bead("zqbigbead " * 50)
        a.config.blob_threshold = old
        assert not sync_once(a, _remote(a, sw, bucket))["errors"]
        made = [snapshot.create(a, _remote(a, sw, bucket)) for _ in range(2)]
        a.remember("written after the snapshot")
        made.append(snapshot.create(a, _remote(a, sw, bucket)))  # 3 made, the 2 newest kept
        assert not sync_once(a, _remote(a, sw, bucket))["errors"]
        want = _export(a)
        replica_a = a.log.replica
        ring = Keyring(a.paths.data_dir)
    objects = sw.objects(bucket)
    snaps = sorted(k for k in objects if "/snapshots/" in k and not k.endswith("index.json"))
    assert len([k for k in snaps if k.endswith(".snap")]) == 2 and made[0]["name"] == made[1]["name"]
    for key, body in objects.items():  # encrypted like everything else
        assert b"zqsnap" not in body and b"quince" not in body, key
    # the decrypted snapshot does not hold what was forgotten
    plain = b"".join(ring.open(k[2:], objects[k]) for k in snaps if not k.endswith(".snap"))
    assert b"zqsnap" in plain and b"zqgone" not in plain

    with _mem(tmp_path / "c") as c:
        _share_key_from(ring, c)
        rem = _remote(c, sw, bucket)
        own = c.log.replica
        got = snapshot.bootstrap(c, rem, forced=True)
        assert got["ops"] == made[-1]["ops"] and got["reembedded"] == 0
        assert c.log.replica == own != replica_a  # the device keeps its identity
        report = sync_once(c, rem)
        assert not report["errors"] and sum(report["pulled"].values()) == 0  # the last snapshot has it all
        assert _export(c) == want
        c.remember("written on the new device")
        assert sync_once(c, rem)["pushed"] == {own: 1}
        with pytest.raises(UsageError, match="empty"):
            snapshot.bootstrap(c, rem, forced=True)
        assert snapshot.bootstrap(c, rem) is None  # not empty: the normal sync


def test_the_remote_contract_holds_for_s3(aws_env, tmp_path):
    """tests/remote_contract.py, as for MemoryRemote, Zep and Graphiti."""
    from remote_contract import run_contract

    from brandmind.config import Config
    from brandmind.memory import Memory
    from brandmind.sync.config import make_s3
    from brandmind.sync.s3 import open_remote

    with Memory(create=True, config=Config.load(tmp_path / "contract")) as mem:
        for i in range(5):
            mem.remember(f"note {i} about the contract", user="ann")
        cfg = make_s3("contract", bucket=aws_env.new_bucket("contract"), endpoint_url=aws_env.endpoint)
        run_contract(open_remote(mem, cfg), mem, keeps_streams=True)
