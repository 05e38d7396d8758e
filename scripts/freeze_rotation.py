"""Write brandmind/data/rotation.bin: the stored vectors' rotation rounds (sign flips and
permutations, storage/recallsql.py) for the sizes in ``FROZEN_DIMS``, as the seeded generator
makes them.  Run once; the file is part of the store format (tests/test_recallsql.py checks it).

    python scripts/freeze_rotation.py
"""
from __future__ import annotations

import numpy as np

from brandmind.storage.recallsql import FROZEN_DIMS, FROZEN_FILE, seeded_rounds


def main() -> None:
    parts = []
    for dim in FROZEN_DIMS:
        signs, perms = seeded_rounds(dim)
        parts.append(perms.astype("<u2").tobytes())
        parts.append(np.packbits(signs > 0).tobytes())
    FROZEN_FILE.write_bytes(b"".join(parts))
    print(f"{FROZEN_FILE}: {sum(map(len, parts)):,} bytes for sizes {FROZEN_DIMS}")


if __name__ == "__main__":
    main()
