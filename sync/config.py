"""Sync remotes of a store: ``<data_dir>/remotes.toml`` (mode 0600).

::

    [remotes.origin]
    type = "s3"
    bucket = "my-bucket"
    prefix = "bm/laptop-and-desktop"      # optional; objects live under it
    endpoint_url = "http://127.0.0.1:8333" # optional: any S3-compatible server
    region = "eu-west-1"                   # optional
    profile = "work"                       # optional: a profile of ~/.aws/config
    # access_key_id / secret_access_key    # optional, hand-edited; otherwise the usual
    #                                      # boto3 chain (env, profile, SSO, instance role)
    # addressing_style = "path"            # path (default with endpoint_url) | virtual | auto

    [remotes.zep]                          # a mirror of the graph in Zep (sync/zep.py)
    type = "zep"
    base_url = "https://api.getzep.com/api/v4"   # optional: another Zep endpoint
    api_key_env = "ZEP_API_KEY"            # the NAME of the variable holding the key
    assist = true                          # recall asks it when local results run short
    timeout_ms = 700                       # remote-assisted recall budget

    [remotes.graph]                        # a self-hosted Graphiti on FalkorDB (sync/graphiti.py)
    type = "graphiti"
    host = "127.0.0.1"
    port = 6379
    username = "bm"                        # optional
    password_env = "FALKORDB_PASSWORD"     # optional: the NAME of the variable
    database = "bm"                        # optional

The file lives with the data, not in config.toml: a remote belongs to this store.  Secrets of
Zep and FalkorDB are never written here: only the names of the environment variables that
hold them.
"""
from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from brandmind.errors import ConfigError, InvalidInput, NotFound

REMOTES_FILE = "remotes.toml"
DEFAULT_NAME = "origin"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_STYLES = ("path", "virtual", "auto")
TYPES = ("s3", "zep", "graphiti")
ZEP_BASE_URL = "https://api.getzep.com/api/v4"
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


@dataclass(frozen=True)
class RemoteConfig:
    name: str
    type: str = "s3"
    bucket: str = ""
    prefix: str = ""
    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    addressing_style: str | None = None
    # zep / graphiti (mirror remotes)
    base_url: str | None = None
    api_key_env: str | None = None
    host: str | None = None
    port: int | None = None
    username: str | None = None
    password_env: str | None = None
    database: str | None = None
    assist: bool | None = None       # recall asks this remote when local results run short
    timeout_ms: int | None = None    # remote-assisted recall budget (default 700)

    def url(self) -> str:
        if self.type == "zep":
            return self.base_url or ZEP_BASE_URL
        if self.type == "graphiti":
            return f"falkordb://{self.host or '127.0.0.1'}:{self.port or 6379}/{self.database or ''}".rstrip("/")
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")

    @property
    def mirror(self) -> bool:
        """Zep and Graphiti hold the graph, not op streams (sync/mirror.py)."""
        return self.type in ("zep", "graphiti")

    def public(self) -> dict[str, Any]:
        """What `bm remote list` shows (never a secret)."""
        out = {k: v for k, v in asdict(self).items() if v not in (None, "") and k != "secret_access_key"}
        if self.secret_access_key:
            out["secret_access_key"] = "(set)"
        out["url"] = self.url()
        return out


def check_name(name: str) -> str:
    if not _NAME.match(name or ""):
        raise InvalidInput(f"bad remote name {name!r}",
                           hint="use letters, digits, '.', '_' or '-' (at most 64), e.g. origin")
    return name


