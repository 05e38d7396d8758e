"""How far apart two builds of one embedding model are, on the embedder chain's probe sentences.

An embedder chain (brandmind/embed/chain.py) uses a fallback only when each of its vectors for
the PROBES sentences is within cosine SAME_MODEL_COSINE of the store's model's.  This prints,
for pairs of the embedders that run here (the embedded all-MiniLM-L6-v2 exact and int8
builds, and the hash embedder as a different model of the same size), the min and mean cosine
on the probes and on 400 generated chat-like sentences (``calibration_texts``), and whether
the chain would accept the pair.

    python scripts/probe_models.py
"""
from __future__ import annotations

import itertools

import numpy as np

from brandmind.config import cache_dir
from brandmind.embed.chain import PROBES, SAME_MODEL_COSINE
from brandmind.embed.hashing import HashEmbedder
from brandmind.embed.local import LocalEmbedder
from brandmind.embed.local_build import calibration_texts


def main() -> None:
    embedders = {v: LocalEmbedder(cache_dir=cache_dir(), variant=v) for v in ("fp32", "int8s", "int8")}
    embedders["hash"] = HashEmbedder(384)
    texts = {"probes": list(PROBES), "400 sentences": list(calibration_texts())[:400]}
    vecs = {(name, t): np.asarray(e.embed_documents(texts[t]), dtype=np.float64)
            for name, e in embedders.items() for t in texts}
    print(f"threshold: every probe's cosine >= {SAME_MODEL_COSINE}")
    for a, b in itertools.combinations(embedders, 2):
        parts = []
        for t in texts:
            cos = np.sum(vecs[(a, t)] * vecs[(b, t)], axis=1)
            parts.append(f"{t}: min {cos.min():.4f} mean {cos.mean():.4f}")
        probe_min = float(np.sum(vecs[(a, "probes")] * vecs[(b, "probes")], axis=1).min())
        verdict = "same model" if probe_min >= SAME_MODEL_COSINE else "refused"
        print(f"{a:>6} vs {b:<6} {'; '.join(parts)} -> {verdict}")


if __name__ == "__main__":
    main()
