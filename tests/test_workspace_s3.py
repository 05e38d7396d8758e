"""The workspace on S3 (brandmind/workspace_s3.py) against a real S3 server (SeaweedFS `weed
mini`, one per module, a bucket per test).

* the Backend contract, run over LocalBackend and S3Backend alike, and the path rules through
  the Workspace over each;
* no object in the bucket holds a file's content or path (names and bodies), every body is a
  sealed object of the store's key;
* a write cut off before or after its manifest swap leaves the old file or the new one, and
  concurrent appends from two devices all land;
* `bm fs` and `bm recall` with `workspace = "s3://..."`: one `Error:` line for a bad path or an
  unreachable server, recall working offline, forget and export.
"""
from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import assert_error, open_memory, use_home  # noqa: E402
from seaweed import SKIP_REASON, free_ports, start_seaweed, weed_path  # noqa: E402

from brandmind.crypto import Keyring, SyncKeyError, header_key_id  # noqa: E402
from brandmind.errors import InvalidInput, NotFound  # noqa: E402
from brandmind.workspace_files import LocalBackend  # noqa: E402
from brandmind.workspace_bucket import Bucket, Location, WorkspaceUnavailable, make_client  # noqa: E402
from brandmind.workspace_s3 import S3Backend  # noqa: E402

pytestmark = pytest.mark.skipif(weed_path() is None, reason=SKIP_REASON)

NOTE = "# Trip\n\nAnn plans a trip to Kyoto in April.\n\n## Budget\n\nThe zebra budget is 3000 euros.\n"


class Server:
    """The module's SeaweedFS with one raw client for the tests' own requests (a boto3 client
    costs 0.1-0.5 s to make: make it once)."""

    def __init__(self, server) -> None:
        self.server = server
        self.endpoint = server.endpoint
        self.raw = server.client()
        self.n = 0

    def env(self) -> dict[str, str]:
        return self.server.env()

    def new_bucket(self) -> str:
        self.n += 1
        name = f"ws-{self.n}-{os.urandom(3).hex()}"
        self.raw.create_bucket(Bucket=name)
        return name

    def objects(self, bucket: str) -> dict[str, bytes]:
        pages = self.raw.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        return {o["Key"]: self.raw.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
                for page in pages for o in page.get("Contents", [])}


@pytest.fixture(scope="module")
def sw(tmp_path_factory):
    server = start_seaweed(tmp_path_factory.mktemp("seaweed"))
    yield Server(server)
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
    """botocore's retries without their sleeps (the faults here are injected)."""
    import botocore.retries.standard

    monkeypatch.setattr(botocore.retries.standard.ExponentialBackoff, "delay_amount", lambda self, ctx: 0.001)


def s3_backend(sw, tmp_path: Path, *, tenant: str = "ann", bucket: str | None = None, client=None,
               keys: Path | None = None) -> S3Backend:
    loc = Location(bucket or sw.new_bucket(), "team/ws", sw.endpoint)
    return S3Backend(loc, tenant, Keyring(keys or tmp_path / "keys"), bucket=Bucket(loc, client))


@pytest.fixture(params=["local", "s3"])
def backend(request, tmp_path):
    if request.param == "local":
        return LocalBackend(tmp_path / "ws")
    return s3_backend(request.getfixturevalue("aws_env"), tmp_path)


def tree(b) -> list[tuple[str, str, int]]:
    return [(e.path, e.kind, e.size) for e in b.list("/", recursive=True)]


# -- the Backend contract, over both -----------------------------------------------------------------
def test_contract_write_read_append_stat(backend):
    import hashlib

    for area in ("/.profile", "/notes", "/drafts", "/system"):
        backend.mkdir(area)
    assert backend.stat("/notes/a.md") is None
    backend.write_bytes("/notes/a.md", b"one")
    backend.write_bytes("/notes/a.md", b"two, longer")  # replaced whole
    assert backend.read_bytes("/notes/a.md") == b"two, longer"
    st = backend.stat("/notes/a.md")
    assert (st.size, st.sha256, st.is_dir) == (11, hashlib.sha256(b"two, longer").hexdigest(), False)
    assert backend.stat("/notes/a.md", digest=False).sha256 is None and st.mtime_ns > 0
    backend.append("/drafts/log.txt", b"a\n")  # created by append
    backend.append("/drafts/log.txt", b"b\n")
    assert backend.read_bytes("/drafts/log.txt") == b"a\nb\n"
    backend.write_bytes("/system/bin", bytes(range(256)))  # any bytes
    assert backend.read_bytes("/system/bin") == bytes(range(256))
    assert backend.stat("/notes").is_dir and backend.stat("/").is_dir
    with pytest.raises(NotFound):
        backend.read_bytes("/notes/missing.md")
    with pytest.raises(InvalidInput, match="is a folder"):
        backend.read_bytes("/notes")


