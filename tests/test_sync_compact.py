"""What an S3 remote keeps (sync/compact.py, sync/rotate.py), on a real S3 server (SeaweedFS
`weed mini`, one per module, a bucket per test), stores in this process (hash embedder):

* compaction folds the segments into a snapshot and deletes them, the old snapshots and the
  unreferenced blobs: after a forget and the next compaction no object in the bucket decrypts
  to the forgotten text (every object decrypted with every key, the log's deflated values
  inflated); a device pushing while another compacts loses nothing; a stale compactor stops;
* key rotation re-seals every object under a new key (the server sees only sealed bytes),
  devices that import it keep syncing, a device with only the old key gets one `Error:` line;
* a device offline for 90 days (clock shifted: brandmind.clock), older than two compactions,
  converges and brings nothing forgotten back;
* a remote that loses or rewrites its log (emptied, restored from an old copy, a segment
  replaced) never costs local ops: they are pushed again (or the round stops with a conflict).
"""
from __future__ import annotations

import os
import sys
import zlib
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import assert_error, inflated_after  # noqa: E402
from seaweed import SKIP_REASON, start_seaweed, weed_path  # noqa: E402

from brandmind.logvalues import DICTIONARY_V1  # noqa: E402

pytestmark = pytest.mark.skipif(weed_path() is None, reason=SKIP_REASON)
DAY_MS = 86_400_000


@pytest.fixture(scope="module")
def sw(tmp_path_factory):
    server = start_seaweed(tmp_path_factory.mktemp("seaweed"))
    yield server
    server.stop()


@pytest.fixture
def aws(sw, monkeypatch):
    for k in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(k)
    for k, v in sw.env().items():
        monkeypatch.setenv(k, v)
    return sw


# -- helpers ---------------------------------------------------------------------------------------
def _mem(home: Path, **config):
    from brandmind.config import Config
    from brandmind.memory import Memory

    return Memory(create=True, config=Config.load(home, **config))


def _cfg(sw, bucket: str):
    from brandmind.sync.config import make_s3

    return make_s3("origin", bucket=bucket, prefix="p", endpoint_url=sw.endpoint)


def _remote(mem, sw, bucket: str):
    from brandmind.sync.s3 import open_remote

    return open_remote(mem.store, _cfg(sw, bucket))


def _join(mem, sw, bucket: str, key_from=None) -> None:
    """Configure the remote (for `bm` runs) and take the key of ``key_from``."""
    from brandmind.crypto import Keyring
    from brandmind.sync.config import add_remote

    add_remote(mem.paths.data_dir, _cfg(sw, bucket), replace=True)
    if key_from is not None:
        Keyring(mem.paths.data_dir).import_key(Keyring(key_from.paths.data_dir).active().export_text())


def sync(mem, sw, bucket: str) -> dict:
    from brandmind.sync.engine import sync_once

    rem = _remote(mem, sw, bucket)
    try:
        report = sync_once(mem.store, rem)
    finally:
        rem.close()
    assert not report["errors"], report
    return report


def compact(mem, sw, bucket: str, **kw) -> dict:
    from brandmind.sync.compact import compact as run

    rem = _remote(mem, sw, bucket)
    try:
        return run(mem.store, rem, **kw)
    finally:
        rem.close()


def export(mem) -> list[str]:
    from brandmind.exchange import export_lines

    return sorted(line for line in export_lines(mem) if '"kind":"header"' not in line)


def inflated(data: bytes) -> bytes:
    """Every deflated value found anywhere in ``data``, inflated: the log's packed ops and
    beads (0x01 + raw deflate with brandmind/logvalues.py's dictionary) and zlib streams."""
    out = []
    for marker, make in ((b"\x01", lambda: zlib.decompressobj(-15, DICTIONARY_V1)),
                         (b"\x78\x9c", zlib.decompressobj), (b"\x78\x01", zlib.decompressobj),
                         (b"\x78\xda", zlib.decompressobj)):
        skip = 1 if marker == b"\x01" else 0
        at = data.find(marker)
        while at >= 0:
            try:
                text = make().decompress(data[at + skip:at + skip + 65536], 1 << 20)
            except zlib.error:
                text = b""
            if len(text) >= 8:
                out.append(text)
            at = data.find(marker, at + 1)
    return b"\n".join(out + inflated_after(data, [t for t in out if t[:1] == b"{"]))