def make_s3(name: str | None, *, bucket: str, prefix: str | None = None, endpoint_url: str | None = None,
            region: str | None = None, profile: str | None = None,
            addressing_style: str | None = None) -> RemoteConfig:
    name = check_name(name or DEFAULT_NAME)
    if not _BUCKET.match(bucket or "") or ".." in bucket:
        raise InvalidInput(f"bad bucket name {bucket!r}",
                           hint="S3 bucket names are 3-63 characters: lower-case letters, digits, '.' and '-'")
    prefix = (prefix or "").strip("/")
    if prefix and (any(part in ("", ".", "..") for part in prefix.split("/")) or "\\" in prefix):
        raise InvalidInput(f"bad prefix {prefix!r}", hint="use a path like team/bm (no empty, '.' or '..' parts)")
    if endpoint_url is not None and not re.match(r"^https?://[^/\s]+", endpoint_url):
        raise InvalidInput(f"bad endpoint URL {endpoint_url!r}",
                           hint="give http(s)://HOST[:PORT] of the S3-compatible server")
    if addressing_style is not None and addressing_style not in _STYLES:
        raise InvalidInput(f"bad addressing style {addressing_style!r}", hint="use path, virtual or auto")
    return RemoteConfig(name=name, type="s3", bucket=bucket, prefix=prefix,
                        endpoint_url=endpoint_url.rstrip("/") if endpoint_url else None,
                        region=region or None, profile=profile or None, addressing_style=addressing_style)


def _check_env(value: str | None, what: str) -> str | None:
    if value is not None and not _ENV.match(value):
        raise InvalidInput(f"bad environment variable name {value!r} for {what}",
                           hint="give the NAME of the variable that holds the secret (e.g. ZEP_API_KEY), "
                                "never the secret itself")
    return value


def _check_timeout(timeout_ms: int | None) -> int | None:
    if timeout_ms is not None and not 50 <= int(timeout_ms) <= 60_000:
        raise InvalidInput(f"bad timeout {timeout_ms} ms", hint="use 50..60000 ms (the default is 700)")
    return timeout_ms


def make_zep(name: str | None, *, base_url: str | None = None, api_key_env: str | None = None,
             assist: bool | None = None, timeout_ms: int | None = None) -> RemoteConfig:
    if base_url is not None and not re.match(r"^https?://[^/\s]+", base_url):
        raise InvalidInput(f"bad Zep URL {base_url!r}", hint=f"give http(s)://HOST[:PORT]/api/v4 (default {ZEP_BASE_URL})")
    return RemoteConfig(name=check_name(name or "zep"), type="zep",
                        base_url=base_url.rstrip("/") if base_url else None,
                        api_key_env=_check_env(api_key_env or "ZEP_API_KEY", "the Zep API key"),
                        assist=assist, timeout_ms=_check_timeout(timeout_ms))


def make_graphiti(name: str | None, *, host: str | None = None, port: int | None = None,
                  username: str | None = None, password_env: str | None = None, database: str | None = None,
                  assist: bool | None = None, timeout_ms: int | None = None) -> RemoteConfig:
    if host is not None and not re.match(r"^[A-Za-z0-9.:\[\]_-]{1,253}$", host):
        raise InvalidInput(f"bad host {host!r}", hint="give a host name or IP address, e.g. 127.0.0.1")
    if port is not None and not 1 <= int(port) <= 65535:
        raise InvalidInput(f"bad port {port}", hint="use 1..65535 (FalkorDB's default is 6379)")
    if database is not None and not re.match(r"^[A-Za-z0-9_-]{1,64}$", database):
        raise InvalidInput(f"bad database name {database!r}", hint="use letters, digits, '_' or '-'")
    return RemoteConfig(name=check_name(name or "graph"), type="graphiti", host=host or "127.0.0.1",
                        port=int(port) if port is not None else 6379, username=username or None,
                        password_env=_check_env(password_env, "the FalkorDB password"), database=database or None,
                        assist=assist, timeout_ms=_check_timeout(timeout_ms))


def secret(env_name: str | None, what: str, *, required: bool) -> str | None:
    """The secret held by environment variable ``env_name`` (read at use time, never stored)."""
    if not env_name:
        return None
    value = os.environ.get(env_name)
    if not value and required:
        raise ConfigError(f"{what} is not set: the environment variable {env_name} is empty or missing",
                          hint=f"export {env_name}=... in the shell (or the daemon's service environment)")
    return value or None


def remotes_path(data_dir: Path) -> Path:
    return Path(data_dir) / REMOTES_FILE


