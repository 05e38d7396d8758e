"""Where bm keeps things and how it is configured.

Resolution, first match wins:

* ``BM_HOME=DIR`` puts a store in one directory: ``DIR/config.toml``,
  ``DIR/data`` (the store), ``DIR/state`` (the sync daemon's logs).
* otherwise the XDG base directories: ``$XDG_CONFIG_HOME/brandmind/config.toml``,
  ``$XDG_DATA_HOME/brandmind`` and ``$XDG_STATE_HOME/brandmind`` (with the usual
  ``~/.config``, ``~/.local/share`` and ``~/.local/state`` defaults).

The built embedding model is not part of a store: every store of a user shares one
cache, ``BM_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/brandmind`` (``~/.cache/brandmind``),
whatever ``BM_HOME`` says, so a new store costs milliseconds, not a model build.

Settings come from the defaults below, then the TOML file, then ``BM_<KEY>``
environment variables (``BM_EMBEDDER=hash``), then explicit arguments.
Nothing is resolved at import time.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .errors import ConfigError

DEFAULTS: dict[str, Any] = {
    # embedder: local (embedded all-MiniLM-L6-v2), ollama, or hash (tests only)
    "embedder": "local",
    # local model variant: int8s (static int8, the default), int8 (dynamic int8) or fp32 (exact, ~2.5x slower)
    "local_variant": "int8s",
    "ollama_host": "http://127.0.0.1:11434",
    "ollama_model": "nomic-embed-text",
    # providers (README "Providers"): an OpenAI-compatible embeddings endpoint (API key from
    # BM_OPENAI_API_KEY or OPENAI_API_KEY) and the Hugging Face Inference API (BM_HF_TOKEN or HF_TOKEN)
    "openai_base_url": "https://api.openai.com/v1",
    "openai_model": "text-embedding-3-small",
    "hf_base_url": "https://router.huggingface.co/hf-inference",
    "hf_model": "sentence-transformers/all-MiniLM-L6-v2",
    # default owner of memories and beads when --user is not given
    "user": "default",
    # beads whose content is larger than this many bytes go to the blob store
    "blob_threshold": 65536,
    # a memory's text may not be longer than this many characters
    "max_memory_chars": 16000,
    # the workspace (`bm fs`): local (<data_dir>/workspace) or s3://BUCKET[/PREFIX] (brandmind/workspace_s3.py);
    # its S3 endpoint (any S3-compatible server; empty: AWS), region and ~/.aws profile (empty: the usual chain)
    "workspace": "local",
    "workspace_endpoint_url": "",
    "workspace_region": "",
    "workspace_profile": "",
    # recall: how much each signal counts (see brandmind/recall.py); 0 turns a signal off
    "weight_vector": 1.0,
    "weight_keyword": 0.4,
    "weight_speaker": 0.5,
    "weight_neighbor": 0.3,
    "weight_episode": 0.5,
    "weight_graph": 0.3,
    "weight_time": 0.3,
    "weight_dated": 0.1,
    "weight_asks": 0.7,
    "weight_recency": 0.0,
    "weight_importance": 0.1,
    # how often and how lately recall returned a memory (counted on this device while it is on: brandmind/expiry.py)
    "weight_access": 0.0,
    "recency_half_life_days": 30.0,
    # recall with --agent: that agent's own memories and the user's global ones, merged
    "recall_agent_k": 5,
    "recall_global_k": 3,
    # ingest: a pause longer than this starts a new episode of a conversation thread
    "episode_gap_minutes": 30,
    # fact extractor for --extract: rules (offline, the default) or llm (a chat model, see llm_provider)
    "extractor": "rules",
    # the Ollama chat model of the llm extractor and arbiter
    "llm_model": "llama3.1:8b",
    # where the llm extractor and arbiter chat: ollama (at ollama_host) or openai, any OpenAI-compatible
    # chat endpoint at llm_base_url (API key from BM_LLM_API_KEY, OPENROUTER_API_KEY or OPENAI_API_KEY)
    "llm_provider": "ollama",
    "llm_base_url": "https://openrouter.ai/api/v1",
    # cost caps of the llm extractor, per ingest / remember / extract call
    "llm_max_calls": 100,
    "llm_max_tokens": 200000,
    # sync daemon: push every N seconds or after N new local ops, pull every N seconds,
    # and back off (exponentially, full jitter) up to N seconds after failures
    "sync_push_interval": 60,
    "sync_push_after_ops": 100,
    "sync_pull_interval": 120,
    "sync_backoff_max": 900,
    # sync: refuse a remote op whose clock is more than this many ms ahead of local time
    "sync_max_skew_ms": 300000,
    # sync daemon: fold the remote's old op segments into a snapshot (and drop them, with the
    # text of what was forgotten) once every N seconds across all devices; 0: only `bm sync compact`
    "sync_compact_interval": 86400,
}

_FLOAT_KEYS = {k for k in DEFAULTS if k.startswith("weight_")} | {"recency_half_life_days"}
_COUNT_KEYS = {"recall_agent_k", "recall_global_k"}  # whole numbers, 0 allowed
_WORKSPACE_KEYS = {"workspace", "workspace_endpoint_url", "workspace_region", "workspace_profile"}
_INT_KEYS = {"blob_threshold", "max_memory_chars", "episode_gap_minutes", "llm_max_calls", "llm_max_tokens"}
_INT_KEYS |= {"sync_push_interval", "sync_push_after_ops", "sync_pull_interval", "sync_backoff_max"}
_INT_KEYS |= {"sync_max_skew_ms"}
_OFF_KEYS = {"sync_compact_interval"}  # whole numbers, 0 (off) allowed, no upper bound


@dataclass(frozen=True)
class Paths:
    config_file: Path
    data_dir: Path
    # the built embedding model, shared by every store (see cache_dir())
    cache_dir: Path
    # logs and run state of the sync daemon: BM_HOME/state, or $XDG_STATE_HOME/brandmind
    state_dir: Path

    @property
    def lmdb_dir(self) -> Path:
        return self.data_dir / "log.lmdb"

    @property
    def sqlite_file(self) -> Path:
        return self.data_dir / "memory.sqlite"

    @property
    def blob_dir(self) -> Path:
        return self.data_dir / "blobs"


def cache_dir() -> Path:
    """The model cache every store shares: ``BM_CACHE_DIR``, else ``$XDG_CACHE_HOME/brandmind``
    (default ``~/.cache/brandmind``).  Not under ``BM_HOME``: a store holds data, not the model."""
    env = os.environ
    if env.get("BM_CACHE_DIR"):
        return Path(env["BM_CACHE_DIR"]).expanduser().resolve()
    return Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "brandmind"


def resolve_paths(home: str | os.PathLike[str] | None = None) -> Paths:
    """Paths for ``home`` (or ``BM_HOME``, or the XDG directories)."""
    home = home if home is not None else os.environ.get("BM_HOME")
    if home:
        root = Path(home).expanduser().resolve()
        return Paths(root / "config.toml", root / "data", cache_dir(), root / "state")
    env = os.environ
    user_home = Path.home()
    config = Path(env.get("XDG_CONFIG_HOME") or user_home / ".config") / "brandmind"
    data = Path(env.get("XDG_DATA_HOME") or user_home / ".local" / "share") / "brandmind"
    state = Path(env.get("XDG_STATE_HOME") or user_home / ".local" / "state") / "brandmind"
    return Paths(config / "config.toml", data, cache_dir(), state)


@dataclass
class Config:
    embedder: str = DEFAULTS["embedder"]
    local_variant: str = DEFAULTS["local_variant"]
    ollama_host: str = DEFAULTS["ollama_host"]
    ollama_model: str = DEFAULTS["ollama_model"]
    openai_base_url: str = DEFAULTS["openai_base_url"]
    openai_model: str = DEFAULTS["openai_model"]
    hf_base_url: str = DEFAULTS["hf_base_url"]
    hf_model: str = DEFAULTS["hf_model"]
    user: str = DEFAULTS["user"]
    blob_threshold: int = DEFAULTS["blob_threshold"]
    max_memory_chars: int = DEFAULTS["max_memory_chars"]
    workspace: str = DEFAULTS["workspace"]
    workspace_endpoint_url: str = DEFAULTS["workspace_endpoint_url"]
    workspace_region: str = DEFAULTS["workspace_region"]
    workspace_profile: str = DEFAULTS["workspace_profile"]
    extractor: str = DEFAULTS["extractor"]
    llm_model: str = DEFAULTS["llm_model"]
    llm_provider: str = DEFAULTS["llm_provider"]
    llm_base_url: str = DEFAULTS["llm_base_url"]
    llm_max_calls: int = DEFAULTS["llm_max_calls"]
    llm_max_tokens: int = DEFAULTS["llm_max_tokens"]
    weight_vector: float = DEFAULTS["weight_vector"]
    weight_keyword: float = DEFAULTS["weight_keyword"]
    weight_speaker: float = DEFAULTS["weight_speaker"]
    weight_neighbor: float = DEFAULTS["weight_neighbor"]
    weight_episode: float = DEFAULTS["weight_episode"]
    weight_graph: float = DEFAULTS["weight_graph"]
    weight_time: float = DEFAULTS["weight_time"]
    weight_dated: float = DEFAULTS["weight_dated"]
    weight_asks: float = DEFAULTS["weight_asks"]
    weight_recency: float = DEFAULTS["weight_recency"]
    weight_importance: float = DEFAULTS["weight_importance"]
    weight_access: float = DEFAULTS["weight_access"]
    recency_half_life_days: float = DEFAULTS["recency_half_life_days"]
    recall_agent_k: int = DEFAULTS["recall_agent_k"]
    recall_global_k: int = DEFAULTS["recall_global_k"]
    episode_gap_minutes: int = DEFAULTS["episode_gap_minutes"]
    sync_push_interval: int = DEFAULTS["sync_push_interval"]
    sync_push_after_ops: int = DEFAULTS["sync_push_after_ops"]
    sync_pull_interval: int = DEFAULTS["sync_pull_interval"]
    sync_backoff_max: int = DEFAULTS["sync_backoff_max"]
    sync_max_skew_ms: int = DEFAULTS["sync_max_skew_ms"]
    sync_compact_interval: int = DEFAULTS["sync_compact_interval"]
    paths: Paths = field(default_factory=resolve_paths)

    @classmethod
    def load(cls, home: str | os.PathLike[str] | None = None, **overrides: Any) -> "Config":
        paths = resolve_paths(home)
        values: dict[str, Any] = dict(DEFAULTS)
        values.update(read_config_file(paths.config_file))
        for key in DEFAULTS:
            env = os.environ.get(f"BM_{key.upper()}")
            if env is not None:
                values[key] = env
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(paths=paths, **{k: coerce(k, v) for k, v in values.items()})

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "paths"}


def coerce(key: str, value: Any) -> Any:
    if key not in DEFAULTS:
        raise ConfigError(
            f"unknown config key {key!r}",
            hint="known keys: " + ", ".join(sorted(DEFAULTS)),
        )
    if key in _WORKSPACE_KEYS:
        return workspace_setting(key, value)
    if key in _FLOAT_KEYS:
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = float("nan")
        if not (number >= 0 and number != float("inf")) or (key == "recency_half_life_days" and number == 0):
            raise ConfigError(f"config key {key!r} must be a finite number of 0 or more"
                              f"{' (above 0)' if key == 'recency_half_life_days' else ''}, got {value!r}",
                              hint=f"e.g. `bm config set {key} {DEFAULTS[key]}`")
        return number
    if key in _COUNT_KEYS:
        try:
            count = int(value)
        except (TypeError, ValueError):
            count = -1
        if count < 0 or count > 1000 or isinstance(value, float) and value != count:
            raise ConfigError(f"config key {key!r} must be a whole number from 0 to 1000, got {value!r}",
                              hint=f"e.g. `bm config set {key} {DEFAULTS[key]}`")
        return count
    if key in _OFF_KEYS:
        number = int(value) if str(value).strip().isdigit() else -1
        if number < 0:
            raise ConfigError(f"config key {key!r} must be a whole number of seconds, 0 for off, got {value!r}",
                              hint=f"e.g. `bm config set {key} {DEFAULTS[key]}`")
        return number
    if key in _INT_KEYS:
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise ConfigError(
                f"config key {key!r} must be a whole number, got {value!r}",
                hint=f"e.g. `bm config set {key} {DEFAULTS[key]}`",
            ) from None
        if number <= 0:
            raise ConfigError(f"config key {key!r} must be positive, got {number}",
                              hint=f"e.g. `bm config set {key} {DEFAULTS[key]}`")
        return number
    if key in ("embedder", "llm_provider"):  # the providers (README "Providers")
        return embedder_chain(value) if key == "embedder" else llm_provider(value)
    if key == "extractor" and value not in ("rules", "llm"):
        raise ConfigError(f"unknown extractor {value!r}",
                          hint="use rules (offline, the default) or llm (Ollama chat): "
                               "`bm config set extractor rules`")
    if key == "local_variant" and value not in ("int8s", "int8", "fp32"):
        raise ConfigError(f"unknown local model variant {value!r}",
                          hint="use int8s (static int8, the default), int8 (dynamic int8) "
                               "or fp32 (exact, slower): `bm config set local_variant fp32`")
    if not isinstance(value, str) or not value:
        raise ConfigError(f"config key {key!r} must be a non-empty string",
                          hint=f"e.g. `bm config set {key} {DEFAULTS[key]}`")
    return value


EMBEDDERS = ("local", "ollama", "openai", "hf", "hash")


def embedder_chain(value: Any) -> str:
    """The ``embedder`` setting as stored: providers in order, comma-separated ("ollama,local")."""
    parts = value if isinstance(value, (list, tuple)) else str(value).split(",") if isinstance(value, str) else None
    names = [p.strip() if isinstance(p, str) else p for p in (parts or [])]
    bad = [n for n in names if n not in EMBEDDERS]
    if not names or bad or len(set(names)) != len(names):
        what = f"unknown embedder {bad[0]!r}" if bad else f"bad embedder chain {value!r}"
        raise ConfigError(what, hint=f"use one of {', '.join(EMBEDDERS)}, or a chain of them without repeats "
                                     "(e.g. `bm config set embedder ollama,local`)")
    return ",".join(names)


def llm_provider(value: Any) -> str:
    if value not in ("ollama", "openai"):
        raise ConfigError(f"unknown llm_provider {value!r}",
                          hint="use ollama or openai (any OpenAI-compatible chat endpoint at llm_base_url): "
                               "`bm config set llm_provider openai`")
    return value


def read_config_file(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    import tomllib  # here: most stores have no config file, and a cold `bm recall` reads none

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot parse {path}: {exc}",
                          hint="fix the file or delete it to go back to the defaults") from None
    unknown = sorted(set(data) - set(DEFAULTS))
    if unknown:
        raise ConfigError(f"unknown key(s) in {path}: {', '.join(unknown)}",
                          hint="known keys: " + ", ".join(sorted(DEFAULTS)))
    return data


def write_config_value(paths: Paths, key: str, value: Any) -> Any:
    """Validate and store ``key = value`` in the TOML file; returns the stored value."""
    import tomli_w

    value = coerce(key, value)
    data = read_config_file(paths.config_file)
    data[key] = value
    paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = paths.config_file.with_suffix(".toml.tmp")
    tmp.write_text(tomli_w.dumps(data), encoding="utf-8")
    os.replace(tmp, paths.config_file)
    return value


_WORKSPACE_FORMS = {
    "workspace": (r"local|s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\\\s]*)?",
                  "local, or s3://BUCKET[/PREFIX], e.g. `bm config set workspace s3://my-bucket/bm`"),
    "workspace_endpoint_url": (r"(https?://[^/\s]+/?)?", "http(s)://HOST[:PORT] of an S3-compatible server, or empty for AWS"),
    "workspace_region": (r"[a-z0-9-]{0,40}", "an S3 region such as eu-west-1, or empty"),
    "workspace_profile": (r"[^\s]{0,128}", "the name of a profile in ~/.aws/config, or empty"),
}


def workspace_setting(key: str, value: Any) -> str:
    """A checked workspace setting (brandmind/workspace_s3.py); the optional ones may be empty."""
    form, hint = _WORKSPACE_FORMS[key]
    text = value.strip() if isinstance(value, str) else ""
    ok = isinstance(value, str) and re.fullmatch(form, text) is not None
    if ok and text.startswith("s3://"):
        bucket, _, prefix = text[len("s3://"):].partition("/")
        parts = prefix.strip("/").split("/")
        ok = ".." not in bucket and (not prefix.strip("/") or all(p not in ("", ".", "..") for p in parts))
    if not ok:
        raise ConfigError(f"bad value {value!r} for config key {key!r}", hint=f"use {hint}")
    return text.rstrip("/") if key != "workspace_profile" else text