def plaintexts(sw, bucket: str, *mems) -> dict[str, bytes]:
    """Every object of the bucket decrypted with every key the stores hold (a snapshot's
    parts joined), with what is deflated inside inflated."""
    from brandmind.crypto import Keyring, header_key_id, open_sealed

    keys = {}
    for mem in mems:
        ring = Keyring(mem.paths.data_dir)
        keys.update({k["key_id"]: ring.get(k["key_id"]) for k in ring.describe()["keys"]})
    out = {}
    for full, body in sw.objects(bucket).items():
        rel = full.split("/", 1)[1]
        assert body[:4] == b"bmS3", full
        plain = open_sealed(keys[header_key_id(body, full)], rel, body, full)
        out[rel] = plain + b"\n" + inflated(plain)
    return out


def holding(texts: dict[str, bytes], *needles: str) -> list[str]:
    return sorted({f"{rel}: {n}" for rel, body in texts.items() for n in needles
                   if n.encode() in body or n.lower().encode() in body})


# -- 1. compaction ------------------------------------------------------------------------------------
def test_compaction_leaves_nothing_forgotten_on_the_remote(aws, tmp_path):
    from brandmind.sync import snapshot

    from brandmind.sync import compact as comp
    from brandmind.sync.daemon import Daemon

    sw = aws
    bucket = sw.new_bucket()
    now = [1000.0]  # the daemons' clock
    with _mem(tmp_path / "a", sync_compact_interval=3600) as a, _mem(tmp_path / "b", sync_compact_interval=0) as b:
        _join(a, sw, bucket)
        _join(b, sw, bucket, key_from=a)
        daemons = {}
        for mem in (a, b):
            rem = _remote(mem, sw, bucket)
            daemons[mem] = Daemon(mem, remotes=[rem], clock=lambda: now[0], state_file=tmp_path / f"{id(mem)}.json")
            daemons[mem]._sched(rem.name, now[0])

        def step(mem) -> bool:
            dm = daemons[mem]
            return dm.step(dm.remotes[0], True, True, 0)

        gone = a.remember("Ann's locker code is zqlocker-4471", user="ann")["id"]
        a.remember("zqgoneuser keeps a diary about the lighthouse", user="zq-gone")
        a.config.blob_threshold, old = 100, a.config.blob_threshold
        a.add_bead("zqbigbead " + "the minutes of the zqgoneuser meeting " * 10, user="zq-gone")
        a.config.blob_threshold = old
        for i in range(12):
            a.remember(f"note {i} from a about tea", user="ann")
            b.remember(f"note {i} from b about coffee", user="bob")
        assert step(b) and step(a) and step(b)  # the daemons: b never compacts (interval 0), a does
        first = comp.record(daemons[a].remotes[0])
        assert first["by"] == a.log.replica and first["generation"] == 1 and daemons[a].next_compact
        assert any("/blobs/" in k for k in sw.objects(bucket))  # a fresh blob: kept through the grace
        rem = _remote(a, sw, bucket)
        snapshot.create(a.store, rem)  # an ordinary snapshot, made before the forget
        rem.close()
        b.forget(gone)  # forgotten on b
        b.forget_user("zq-gone")
        sync(b, sw, bucket), sync(a, sw, bucket)
        needles = ("zqlocker", "zqgoneuser", "zqbigbead")
        before = holding(plaintexts(sw, bucket, a), *needles)
        assert {n.split(": ")[1] for n in before} == set(needles)  # the scan sees them while they are there
        assert any(k.startswith("blobs/") for k in (n.split(": ")[0] for n in before))
        now[0] += 600
        assert step(a) and comp.record(daemons[a].remotes[0])["generation"] == 1  # not due for an hour
        assert 2990 <= daemons[a].next_compact["origin"] - now[0] <= 3600
        done = compact(a, sw, bucket, blob_grace_s=0)
        assert done["compacted"] and done["segments_deleted"] == 1, done
        assert done["snapshots_deleted"] >= 1 and done["blobs_deleted"] == 1, done
        texts = plaintexts(sw, bucket, a)
        assert holding(texts, *needles) == []
        assert holding(texts, "note 11 from b") != []  # what is not forgotten is still there
        assert not [k for k in texts if k.startswith("ops/")]  # every segment was folded
        assert compact(a, sw, bucket)["compacted"] is False  # nothing new to fold
        # both devices go on (a new device starting from the base: the rotation test)
        b.remember("after the compaction from b", user="bob")
        sync(b, sw, bucket), sync(a, sw, bucket)
        assert export(a) == export(b) and "zqlocker" not in "\n".join(export(b))
        for dm in daemons.values():
            dm.remotes[0].close()


