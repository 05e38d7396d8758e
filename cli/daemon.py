"""bm daemon run|start|stop|status|install|uninstall: the background sync of this store."""
from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from .common import JsonOpt
from .output import console, emit_json, info, kv_table, wants_json

daemon_app = typer.Typer(
    help="The sync daemon: pushes this device's ops and pulls the others' on a schedule "
         "(config: sync_push_interval, sync_push_after_ops, sync_pull_interval, sync_backoff_max).",
    no_args_is_help=True,
)

KindOpt = Annotated[Optional[bool], typer.Option(
    "--systemd/--launchd", help="Service manager (default: launchd on macOS, systemd elsewhere).",
    show_default=False)]
NameOpt = Annotated[str, typer.Option("--name", help="Unit / agent name (to run daemons of several stores).")]


def _kind(systemd: Optional[bool]) -> str:
    from brandmind.sync.service import default_kind

    if systemd is None:
        return default_kind()
    return "systemd" if systemd else "launchd"


@daemon_app.command()
def run(
    detached: Annotated[bool, typer.Option("--detached", hidden=True,
                                           help="Log to the file only (used by `bm daemon start`).")] = False,
) -> None:
    """Run the daemon in the foreground until Ctrl-C / SIGTERM (which let the current step finish).

    \b
    Examples:
      bm daemon run                        # logs to stderr too
      BM_HOME=~/work-store bm daemon run   # another store's daemon
    """
    from brandmind.sync import daemon

    from .resident import start_services

    code = daemon.run(to_stderr=not detached, services=start_services)
    if code:
        raise typer.Exit(code)


@daemon_app.command()
def start(as_json: JsonOpt = False) -> None:
    """Start the daemon in the background; returns once it runs.

    \b
    Examples:
      bm daemon start && bm daemon status
    """
    from brandmind.sync import daemon

    out = daemon.start()
    if wants_json(as_json):
        emit_json(out)
    else:
        info(f"bm daemon started (pid {out['pid']}); log: {out['log']}")


@daemon_app.command()
def stop(as_json: JsonOpt = False) -> None:
    """Stop the daemon (SIGTERM; it finishes its current step) and wait until it has exited.

    \b
    Examples:
      bm daemon stop
    """
    from brandmind.sync import daemon

    out = daemon.stop()
    if wants_json(as_json):
        emit_json(out)
    elif out["stopped"]:
        info(f"bm daemon stopped (pid {out['pid']})")
    else:
        info("no bm daemon is running for this store")


@daemon_app.command()
def status(as_json: JsonOpt = False) -> None:
    """Is the daemon running; its pid, uptime, last push and pull, last error, next tick (JSON when piped).

    \b
    Examples:
      bm daemon status
      bm daemon status --json | jq .running
    """
    from brandmind.sync import daemon

    st = daemon.state()
    if st["running"]:
        from .client import NoDaemon, daemon_status

        try:
            st["serving"] = daemon_status()
        except NoDaemon:
            st["serving"] = None
    if wants_json(as_json):
        emit_json(st)
        return
    console().print(kv_table(_human(st), title="bm daemon"))


def _human(st: dict) -> dict:
    def when(item: object) -> str:
        if not item:
            return "-"
        if isinstance(item, dict):
            extra = f" ({item['ops']} ops)" if "ops" in item else ""
            return f"{item.get('at')}{extra}" if "at" in item else str(item)
        return str(item)

    rows = {"running": "yes" if st["running"] else "no"}
    if st.get("pid"):
        rows["pid"] = str(st["pid"])
    if st.get("status"):
        rows["status"] = st["status"]
    if st.get("uptime_s") is not None:
        rows["uptime"] = _duration(st["uptime_s"])
    rows["last push"] = when(st.get("last_push"))
    rows["last pull"] = when(st.get("last_pull"))
    err = st.get("last_error")
    rows["last error"] = f"{err['at']}: {err['message']}" if isinstance(err, dict) else "-"
    if st["running"]:
        rows["next tick"] = when(st.get("next_tick_at"))
        rows["next push"] = when(st.get("next_push_at"))
        rows["next pull"] = when(st.get("next_pull_at"))
        if st.get("retry_at"):
            rows["backing off until"] = st["retry_at"]
    serving = st.get("serving")
    if serving:
        rows["socket"] = serving["socket"]
        rows["requests"] = f"{serving['served']} served ({serving['ran_in_client']} ran in the client)"
        worker = serving.get("worker") or {}
        rows["backlog"] = (f"{worker.get('vectors_pending', 0)} vectors, {worker.get('jobs_queued', 0)} "
                           f"extractions waiting; {worker.get('embedded', 0)} embedded since start")
    rows["log"] = st["log"]
    return rows


def _duration(seconds: float) -> str:
    s = int(seconds)
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h {m:02d}m {s:02d}s" if h else f"{m}m {s:02d}s"


@daemon_app.command()
def install(
    systemd: KindOpt = None,
    name: NameOpt = "bm-daemon",
    print_only: Annotated[bool, typer.Option("--print", help="Print the unit / plist; write nothing.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing file with other settings.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Write a systemd user unit (or launchd agent) that runs `bm daemon run`, BM_HOME baked in when set.

    \b
    Examples:
      bm daemon install --print                # see the unit first
      bm daemon install                        # then run the commands it prints
      BM_HOME=~/work-store bm daemon install --name bm-work   # a second store
    """
    from brandmind.sync import service

    kind = _kind(systemd)
    if print_only:
        _, body, _ = service.render(kind, name=name)
        sys.stdout.write(body.decode())
        return
    out = service.install(kind, name=name, force=force)
    if wants_json(as_json):
        emit_json(out)
    else:
        info(f"wrote {out['path']}; to enable it run:\n  " + "\n  ".join(out["then"]))


@daemon_app.command()
def uninstall(
    systemd: KindOpt = None,
    name: NameOpt = "bm-daemon",
    as_json: JsonOpt = False,
) -> None:
    """Remove the unit / plist written by `bm daemon install`.

    \b
    Examples:
      bm daemon uninstall
      bm daemon uninstall --name bm-work
    """
    from brandmind.sync import service

    out = service.uninstall(_kind(systemd), name=name)
    if wants_json(as_json):
        emit_json(out)
    elif out["removed"]:
        stopped = f" (stopped the daemon, pid {out['stopped_pid']})" if out["stopped_pid"] else ""
        info(f"removed {out['path']}{stopped}; to tell the service manager run:\n  " + "\n  ".join(out["then"]))
    else:
        info(f"nothing to remove: {out['path']} does not exist")
