"""Run the sync daemon as a user service: a systemd user unit or a launchd agent.

``bm daemon install`` writes one of them (chosen by platform: launchd on macOS, systemd
elsewhere; ``--systemd`` / ``--launchd`` force one), ``bm daemon uninstall`` removes it.
Both run ``<this python> -m brandmind.cli.app daemon run`` in the foreground (the service
manager supervises it), with ``BM_HOME`` baked in when it is set, restart it on failure,
and stop it with SIGTERM, giving it longer than the daemon's own stop bound.

* systemd: ``$XDG_CONFIG_HOME/systemd/user/bm-daemon.service`` (default
  ``~/.config/systemd/user``); enable with ``systemctl --user daemon-reload &&
  systemctl --user enable --now bm-daemon.service``.
* launchd: ``~/Library/LaunchAgents/io.brandmind.bm-daemon.plist``; load with
  ``launchctl bootstrap gui/$(id -u) PATH``.

Rendering is pure (:func:`systemd_unit`, :func:`launchd_plist`); only :func:`install` and
:func:`uninstall` touch files.  Nothing here runs systemctl or launchctl: the commands to
run are returned (and printed by the CLI).
"""
from __future__ import annotations

import os
import plistlib
import sys
from pathlib import Path
from typing import Any

from brandmind.errors import BMError

from .daemon import STOP_GRACE

UNIT_NAME = "bm-daemon"
LAUNCHD_LABEL = "io.brandmind.bm-daemon"


class ServiceError(BMError):
    """A service file cannot be written or removed."""


def default_kind(platform: str | None = None) -> str:
    return "launchd" if (platform or sys.platform) == "darwin" else "systemd"


def daemon_command(python: str | None = None) -> list[str]:
    """The daemon's command line: this interpreter (so the service sees the same install,
    venv included; not the `bm` script, which another package also installs)."""
    return [python or sys.executable, "-m", "brandmind.cli.app", "daemon", "run"]


def service_env(bm_home: str | None = None) -> dict[str, str]:
    home = bm_home if bm_home is not None else os.environ.get("BM_HOME")
    env = {"PYTHONUNBUFFERED": "1"}
    if home:
        env["BM_HOME"] = str(Path(home).expanduser().resolve())
    return env


# ---------------------------------------------------------------------------- systemd
def _systemd_quote(word: str) -> str:
    """One word of a systemd command line or assignment: specifiers (%) and variables ($)
    escaped; quoted when it holds blanks, quotes or backslashes."""
    word = word.replace("%", "%%").replace("$", "$$")
    if word and not any(c in word for c in ' \t"\'\\;'):
        return word
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


def systemd_unit(command: list[str] | None = None, env: dict[str, str] | None = None,
                 *, description_store: str | None = None) -> str:
    command = command or daemon_command()
    env = service_env() if env is None else env
    about = f" for {description_store}" if description_store else ""
    lines = [
        "# Written by `bm daemon install`; remove with `bm daemon uninstall`.",
        "[Unit]",
        f"Description=bm sync daemon{about}".replace("%", "%%"),
        "",
        "[Service]",
        "Type=simple",
        "ExecStart=" + " ".join(_systemd_quote(w) for w in command),
    ]
    for key, value in sorted(env.items()):
        lines.append("Environment=" + _systemd_quote(f"{key}={value}"))
    lines += [
        "Restart=on-failure",
        "RestartSec=30",
        "KillMode=mixed",
        "KillSignal=SIGTERM",
        f"TimeoutStopSec={int(STOP_GRACE) + 10}",
        "Nice=10",
        "",
        "[Install]",
        "WantedBy=default.target",
        "",
    ]
    return "\n".join(lines)


def systemd_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "systemd" / "user"