def test_a_push_during_compaction_survives_and_a_stale_compactor_stops(aws, tmp_path, monkeypatch):
    from brandmind.sync import compact as comp
    from brandmind.sync import snapshot

    sw = aws
    bucket = sw.new_bucket()
    with _mem(tmp_path / "a") as a, _mem(tmp_path / "b") as b:
        _join(a, sw, bucket)
        _join(b, sw, bucket, key_from=a)
        for i in range(5):
            a.remember(f"a note {i}")
            b.remember(f"b note {i}")
        sync(a, sw, bucket), sync(b, sw, bucket), sync(a, sw, bucket)
        # b pushes between a's commit of compact.json and a's deletion of segments
        real = snapshot.register

        def racing(remote, entry, keep=snapshot.KEEP):
            b.remember("pushed while a compacts")
            sync(b, sw, bucket)
            return real(remote, entry, keep)

        a.config.blob_threshold, keep = 100, a.config.blob_threshold
        a.add_bead("zqunpushed " + "a long bead a folds before pushing it " * 8)  # its blob too
        a.config.blob_threshold = keep
        monkeypatch.setattr(comp.snapshot, "register", racing)
        done = compact(a, sw, bucket, blob_grace_s=0)
        monkeypatch.setattr(comp.snapshot, "register", real)
        assert done["compacted"] and done["segments_deleted"] == 2
        left = [k for k in sw.objects(bucket) if "/ops/" in k]
        assert len(left) == 1  # b's new segment, past the snapshot: kept
        # a stale device (c holds only part of it) cannot compact over a's base
        with _mem(tmp_path / "c") as c:
            _join(c, sw, bucket, key_from=a)
            c.remember("c note")
            with pytest.raises(comp.CompactError, match="only up to 0") as err:
                compact(c, sw, bucket)
            assert "bm sync now" in err.value.hint
            # ... also when it read compact.json before a's commit: the swap refuses, its snapshot goes
            with monkeypatch.context() as m, pytest.raises(comp.CompactError, match="meanwhile"):
                m.setattr(comp, "record", lambda remote: {})
                compact(c, sw, bucket)
            assert not [k for k in sw.objects(bucket) if c.log.replica in k]
            sync(c, sw, bucket)  # reads what a folded from the base, then b's segments
            sync(a, sw, bucket)
            assert export(a) == export(c)
            assert "pushed while a compacts" in "\n".join(export(c)) and "zqunpushed" in "\n".join(export(c))


