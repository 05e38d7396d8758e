"""A configured chain of embedders (``embedder = ["ollama", "local"]``) that never mixes models.

The first provider names the store's model: the chain's ``name`` is always its name, which
the store records at ``bm init`` and checks at every open (``sqlstore``: ``embed_model``,
``embed_dim``).  Each call goes to the first provider that answers.  A provider that fails
with :class:`~brandmind.errors.EmbedderUnavailable` (down, refusing, timing out) is skipped
for ``retry_after`` seconds (60) and the next one is tried, but a fallback is used only if it
makes the same model's vectors, which is measured, not declared:

* The reference: the first time the store's model answers (once per store), the chain
  embeds the :data:`PROBES` sentences with it and keeps those vectors beside the store
  (``data/embed_reference.json``: model name, dim, vectors).
* A fallback is checked once per process before its first use: it embeds the same sentences,
  and it is the same model only if its vectors have the reference's size and each one's
  cosine to the reference is at least :data:`SAME_MODEL_COSINE` (0.99).

What that threshold separates (``python scripts/probe_models.py``, on these probes): the
embedded all-MiniLM-L6-v2 run exactly (fp32) and the same weights quantised to int8
(``local_variant`` int8s / int8) score min 0.9926 / 0.9916 (int8s vs int8: 0.9907), so a
quantised copy of the same weights counts as the same model (Ollama's ``all-minilm``, a GGUF
of them, should too: no Ollama runs here to measure it); a different 384-d model (``hash``)
scores min -0.07, mean 0.03.  Nothing here sits between, which is why a measured check was
chosen over a declared equivalence: a declaration cannot notice that the model behind a
name is not the one the user thinks, the probe does.  (On 400 generated chat sentences the int8
builds' worst cosine to fp32 is 0.967, mean 0.992.)

When no provider can serve, the call raises one ``EmbedderUnavailable`` naming the
provider it could not reach, why each fallback was not used, and the fix; no vector was
made, so nothing of another model enters the store.  ``served_by`` is the name of the
provider that made the last vectors.
"""
from __future__ import annotations

import base64
import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import EmbedderUnavailable, InvalidInput
from .base import Embedder, check_texts

__all__ = ["EmbedderChain", "Provider", "PROBES", "SAME_MODEL_COSINE", "REFERENCE_FILE"]

SAME_MODEL_COSINE = 0.99
RETRY_AFTER = 60.0
REFERENCE_FILE = "embed_reference.json"
# short, varied, chat-like sentences: what a store holds
PROBES = (
    "I moved to Lisbon last spring and I work as a nurse at the city hospital.",
    "Remind me to call the dentist on Tuesday morning.",
    "Caroline joined a support group after the adoption fell through.",
    "My favourite dish is grilled sardines with a glass of vinho verde.",
    "The quarterly report is due on 15 March; Ann owns the revenue section.",
    "We hiked up the mountain in the rain and the dog loved it.",
    "Python 3.11 made the test suite about a quarter faster.",
    "what does Melanie like to paint?",
)


@dataclass
class Provider:
    """One link of the chain: ``kind`` (config name), ``name`` (model identity), a maker."""

    kind: str
    name: str
    make: Callable[[], Embedder]
    embedder: Embedder | None = None
    down_until: float = 0.0
    last_error: EmbedderUnavailable | None = None
    verdict: str | None = None  # a fallback's check: None not yet, "" same model, else why not


