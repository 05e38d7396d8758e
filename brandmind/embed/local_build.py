"""Building the local model: the fp32 ONNX graph written with ``onnx.helper`` from the
safetensors weights, its int8 forms (dynamic, and static with calibrated activation
ranges), and saving it atomically with its tensors in a memory-mappable side file.

See ``brandmind.embed.local`` for the variants and their numbers.  ``onnx``,
``onnxruntime`` and ``safetensors`` are imported only inside the functions that build.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..errors import EmbedderUnavailable, InvalidInput
from ..notices import tell
from .minilm import (
    DIM,
    DISABLED_FUSIONS,
    INSTALL_HINT,
    MODEL_ID,
    VARIANTS,
    load_tokenizer,
    model_dir,
)

if TYPE_CHECKING:  # pragma: no cover
    import onnx

_HIDDEN = 384
_HEADS = 12
_HEAD_DIM = 32
_LAYERS = 6
_INTERMEDIATE = 1536
_EPS = 1e-12


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
                hint=f"reinstall it: {INSTALL_HINT}",
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
    W = {k: v.astype(np.float32) for k, v in weights.items() if v.dtype != np.int64}
    h = _embeddings(g, W, "input_ids")
    mask_i32 = g.op("Cast", ["attention_mask"], to=g.onnx.TensorProto.INT32)
    for i in range(_LAYERS):
        h = _encoder_layer(g, W, i, h, mask_i32)
    _mean_pool_normalised(g, h, "attention_mask")
    return _finish(g)


def _embeddings(g: _Graph, W: dict[str, np.ndarray], ids: str) -> str:
    """Word + position (+ token type 0) embeddings, then LayerNorm."""
    word = g.const("word_embeddings", W["embeddings.word_embeddings.weight"])
    pos_table = W["embeddings.position_embeddings.weight"] + W["embeddings.token_type_embeddings.weight"][0]
    pos = g.const("position_embeddings", pos_table)
    shape = g.op("Shape", [ids])
    seq = g.op("Slice", [shape, g.const("one_i64", np.array([1], np.int64)), g.const("two_i64", np.array([2], np.int64))])
    pos_s = g.op("Slice", [pos, g.const("zero_i64", np.array([0], np.int64)), seq])
    h = g.op("Add", [g.op("Gather", [word, ids]), pos_s])
    return g.op(
        "LayerNormalization",
        [h, g.const("emb_ln_g", W["embeddings.LayerNorm.weight"]), g.const("emb_ln_b", W["embeddings.LayerNorm.bias"])],
        axis=-1,
        epsilon=_EPS,
    )


def _add_ln(g: _Graph, W: dict[str, np.ndarray], x: str, residual: str, key: str, prefix: str) -> str:
    """LayerNorm(x + dense bias + residual).

    Deliberately not the fused SkipLayerNormalization: onnxruntime's CPU kernel
    for it is several times slower than Add + LayerNormalization (and the bias
    Add folds into the preceding quantised MatMul); sessions disable the
    optimiser pass that would fuse it back (see DISABLED_FUSIONS).
    """
    gamma = g.const(f"{key}_ln_g", W[prefix + ".LayerNorm.weight"])
    beta = g.const(f"{key}_ln_b", W[prefix + ".LayerNorm.bias"])
    bias = g.const(f"{key}_b", W[prefix + ".dense.bias"])
    return g.op("LayerNormalization", [g.op("Add", [g.op("Add", [x, bias]), residual]), gamma, beta],
                axis=-1, epsilon=_EPS)


def _gelu(g: _Graph, x: str, bias: str) -> str:
    """Exact GELU of x + bias: 0.5 y (1 + erf(y / sqrt 2)).

    Add + Gelu rather than the fused BiasGelu, whose CPU kernel is ~2x slower
    than Gelu alone (and the Add folds into a quantised MatMul's bias).
    """
    return g.op("Gelu", [g.op("Add", [x, bias])], domain="com.microsoft")


def _encoder_layer(g: _Graph, W: dict[str, np.ndarray], i: int, h: str, mask_i32: str) -> str:
    """BERT layer ``i``: fused attention over the QKV weights, then the feed-forward block."""
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
    h = _add_ln(g, W, attn, h, f"l{i}_attn", p + "attention.output")
    inter = g.op("MatMul", [h, g.const(f"l{i}_inter_w", W[p + "intermediate.dense.weight"].T)])
    inter = _gelu(g, inter, g.const(f"l{i}_inter_b", W[p + "intermediate.dense.bias"]))
    out = g.op("MatMul", [inter, g.const(f"l{i}_out_w", W[p + "output.dense.weight"].T)])
    return _add_ln(g, W, out, h, f"l{i}_out", p + "output")


def _mean_pool_normalised(g: _Graph, h: str, mask: str) -> None:
    """Mean pooling over the mask, then L2 normalisation, into the output ``embedding``."""
    f32 = np.float32
    maskf = g.op("Unsqueeze", [g.op("Cast", [mask], to=g.onnx.TensorProto.FLOAT),
                               g.const("axis_m1", np.array([-1], np.int64))])
    axis1 = g.const("axis_1", np.array([1], np.int64))
    summed = g.op("ReduceSum", [g.op("Mul", [h, maskf]), axis1], keepdims=0)
    count = g.op("Max", [g.op("ReduceSum", [maskf, axis1], keepdims=0), g.const("tiny", np.array(1e-9, f32))])
    mean = g.op("Div", [summed, count])
    norm = g.op("ReduceL2", [mean], axes=[-1], keepdims=1)  # axes is an attribute in opset 17
    g.nodes.append(
        g.helper.make_node("Div", [mean, g.op("Max", [norm, g.const("tiny2", np.array(1e-12, f32))])], ["embedding"],
                           name="normalise")
    )


def _finish(g: _Graph) -> "onnx.ModelProto":
    """The model of the graph ``g`` built so far: its inputs, output and opsets."""
    helper, onnx = g.helper, g.onnx
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
    import logging  # here: a cold `bm recall` loads this module and never builds a model

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
                                disabled_optimizers=DISABLED_FUSIONS)
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
    g = dynamic.graph
    dql = [n for n in g.node if n.op_type == "DynamicQuantizeLinear"]
    ranges = _activation_ranges(fp32, [n.input[0] for n in dql], tokenizer, calibration_texts())
    nodes = _fuse_matmul_integer(g, _static_quantize(g, ranges))
    del g.node[:]
    g.node.extend(nodes)
    return dynamic


def _static_quantize(g: Any, ranges: dict) -> list[Any]:
    """The nodes of ``g`` with each DynamicQuantizeLinear replaced by a QuantizeLinear whose
    scale and zero point (new initialisers) come from the calibrated ``ranges``."""
    from onnx import helper, numpy_helper

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
    return nodes


def _fuse_matmul_integer(g: Any, nodes: list[Any]) -> list[Any]:
    """MatMulInteger -> Cast -> Mul(a_scale * b_scale) [-> Add(bias)]  =>  MatMulIntegerToFloat."""
    from onnx import helper

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
    return [fused.get(id(n), n) for n in nodes if id(n) not in drop]


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
            f"cannot read {wdir / 'model.safetensors'}: {exc}", hint=f"reinstall it: {INSTALL_HINT}"
        ) from exc
    model = build_fp32_model(weights)
    if variant in ("int8", "int8s"):
        import tempfile

        fp32 = model
        with tempfile.TemporaryDirectory(prefix="bm-embed-") as tmp:
            out = Path(tmp) / "int8.onnx"
            quantize_int8(fp32, out)
            model = onnx.load(str(out))
        if variant == "int8s":
            model = make_static(model, fp32, load_tokenizer(wdir))
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
    import tempfile

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


class build_lock:
    """An exclusive ``flock`` on ``<cache>/.<model>.lock`` while a model is built (no-op where
    ``fcntl`` does not exist)."""

    def __init__(self, path: Path) -> None:
        self.path = path.parent / f".{path.name}.lock"
        self.fd: int | None = None

    def __enter__(self) -> "build_lock":
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


def say_building(path: Path) -> None:
    """On a terminal, say what the pause of a first model build is (never into a pipe)."""
    tell(f"building the local embedding model (once, ~6 s) in {path.parent} ...")
