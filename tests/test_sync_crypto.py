"""The sync encryption (brandmind/crypto.py) and remote config (sync/config.py): no server."""
from __future__ import annotations

import os
import stat

import pytest

from brandmind.errors import BMError, InvalidInput
from brandmind.sync.config import add_remote, get_remote, load_remotes, make_s3, remotes_path, remove_remote
from brandmind.crypto import Keyring, SyncKey, SyncKeyError, open_sealed, seal
from brandmind.sync.s3 import is_redaction, same_op


def test_the_key_is_made_once_and_kept_private(tmp_path):
    ring = Keyring(tmp_path)
    assert not ring.has_key() and not ring.path.exists()
    key = ring.active()
    assert stat.S_IMODE(os.stat(ring.path).st_mode) == 0o600
    assert Keyring(tmp_path).active().secret == key.secret  # stable across opens
    shown = ring.describe()
    assert shown["key_id"] == key.key_id and len(key.key_id) == 16
    assert key.export_text().split(":")[-1] not in str(shown)  # never the key itself
    assert ring.path.read_text().count(key.export_text().split(":")[-1]) == 1


def test_sealing_is_deterministic_authenticated_and_bound_to_the_name(tmp_path):
    key = Keyring(tmp_path).active()
    data = b'{"text": "Ann lives in Lisbon"}' * 20
    one = seal(key, "ops/r_a/000000000001-000000000002.seg", data)
    assert one == seal(key, "ops/r_a/000000000001-000000000002.seg", data)  # same bytes: 412 rule
    other = seal(key, "ops/r_a/000000000001-000000000002.seg", data + b" ")
    assert other[14:26] != one[14:26]  # another plaintext, another nonce
    assert b"Lisbon" not in one and one[:4] == b"bmS3"
    assert open_sealed(key, "ops/r_a/000000000001-000000000002.seg", one, "x") == data
    with pytest.raises(SyncKeyError, match="cannot decrypt"):  # moved to another name
        open_sealed(key, "ops/r_a/000000000003-000000000004.seg", one, "x")
    bad = bytearray(one)
    bad[-1] ^= 1
    with pytest.raises(SyncKeyError, match="tampered"):
        open_sealed(key, "ops/r_a/000000000001-000000000002.seg", bytes(bad), "x")
    plain = seal(key, "n", data, compress=False)
    assert open_sealed(key, "n", plain, "n") == data


def test_a_wrong_key_names_the_fix_and_import_adds_a_device(tmp_path):
    a, b = Keyring(tmp_path / "a"), Keyring(tmp_path / "b")
    blob = a.seal("heads.json", b"{}")
    with pytest.raises(SyncKeyError) as err:
        b.open("heads.json", blob, where="s3://bkt/heads.json")
    assert "this store's sync key cannot decrypt s3://bkt/heads.json" in err.value.message
    assert "no key yet" in err.value.message and "bm sync key import" in err.value.hint
    b.active()  # b made its own key: still the wrong one
    with pytest.raises(SyncKeyError, match=a.active().key_id):
        b.open("heads.json", blob)
    key, changed = b.import_key("  " + a.active().export_text() + "\n")
    assert changed and key.key_id == a.active().key_id
    assert Keyring(tmp_path / "b").open("heads.json", blob) == b"{}"
    assert len(Keyring(tmp_path / "b").describe()["keys"]) == 2  # its own key stays readable
    assert b.import_key(a.active().export_text())[1] is False
    text = a.active().export_text()
    for broken in ("hello", text[:-3] + "AAA", text.replace("bm-sync-key:1:", "bm-sync-key:1:00"), text[:30]):
        with pytest.raises(InvalidInput):
            b.import_key(broken)
    with pytest.raises(SyncKeyError, match="not a bm sync object"):
        b.open("x", b"plain text that is long enough to look like an object")


def test_a_damaged_key_file_is_a_clear_error(tmp_path):
    ring = Keyring(tmp_path)
    ring.active()
    ring.path.write_text("{not json")
    with pytest.raises(SyncKeyError, match="cannot read the sync keys"):
        Keyring(tmp_path)


def test_subkeys_and_names_differ_per_purpose():
    key = SyncKey(bytes(range(32)))
    assert len({key.subkey("enc"), key.subkey("nonce"), key.subkey("name")}) == 3
    assert key.name_mac("blob:abc") != key.name_mac("blob:abd")
    assert SyncKey.from_export(key.export_text()) == key
    with pytest.raises(InvalidInput):
        SyncKey(b"short")


