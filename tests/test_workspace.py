"""The explicit-memory workspace: `bm fs ls|cat|write|append|rm|mv|find|index`, path safety
(.., absolute paths, NUL, symlinks out of the root), notes and profile files indexed for
`bm recall` with their path in provenance and re-indexed when they change, forget, export,
rebuild."""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import BM_CMD, assert_error, open_memory, use_home

NOTE = """# Trip planning

Ann is planning a trip to Kyoto in April to see the cherry blossoms.

## Budget

The budget for the Kyoto trip is 3000 euros, flights included.
"""


def root(home: Path, user: str = "default") -> Path:
    return home / "data" / "workspace" / user


def recall(bm, query: str, user: str = "default", k: int = 3) -> list[dict]:
    res = bm("recall", query, "--user", user, "-k", k)
    assert res.code == 0, res
    return res.json()


def file_chunks(user: str = "default", path: str | None = None) -> list[dict]:
    with open_memory() as mem:
        rows = mem.list_memories(user=user, limit=1000)
    return [m for m in rows if m["meta"].get("kind") == "file" and (path is None or m["meta"]["path"] == path)]


def op_count() -> int:
    with open_memory() as mem:
        return mem.log.count("ops")


# -- CLI end to end ------------------------------------------------------------------------------
def test_layout_and_every_command(bm, store):
    res = bm("fs", "ls")
    assert res.code == 0, res
    assert [(e["path"], e["type"]) for e in res.json()] == [
        ("/.profile", "dir"), ("/drafts", "dir"), ("/notes", "dir"), ("/system", "dir")]
    assert sorted(p.name for p in root(store).iterdir()) == [".profile", "drafts", "notes", "system"]

    res = bm("fs", "write", "/notes/kyoto.md", NOTE)
    assert res.code == 0, res
    out = res.json()
    assert out["path"] == "/notes/kyoto.md" and out["size"] == len(NOTE.encode()) and out["indexed"] and out["chunks"] >= 1
    assert bm("fs", "cat", "notes/kyoto.md").out == NOTE  # relative paths are the same file
    res = bm("fs", "append", "/notes/kyoto.md", "\nAlso visit Nara.\n")
    assert res.code == 0 and bm("fs", "cat", "/notes/kyoto.md").out == NOTE + "\nAlso visit Nara.\n"
    assert bm("fs", "cat", "/notes/kyoto.md", "--json").json() == {
        "path": "/notes/kyoto.md", "size": len(NOTE) + 18, "text": NOTE + "\nAlso visit Nara.\n"}
    assert bm("fs", "append", "/drafts/new.txt", "created by append").json()["indexed"] is False
    bm("fs", "write", "/system/config.json", '{"tone": "formal"}')

    listed = bm("fs", "ls", "/notes").json()
    assert [(e["name"], e["type"], e["size"]) for e in listed] == [("kyoto.md", "file", len(NOTE) + 18)]
    assert bm("fs", "ls", "/notes/kyoto.md").json()[0]["path"] == "/notes/kyoto.md"

    assert [e["path"] for e in bm("fs", "find", "*.md").json()] == ["/notes/kyoto.md"]
    assert [e["path"] for e in bm("fs", "find", "/drafts/*").json()] == ["/drafts/new.txt"]
    assert [e["path"] for e in bm("fs", "find", "*CONFIG*").json()] == ["/system/config.json"]  # case-insensitive
    hits = bm("fs", "find", "--grep", "KYOTO").json()
    assert [(h["path"], h["line"]) for h in hits] == [("/notes/kyoto.md", 3), ("/notes/kyoto.md", 7)]
    assert bm("fs", "find", "*.txt", "--grep", "kyoto").json() == []
    assert bm("fs", "find", "--grep", "formal", "--in", "/system").json()[0]["path"] == "/system/config.json"

    res = bm("fs", "mv", "/drafts/new.txt", "/drafts/old.txt")
    assert res.code == 0 and res.json()["to"] == "/drafts/old.txt"
    assert bm("fs", "mv", "/drafts/old.txt", "/system").json()["to"] == "/system/old.txt"  # into a folder
    assert_error(bm("fs", "mv", "/system/old.txt", "/system/config.json"), 1, "already exists", "--force")
    assert bm("fs", "mv", "/system/old.txt", "/system/config.json", "--force").code == 0
    assert bm("fs", "cat", "/system/config.json").out == "created by append"

    bm("fs", "write", "/drafts/deck/outline.md", "one")
    bm("fs", "write", "/drafts/deck/notes.md", "two")
    assert_error(bm("fs", "rm", "/drafts/deck"), 1, "is a folder", "-r")
    res = bm("fs", "rm", "-r", "/drafts/deck")
    assert res.code == 0 and sorted(res.json()["files"]) == ["/drafts/deck/notes.md", "/drafts/deck/outline.md"]
    assert bm("fs", "ls", "/drafts").json() == []
    assert bm("fs", "rm", "/system/config.json").code == 0
    assert_error(bm("fs", "cat", "/system/config.json"), 1, "no file")
    assert_error(bm("fs", "rm", "/system/config.json"), 1, "no file")
    assert_error(bm("fs", "cat", "/notes"), 1, "folder")
    assert_error(bm("fs", "write", "/notes", "x"), 1, "folder")
    assert_error(bm("fs", "rm", "-r", "/"), 1, "whole workspace")
    assert_error(bm("fs", "mv", "/notes/kyoto.md", "/notes/kyoto.md"), 2, "already there")

    # one workspace per user
    assert bm("fs", "write", "/notes/kyoto.md", "bob's own", "--user", "bob").code == 0
    assert bm("fs", "cat", "/notes/kyoto.md", "--user", "bob").out == "bob's own"
    assert bm("fs", "cat", "/notes/kyoto.md").out.startswith("# Trip planning")
    assert (root(store, "bob") / "notes" / "kyoto.md").is_file()


