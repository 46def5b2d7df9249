"""Seed derivation shared by every stage: one random draw, one seed derived from the run's seed and the draw's
purpose, so a draw is reproducible on its own and adding a draw elsewhere changes no other."""

from __future__ import annotations

import numpy as np


def derive_seed(*parts) -> int:
    """A 63-bit seed from (run seed, purpose, epoch, step, ...) so every random draw is reproducible on its own."""
    ints = [
        p if isinstance(p, int) else int.from_bytes(str(p).encode()[:16].ljust(16, b"\0"), "little") % 2**63
        for p in parts
    ]
    return int(np.random.SeedSequence(ints).generate_state(1, dtype=np.uint64)[0] >> 1)
