"""bm remote add|list|remove|test and bm sync now|status|key (brandmind/sync)."""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from .common import JsonOpt, open_store
from .output import emit, emit_json, info, kv_table, wants_json

remote_app = typer.Typer(
    help="Sync remotes of this store, kept in <data dir>/remotes.toml: S3 (or any S3-compatible server) "
         "for the op log, Zep or a self-hosted Graphiti on FalkorDB for the graph.",
    no_args_is_help=True)
remote_add_app = typer.Typer(help="Add a remote.", no_args_is_help=True)
remote_app.add_typer(remote_add_app, name="add")
sync_app = typer.Typer(
    help="Replicate this store's op log through its remotes, end-to-end encrypted "
         "(`bm sync now`, `bm sync status`, `bm sync key`).",
    no_args_is_help=True)
key_app = typer.Typer(
    help="This store's sync key: every device of the store needs the same one "
         "(`bm sync key export` here, `bm sync key import FILE` there).",
    no_args_is_help=True)
sync_app.add_typer(key_app, name="key")

RemoteOpt = Annotated[Optional[str], typer.Option("--remote", "-r", help="Remote name (default: every remote).")]


def _data_dir() -> Path:
    """The store's data directory; the store must exist (remotes and keys belong to it)."""
    from brandmind.config import resolve_paths
    from brandmind.errors import StoreMissing

    paths = resolve_paths()
    if not (paths.lmdb_dir / "data.mdb").exists():
        raise StoreMissing(f"no bm store at {paths.data_dir}",
                           hint="run `bm init` first (or point BM_HOME at an existing store)")
    return paths.data_dir


# -- bm remote ----------------------------------------------------------------------------------------
@remote_add_app.command("s3")
def remote_add_s3(
    bucket: Annotated[str, typer.Option("--bucket", "-b", help="The S3 bucket.")],
    name: Annotated[Optional[str], typer.Argument(help="Name of the remote (default: origin).")] = None,
    prefix: Annotated[Optional[str], typer.Option("--prefix", help="Key prefix inside the bucket, e.g. bm/home.")] = None,
    endpoint_url: Annotated[Optional[str], typer.Option("--endpoint-url", help="An S3-compatible server, e.g. http://127.0.0.1:8333 (path-style addressing).")] = None,
    region: Annotated[Optional[str], typer.Option("--region", help="AWS region (default: the profile's, or us-east-1 with --endpoint-url).")] = None,
    profile: Annotated[Optional[str], typer.Option("--profile", help="A profile of ~/.aws/config for the credentials.")] = None,
    addressing_style: Annotated[Optional[str], typer.Option("--addressing-style", help="path, virtual or auto (default: path with --endpoint-url).")] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Overwrite a remote of the same name.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Add an S3 remote (or one on any S3-compatible server) for the op log.

    Credentials come from the usual boto3 chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, --profile,
    SSO, an instance role); nothing secret is written by this command.

    \b
    Examples:
      bm remote add s3 --bucket my-bucket --prefix bm/home      # named origin
      bm remote add s3 lan -b bm --endpoint-url http://127.0.0.1:8333  # MinIO
    """
    from brandmind.sync.config import add_remote, make_s3

    cfg = make_s3(name, bucket=bucket, prefix=prefix, endpoint_url=endpoint_url, region=region,
                  profile=profile, addressing_style=addressing_style)
    add_remote(_data_dir(), cfg, replace=replace)
    if wants_json(as_json):
        emit_json(cfg.public())
    else:
        info(f"remote {cfg.name} -> {cfg.url()}" + (f" at {cfg.endpoint_url}" if cfg.endpoint_url else "")
             + " (check it with `bm remote test`, then `bm sync now`)")


AssistOpt = Annotated[Optional[bool], typer.Option("--assist/--no-assist", help="Ask this remote during `bm recall` when local results run short [default: no].")]
TimeoutOpt = Annotated[Optional[int], typer.Option("--timeout-ms", help="Budget of remote-assisted recall in ms [default: 700].")]
ReplaceOpt = Annotated[bool, typer.Option("--replace", help="Overwrite a remote of the same name.")]


def _added(cfg: Any, as_json: bool) -> None:
    if wants_json(as_json):
        emit_json(cfg.public())
    else:
        info(f"remote {cfg.name} ({cfg.type}) -> {cfg.url()} (check it with `bm remote test {cfg.name}`, "
             "then `bm sync now`)")


@remote_add_app.command("zep")
def remote_add_zep(
    name: Annotated[Optional[str], typer.Argument(help="Name of the remote (default: zep).")] = None,
    api_key_env: Annotated[Optional[str], typer.Option("--api-key-env", help="The environment variable holding the Zep API key [default: ZEP_API_KEY].")] = None,
    base_url: Annotated[Optional[str], typer.Option("--base-url", help="Zep API root [default: https://api.getzep.com/api/v4].")] = None,
    assist: AssistOpt = None,
    timeout_ms: TimeoutOpt = None,
    replace: ReplaceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Mirror the graph to Zep (the zep-cloud v4 API).

    Facts and graph edges become Zep graph edges, turns thread messages; retired and forgotten
    facts are deleted there; facts Zep makes come back on `bm sync now`. The key is read from the
    variable at use time and never stored.

    \b
    Examples:
      bm remote add zep --api-key-env ZEP_API_KEY
      bm remote add zep --assist --timeout-ms 500    # also asked by bm recall
    """
    from brandmind.sync.config import add_remote, make_zep

    cfg = make_zep(name, base_url=base_url, api_key_env=api_key_env, assist=assist, timeout_ms=timeout_ms)
    add_remote(_data_dir(), cfg, replace=replace)
    _added(cfg, as_json)


