"""bm (BrandMind memory): local-first memory for AI agents.

``from brandmind import Memory`` opens a store; everything else hangs off it.
``Memory`` is imported on first use so that ``import brandmind`` (and ``bm --help``) stay fast.

The package is layered; each layer imports only the ones below it (tests/test_layers.py
enforces it, docs/ARCHITECTURE.md says where each kind of change goes)::

    facade      memory.Memory and its sub-APIs (blocks, personas, skills, graph, facts, admin)
    domain      recall, facts, graph, blocks, personas, skills, workspace, context, ...: over a Store
    store       store.Store: the narrow handle (log, index, embedder, user, catch_up)
    rules       ops (every op kind and its Rule), merge (pure merge functions), projection, ...
    storage     oplog (LMDB), storage/* (SQL repositories), sqlstore
    foundation  errors, clock, validate, config, embed, extract, pii, ...

``brandmind.cli`` and ``brandmind.sync`` sit above it; the library imports neither.
"""
from __future__ import annotations

from .errors import BMError

TYPE_CHECKING = False  # not `typing`: importing it costs a cold `bm` call (cli/client.py) ~6 ms

__version__ = "0.1.0"
__all__ = ["Memory", "BMError", "__version__"]

if TYPE_CHECKING:  # pragma: no cover
    from .memory import Memory


def __getattr__(name: str) -> object:
    if name == "Memory":
        from .memory import Memory

        return Memory
    raise AttributeError(name)