def test_contract_folders_list_move_delete(backend):
    for area in ("/.profile", "/notes", "/drafts", "/system"):
        backend.mkdir(area)
    backend.mkdir("/drafts/x/y")
    backend.write_bytes("/drafts/x/y/z.md", b"zz")
    backend.write_bytes("/drafts/x/a.md", b"a")
    backend.write_bytes("/notes/sub/deep/n.md", b"nnn")  # parents made on the way
    assert tree(backend) == [
        ("/.profile", "dir", 0), ("/drafts", "dir", 0), ("/drafts/x", "dir", 0), ("/drafts/x/a.md", "file", 1),
        ("/drafts/x/y", "dir", 0), ("/drafts/x/y/z.md", "file", 2), ("/notes", "dir", 0),
        ("/notes/sub", "dir", 0), ("/notes/sub/deep", "dir", 0), ("/notes/sub/deep/n.md", "file", 3),
        ("/system", "dir", 0)]
    assert [e.path for e in backend.list("/drafts/x")] == ["/drafts/x/a.md", "/drafts/x/y"]
    assert [(e.path, e.kind) for e in backend.list("/drafts/x/a.md")] == [("/drafts/x/a.md", "file")]
    with pytest.raises(NotFound):
        backend.list("/drafts/nothing")
    for bad in (lambda: backend.write_bytes("/drafts/x", b"?"),          # a folder
                lambda: backend.write_bytes("/drafts/x/a.md/b", b"?"),   # under a file
                lambda: backend.mkdir("/drafts/x/a.md")):                # a file
        with pytest.raises(InvalidInput):
            bad()
    # move: a file onto another (replaced), a folder with everything in it
    backend.write_bytes("/notes/old.md", b"old")
    backend.move("/drafts/x/a.md", "/notes/old.md")
    assert backend.read_bytes("/notes/old.md") == b"a" and backend.stat("/drafts/x/a.md") is None
    backend.move("/drafts/x", "/notes/moved")
    assert backend.read_bytes("/notes/moved/y/z.md") == b"zz" and backend.stat("/drafts/x") is None
    assert backend.stat("/notes/moved/y").is_dir
    with pytest.raises(NotFound):
        backend.move("/drafts/gone.md", "/notes/g.md")
    # delete: a file; a folder only recursively
    backend.delete("/notes/old.md")
    assert backend.stat("/notes/old.md") is None
    with pytest.raises(InvalidInput, match="folder"):
        backend.delete("/notes/moved")
    backend.delete("/notes/moved", recursive=True)
    with pytest.raises(NotFound):
        backend.delete("/notes/moved")
    assert tree(backend) == [("/.profile", "dir", 0), ("/drafts", "dir", 0), ("/notes", "dir", 0),
                             ("/notes/sub", "dir", 0), ("/notes/sub/deep", "dir", 0),
                             ("/notes/sub/deep/n.md", "file", 3), ("/system", "dir", 0)]


BAD_PATHS = [("../escape.md", "escapes the workspace"), ("/notes/../../x.md", "escapes the workspace"),
             ("/etc/passwd", "outside the workspace"), ("secrets.md", "outside the workspace"),
             ("/notes/a\x00b.md", "NUL"), ("/notes/" + "x" * 300, "longer than 255"), ("/notes", "folder")]


def test_path_rules_are_the_same_over_both(backend, store):
    from brandmind.workspace import Workspace

    with open_memory() as mem:
        ws = Workspace(mem.store, "ann", backend=backend)
        ws.ensure_layout()
        for bad, words in BAD_PATHS:
            for call in (lambda: ws.write(bad, "x"), lambda: ws.append(bad, "x"), lambda: ws.cat(bad)):
                with pytest.raises(InvalidInput, match=words):
                    call()
        assert [p for p, kind, _ in tree(backend) if kind == "file"] == []
    if isinstance(backend, S3Backend):  # the backend itself takes only normalised paths
        with pytest.raises(InvalidInput, match="not normalised"):
            backend.write_bytes("/notes/./a.md", b"x")


