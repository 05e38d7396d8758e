"""One line on a terminal's stderr about a pause the user would otherwise wonder about (a first
model build, a large index made anew); never into a pipe or a log, where output is data."""
from __future__ import annotations

import sys


def tell(line: str) -> None:
    """Write ``line`` on stderr when it is a terminal (nothing for a closed or odd stderr)."""
    err = sys.stderr
    try:
        tty = err is not None and err.isatty()
    except (AttributeError, ValueError):  # a closed or odd stderr
        tty = False
    if tty:
        err.write(line + "\n")
        err.flush()