# ---------------------------------------------------------------------------- launchd
def launchd_plist(command: list[str] | None = None, env: dict[str, str] | None = None,
                  *, log_dir: str | None = None, label: str = LAUNCHD_LABEL) -> bytes:
    command = command or daemon_command()
    env = service_env() if env is None else env
    doc: dict[str, Any] = {
        "Label": label,
        "ProgramArguments": list(command),
        "EnvironmentVariables": dict(env),
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},  # restart after a crash, not after a clean stop
        "ThrottleInterval": 30,
        "ExitTimeOut": int(STOP_GRACE) + 10,
        "ProcessType": "Background",
        "WorkingDirectory": "/",
    }
    if log_dir:
        doc["StandardOutPath"] = str(Path(log_dir) / "launchd.out")
        doc["StandardErrorPath"] = str(Path(log_dir) / "launchd.err")
    return plistlib.dumps(doc, sort_keys=True)


def launchd_dir() -> Path:
    return Path.home() / "Library" / "LaunchAgents"


# ---------------------------------------------------------------------------- files
def render(kind: str, *, name: str = UNIT_NAME, paths: Any = None) -> tuple[Path, bytes, list[str]]:
    """(where the file goes, its bytes, the commands that activate it) for ``kind``."""
    from brandmind.config import resolve_paths

    paths = paths or resolve_paths()
    if kind == "systemd":
        target = systemd_dir() / f"{name}.service"
        body = systemd_unit(description_store=str(paths.data_dir)).encode()
        after = ["systemctl --user daemon-reload", f"systemctl --user enable --now {name}.service"]
    elif kind == "launchd":
        label = LAUNCHD_LABEL if name == UNIT_NAME else name
        target = launchd_dir() / f"{label}.plist"
        body = launchd_plist(log_dir=str(paths.state_dir), label=label)
        after = [f"launchctl bootstrap gui/$(id -u) {target}"]
    else:  # pragma: no cover - the CLI only passes the two
        raise ServiceError(f"unknown service kind {kind!r}", hint="use --systemd or --launchd")
    return target, body, after


def install(kind: str, *, name: str = UNIT_NAME, force: bool = False) -> dict:
    """Write the unit / plist; returns {"path", "kind", "then": [commands]}.  An existing
    file with other content (e.g. another store's daemon) is kept unless ``force``."""
    path, body, after = render(kind, name=name)
    if path.exists() and not force:
        try:
            current = path.read_bytes()
        except OSError:
            current = b""
        if current != body:
            raise ServiceError(f"{path} already exists with other settings (another store or bm install?)",
                               hint="pass --force to replace it, or --name NAME to install a second daemon")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(body)
        os.replace(tmp, path)
    except OSError as exc:
        raise ServiceError(f"cannot write {path}: {exc.strerror or exc}",
                           hint="check the directory's permissions") from None
    return {"installed": True, "kind": kind, "path": str(path), "then": after}


def uninstall(kind: str, *, name: str = UNIT_NAME) -> dict:
    """Remove the unit / plist (and systemd's ``default.target.wants`` link to it).  When
    the file is this store's (same content as ``install`` would write), the store's running
    daemon is stopped first (it exits 0, so the service manager does not restart it).
    Returns {"removed", "path", "stopped_pid", "then": [commands to tell the manager]}."""
    from .daemon import stop

    path, body, _ = render(kind, name=name)
    existed = path.exists()
    stopped = None
    if existed:
        try:
            ours = path.read_bytes() == body
        except OSError:
            ours = False
        if ours:
            stopped = stop().get("pid")
        links = [path.parent / "default.target.wants" / path.name] if kind == "systemd" else []
        try:
            for link in links:
                if link.is_symlink():
                    link.unlink()
            path.unlink()
        except OSError as exc:
            raise ServiceError(f"cannot remove {path}: {exc.strerror or exc}",
                               hint="check the directory's permissions") from None
    if kind == "systemd":
        after = ["systemctl --user daemon-reload"]
    else:
        after = [f"launchctl bootout gui/$(id -u)/{path.stem}"]
    return {"removed": existed, "kind": kind, "path": str(path), "stopped_pid": stopped, "then": after}
