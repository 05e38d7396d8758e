"""Embeddings from the Hugging Face Inference API (feature extraction over HTTP, with httpx).

``HFEmbedder(model)`` posts ``{"inputs": [texts]}`` to
``<base_url>/models/<model>/pipeline/feature-extraction`` (default base
``https://router.huggingface.co/hf-inference``; a dedicated Inference Endpoint or a
text-embeddings-inference server answers the same request at its own URL) and reads one
vector per text.  Its name is ``hf:<model>``; vectors are L2-normalised here.  The token:
``BM_HF_TOKEN``, else ``HF_TOKEN`` (none is sent when neither is set).

Why httpx and not ``huggingface_hub.InferenceClient``: the client's ``feature_extraction``
first asks the Hub which task the model supports (``HfApi().model_info``: a second request
per process, to another host) unless it is given the full URL, and then does this same POST;
httpx does the one request, is already what the ``ollama`` client stands on, and imports in
~0.2 s (``python -X importtime -c "import httpx"``).

A model that answers token-level vectors (3-d: not a sentence-embedding model) is refused,
as is anything else that is not one finite vector per text; every failure is
:class:`~brandmind.errors.EmbedderUnavailable` with a hint (503 "model is loading" included).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import EmbedderUnavailable, InvalidInput
from .openai_compat import ServedEmbedder, api_key_from_env

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_BASE_URL = "https://router.huggingface.co/hf-inference"
TOKEN_VARIABLES = ("BM_HF_TOKEN", "HF_TOKEN")


class HFEmbedder(ServedEmbedder):
    """Embedder behind the Hugging Face Inference API (name ``hf:<model>``)."""

    def __init__(self, model: str = DEFAULT_MODEL, base_url: str | None = None, token: str | None = None,
                 dim: int | None = None, timeout: float = 30, batch_size: int = 32) -> None:
        if not model or not isinstance(model, str):
            raise InvalidInput("the Hugging Face model name is empty", hint=f"e.g. `bm config set hf_model {DEFAULT_MODEL}`")
        self._check_dim(dim)
        self.model = model
        self.name = f"hf:{model}"
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self.url = f"{self.base_url}/models/{model}/pipeline/feature-extraction"
        self.token = token or api_key_from_env(TOKEN_VARIABLES)
        self.timeout = timeout
        self.batch_size = max(1, int(batch_size))
        self._dim = dim
        self._client: Any = None

    def _hint(self) -> str:
        return (f"check that {self.base_url} is reachable and serves {self.model!r} "
                "(`bm config set hf_base_url URL`, `bm config set hf_model NAME`), or set embedder = local")

    def _get_client(self) -> Any:
        if self._client is None:
            try:
                import httpx
            except ImportError as exc:
                raise EmbedderUnavailable("the `httpx` Python package is not installed",
                                          hint="pip install 'brandmind[hf]', or set embedder = local") from exc
            headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
            self._client = httpx.Client(timeout=self.timeout, headers=headers)
        return self._client

    def _post(self, inputs: list[str]) -> Any:
        client = self._get_client()
        import httpx

        where = f"the Hugging Face Inference API at {self.base_url}"
        try:
            response = client.post(self.url, json={"inputs": inputs})
        except httpx.HTTPError as exc:
            raise EmbedderUnavailable(f"cannot reach {where}: {exc or type(exc).__name__}", hint=self._hint()) from exc
        status = response.status_code
        if status == 401 or status == 403:
            raise EmbedderUnavailable(f"{where} refused the token (HTTP {status})",
                                      hint="set BM_HF_TOKEN (or HF_TOKEN) to a token with inference access, "
                                           "or set embedder = local")
        if status == 404:
            raise EmbedderUnavailable(f"{where} has no model {self.model!r} (HTTP 404)",
                                      hint="`bm config set hf_model NAME` to a sentence-transformers model, "
                                           "or set embedder = local")
        if status == 503:
            raise EmbedderUnavailable(f"{where} is loading {self.model!r} (HTTP 503)",
                                      hint="retry in a minute, or set embedder = local")
        if status != 200:
            raise EmbedderUnavailable(f"{where} answered HTTP {status}", hint=self._hint())
        try:
            return response.json()
        except ValueError as exc:
            raise EmbedderUnavailable(f"{where} answered something that is not JSON", hint=self._hint()) from exc

    def _request(self, inputs: list[str]) -> np.ndarray:
        rows = self._post(inputs)
        where = f"the Hugging Face Inference API ({self.model})"
        if isinstance(rows, list) and rows and isinstance(rows[0], list) and rows[0] and isinstance(rows[0][0], list):
            raise EmbedderUnavailable(f"{where} answered token-level vectors, not one vector per text",
                                      hint="use a sentence-embedding model, e.g. "
                                           f"`bm config set hf_model {DEFAULT_MODEL}`")
        return self._vectors(rows, len(inputs), where)