# -- what the bucket holds ----------------------------------------------------------------------------
def test_the_bucket_holds_no_plaintext(aws_env, tmp_path):
    sw = aws_env
    b = s3_backend(sw, tmp_path, tenant="ann")
    secret_paths = ["/notes/quartz-harbour-plans.md", "/drafts/zq-folder/lighthouse-memo.txt"]
    secret_texts = ["Ann keeps her spare key under the blue flowerpot", "vault code 8841-quartz"]
    b.write_bytes(secret_paths[0], (secret_texts[0] + "\n").encode())
    b.append(secret_paths[0], secret_texts[1].encode())
    b.write_bytes(secret_paths[1], ("memo: " + secret_texts[1]).encode() * 50)
    b.move(secret_paths[1], "/system/zq-moved-name.txt")
    objects = sw.objects(b.loc.bucket)
    assert sorted(k.rsplit("/", 1)[0] for k in objects) == ["team/ws/ann", "team/ws/ann/o", "team/ws/ann/o"]
    ring, stranger = Keyring(tmp_path / "keys"), Keyring.throwaway(tmp_path / "other")
    seen = b""
    for key, body in objects.items():
        rel = key.removeprefix("team/ws/")
        assert body[:4] == b"bmS3", key
        seen += ring.open(rel, body)  # sealed under the store's key, bound to its name ...
        with pytest.raises(SyncKeyError):
            stranger.open(rel, body)  # ... and no other key opens it
        for needle in [*secret_texts, "quartz", "lighthouse", "zq-folder", "zq-moved", "notes", "drafts", ".md"]:
            for form in {needle.encode(), needle.encode("utf-16-le"), json.dumps(needle).encode()}:
                assert form not in body, (needle, key)
            assert needle not in key, (needle, key)
    # the scan looked at the right bytes: decrypted, they hold every text and path
    for needle in [*secret_texts, "/notes/quartz-harbour-plans.md", "/system/zq-moved-name.txt"]:
        assert needle.encode() in seen


def test_objects_are_bound_to_their_tenant_and_key(aws_env, tmp_path):
    sw = aws_env
    ann = s3_backend(sw, tmp_path, tenant="ann")
    ann.write_bytes("/notes/a.md", b"Ann's note")
    bucket = ann.loc.bucket
    bob = s3_backend(sw, tmp_path, tenant="bob", bucket=bucket)
    bob.write_bytes("/notes/b.md", b"Bob's note")
    c = sw.raw
    body = c.get_object(Bucket=bucket, Key="team/ws/ann/manifest")["Body"].read()
    c.put_object(Bucket=bucket, Key="team/ws/bob/manifest", Body=body)  # the server swaps manifests
    with pytest.raises(SyncKeyError, match="moved from another name"):
        s3_backend(sw, tmp_path, tenant="bob", bucket=bucket).list("/")
    other = s3_backend(sw, tmp_path, tenant="ann", bucket=bucket, keys=tmp_path / "other-keys")
    with pytest.raises(SyncKeyError, match="cannot decrypt") as info:  # a device without the store's key
        other.read_bytes("/notes/a.md")
    assert "bm sync key import" in info.value.hint


def test_after_a_key_rotation_reseal_lets_a_device_with_only_the_new_key_read(aws_env, tmp_path):
    sw = aws_env
    b = s3_backend(sw, tmp_path)
    b.write_bytes("/notes/a.md", b"sealed under the first key")
    b.write_bytes("/drafts/b.md", b"this one too")
    ring = Keyring(tmp_path / "keys")
    old = ring.active().key_id
    new = ring.rotate().key_id
    newcomer = Keyring(tmp_path / "newcomer")
    newcomer.import_key(ring.active().export_text())  # it never had the old key
    late = S3Backend(b.loc, "ann", newcomer)
    with pytest.raises(SyncKeyError, match=old):
        late.read_bytes("/notes/a.md")
    assert b.reseal() == 2 and b.reseal() == 0
    assert [header_key_id(body, k) for k, body in sw.objects(b.loc.bucket).items()] == [new] * 3
    late = S3Backend(b.loc, "ann", newcomer)
    assert late.read_bytes("/notes/a.md") == b"sealed under the first key"
    assert late.read_bytes("/drafts/b.md") == b"this one too"