def test_a_device_offline_for_90_days_converges_and_resurrects_nothing(aws, tmp_path, monkeypatch):
    from brandmind import clock

    sw = aws
    bucket = sw.new_bucket()
    window = {"sync_max_skew_ms": 200 * DAY_MS}  # the whole test runs 90 days ahead of the S3 server
    with _mem(tmp_path / "a", **window) as a, _mem(tmp_path / "d", **window) as d:
        _join(a, sw, bucket)
        _join(d, sw, bucket, key_from=a)
        kept = a.remember("Ann likes green tea", user="ann")["id"]
        gone = a.remember("Ann's old address is zqaddress 12 Elm", user="ann")["id"]
        d.remember("d before leaving", user="ann")
        sync(a, sw, bucket), sync(d, sw, bucket), sync(a, sw, bucket)
        # d goes offline and writes there; 90 days pass for a
        d.remember("d wrote this offline", user="ann")
        monkeypatch.setattr(clock, "_TEST_SHIFT_MS", 90 * DAY_MS)
        a.forget(gone)
        for i in range(2):  # the second compaction also drops the first base
            a.remember(f"a note {i} while d is away", user="ann")
            sync(a, sw, bucket)
            compact(a, sw, bucket)  # each time: d's last-seen segments and the older base go
        assert not [k for k in sw.objects(bucket) if "/ops/" in k]
        # d comes back
        report = sync(d, sw, bucket)
        assert sum(report["pulled"].values()) == 3 and report["pushed"] == {d.log.replica: 1}
        sync(a, sw, bucket)
        assert export(a) == export(d)
        text = "\n".join(export(d))
        assert "zqaddress" not in text and "d wrote this offline" in text and kept in text
        compact(a, sw, bucket, blob_grace_s=0)
        assert holding(plaintexts(sw, bucket, a), "zqaddress") == []


def test_a_remote_that_loses_or_rewrites_its_log_costs_no_local_op(aws, tmp_path):
    sw = aws
    bucket = sw.new_bucket()
    client = sw.client()

    def restore(objects: dict[str, bytes]) -> None:
        for key in list(sw.objects(bucket)):
            client.delete_object(Bucket=bucket, Key=key)
        for key, body in objects.items():
            client.put_object(Bucket=bucket, Key=key, Body=body)

    with _mem(tmp_path / "a") as a, _mem(tmp_path / "b") as b:
        _join(a, sw, bucket)
        _join(b, sw, bucket, key_from=a)
        a.remember("a first"), b.remember("b first")
        sync(a, sw, bucket), sync(b, sw, bucket)
        old = sw.objects(bucket)
        a.remember("a second, pushed then lost")
        sync(a, sw, bucket)
        compact(a, sw, bucket)
        a.remember("a third, never pushed")
        want = export(a)
        restore(old)  # the bucket goes back to an old copy: a's later ops and the compaction are gone
        report = sync(a, sw, bucket)
        assert report["pushed"] == {a.log.replica: 2} and export(a) == want
        restore({})  # emptied
        report = sync(a, sw, bucket)
        assert report["pushed"] == {a.log.replica: 3} and export(a) == want
        sync(b, sw, bucket)
        # a's newest segment lost while heads.json still counts it (a lifecycle rule, a bad restore)
        a.remember("a fourth, pushed then its segment lost")
        sync(a, sw, bucket)
        newest = max(k for k in sw.objects(bucket) if f"/ops/{a.log.replica}/" in k)
        client.delete_object(Bucket=bucket, Key=newest)
        assert sync(a, sw, bucket)["pushed"] == {a.log.replica: 1}
        sync(b, sw, bucket)
        assert export(b) == export(a)
        # a segment of a's replaced by other ops (a device with the key writing under a's id)
        from brandmind.oplog import dumps

        rem = _remote(a, sw, bucket)
        seg = rem.segments(a.log.replica)[-1]  # the newest: the one each round checks
        ops = rem.read_segment(seg, a.log.replica)
        forged = [{**op, "hlc": [op["hlc"][0] + 1, 0, op["hlc"][2]]} for op in ops]
        body = rem.keyring.seal(seg.key, dumps({"format": 1, "replica": a.log.replica, "ops": forged}))
        rem.put(seg.key, body)
        rem.close()
        a.remember("a fifth, never pushed")
        want = export(a)
        from brandmind.sync.engine import sync_once

        rem = _remote(a, sw, bucket)
        report = sync_once(a.store, rem)
        rem.close()
        assert report["errors"] and "share replica id" in report["errors"][0]["message"]
        assert export(a) == want  # nothing local went
        assert export(b) != want and "a fifth" not in "\n".join(export(b))


