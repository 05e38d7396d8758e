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

The file lives with the data, not in config.toml: a remote belongs to this store.
"""
from __future__ import annotations

import os
import re
import tomllib
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from brandmind.errors import ConfigError, InvalidInput, NotFound

REMOTES_FILE = "remotes.toml"
DEFAULT_NAME = "origin"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_STYLES = ("path", "virtual", "auto")


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

    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")

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


def remotes_path(data_dir: Path) -> Path:
    return Path(data_dir) / REMOTES_FILE


def load_remotes(data_dir: Path) -> dict[str, RemoteConfig]:
    path = remotes_path(data_dir)
    if not path.exists():
        return {}
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
        if entry.get("type", "s3") != "s3":
            raise ConfigError(f"{path}: remote {name!r} has type {entry.get('type')!r}; this bm knows s3",
                              hint="upgrade bm, or remove the remote with `bm remote remove`")
        if not entry.get("bucket"):
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