def load_remotes(data_dir: Path) -> dict[str, RemoteConfig]:
    path = remotes_path(data_dir)
    if not path.exists():
        return {}
    import tomllib

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}", hint="fix or delete the file, then `bm remote add`") from None
    known = {f.name for f in fields(RemoteConfig)} - {"name"}
    out: dict[str, RemoteConfig] = {}
    for name, entry in (data.get("remotes") or {}).items():
        if not isinstance(entry, dict):
            raise ConfigError(f"{path}: [remotes.{name}] is not a table", hint="fix or delete the file")
        unknown = set(entry) - known
        if unknown:
            raise ConfigError(f"{path}: unknown key(s) {', '.join(sorted(unknown))} in [remotes.{name}]",
                              hint="known keys: " + ", ".join(sorted(known)))
        kind = entry.get("type", "s3")
        if kind not in TYPES:
            raise ConfigError(f"{path}: remote {name!r} has type {kind!r}; this bm knows {', '.join(TYPES)}",
                              hint="upgrade bm, or remove the remote with `bm remote remove`")
        for key in ("api_key_env", "password_env"):
            if entry.get(key) is not None and not _ENV.match(str(entry[key])):
                raise ConfigError(f"{path}: {key} of remote {name!r} is not an environment variable name",
                                  hint="put the NAME of the variable there (the secret stays in the environment)")
        if kind == "s3" and not entry.get("bucket"):
            raise ConfigError(f"{path}: remote {name!r} has no bucket", hint="`bm remote add s3 NAME --bucket B`")
        out[name] = RemoteConfig(name=name, **{k: v for k, v in entry.items()})
    return out


def _save(data_dir: Path, remotes: dict[str, RemoteConfig]) -> None:
    import tomli_w

    body = {"remotes": {name: {k: v for k, v in asdict(r).items() if k != "name" and v not in (None, "")}
                        for name, r in sorted(remotes.items())}}
    path = remotes_path(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # may hold credentials
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write("# bm sync remotes of this store (`bm remote add|list|remove`)\n")
        fh.write(tomli_w.dumps(body))
    os.replace(tmp, path)


def add_remote(data_dir: Path, remote: RemoteConfig, *, replace: bool = False) -> RemoteConfig:
    remotes = load_remotes(data_dir)
    if remote.name in remotes and not replace and remotes[remote.name] != remote:
        raise InvalidInput(f"remote {remote.name!r} already exists ({remotes[remote.name].url()})",
                           hint=f"pick another name, `bm remote remove {remote.name}` first, or pass --replace")
    remotes[remote.name] = remote
    _save(data_dir, remotes)
    return remote


def remove_remote(data_dir: Path, name: str) -> RemoteConfig:
    remotes = load_remotes(data_dir)
    if name not in remotes:
        raise NotFound(f"no remote named {name!r}", hint=_known(remotes))
    gone = remotes.pop(name)
    _save(data_dir, remotes)
    return gone


def get_remote(data_dir: Path, name: str | None) -> RemoteConfig:
    """The remote called ``name``; without a name, the only remote (or ``origin``)."""
    remotes = load_remotes(data_dir)
    if name is not None:
        if name not in remotes:
            raise NotFound(f"no remote named {name!r}", hint=_known(remotes))
        return remotes[name]
    if not remotes:
        raise NotFound("this store has no sync remote",
                       hint="add one: `bm remote add s3 --bucket BUCKET [--endpoint-url URL]`")
    if len(remotes) == 1:
        return next(iter(remotes.values()))
    if DEFAULT_NAME in remotes:
        return remotes[DEFAULT_NAME]
    raise InvalidInput("this store has several remotes: " + ", ".join(sorted(remotes)),
                       hint="name one with --remote NAME")


def _known(remotes: dict[str, RemoteConfig]) -> str:
    if not remotes:
        return "add one: `bm remote add s3 --bucket BUCKET`"
    return "known remotes: " + ", ".join(sorted(remotes)) + " (`bm remote list`)"