def test_remote_config_round_trip_and_validation(tmp_path):
    cfg = make_s3(None, bucket="my-bucket", prefix="/team/bm/", endpoint_url="http://127.0.0.1:9000/",
                  region="eu-west-1")
    assert cfg.name == "origin" and cfg.prefix == "team/bm" and cfg.endpoint_url == "http://127.0.0.1:9000"
    add_remote(tmp_path, cfg)
    assert stat.S_IMODE(os.stat(remotes_path(tmp_path)).st_mode) == 0o600
    assert load_remotes(tmp_path) == {"origin": cfg}
    assert get_remote(tmp_path, None) == cfg
    add_remote(tmp_path, cfg)  # the same again is fine
    with pytest.raises(InvalidInput, match="already exists"):
        add_remote(tmp_path, make_s3(None, bucket="other-bucket"))
    add_remote(tmp_path, make_s3("aws", bucket="other-bucket", profile="work"))
    assert get_remote(tmp_path, None) == cfg  # several: origin is the default
    assert remove_remote(tmp_path, "origin") == cfg
    with pytest.raises(BMError, match="no remote named 'origin'"):
        get_remote(tmp_path, "origin")
    assert get_remote(tmp_path, None).name == "aws"
    add_remote(tmp_path, make_s3("nas", bucket="nas-bucket"))
    with pytest.raises(InvalidInput, match="several remotes"):
        get_remote(tmp_path, None)
    for bad in (dict(bucket="A"), dict(bucket="ab"), dict(bucket="ok-bucket", prefix="a/../b"),
                dict(bucket="ok-bucket", endpoint_url="127.0.0.1:9000"),
                dict(bucket="ok-bucket", addressing_style="sideways")):
        with pytest.raises(InvalidInput):
            make_s3(None, **bad)
    with pytest.raises(InvalidInput):
        make_s3("bad name", bucket="ok-bucket")
    remotes_path(tmp_path).write_text('[remotes.x]\nbucket = "b-b-b"\nsecret = 1\n')
    with pytest.raises(BMError, match="unknown key"):
        load_remotes(tmp_path)


def test_same_op_allows_a_redaction_and_nothing_else():
    op = {"id": "r_a:3", "hlc": [5, 0, "r_a"], "kind": "memory.add", "payload": {"id": "m_1", "text": "hi"}}
    assert same_op(op, dict(op))
    assert same_op(op, {**op, "payload": {"id": "m_1", "redacted": True}})
    assert same_op({**op, "hlc": [5, 0, "r_a"]}, {**op, "payload": {"id": "m_1", "text": None}})
    assert not same_op(op, {**op, "payload": {"id": "m_1", "text": "bye"}})
    assert not same_op(op, {**op, "hlc": [6, 0, "r_a"]})
    assert not same_op(op, {**op, "kind": "memory.forget"})
    assert is_redaction({"id": "k", "user": None}, {"id": "k", "user": "ann"})
    assert not is_redaction({"id": "k", "user": "bob"}, {"id": "k", "user": "ann"})


def test_a_running_process_sees_a_key_imported_by_another(tmp_path):
    daemon_view = Keyring(tmp_path / "a")
    first = daemon_view.active()
    other = Keyring(tmp_path / "other").active()
    Keyring(tmp_path / "a").import_key(other.export_text())  # `bm sync key import` meanwhile
    assert daemon_view.active().key_id == other.key_id != first.key_id
    assert daemon_view.open("x", seal(other, "x", b"hi")) == b"hi"


def test_two_processes_making_the_key_at_once_agree(tmp_path):
    import subprocess
    import sys

    code = ("import sys; from brandmind.crypto import Keyring; "
            "print(Keyring(sys.argv[1]).active().key_id)")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
             for _ in range(4)]
    ids = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert len(ids) == 1 and Keyring(tmp_path).active().key_id in ids


def test_rotate_makes_a_new_active_key_and_keeps_the_old_one_readable(tmp_path):
    ring = Keyring(tmp_path)
    old = ring.active()
    blob = ring.seal("heads.json", b"{}")
    new = ring.rotate()
    assert new.key_id != old.key_id and ring.active().key_id == new.key_id
    assert Keyring(tmp_path).active().key_id == new.key_id  # saved
    assert ring.open("heads.json", blob) == b"{}"  # what the old key sealed stays readable here
    shown = {k["key_id"]: k for k in ring.describe()["keys"]}
    assert shown[new.key_id]["source"] == "rotated" and shown[new.key_id]["replaces"] == old.key_id
    only_old = Keyring(tmp_path / "other")
    only_old.import_key(old.export_text())
    with pytest.raises(SyncKeyError) as err:
        only_old.open("heads.json", ring.seal("heads.json", b"{}"))
    assert new.key_id in err.value.message and "rotated" in err.value.message
    assert "bm sync key import" in err.value.hint