@remote_add_app.command("graphiti")
def remote_add_graphiti(
    name: Annotated[Optional[str], typer.Argument(help="Name of the remote (default: graph).")] = None,
    host: Annotated[Optional[str], typer.Option("--host", help="FalkorDB host [default: 127.0.0.1].")] = None,
    port: Annotated[Optional[int], typer.Option("--port", help="FalkorDB port [default: 6379].")] = None,
    username: Annotated[Optional[str], typer.Option("--username", help="FalkorDB user, if it has ACLs.")] = None,
    password_env: Annotated[Optional[str], typer.Option("--password-env", help="The environment variable holding the FalkorDB password.")] = None,
    database: Annotated[Optional[str], typer.Option("--database", help="Prefix of this store's graphs [default: bm].")] = None,
    assist: AssistOpt = None,
    timeout_ms: TimeoutOpt = None,
    replace: ReplaceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Mirror the graph to a self-hosted Graphiti on FalkorDB (no LLM: bm sends its own vectors).
    Needs `pip install 'brandmind[graphiti]'`.

    \b
    Examples:
      bm remote add graphiti --host 127.0.0.1 --port 6379
      bm remote add graphiti --password-env FALKORDB_PASSWORD --assist
      bm remote add graphiti work --database bm_work   # another store's graphs
    """
    from brandmind.sync.config import add_remote, make_graphiti

    cfg = make_graphiti(name, host=host, port=port, username=username, password_env=password_env,
                        database=database, assist=assist, timeout_ms=timeout_ms)
    add_remote(_data_dir(), cfg, replace=replace)
    _added(cfg, as_json)


@remote_app.command("list")
def remote_list(as_json: JsonOpt = False) -> None:
    """The remotes of this store.

    \b
    Examples:
      bm remote list
      bm remote list --json | jq -r '.[].name'
    """
    from brandmind.sync.config import load_remotes

    items = [r.public() for r in load_remotes(_data_dir()).values()]

    def table(rows: list[dict]) -> Any:
        from rich.table import Table

        t = Table(header_style="bold")
        cols = ("name", "type", "url", "endpoint_url", "region", "profile", "assist")
        for col in cols:
            t.add_column(col)
        for r in rows:
            t.add_row(*(str(r.get(c) if r.get(c) is not None else "") for c in cols))
        if not rows:
            t.caption = "no remotes: `bm remote add s3 --bucket BUCKET`"
        return t

    emit(items, as_json=as_json, jsonl=False, table=table)


@remote_app.command("remove")
def remote_remove(name: Annotated[str, typer.Argument(help="The remote to remove.")], as_json: JsonOpt = False) -> None:
    """Forget a remote (nothing in the bucket is deleted).

    \b
    Examples:
      bm remote remove origin
    """
    from brandmind.sync.config import remove_remote

    gone = remove_remote(_data_dir(), name)
    if wants_json(as_json):
        emit_json({"removed": gone.name, "url": gone.url()})
    else:
        info(f"removed remote {gone.name} ({gone.url()}); the bucket is untouched")


@remote_app.command("test")
def remote_test(
    name: Annotated[Optional[str], typer.Argument(help="The remote (default: the only one, or origin).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Check a remote with one harmless round trip and report its latency. S3: write, read and
    delete an encrypted probe object and check the conditional writes sync needs (If-None-Match,
    If-Match); Zep / Graphiti: one read-only request.

    \b
    Examples:
      bm remote test            # the only remote, or origin
      bm remote test graph
    """
    from brandmind.errors import BMError
    from brandmind.sync.config import get_remote
    from brandmind.sync.remotes import probe

    data_dir = _data_dir()
    cfg = get_remote(data_dir, name)
    result = probe(cfg, data_dir)
    emit(result, as_json=as_json, jsonl=False, table=lambda r: kv_table(r, title=f"remote {cfg.name}"))
    if result.get("error"):
        raise BMError(f"remote {cfg.name!r} failed the test: {result['error']}", hint=result.get("hint"))
    if result.get("note"):
        info(f"note: {result['note']}")
    if not result["ok"]:
        missing = [k for k in ("round_trip", "if_none_match", "if_match", "deleted") if not result.get(k)]
        raise BMError(f"remote {cfg.name!r} does not support what sync needs: {', '.join(missing)} failed",
                      hint="use S3 or a server with conditional writes (If-None-Match / If-Match), "
                           "e.g. recent MinIO, SeaweedFS or Garage")


# -- bm sync ------------------------------------------------------------------------------------------------
def _remotes(store: Any, name: str | None) -> list[Any]:
    """The remotes of the open store (``mem.store``): the one named, else every one."""
    from brandmind.sync.config import get_remote
    from brandmind.sync.remotes import open_all, open_remote

    data_dir = store.config.paths.data_dir
    if name is not None:
        return [open_remote(store, get_remote(data_dir, name))]
    remotes = open_all(store)  # op-log remotes first: an empty store starts from their snapshot
    if not remotes:
        get_remote(data_dir, None)  # raises "no sync remote" with the hint
    return remotes


def _error_text(err: Any) -> tuple[str, str | None]:
    if isinstance(err, dict):
        return str(err.get("message") or err.get("error") or err), err.get("hint")
    return str(err), None


@sync_app.command("now")
def sync_now(
    remote: RemoteOpt = None,
    push: Annotated[bool, typer.Option("--push/--no-push", help="Send this device's ops.")] = True,
    pull: Annotated[bool, typer.Option("--pull/--no-pull", help="Fetch the other devices' ops.")] = True,
    bootstrap: Annotated[bool, typer.Option("--bootstrap", help="Start from the newest snapshot on the remote instead of replaying every op (automatic when this store is empty).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Push this device's new ops and pull the others' (once, without the daemon).

    \b
    Examples:
      bm sync now                          # every remote
      bm sync now -r origin --no-pull      # only send this device's ops
      bm sync now --bootstrap              # start from the newest snapshot
    """
    from brandmind.errors import BMError
    from brandmind.sync.bootstrap import should_bootstrap
    from brandmind.sync.engine import sync_once
    from brandmind.sync.snapshot import bootstrap as install_snapshot

    reports = []
    with open_store() as mem:
        booted = False
        for rem in _remotes(mem.store, remote):
            t0 = time.perf_counter()
            boot = None
            if not booted and should_bootstrap(mem.store, rem, pull=pull, forced=bootstrap):
                booted = True  # one snapshot per command: the first op-log remote's
                boot = install_snapshot(mem.store, rem, forced=bootstrap)
                if boot is None and bootstrap:
                    info(f"{rem.name}: no snapshot on the remote; replaying every op")
            report = dict(sync_once(mem.store, rem, push=push, pull=pull))
            report = {"remote": rem.name, "url": rem.cfg.url(), **report,
                      "seconds": round(time.perf_counter() - t0, 3)}
            if boot is not None:
                report["bootstrap"] = boot
            reports.append(report)
    out = {"ok": not any(r.get("errors") for r in reports), "remotes": reports}
    if wants_json(as_json):
        emit_json(out)
    else:
        for r in reports:
            pushed = sum((r.get("pushed") or {}).values())
            pulled = sum((r.get("pulled") or {}).values()) + int(r.get("released") or 0)
            info(f"{r['remote']}: pushed {pushed} op(s), pulled {pulled} op(s) in {r['seconds']:.2f} s"
                 + (f"; {len(r['errors'])} error(s)" if r.get("errors") else ""))
            for note in r.get("notes") or []:  # what a mirror could not do (e.g. Zep keeps forgotten turns)
                info(f"{r['remote']}: note: {note}")
    failed = [(r["remote"], e) for r in reports for e in (r.get("errors") or [])]
    if reports and not failed:  # a note on stderr, piped or not (the JSON has them too)
        _warn_held(reports[-1].get("held") or [], mem.config.sync_max_skew_ms)
    if failed:
        name, err = failed[0]
        message, hint = _error_text(err)
        raise BMError(f"sync with {name} failed: {message}",
                      hint=hint or "nothing is lost (the local op log keeps every op); see `bm sync status`")


@sync_app.command("snapshot")
def sync_snapshot(remote: RemoteOpt = None, as_json: JsonOpt = False) -> None:
    """Upload a snapshot of this store's state (encrypted), so a new device starts from it
    (`bm sync now` on an empty store) instead of replaying every op.  Sync first: the
    snapshot holds what this device has.

    \b
    Examples:
      bm sync now && bm sync snapshot -r origin
    """
    from brandmind.sync import snapshot

    with open_store() as mem:
        made = [{"remote": rem.name, **snapshot.create(mem.store, rem)} for rem in _remotes(mem.store, remote)]
    if wants_json(as_json):
        emit_json(made)
    else:
        for m in made:
            info(f"{m['remote']}: snapshot of {m['ops']:,} ops ({m['bytes'] / 1e6:.1f} MB) in {m['seconds']:.2f} s")


def _object_remotes(store: Any, name: str | None) -> list[Any]:
    """The S3 remotes (those that keep the op log) among ``_remotes``; none is a usage error."""
    from brandmind.errors import UsageError
    from brandmind.sync.remote import ObjectRemote

    found = [r for r in _remotes(store, name) if isinstance(r, ObjectRemote)]
    if not found:
        raise UsageError("no S3 remote keeps this store's op log", hint="add one: `bm remote add s3 --bucket BUCKET`")
    return found


@sync_app.command("compact")
def sync_compact(remote: RemoteOpt = None, as_json: JsonOpt = False) -> None:
    """Sync, then fold the remote's op segments into a snapshot of this store and delete them,
    with older snapshots and unused blobs: what was forgotten stops existing on the remote.
    Devices that were offline since read the ops they lack from that snapshot. The daemon
    does this every sync_compact_interval seconds (one device per interval).

    \b
    Examples:
      bm sync compact                  # every S3 remote
      bm sync compact -r origin --json
    """
    from brandmind.errors import BMError
    from brandmind.sync.compact import compact
    from brandmind.sync.engine import sync_once

    done = []
    with open_store() as mem:
        for rem in _object_remotes(mem.store, remote):
            report = sync_once(mem.store, rem)
            if report["errors"]:
                message, hint = _error_text(report["errors"][0])
                raise BMError(f"sync with {rem.name} failed, so it was not compacted: {message}", hint=hint)
            done.append({"remote": rem.name, **compact(mem.store, rem)})
    if wants_json(as_json):
        emit_json(done)
    for d in [] if wants_json(as_json) else done:
        info(f"{d['remote']}: " + (f"folded {d['segments_deleted']} segment(s) into a snapshot of {d['ops']:,} ops; "
                                   f"deleted {d['snapshots_deleted']} old snapshot(s), {d['blobs_deleted']} blob(s) "
                                   f"in {d['seconds']:.2f} s" if d["compacted"] else d["reason"]))


@sync_app.command("status")
def sync_status_cmd(remote: RemoteOpt = None, as_json: JsonOpt = False) -> None:
    """Pending ops per remote, the version vector, the last success and the last error
    (from this device's records and the daemon's, without contacting the remotes unless
    --remote is given).

    \b
    Examples:
      bm sync status
      bm sync status -r origin --json | jq .remotes    # asks origin too
    """
    from brandmind.sync.engine import sync_status

    with open_store(check_model=False) as mem:
        rem = _remotes(mem.store, remote)[0] if remote else None
        out = sync_status(mem.store, rem)
        if "daemon" not in out:  # what the daemon last did (brandmind.sync.daemon)
            from brandmind.sync.daemon import summary

            out = {**out, "daemon": summary(mem.store)}
    emit(out, as_json=as_json, jsonl=False, table=_status_table)


def _status_table(st: dict) -> Any:
    """`bm sync status` on a terminal: one row per remote."""
    from rich.table import Table

    vv = " ".join(f"{r}:{n}" for r, n in sorted((st.get("version_vector") or {}).items())) or "(empty)"
    t = Table(header_style="bold", title=f"bm sync · replica {st.get('replica')} · {st.get('ops', 0):,} ops",
              caption=f"version vector: {vv}")
    for col in ("remote", "pending", "incoming", "last success", "last error", "checked"):
        t.add_column(col, overflow="fold")
    for name, r in sorted((st.get("remotes") or {}).items()):
        ok = r.get("last_success") or {}
        err = r.get("last_error") or {}
        t.add_row(name, f"{r.get('pending_total', 0):,}", f"{sum((r.get('incoming') or {}).values()):,}",
                  f"{ok.get('at', '')} (+{ok.get('pushed', 0)}/-{ok.get('pulled', 0)})" if ok else "never",
                  f"{err.get('at', '')} {err.get('message', '')}".strip() if err else "",
                  r.get("checked", ""))
    if not st.get("remotes"):
        t.add_row("(none yet)", "", "", "", "", "")
    for h in st.get("held") or []:
        t.caption += (f"\nheld: {h['ops']:,} op(s) of replica {h['replica']} (seq {h['first_seq']}.."
                      f"{h['last_seq']}), stamped up to {h['ahead']} ahead of this device's clock")
    if st.get("held"):
        t.caption += "\n(applied once within sync_max_skew_ms; `bm sync accept` takes them now)"
    daemon = st.get("daemon") or {}
    if daemon:
        t.caption += ("; daemon: running, pid " + str(daemon.get("pid"))) if daemon.get("running") \
            else "; daemon: not running (`bm daemon start`)"
    return t


def _warn_held(held: list[dict], window_ms: int) -> None:
    """A note on stderr for ops set aside because another device's clock runs ahead."""
    from brandmind.clock import span

    for h in held:
        info(f"Warning: {h['ops']:,} op(s) of replica {h['replica']} are held: stamped up to {h['ahead']} "
             f"ahead of this device's clock (more than the {span(window_ms)} allowed); they are applied "
             "once within it, or now with `bm sync accept` (see `bm sync status`)")


@sync_app.command("accept")
def sync_accept(
    replica: Annotated[Optional[str], typer.Option("--replica", help="Only this replica's held ops (default: all).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Apply the ops held because they are stamped too far ahead (another device's clock runs
    ahead; `bm sync status` lists them), without waiting until they are within sync_max_skew_ms.

    This device's clock (HLC) then moves past them: its own next ops are stamped as far ahead,
    and other devices hold those in turn. Prefer fixing the clock of the device that wrote
    them.

    \b
    Examples:
      bm sync accept                       # every replica's held ops
      bm sync accept --replica r_01m8...   # one replica's (ids in bm sync status)
    """
    from brandmind.clock import span
    from brandmind.errors import NotFound
    from brandmind.replication import accept_held, held_summary

    with open_store() as mem:
        held = held_summary(mem.log)
        if replica is not None:
            held = [h for h in held if h["replica"] == replica]
            if not held:
                others = ", ".join(h["replica"] for h in held_summary(mem.log)) or "none"
                raise NotFound(f"no ops of replica {replica!r} are held",
                               hint=f"replicas with held ops: {others} (`bm sync status`)")
        jump = max((h["ahead_ms"] for h in held), default=0)
        if jump > 0:
            info(f"Warning: this device's clock (HLC) jumps {span(jump)} ahead to take these ops: its own "
                 "next ops are stamped that far ahead too, and other devices hold them until their clocks "
                 "catch up (or they accept them)")
        n = accept_held(mem.store, replica)
        out = {"accepted": n, "replicas": [h["replica"] for h in held], "hlc_jump_ms": max(0, jump)}
    if wants_json(as_json):
        emit_json(out)
    elif n:
        info(f"accepted {n:,} held op(s) of {', '.join(out['replicas'])}")
    else:
        info("nothing is held")


# -- bm sync key ----------------------------------------------------------------------------------------
@key_app.command("show")
def key_show(as_json: JsonOpt = False) -> None:
    """The key id and fingerprint of this store's sync key (made on first use; never the key itself).

    \b
    Examples:
      bm sync key show      # compare the fingerprint on each device
    """
    from brandmind.crypto import Keyring

    ring = Keyring(_data_dir())
    created = not ring.has_key()
    ring.active()
    out = {**ring.describe(), "created": created}
    emit(out, as_json=as_json, jsonl=False, table=lambda o: kv_table(
        {k: v for k, v in o.items() if k != "keys"}, title="sync key"))


@key_app.command("export")
def key_export(
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="File to write (mode 0600); default stdout.")] = None,
) -> None:
    """Print this store's sync key (to add a device: `bm sync key import FILE` there).
    The key itself, as text, piped or not (it is what `import` reads).

    \b
    Examples:
      bm sync key export -o bm.key     # mode 0600; copy it to the new device
      ssh laptop bm sync key export | bm sync key import -
    """
    import os

    from brandmind.errors import InvalidInput
    from brandmind.crypto import Keyring

    key = Keyring(_data_dir()).active()
    text = key.export_text() + "\n"
    sys.stderr.write(f"Warning: this key ({key.key_id}) decrypts everything this store syncs; "
                     "keep it secret and delete copies you no longer need.\n")
    if output is None:
        sys.stdout.write(text)
        return
    try:
        fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise InvalidInput(f"cannot write {output}: {exc.strerror or exc}",
                           hint="give a path in an existing, writable directory, or omit -o for stdout") from None
    info(f"sync key {key.key_id} written to {output}")


@key_app.command("rotate")
def key_rotate(remote: RemoteOpt = None, as_json: JsonOpt = False) -> None:
    """Make a new sync key and re-encrypt everything the remote keeps with it (here: the server
    sees only encrypted bytes). Then `bm sync key export` and `bm sync key import` it on the
    other devices: until they do, their sync stops with an error naming that fix.

    \b
    Examples:
      bm sync key rotate && bm sync key export -o bm.key
    """
    from brandmind.sync.remote import ObjectRemote
    from brandmind.sync.remotes import open_all
    from brandmind.sync.rotate import rotate_all
    from brandmind.workspace_s3 import s3_workspace

    with open_store() as mem:
        if remote or not s3_workspace(mem.store):
            remotes = _object_remotes(mem.store, remote)
        else:  # an S3 workspace is sealed with the same key: it is rotated even with no S3 remote
            remotes = [r for r in open_all(mem.store) if isinstance(r, ObjectRemote)]
        out = rotate_all(mem.store, remotes)
    if wants_json(as_json):
        emit_json(out)
        return
    for o in out:
        info(f"{o['remote'] or 'workspace on S3'}: re-encrypted {o['resealed'] + o['renamed_blobs']} object(s) "
             f"with the new key {o['key_id']}")
    info("run `bm sync key export -o bm.key` here and `bm sync key import bm.key` on every other device")


@key_app.command("import")
def key_import(
    path: Annotated[str, typer.Argument(help="A file written by `bm sync key export`, or - for stdin.")],
    as_json: JsonOpt = False,
) -> None:
    """Use the sync key of the other devices of this store (it becomes the active key;
    keys this store had stay, so what they wrote stays readable).

    \b
    Examples:
      bm sync key import bm.key        # from `bm sync key export -o bm.key`
      ssh laptop bm sync key export | bm sync key import -
    """
    from brandmind.errors import NotFound
    from brandmind.crypto import Keyring

    if path == "-":
        text = sys.stdin.read()
    else:
        p = Path(path)
        if not p.is_file():
            raise NotFound(f"no such file: {path}", hint="give the file written by `bm sync key export`, or -")
        text = p.read_text(encoding="utf-8", errors="replace")
    ring = Keyring(_data_dir())
    key, changed = ring.import_key(text)
    out = {"key_id": key.key_id, "fingerprint": key.fingerprint, "changed": changed, "file": str(ring.path)}
    if wants_json(as_json):
        emit_json(out)
    else:
        info(f"sync key {key.key_id} ({key.fingerprint}) " + ("imported; it is now this store's key"
                                                               if changed else "was already this store's key"))