# -- atomic writes, lost answers, concurrent writers --------------------------------------------------
def test_a_write_cut_off_leaves_the_old_file_and_sweep_clears_what_it_left(aws_env, fast_retries, tmp_path):
    import botocore.exceptions

    sw = aws_env
    loc = Location(sw.new_bucket(), "team/ws", sw.endpoint)
    client = make_client(loc)
    b = s3_backend(sw, tmp_path, bucket=loc.bucket, client=client)
    b.write_bytes("/notes/a.md", b"old version")
    down = {"on": True}

    def manifest_down(request, **_):
        if down["on"] and request.method == "PUT" and request.url.split("?")[0].endswith("/manifest"):
            raise botocore.exceptions.EndpointConnectionError(endpoint_url=request.url)

    client.meta.events.register("before-send.s3", manifest_down)
    with pytest.raises(WorkspaceUnavailable, match="cannot reach"):
        b.write_bytes("/notes/a.md", b"new version, never swapped in")
    fresh = s3_backend(sw, tmp_path, bucket=loc.bucket)
    assert fresh.read_bytes("/notes/a.md") == b"old version"
    assert len(sw.objects(loc.bucket)) == 3  # the manifest, the old content, the upload left behind
    assert fresh.sweep() == 0  # an upload may be in flight: only old strays go
    assert fresh.sweep(grace_s=-60) == 1 and len(sw.objects(loc.bucket)) == 2
    down["on"] = False
    b.write_bytes("/notes/a.md", b"new version")
    assert fresh.read_bytes("/notes/a.md") == b"new version" and len(sw.objects(loc.bucket)) == 2


def test_a_swap_whose_answer_was_lost_counts_as_done(aws_env, fast_retries, tmp_path):
    import botocore.exceptions
    import urllib3

    sw = aws_env
    loc = Location(sw.new_bucket(), "team/ws", sw.endpoint)
    client = make_client(loc)
    b = s3_backend(sw, tmp_path, bucket=loc.bucket, client=client)
    b.write_bytes("/notes/a.md", b"first")
    b.write_bytes("/notes/b.md", b"to delete")
    http, armed, hits = urllib3.PoolManager(), [], []

    def commit_then_timeout(request, **_):
        """Deliver the manifest's PUT for real, then pretend the answer never came."""
        if request.method == "PUT" and request.url.split("?")[0].endswith("/manifest") and armed:
            armed.clear()
            body = request.body.read() if hasattr(request.body, "read") else request.body
            hits.append(http.request("PUT", request.url, body=body, headers=dict(request.headers)).status)
            raise botocore.exceptions.ReadTimeoutError(endpoint_url=request.url)

    client.meta.events.register("before-send.s3", commit_then_timeout)
    armed.append(1)
    b.write_bytes("/notes/a.md", b"second")  # botocore's retry gets 412: the manifest is ours
    armed.append(1)
    b.delete("/notes/b.md")  # (the retry finds no /notes/b.md: still no error, it was this delete)
    assert hits == [200, 200]
    fresh = s3_backend(sw, tmp_path, bucket=loc.bucket)
    assert fresh.read_bytes("/notes/a.md") == b"second" and fresh.stat("/notes/b.md") is None
    assert len(sw.objects(loc.bucket)) == 2  # the manifest and "second": the replaced objects were dropped


def test_appends_from_two_devices_at_once_all_land(aws_env, tmp_path):
    sw = aws_env
    bucket = sw.new_bucket()
    devices = [s3_backend(sw, tmp_path, bucket=bucket) for _ in range(2)]
    errors: list[BaseException] = []

    def run(i: int, dev: S3Backend) -> None:
        try:
            for n in range(8):
                dev.append("/notes/log.md", f"device {i} line {n}\n".encode())
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i, d)) for i, d in enumerate(devices)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    lines = devices[0].read_bytes("/notes/log.md").decode().splitlines()
    assert sorted(lines) == sorted(f"device {i} line {n}" for i in range(2) for n in range(8))
    for i in range(2):  # each device's lines in its own order
        assert [ln for ln in lines if ln.startswith(f"device {i}")] == [f"device {i} line {n}" for n in range(8)]
    assert len(sw.objects(bucket)) == 2  # the manifest and the one live version: nothing left behind


