"""Embeddings from any OpenAI-compatible endpoint through the official ``openai`` client.

``OpenAIEmbedder(model, base_url, api_key)`` posts to ``<base_url>/embeddings``: OpenAI itself
(the default ``https://api.openai.com/v1``), OpenRouter, vLLM, LM Studio and llama.cpp's
``llama-server --embeddings`` all answer it.  Its name is ``openai:<model>``.  The vector size
is learned from the first answer unless ``dim`` is given (then every answer is checked
against it); vectors are L2-normalised here, whatever the server returns.

The API key: ``api_key``, else ``BM_OPENAI_API_KEY``, else ``OPENAI_API_KEY``; a local server
needs none (a placeholder is sent; one that wants a key answers 401, which names the
variables).  Keys are never read from the config file, so ``bm config`` never prints one.

Every failure to get vectors (connection refused, timeout, HTTP error, unknown model, a
malformed answer) is :class:`~brandmind.errors.EmbedderUnavailable` with a hint naming the
fix, which is what lets an embedder chain (``brandmind/embed/chain.py``) try the next provider.
``openai`` is imported when the first request is made, so importing this module is cheap.
"""
from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from ..errors import EmbedderUnavailable, InvalidInput, ModelMismatch
from .base import check_texts

DEFAULT_MODEL = "text-embedding-3-small"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
KEY_VARIABLES = ("BM_OPENAI_API_KEY", "OPENAI_API_KEY")
NO_KEY = "no-key"  # what a keyless local server (vLLM, LM Studio, llama.cpp) is sent


def api_key_from_env(variables: Sequence[str]) -> str | None:
    """The first of ``variables`` that is set and not empty."""
    return next((os.environ[v] for v in variables if os.environ.get(v)), None)


def as_vectors(rows: Any, count: int, where: str, hint: str) -> np.ndarray:
    """``rows`` as a (count, dim) float32 matrix of finite numbers, or EmbedderUnavailable."""
    try:
        vectors = np.asarray(rows, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise EmbedderUnavailable(f"{where} returned ragged or non-numeric vectors: {exc}", hint=hint) from exc
    if vectors.ndim != 2 or vectors.shape[0] != count or vectors.shape[1] == 0:
        raise EmbedderUnavailable(f"{where} returned vectors of shape {vectors.shape} for {count} texts",
                                  hint=hint)
    if not np.all(np.isfinite(vectors)):
        raise EmbedderUnavailable(f"{where} returned non-finite vectors", hint=hint)
    return vectors


def normalised(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


class ServedEmbedder:
    """What the embedders behind a server share (this module's and ``hfapi``'s): the size
    learned from the first answer (or given), every answer checked, sized and normalised
    (``_vectors``), documents sent in batches.  A subclass sets ``model``, ``base_url``,
    ``batch_size`` and ``_dim`` and implements ``_request(inputs)`` with ``_vectors``."""

    model: str
    base_url: str
    batch_size: int
    _dim: int | None

    @staticmethod
    def _check_dim(dim: Any) -> None:
        if dim is not None and (not isinstance(dim, int) or dim < 1):
            raise InvalidInput(f"dim must be a positive integer, not {dim!r}", hint="leave it unset to learn it")

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._request(["dimension probe"])  # sets self._dim
        assert self._dim is not None
        return self._dim

    def _hint(self) -> str:  # pragma: no cover - each subclass names its own settings
        raise NotImplementedError

    def _request(self, inputs: list[str]) -> np.ndarray:  # pragma: no cover - see the class doc
        raise NotImplementedError

    def _vectors(self, rows: Any, count: int, where: str) -> np.ndarray:
        """``rows`` of an answer for ``count`` texts as unit vectors of the store's size."""
        vectors = as_vectors(rows, count, where, self._hint())
        if self._dim is None:
            self._dim = int(vectors.shape[1])
        elif vectors.shape[1] != self._dim:
            raise ModelMismatch(f"{self.model!r} at {self.base_url} returned {vectors.shape[1]}-d vectors, "
                                f"expected {self._dim}", hint="use the model the store was built with")
        return normalised(vectors)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        texts = check_texts(texts)
        if not texts:
            return np.empty((0, self._dim or 0), dtype=np.float32)
        parts = [self._request(texts[i:i + self.batch_size]) for i in range(0, len(texts), self.batch_size)]
        return np.concatenate(parts, axis=0)

    def embed_query(self, text: str) -> np.ndarray:
        if not isinstance(text, str):
            raise InvalidInput(f"a query must be text, not {type(text).__name__}", hint="pass a string")
        return self._request([text])[0]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r}, dim={self._dim})"


