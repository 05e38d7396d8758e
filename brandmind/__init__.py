"""bm (BrandMind memory): local-first memory for AI agents.

``from brandmind import Memory`` opens a store; everything else hangs off it.
Imports are deferred so that ``import brandmind`` (and ``bm --help``) stay fast.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import BMError

__version__ = "0.1.0"
__all__ = ["Memory", "BMError", "__version__"]

if TYPE_CHECKING:  # pragma: no cover
    from .memory import Memory


def __getattr__(name: str) -> Any:
    if name == "Memory":
        from .memory import Memory

        return Memory
    raise AttributeError(name)