def test_requests_per_operation(aws_env, tmp_path):
    """What each call costs in requests (the README quotes these), from a fresh backend each."""
    sw = aws_env
    loc = Location(sw.new_bucket(), "team/ws", sw.endpoint)
    client = make_client(loc)
    sent: list[str] = []
    client.meta.events.register("before-send.s3", lambda request, **_: sent.append(request.method))
    s3_backend(sw, tmp_path, bucket=loc.bucket, client=client).write_bytes("/notes/a.md", b"a")
    counts = {}
    for label, call in [("new file", lambda b: b.write_bytes("/notes/b.md", b"b")),
                        ("rewrite", lambda b: b.write_bytes("/notes/b.md", b"bb")),
                        ("append", lambda b: b.append("/notes/b.md", b"+")),
                        ("read", lambda b: b.read_bytes("/notes/b.md")),
                        ("stat and list", lambda b: (b.stat("/notes/b.md"), b.list("/", recursive=True))),
                        ("mkdir of an area", lambda b: b.mkdir("/notes")),
                        ("move", lambda b: b.move("/notes/b.md", "/notes/c.md")),
                        ("delete", lambda b: b.delete("/notes/c.md"))]:
        sent.clear()
        call(s3_backend(sw, tmp_path, bucket=loc.bucket, client=client))
        counts[label] = len(sent)
    assert counts == {"new file": 4, "rewrite": 5, "append": 6, "read": 2, "stat and list": 1,
                      "mkdir of an area": 0, "move": 2, "delete": 3}


# -- the CLI with `workspace = "s3://..."` ------------------------------------------------------------
@pytest.fixture
def s3_store(aws_env, store, monkeypatch):
    """A store whose workspace is on the test server (config through BM_* like any setting)."""
    bucket = aws_env.new_bucket()
    monkeypatch.setenv("BM_WORKSPACE", f"s3://{bucket}/tenants")
    monkeypatch.setenv("BM_WORKSPACE_ENDPOINT_URL", aws_env.endpoint)
    return bucket


