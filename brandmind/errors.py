"""One error base class for the whole library.

Every error bm raises on purpose is a :class:`BMError`: it carries a one-line
message and a ``hint`` naming the fix.  The CLI turns it into ``Error: …`` plus
the hint on stderr and exit code 1; nothing else in the CLI catches exceptions.
"""
from __future__ import annotations


class BMError(Exception):
    """Base class of every error bm raises on purpose."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.message


class InvalidInput(BMError):
    """The caller gave text, JSON or arguments bm cannot accept."""


class UsageError(BMError):
    """Wrong combination of options (exit 2, like a usage error)."""

    exit_code = 2


class NotFound(BMError):
    """An id, user, node or file that does not exist."""


class StoreMissing(BMError):
    """No store at the configured path."""


class StoreCorrupt(BMError):
    """The store exists but cannot be read as a bm store."""


class ModelMismatch(BMError):
    """Vectors of another embedding model or size than the store's."""


class EmbedderUnavailable(BMError):
    """The configured embedder cannot be loaded or reached."""


class ConfigError(BMError):
    """A bad config file, key or value."""


class ExtractorUnavailable(BMError):
    """The configured fact extractor (e.g. an LLM behind Ollama) cannot be reached or used."""


class SyncConflict(BMError):
    """Two devices write ops under one replica id (same op id, different op): sync stops."""


class ClockSkew(BMError):
    """A remote op is stamped too far ahead of this device's clock (config ``sync_max_skew_ms``)."""