def test_index_command_and_table_output(bm, store):
    res = bm("fs", "index")
    assert res.code == 0 and res.json() == {"indexed": [], "removed": [], "unchanged": [], "chunks": 0, "forgotten": 0}
    assert_error(bm("fs", "find", "--grep", ""), 1, "needs some text")


def test_binary_content_from_stdin_round_trips(store):
    data = bytes(range(256)) + b"\xff\xfe not utf-8"
    env = {**os.environ}
    w = subprocess.run([*BM_CMD, "fs", "write", "/drafts/blob.bin", "-"], input=data, capture_output=True, env=env)
    assert w.returncode == 0, w.stderr
    c = subprocess.run([*BM_CMD, "fs", "cat", "/drafts/blob.bin"], capture_output=True, env=env)
    assert c.returncode == 0 and c.stdout == data
    j = subprocess.run([*BM_CMD, "fs", "cat", "/drafts/blob.bin", "--json"], capture_output=True, env=env)
    import base64

    assert base64.b64decode(json.loads(j.stdout)["base64"]) == data
    # binary notes are stored but not indexed
    w = subprocess.run([*BM_CMD, "fs", "write", "/notes/blob.bin", "-"], input=data, capture_output=True, env=env)
    assert json.loads(w.stdout)["chunks"] == 0 and file_chunks() == []


def test_no_store(bm, bm_home):
    res = bm("fs", "ls")  # a listing on a missing store: an empty workspace, a note, nothing created
    assert res.code == 0 and all(e["type"] == "dir" for e in res.json()) and "no bm store" in res.err, res
    assert not (bm_home / "data").exists()
    assert_error(bm("fs", "cat", "/notes/a.md"), 1, "no bm store")


# -- path safety ------------------------------------------------------------------------------------
@pytest.mark.parametrize("path, words", [
    ("../escape.md", ["escapes the workspace"]),
    ("/notes/../../escape.md", ["escapes the workspace"]),
    ("notes/../../../etc/passwd", ["escapes the workspace"]),
    ("/etc/passwd", ["outside the workspace"]),
    ("/tmp/x.md", ["outside the workspace"]),
    ("secrets.md", ["outside the workspace"]),
    ("/", ["folder"]),
])
def test_escapes_are_refused(bm, store, path, words):
    for cmd in (("write", path, "x"), ("append", path, "x"), ("cat", path)):
        assert_error(bm("fs", *cmd), 1, *words)
    assert not (store / "escape.md").exists() and not (store / "data" / "escape.md").exists()
    assert not (root(store) / "secrets.md").exists()


def test_host_paths_outside_the_root_are_refused_inside_accepted(bm, store, tmp_path):
    outside = tmp_path / "outside.md"
    assert_error(bm("fs", "write", str(outside), "x"), 1, "outside the workspace")
    assert not outside.exists()
    bm("fs", "ls")  # creates the layout
    inside = root(store) / "notes" / "host.md"
    assert bm("fs", "write", str(inside), "via the host path").json()["path"] == "/notes/host.md"
    assert inside.read_text() == "via the host path"