def test_bm_fs_and_recall_on_s3(bm, s3_store, aws_env, monkeypatch, tmp_path_factory):
    sw = aws_env
    assert bm("fs", "write", "/notes/kyoto.md", NOTE, "-u", "ann").json()["chunks"] >= 1
    assert bm("fs", "append", "/notes/kyoto.md", "Also visit Nara.\n", "-u", "ann").code == 0
    assert bm("fs", "cat", "/notes/kyoto.md", "-u", "ann").out == NOTE + "Also visit Nara.\n"
    bm("fs", "write", "/drafts/plan.md", "a plan about the zebra budget", "-u", "ann")
    assert [(e["path"], e["type"]) for e in bm("fs", "ls", "/notes", "-u", "ann").json()] == [
        ("/notes/kyoto.md", "file")]
    assert [h["line"] for h in bm("fs", "find", "--grep", "zebra", "--in", "/notes", "-u", "ann").json()] == [7]
    top = bm("recall", "what is the budget of the Kyoto trip?", "-u", "ann", "-k", "3").json()[0]
    assert "3000 euros" in top["text"] and top["provenance"][0]["path"] == "/notes/kyoto.md"
    res = bm("fs", "mv", "/drafts/plan.md", "/notes/", "-u", "ann")  # into an indexed area: indexed
    assert res.code == 0 and res.json()["to"] == "/notes/plan.md"
    assert any(m["meta"].get("path") == "/notes/plan.md"
               for m in bm("recall", "the zebra plan", "-u", "ann", "-k", "5").json())
    assert not (Path(os.environ["BM_HOME"]) / "data" / "workspace" / "ann").exists()
    keys = sorted(sw.objects(s3_store))
    assert keys[0] == "tenants/ann/manifest" and all(k.startswith("tenants/ann/o/") for k in keys[1:])

    # another device writes behind this one's back: the next `bm recall` indexes it
    other = S3Backend(Location(s3_store, "tenants", sw.endpoint), "ann",
                      Keyring(Path(os.environ["BM_HOME"]) / "data"))
    other.write_bytes("/.profile/bio.md", b"Ann is a vegetarian architect living in Porto.")
    bio = bm("recall", "where does Ann live and what does she do?", "-u", "ann", "-k", "1").json()[0]
    assert bio["provenance"] == [{"chunk": 0, "path": "/.profile/bio.md"}]

    # `bm sync key rotate` with no sync remote: the workspace's objects are sealed again under the new key
    res = bm("sync", "key", "rotate", "--json")
    assert res.code == 0 and res.json()[0]["remote"] is None and res.json()[0]["resealed"] == 3, res
    new = res.json()[0]["key_id"]
    assert {header_key_id(body, k) for k, body in sw.objects(s3_store).items()} == {new}
    fresh = tmp_path_factory.mktemp("newkey") / "data"
    fresh.mkdir()
    Keyring(fresh).import_key(bm("sync", "key", "export").out)  # a device holding only the new key
    only_new = S3Backend(Location(s3_store, "tenants", sw.endpoint), "ann", Keyring(fresh))
    assert only_new.read_bytes("/notes/kyoto.md").decode() == NOTE + "Also visit Nara.\n"

    # bad paths and usage: one Error: line each, nothing stored
    assert_error(bm("fs", "write", "../escape.md", "x", "-u", "ann"), 1, "escapes the workspace")
    assert_error(bm("fs", "cat", "/etc/passwd", "-u", "ann"), 1, "outside the workspace")
    assert_error(bm("fs", "cat", "/notes/none.md", "-u", "ann"), 1, "no file /notes/none.md")
    assert_error(bm("fs", "rm", "/notes", "-u", "ann"), 1, "is a folder", "-r")
    assert_error(bm("fs", "mv", "/notes/kyoto.md", "/notes/kyoto.md", "-u", "ann"), 2, "already there")
    assert len(sw.objects(s3_store)) == len(keys) + 1  # (+ the profile)

    # a stray object (a crashed write's upload) is swept by `bm fs index --full` once an hour old
    stray = f"tenants/ann/o/{'0' * 32}"
    sw.raw.put_object(Bucket=s3_store, Key=stray, Body=b"bmS3 stray")
    assert bm("fs", "index", "--full", "-u", "ann").json()["swept"] == 0 and stray in sw.objects(s3_store)

    # export carries the files; forget removes the tenant's objects
    exported = bm("export").out
    files = [r for r in map(json.loads, exported.splitlines()) if r["kind"] == "file"]
    assert [(f["user"], f["path"]) for f in files] == [("ann", "/.profile/bio.md"), ("ann", "/notes/kyoto.md"),
                                                      ("ann", "/notes/plan.md")]
    assert bm("fs", "rm", "/notes/plan.md", "-u", "ann").json()["forgotten_chunks"] >= 1
    foreign = "tenants/ann/another-tool.txt"  # not a name the workspace makes: left alone
    sw.raw.put_object(Bucket=s3_store, Key=foreign, Body=b"x")
    res = bm("forget", "--wipe-user", "ann", "--yes")
    assert res.code == 0 and res.json()["forgotten"]["files"] == 2, res
    assert list(sw.objects(s3_store)) == [foreign] and bm("recall", "Kyoto", "-u", "ann").json() == []

    # a second store imports the export into its own bucket: the files land there, sealed
    dump = Path(os.environ["BM_HOME"]) / "dump.jsonl"
    dump.write_text(exported, encoding="utf-8")
    use_home(monkeypatch, Path(os.environ["BM_HOME"] + "-second"))
    second = sw.new_bucket()
    monkeypatch.setenv("BM_WORKSPACE", f"s3://{second}")
    assert bm("import", str(dump)).json()["file"] == 3
    assert bm("fs", "cat", "/notes/kyoto.md", "-u", "ann").out == NOTE + "Also visit Nara.\n"
    assert all(k.startswith("ann/") and body[:4] == b"bmS3" for k, body in sw.objects(second).items())


def test_unreachable_or_misconfigured_s3_fails_cleanly_and_recall_still_works(bm, s3_store, aws_env,
                                                                               fast_retries, monkeypatch):
    bm("fs", "write", "/notes/kyoto.md", NOTE)
    bm("remember", "Ann's sister lives in Osaka")
    port = free_ports(1)[0]
    monkeypatch.setenv("BM_WORKSPACE_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    assert_error(bm("fs", "ls"), 1, "cannot reach the workspace", f"127.0.0.1:{port}")
    assert_error(bm("fs", "write", "/notes/b.md", "x"), 1, "cannot reach the workspace")
    hits = bm("recall", "where does Ann's sister live?", "-k", "3")  # local-first: recall works offline
    assert hits.code == 0 and any("Osaka" in m["text"] for m in hits.json()), hits
    monkeypatch.setenv("BM_WORKSPACE_ENDPOINT_URL", aws_env.endpoint)
    monkeypatch.setenv("BM_WORKSPACE", "s3://no-such-bucket-zq/x")
    assert_error(bm("fs", "cat", "/notes/kyoto.md"), 1, "bucket 'no-such-bucket-zq' does not exist")
    assert_error(bm("config", "set", "workspace", "s3://Bad_Bucket"), 1, "bad value", "s3://BUCKET")
    monkeypatch.setenv("BM_WORKSPACE", f"s3://{s3_store}/tenants")
    assert bm("fs", "cat", "/notes/kyoto.md").out == NOTE