# -- 2. key rotation ----------------------------------------------------------------------------------
def test_key_rotation_reseals_everything_and_the_old_key_gets_one_error_line(aws, tmp_path, bm, monkeypatch):
    from brandmind.crypto import Keyring, header_key_id
    from brandmind.sync import s3client

    sw = aws
    bucket = sw.new_bucket()
    with _mem(tmp_path / "a") as a, _mem(tmp_path / "b") as b, _mem(tmp_path / "d") as d:
        for mem in (a, b, d):
            _join(mem, sw, bucket, key_from=a if mem is not a else None)
        old = Keyring(a.paths.data_dir).active().key_id
        a.remember("zqrotate Ann keeps bees", user="ann")
        a.config.blob_threshold, keep = 100, a.config.blob_threshold
        a.add_bead("zqrotatebead " + "the hive inspection notes " * 10, user="ann")
        a.config.blob_threshold = keep
        sync(a, sw, bucket), sync(b, sw, bucket)
        compact(a, sw, bucket)  # a base snapshot and compact.json
        b.remember("zqrotate after the compaction", user="bob")
        sync(b, sw, bucket), sync(a, sw, bucket)  # and a segment past it
        before = sorted(sw.objects(bucket))
        assert any("/blobs/" in k for k in before) and any("/ops/" in k for k in before)
    # `bm sync key rotate` on a, every body the server receives watched
    puts: list[tuple[str, bytes]] = []
    real_put = s3client.S3Objects.put
    monkeypatch.setattr(s3client.S3Objects, "put",
                        lambda self, rel, body, **c: puts.append((rel, body)) or real_put(self, rel, body, **c))
    monkeypatch.setenv("BM_HOME", str(tmp_path / "a"))
    res = bm("sync", "key", "rotate", "--json")
    assert res.code == 0, res
    out = res.json()[0]
    new = out["key_id"]
    assert new != old and out["replaces"] == old and out["renamed_blobs"] == 1 and out["resealed"] >= 5
    assert puts and all(body[:4] == b"bmS3" and header_key_id(body, rel) == new for rel, body in puts)
    assert not [rel for rel, body in puts if b"zqrotate" in body or b"hive" in body]
    objects = sw.objects(bucket)
    assert all(header_key_id(body, key) == new for key, body in objects.items())
    assert len(objects) == len(before)  # the same objects (a blob under its new name)
    monkeypatch.setattr(s3client.S3Objects, "put", real_put)
    # d kept only the old key: one error line naming the fix, nothing local lost
    monkeypatch.setenv("BM_HOME", str(tmp_path / "d"))
    assert_error(bm("sync", "now"), 1, "cannot decrypt", new, "bm sync key import")
    # b imports the new key and keeps syncing; a new device with only the new key starts from the base
    monkeypatch.setenv("BM_HOME", str(tmp_path / "a"))
    res = bm("sync", "compact", "--json")  # under the new key; b's segment is folded too
    assert res.code == 0 and res.json()[0]["compacted"] and res.json()[0]["segments_deleted"] == 1, res
    key = tmp_path / "new.key"
    key.write_text(Keyring(tmp_path / "a" / "data").active().export_text())
    with _mem(tmp_path / "b") as b, _mem(tmp_path / "a") as a, _mem(tmp_path / "c") as c:
        Keyring(b.paths.data_dir).import_key(key.read_text())
        _join(c, sw, bucket)
        Keyring(c.paths.data_dir).import_key(key.read_text())
        assert len(Keyring(c.paths.data_dir).describe()["keys"]) == 1
        b.remember("b after the rotation", user="bob")
        sync(b, sw, bucket), sync(a, sw, bucket), sync(c, sw, bucket)
        assert export(a) == export(b) == export(c)
        assert "zqrotatebead" in "\n".join(export(c))  # its blob, under the new name