class OpenAIEmbedder(ServedEmbedder):
    """Embedder behind an OpenAI-compatible ``/embeddings`` endpoint (name ``openai:<model>``)."""

    def __init__(self, model: str = DEFAULT_MODEL, base_url: str | None = None, api_key: str | None = None,
                 dim: int | None = None, timeout: float = 30, batch_size: int = 64, max_retries: int = 1) -> None:
        if not model or not isinstance(model, str):
            raise InvalidInput("the embedding model name is empty", hint=f"e.g. `bm config set openai_model {DEFAULT_MODEL}`")
        self._check_dim(dim)
        self.model = model
        self.name = f"openai:{model}"
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self.api_key = api_key or api_key_from_env(KEY_VARIABLES)
        self.timeout = timeout
        self.batch_size = max(1, int(batch_size))
        self.max_retries = max_retries
        self._dim = dim
        self._client: Any = None

    def _hint(self) -> str:
        return (f"check that the endpoint at {self.base_url} is up and serves {self.model!r} "
                "(`bm config set openai_base_url URL`, `bm config set openai_model NAME`), or set embedder = local")

    def _get_client(self) -> Any:
        if self._client is None:
            try:
                import openai
            except ImportError as exc:
                raise EmbedderUnavailable("the `openai` Python package is not installed",
                                          hint="pip install 'brandmind[openai]', or set embedder = local") from exc
            self._client = openai.OpenAI(base_url=self.base_url, api_key=self.api_key or NO_KEY,
                                         timeout=self.timeout, max_retries=self.max_retries)
        return self._client

    def _request(self, inputs: list[str]) -> np.ndarray:
        client = self._get_client()
        import openai

        where = f"the embeddings endpoint at {self.base_url}"
        try:
            response = client.embeddings.create(model=self.model, input=inputs, encoding_format="float")
        except openai.AuthenticationError as exc:
            raise EmbedderUnavailable(f"{where} refused the API key (HTTP 401)",
                                      hint="set BM_OPENAI_API_KEY (or OPENAI_API_KEY) to a valid key, "
                                           "or set embedder = local") from exc
        except openai.NotFoundError as exc:
            raise EmbedderUnavailable(f"{where} has no model {self.model!r} (HTTP 404)",
                                      hint="`bm config set openai_model NAME` to a model it serves, "
                                           "or set embedder = local") from exc
        except openai.APIStatusError as exc:
            raise EmbedderUnavailable(f"{where} answered HTTP {exc.status_code}", hint=self._hint()) from exc
        except openai.APIConnectionError as exc:  # refused, unreachable, timed out
            raise EmbedderUnavailable(f"cannot reach {where}: {exc}", hint=self._hint()) from exc
        except Exception as exc:  # noqa: BLE001 - a malformed answer the client could not read
            raise EmbedderUnavailable(f"bad answer from {where}: {exc}", hint=self._hint()) from exc
        try:
            rows = [item.embedding for item in sorted(response.data, key=lambda d: d.index)]
        except (AttributeError, TypeError) as exc:
            raise EmbedderUnavailable(f"bad answer from {where}: {exc}", hint=self._hint()) from exc
        return self._vectors(rows, len(inputs), where)
