"""Embeddings from an Ollama server through the official ``ollama`` client.

``OllamaEmbedder(model="nomic-embed-text")`` posts to ``/api/embed``.  The
vector size is taken from the first answer unless ``dim`` is given (then every
answer is checked against it).  Vectors are L2-normalised here, whatever the
server returns.

Task prefixes: the nomic-embed-text family is trained with task prefixes, so for
models whose name starts with ``nomic-embed-text`` (any tag, any namespace)
documents are sent as ``"search_document: <text>"`` and queries as
``"search_query: <text>"``.  Other models get the text unchanged.

Every failure to reach the server or to get vectors from it (connection
refused, timeout, HTTP error, model not pulled, malformed answer) becomes
:class:`~brandmind.errors.EmbedderUnavailable` with a hint naming the fix.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..errors import EmbedderUnavailable, InvalidInput, ModelMismatch
from .base import check_texts

DEFAULT_MODEL = "nomic-embed-text"
DOCUMENT_PREFIX = "search_document: "
QUERY_PREFIX = "search_query: "


def uses_nomic_prefixes(model: str) -> bool:
    """True for the nomic-embed-text family (e.g. ``nomic-embed-text:v1.5``)."""
    base = model.rsplit("/", 1)[-1].lower()
    return base.startswith("nomic-embed-text")


class OllamaEmbedder:
    """Embedder backed by an Ollama server (name ``ollama:<model>``)."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        host: str | None = None,
        dim: int | None = None,
        timeout: float = 30,
        batch_size: int = 64,
    ) -> None:
        if not model or not isinstance(model, str):
            raise InvalidInput("the Ollama model name is empty", hint=f"use e.g. model={DEFAULT_MODEL!r}")
        if dim is not None and (not isinstance(dim, int) or dim < 1):
            raise InvalidInput(f"dim must be a positive integer, not {dim!r}", hint="leave it unset to learn it")
        self.model = model
        self.name = f"ollama:{model}"
        self.host = host
        self.timeout = timeout
        self.batch_size = max(1, int(batch_size))
        self._dim = dim
        self._prefixes = uses_nomic_prefixes(model)
        self._client: Any = None

    # -- the Protocol's dim: learned from the server when not given

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._request(["dimension probe"])  # sets self._dim
        assert self._dim is not None
        return self._dim

    # -- plumbing

    def _hint(self) -> str:
        where = f" at {self.host}" if self.host else ""
        return (
            f"start the Ollama server{where} with `ollama serve` and `ollama pull {self.model}`, "
            "or set embedder = local"
        )

    def _get_client(self) -> Any:
        if self._client is None:
            try:
                import ollama
            except ImportError as exc:
                raise EmbedderUnavailable(
                    "the `ollama` Python package is not installed",
                    hint="pip install 'brandmind[ollama]' (or `pip install ollama`), or set embedder = local",
                ) from exc
            self._client = ollama.Client(host=self.host, timeout=self.timeout)
        return self._client

    def _request(self, inputs: list[str]) -> np.ndarray:
        client = self._get_client()
        import httpx
        import ollama

        try:
            response = client.embed(model=self.model, input=inputs)
        except ollama.ResponseError as exc:
            if exc.status_code == 404:
                raise EmbedderUnavailable(
                    f"Ollama has no model {self.model!r}: {exc.error}",
                    hint=f"pull it with `ollama pull {self.model}`, or set embedder = local",
                ) from exc
            raise EmbedderUnavailable(f"Ollama refused the embedding request: {exc}", hint=self._hint()) from exc
        except (ConnectionError, httpx.HTTPError, OSError) as exc:
            raise EmbedderUnavailable(f"cannot reach Ollama: {exc or type(exc).__name__}", hint=self._hint()) from exc
        except Exception as exc:  # noqa: BLE001 - e.g. a pydantic error on a malformed answer
            raise EmbedderUnavailable(f"bad answer from Ollama: {exc}", hint=self._hint()) from exc

        try:
            vectors = np.asarray(response.embeddings, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise EmbedderUnavailable(f"Ollama returned ragged or non-numeric vectors: {exc}", hint=self._hint()) from exc
        if vectors.ndim != 2 or vectors.shape[0] != len(inputs) or vectors.shape[1] == 0:
            raise EmbedderUnavailable(
                f"Ollama returned {vectors.shape[0] if vectors.ndim else 0} vectors of shape {vectors.shape} "
                f"for {len(inputs)} texts",
                hint=f"check that {self.model!r} is an embedding model, or set embedder = local",
            )
        if not np.all(np.isfinite(vectors)):
            raise EmbedderUnavailable("Ollama returned non-finite vectors", hint=self._hint())
        if self._dim is None:
            self._dim = int(vectors.shape[1])
        elif vectors.shape[1] != self._dim:
            raise ModelMismatch(
                f"Ollama model {self.model!r} returned {vectors.shape[1]}-d vectors, expected {self._dim}",
                hint="set dim to the model's size, or use the model the store was built with",
            )
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.maximum(norms, 1e-12)

    # -- the Protocol

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        texts = check_texts(texts)
        if not texts:
            return np.empty((0, self._dim or 0), dtype=np.float32)
        prefix = DOCUMENT_PREFIX if self._prefixes else ""
        parts = [
            self._request([prefix + t for t in texts[i : i + self.batch_size]])
            for i in range(0, len(texts), self.batch_size)
        ]
        return np.concatenate(parts, axis=0).astype(np.float32, copy=False)

    def embed_query(self, text: str) -> np.ndarray:
        if not isinstance(text, str):
            raise InvalidInput(f"a query must be text, not {type(text).__name__}", hint="pass a string")
        prefix = QUERY_PREFIX if self._prefixes else ""
        return self._request([prefix + text])[0]

    def __repr__(self) -> str:
        return f"OllamaEmbedder(model={self.model!r}, host={self.host!r}, dim={self._dim})"