class EmbedderChain:
    """Embedders tried in order, the first naming the model (see the module docstring)."""

    def __init__(self, providers: Sequence[Provider], reference_file: str | os.PathLike[str] | None,
                 *, threshold: float = SAME_MODEL_COSINE, retry_after: float = RETRY_AFTER) -> None:
        if not providers:
            raise InvalidInput("an embedder chain needs at least one provider", hint="e.g. embedder = ollama,local")
        self.providers = list(providers)
        self.name = self.providers[0].name
        self.reference_file = Path(reference_file) if reference_file is not None else None
        self.threshold = threshold
        self.retry_after = retry_after
        self.served_by: str | None = None
        self._lock = threading.RLock()
        self._reference: dict[str, Any] | None = None
        self._recorded = False

    # -- the Protocol
    @property
    def dim(self) -> int:
        primary = self.providers[0]
        try:
            return int(self._get(primary).dim)
        except EmbedderUnavailable as exc:
            ref = self.reference()
            if ref is None:
                raise self._unreachable([], first=exc) from exc
            return int(ref["dim"])

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        texts = check_texts(texts)
        return self._call(lambda e: e.embed_documents(texts))

    def embed_query(self, text: str) -> np.ndarray:
        if not isinstance(text, str):
            raise InvalidInput(f"a query must be text, not {type(text).__name__}", hint="pass a string")
        return self._call(lambda e: e.embed_query(text))

    # -- the chain
    def _get(self, p: Provider) -> Embedder:
        if p.embedder is None:
            p.embedder = p.make()
        return p.embedder

    def _call(self, fn: Callable[[Embedder], np.ndarray]) -> np.ndarray:
        failures: list[str] = []  # why each fallback was not used
        primary_error: EmbedderUnavailable | None = None
        for i, p in enumerate(self.providers):
            error = p.last_error if p.down_until > time.monotonic() else None
            if error is None and i > 0:
                why = self._check(p)
                if why:
                    failures.append(why)
                    continue
            if error is None:
                try:
                    out = fn(self._get(p))
                except EmbedderUnavailable as exc:
                    p.down_until, p.last_error = time.monotonic() + self.retry_after, exc
                    error = exc
            if error is not None:
                if i == 0:
                    primary_error = error
                else:
                    failures.append(self._why_down(p, error))
                continue
            if i == 0:
                self._record_reference(p)
            self.served_by = p.name
            return out
        raise self._unreachable(failures, first=primary_error)

    def _why_down(self, p: Provider, exc: EmbedderUnavailable) -> str:
        return f"{p.kind} ({p.name}) is unavailable: {exc.message}"

    def _unreachable(self, fallbacks: list[str], *, first: EmbedderUnavailable | None) -> EmbedderUnavailable:
        primary = self.providers[0]
        reason = first.message.rstrip(".") if first is not None else "it did not answer"
        message = f"cannot reach {primary.kind}, the embedder of this store ({self.name}): {reason}"
        if fallbacks:
            message += "; not used instead: " + "; ".join(fallbacks)
        message += " — no vectors were made"
        hint = (first.hint if first is not None and first.hint else f"bring {primary.kind} back")
        if len(self.providers) > 1:
            other = self.providers[1].kind
            hint += (f"; or make {other} this store's model: `bm config set embedder {other}` "
                     "then `bm reindex`")
        return EmbedderUnavailable(message, hint=hint)

    # -- the same model: measured against the reference
    def _check(self, p: Provider) -> str:
        """"" when the fallback ``p`` makes the store's model's vectors, else why not."""
        with self._lock:
            if p.verdict is not None:
                return p.verdict
            ref = self.reference()
            if ref is None:
                return (f"{p.kind} ({p.name}) cannot be checked against {self.name}: that model has not "
                        "answered this store yet, so there are no reference vectors")
            try:
                got = np.asarray(self._get(p).embed_documents(list(PROBES)), dtype=np.float32)
            except EmbedderUnavailable as exc:
                p.down_until, p.last_error = time.monotonic() + self.retry_after, exc
                return self._why_down(p, exc)
            want = ref["vectors"]
            if got.shape != want.shape:
                p.verdict = (f"{p.kind} ({p.name}) makes {got.shape[-1]}-d vectors, "
                             f"the store's {self.name} makes {want.shape[-1]}-d ones")
                return p.verdict
            cosines = np.sum(_unit(got) * _unit(want), axis=1)
            low = float(cosines.min())
            p.verdict = "" if low >= self.threshold else (
                f"{p.kind} ({p.name}) does not make {self.name}'s vectors "
                f"(probe cosine {low:.3f} < {self.threshold})")
            return p.verdict

    def reference(self) -> dict[str, Any] | None:
        """The store model's probe vectors (``{"model", "dim", "vectors"}``), or None."""
        if self._reference is None and self.reference_file is not None and self.reference_file.exists():
            try:
                data = json.loads(self.reference_file.read_text(encoding="utf-8"))
                vectors = np.frombuffer(base64.b64decode(data["vectors"]), dtype="<f4")
                vectors = vectors.reshape(len(data["probes"]), int(data["dim"]))
            except (OSError, ValueError, KeyError, TypeError):
                return None  # unreadable: made again when the store's model next answers
            if data.get("model") == self.name and tuple(data["probes"]) == PROBES:
                self._reference = {"model": data["model"], "dim": int(data["dim"]), "vectors": vectors}
        return self._reference

    def _record_reference(self, p: Provider) -> None:
        """Once per store (and checked once per process): the store's model's probe vectors."""
        if self._recorded or len(self.providers) < 2 or self.reference_file is None:
            return
        with self._lock:
            self._recorded = True
            if self.reference() is not None:
                return
            try:
                vectors = np.asarray(self._get(p).embed_documents(list(PROBES)), dtype="<f4")
            except EmbedderUnavailable:
                self._recorded = False  # try again with the next call
                return
            data = {"model": self.name, "dim": int(vectors.shape[1]), "probes": list(PROBES),
                    "vectors": base64.b64encode(vectors.tobytes()).decode("ascii")}
            path = self.reference_file
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(json.dumps(data), encoding="utf-8")
            os.replace(tmp, path)
            self._reference = {"model": self.name, "dim": data["dim"], "vectors": vectors}

    def __repr__(self) -> str:
        return f"EmbedderChain({[p.name for p in self.providers]!r})"


def _unit(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float64)
    return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