def test_paths_are_normalised(bm, store):
    bm("fs", "write", "//notes/./sub/../a.md", "one")
    assert [e["path"] for e in bm("fs", "find", "*").json()] == ["/notes/a.md"]
    assert bm("fs", "cat", "notes/a.md").out == "one"


def test_nul_bytes_and_bad_names_are_refused_through_the_api(store):
    from brandmind.errors import InvalidInput

    with open_memory() as mem:
        ws = mem.workspace()
        for bad in ("/notes/a\x00b.md", "", "/notes/" + "x" * 300):
            with pytest.raises(InvalidInput):
                ws.write(bad, "x")


def test_symlinks_out_of_the_root_are_refused(bm, store, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.md"
    secret.write_text("The vault code is 4711 zebra", encoding="utf-8")
    bm("fs", "ls")
    notes = root(store) / "notes"
    (notes / "out").symlink_to(outside, target_is_directory=True)
    (notes / "secret.md").symlink_to(secret)
    (root(store) / "drafts" / "real.md").write_text("inside", encoding="utf-8")
    (notes / "alias.md").symlink_to(root(store) / "drafts" / "real.md")  # stays inside: fine

    for cmd in (("cat", "/notes/secret.md"), ("cat", "/notes/out/secret.md"),
                ("write", "/notes/out/new.md", "x"), ("append", "/notes/secret.md", "x"),
                ("write", "/notes/secret.md", "x"), ("rm", "/notes/secret.md"),
                ("mv", "/notes/secret.md", "/drafts/s.md"), ("mv", "/drafts/real.md", "/notes/out/x.md"),
                ("ls", "/notes/out")):
        assert_error(bm("fs", *cmd), 1, "resolves outside the workspace")
    assert secret.read_text() == "The vault code is 4711 zebra" and sorted(os.listdir(outside)) == ["secret.md"]
    assert bm("fs", "cat", "/notes/alias.md").out == "inside"

    listed = {e["name"]: e["type"] for e in bm("fs", "ls", "/notes").json()}
    assert listed == {"alias.md": "file", "out": "link-outside", "secret.md": "link-outside"}
    assert [h["path"] for h in bm("fs", "find", "--grep", "zebra").json()] == []
    res = bm("fs", "index")
    assert res.code == 0 and res.json()["indexed"] == ["/notes/alias.md"]
    assert not any("zebra" in m["text"] for m in recall(bm, "vault code zebra", k=10))


# -- indexing for recall ----------------------------------------------------------------------------
def test_notes_and_profile_are_found_by_recall_with_their_path(bm, store):
    bm("fs", "write", "/notes/kyoto.md", NOTE)
    bm("fs", "write", "/.profile/bio.md", "Ann is a vegetarian architect living in Porto.")
    bm("fs", "write", "/drafts/memo.md", "Draft: the zebra migration report")
    bm("fs", "write", "/system/prefs.md", "zebra tone settings")

    top = recall(bm, "what is the budget for the Kyoto trip?")[0]
    assert "3000 euros" in top["text"]
    assert top["provenance"][0]["path"] == "/notes/kyoto.md" and top["type"] == "concept" and top["source"] == "workspace"
    assert top["meta"]["kind"] == "file" and top["meta"]["path"] == "/notes/kyoto.md" and len(top["meta"]["sha256"]) == 64
    bio = recall(bm, "what does Ann do for a living, where does she live?")[0]
    assert bio["provenance"] == [{"chunk": 0, "path": "/.profile/bio.md"}] and bio["type"] == "fact"
    # drafts and system are not indexed
    assert not any("zebra" in m["text"] for m in recall(bm, "zebra", k=10))
    assert {m["meta"]["path"] for m in file_chunks()} == {"/notes/kyoto.md", "/.profile/bio.md"}
    # other users see none of it
    assert recall(bm, "Kyoto budget", user="bob") == []


def test_rewrite_append_mv_rm_reindex(bm, store):
    bm("fs", "write", "/notes/pet.md", "Ann's dog is a beagle called Pixel.")
    old = file_chunks(path="/notes/pet.md")
    assert len(old) == 1
    res = bm("fs", "write", "/notes/pet.md", "Ann's cat is a tabby called Miso.")
    assert res.json()["reindexed"] is True
    new = file_chunks(path="/notes/pet.md")
    assert len(new) == 1 and new[0]["id"] != old[0]["id"] and "Miso" in new[0]["text"]
    assert not any("beagle" in m["text"] for m in recall(bm, "beagle Pixel", k=10))
    with open_memory() as mem:  # the old text does not linger in the log
        ops = list(mem.log.iter_ops())
        assert not any("beagle" in json.dumps(op) for op in ops)
        assert [op["kind"] for op in ops].count("memory.forget") == 1

    bm("fs", "append", "/notes/pet.md", " Miso sleeps on the piano.")
    chunks = file_chunks(path="/notes/pet.md")
    assert len(chunks) == 1 and chunks[0]["text"].endswith("piano.")

    bm("fs", "mv", "/notes/pet.md", "/drafts/pet.md")  # out of the index
    assert file_chunks() == []
    bm("fs", "mv", "/drafts/pet.md", "/notes/animals/pet.md")  # back in, at its new path
    assert [m["provenance"][0]["path"] for m in file_chunks()] == ["/notes/animals/pet.md"]
    bm("fs", "mv", "/notes/animals", "/.profile/animals")  # a folder: its files follow
    top = recall(bm, "who sleeps on the piano?")[0]
    assert top["provenance"][0]["path"] == "/.profile/animals/pet.md" and top["type"] == "fact"
    res = bm("fs", "rm", "-r", "/.profile/animals")
    assert res.json()["forgotten_chunks"] == 1 and file_chunks() == []


def test_changes_on_disk_are_picked_up_by_index(bm, store):
    bm("fs", "write", "/notes/a.md", "Ann prefers window seats on long flights.")
    bm("fs", "write", "/notes/b.md", "Ann's passport expires in 2031.")
    notes = root(store) / "notes"
    (notes / "a.md").write_text("Ann prefers aisle seats since her knee surgery.", encoding="utf-8")
    (notes / "b.md").unlink()
    (notes / "sub").mkdir()
    (notes / "sub" / "c.md").write_text("Ann is allergic to peanuts.", encoding="utf-8")

    res = bm("fs", "index")
    assert res.code == 0, res
    report = res.json()
    assert report["indexed"] == ["/notes/a.md", "/notes/sub/c.md"] and report["removed"] == ["/notes/b.md"]
    top = recall(bm, "which seat does Ann prefer?")[0]
    assert "aisle" in top["text"] and top["provenance"][0]["path"] == "/notes/a.md"
    assert not any("window" in m["text"] or "passport" in m["text"] for m in recall(bm, "window passport", k=10))
    assert recall(bm, "peanut allergy")[0]["provenance"][0]["path"] == "/notes/sub/c.md"

    # nothing changed: no op; a touch without a change: re-hashed, still no op
    before = op_count()
    assert bm("fs", "index").json()["indexed"] == []
    os.utime(notes / "a.md", ns=(time.time_ns(), time.time_ns() + 5_000_000_000))
    report = bm("fs", "index").json()
    assert report["unchanged"] == ["/notes/a.md"] and report["indexed"] == []
    assert op_count() == before
    # --full re-hashes everything and finds nothing to do either
    assert bm("fs", "index", "--full").json()["indexed"] == [] and op_count() == before


def test_recall_itself_picks_up_notes_changed_on_disk(bm, store):
    bm("fs", "write", "/notes/a.md", "Ann prefers window seats on long flights.")
    (root(store) / "notes" / "a.md").write_text("Ann prefers aisle seats since her knee surgery.", encoding="utf-8")
    (root(store) / ".profile" / "work.md").write_text("Ann works night shifts at the port.", encoding="utf-8")
    top = recall(bm, "which seat does Ann prefer?")[0]  # no `bm fs index` in between
    assert "aisle" in top["text"] and top["provenance"][0]["path"] == "/notes/a.md"
    assert recall(bm, "night shifts at the port")[0]["provenance"][0]["path"] == "/.profile/work.md"
    assert not any("window" in m["text"] for m in recall(bm, "window seats", k=10))


def test_recall_forgets_notes_whose_whole_workspace_went_behind_bms_back(bm, store):
    """`bm recall` skips the workspace's code when the store keeps no workspace files
    (Memory.refresh_workspace), but not when files it indexed are gone with the whole
    workspace folder: their chunks are forgotten, not found."""
    import shutil

    assert not (root(store).parent).exists()
    assert recall(bm, "window seats", k=10) == []
    bm("fs", "write", "/notes/a.md", "Ann prefers window seats on long flights.")
    assert "window" in recall(bm, "window seats")[0]["text"]
    shutil.rmtree(root(store).parent)  # <data>/workspace, every user's
    assert not any("window" in m["text"] for m in recall(bm, "window seats", k=10))


def test_refresh_api_and_its_cost_when_nothing_changed(store, monkeypatch):
    """With nothing changed, refresh takes the cheap path: a directory scan and two indexed
    queries; it reads no file, hashes none and re-indexes none (what that costs is a
    benchmark's to say, not a timed test's)."""
    import brandmind.workspace_index as workspace_index
    from brandmind.workspace import refresh
    from brandmind.workspace_files import LocalBackend

    with open_memory() as mem:
        ws = mem.workspace("ann")
        for i in range(50):
            area = "/.profile" if i % 10 == 0 else "/notes"
            ws.write(f"{area}/f{i:02d}.md", f"# File {i}\n\nAnn's note number {i} about topic {i * 7}.\n")
        assert refresh(mem.store, "ann") is None

        def not_now(*args, **kwargs):
            raise AssertionError("refresh with nothing changed read, hashed or re-indexed a file")

        with monkeypatch.context() as m:
            m.setattr(workspace_index, "reindex", not_now)
            m.setattr(LocalBackend, "read_bytes", not_now)
            real_stat = LocalBackend.stat
            m.setattr(LocalBackend, "stat", lambda self, path, *, digest=True: (
                not_now() if digest else real_stat(self, path, digest=False)))
            for _ in range(3):
                assert refresh(mem.store, "ann") is None
        (ws.root / "notes" / "f05.md").write_text("Ann switched to decaf.", encoding="utf-8")
        report = refresh(mem.store, "ann")
        assert report["indexed"] == ["/notes/f05.md"] and report["forgotten"] == 1
        assert refresh(mem.store, "ann") is None
        assert refresh(mem.store, "nobody") is None and not (ws.root.parent / "nobody").exists()


def test_two_processes_indexing_at_once_index_once(store):
    notes = root(store) / "notes"
    notes.mkdir(parents=True)
    for i in range(5):
        (notes / f"n{i}.md").write_text(f"Note {i}: Ann met Bo at cafe number {i}.", encoding="utf-8")
    procs = [subprocess.Popen([*BM_CMD, "fs", "index"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    reports = [json.loads(o[0]) for o in outs]
    assert sorted(len(r["indexed"]) for r in reports) == [0, 5]
    assert sorted(m["meta"]["path"] for m in file_chunks()) == [f"/notes/n{i}.md" for i in range(5)]


def test_chunking_by_headings_and_paragraphs_with_overlap():
    from brandmind.workspace import CHUNK_CHARS, chunk_text

    assert chunk_text("") == [] and chunk_text("\n\n  \n") == []
    assert chunk_text("one line") == ["one line"]
    para = " ".join(f"Sentence {i} is about the quarterly revenue of store {i}." for i in range(40))
    text = f"# Report\n\nIntro paragraph.\n\n## Revenue\n\n{para}\n\n## Staff\n\nBo manages the team.\n"
    chunks = chunk_text(text)
    assert len(chunks) >= 4
    assert all(len(c) <= CHUNK_CHARS + 250 for c in chunks)
    assert chunks[0].startswith("# Report")
    revenue = [c for c in chunks if "quarterly revenue" in c]
    assert len(revenue) >= 3 and all(c.startswith("## Revenue") for c in revenue)  # the heading goes along
    for a, b in zip(revenue, revenue[1:]):  # and ~120 characters of overlap
        heading, tail, _ = b.split("\n\n", 2)
        assert heading == "## Revenue" and 60 <= len(tail) <= 120 and a.endswith(tail)
    assert chunks[-1].startswith("## Staff") and "Bo manages" in chunks[-1]
    for i in range(40):  # nothing is lost
        assert any(f"store {i}." in c for c in chunks)
    fenced = "# Code\n\n```\n# not a heading\n\nstill code\n```\n"
    assert chunk_text(fenced) == ["# Code\n```\n# not a heading\n\nstill code\n```"]


# -- forget, export/import, rebuild -------------------------------------------------------------------
def test_forget_user_removes_the_workspace_and_its_index(bm, store):
    bm("fs", "write", "/notes/kyoto.md", NOTE, "--user", "ann")
    bm("fs", "write", "/drafts/d.md", "draft", "--user", "ann")
    bm("fs", "write", "/notes/bo.md", "Bo likes jazz.", "--user", "bob")
    res = bm("forget", "--wipe-user", "ann", "--yes")
    assert res.code == 0, res
    assert res.json()["forgotten"]["files"] == 2
    assert not root(store, "ann").exists()
    assert file_chunks("ann") == [] and recall(bm, "Kyoto budget", user="ann") == []
    assert bm("fs", "cat", "/notes/bo.md", "--user", "bob").out == "Bo likes jazz."
    assert recall(bm, "jazz", user="bob")[0]["provenance"][0]["path"] == "/notes/bo.md"
    with open_memory() as mem:
        assert not any("Kyoto" in json.dumps(op) for op in mem.log.iter_ops())
    # a fresh start for ann: nothing comes back
    assert bm("fs", "ls", "/notes", "--user", "ann").json() == []


def test_export_import_carries_workspace_files(bm, store, tmp_path, monkeypatch):
    bm("fs", "write", "/notes/kyoto.md", NOTE, "--user", "ann")
    bm("fs", "write", "/system/s.json", "{}", "--user", "ann")
    subprocess.run([*BM_CMD, "fs", "write", "/drafts/b.bin", "-", "--user", "a/b"], input=b"\x00\xffbin",
                   check=True, capture_output=True)
    (root(store, "ann") / "stray.txt").write_text("outside the four areas: not exported", encoding="utf-8")
    out = bm("export")
    assert out.code == 0, out
    files = [r for r in map(json.loads, out.out.splitlines()) if r["kind"] == "file"]
    assert [(f["user"], f["path"]) for f in files] == [("a/b", "/drafts/b.bin"), ("ann", "/notes/kyoto.md"),
                                                      ("ann", "/system/s.json")]
    assert files[0]["base64"] and files[1]["text"] == NOTE
    dump = tmp_path / "dump.jsonl"
    dump.write_text(out.out, encoding="utf-8")

    use_home(monkeypatch, tmp_path / "other")
    res = bm("import", str(dump))
    assert res.code == 0 and res.json()["file"] == 3, res
    assert bm("export").out == out.out
    assert bm("fs", "cat", "/notes/kyoto.md", "--user", "ann").out == NOTE
    # the imported chunks match the files: indexing has nothing to do
    before = op_count()
    assert bm("fs", "index", "--user", "ann").json()["indexed"] == [] and op_count() == before
    assert recall(bm, "Kyoto trip budget", user="ann")[0]["provenance"][0]["path"] == "/notes/kyoto.md"
    # importing again: the files are there already
    assert bm("import", str(dump)).json()["file"] == 0


def test_import_refuses_unsafe_file_records(bm, store, tmp_path):
    header = json.dumps({"kind": "header", "format": "bm-export/1"})
    for rec, words in (({"path": "/../../evil.md", "text": "x"}, ["escapes"]),
                       ({"path": "/etc/evil.md", "text": "x"}, ["outside the workspace"]),
                       ({"path": "/notes/a.md", "text": "x", "sha256": "0" * 64}, ["sha256"]),
                       ({"path": "/notes/a.md", "base64": "%%%"}, ["bad content"])):
        dump = tmp_path / "d.jsonl"
        dump.write_text(header + "\n" + json.dumps({"kind": "file", "user": "ann", **rec}) + "\n", encoding="utf-8")
        assert_error(bm("import", str(dump)), 1, "line 2", *words)
    assert not (store / "evil.md").exists() and not root(store, "ann").exists()


def test_rebuild_keeps_file_chunks_and_index_has_nothing_to_redo(bm, store):
    bm("fs", "write", "/notes/kyoto.md", NOTE)
    bm("fs", "write", "/notes/kyoto.md", NOTE + "\nRevised.\n")
    bm("fs", "write", "/.profile/bio.md", "Ann is an architect.")
    before_export = bm("export").out
    assert bm("rebuild").code == 0
    assert bm("export").out == before_export
    ops = op_count()
    report = bm("fs", "index").json()  # the stat cache is gone: files are re-hashed, not re-indexed
    assert report["indexed"] == [] and sorted(report["unchanged"]) == ["/.profile/bio.md", "/notes/kyoto.md"]
    assert op_count() == ops and bm("export").out == before_export
