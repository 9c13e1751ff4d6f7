"""The row order of one epoch, reproducible per (seed, epoch, position) (rows are read by `evr1_cache.read_rows`).

Why: a resumed run must draw exactly the batches the uninterrupted run would have drawn.
"""

from __future__ import annotations


def epoch_order(n: int, seed: int, epoch: int, shuffle: bool) -> list[int]:
    """Row order of one epoch: a permutation seeded by (seed, epoch), or identity."""
    if not shuffle:
        return list(range(n))
    import numpy as np

    return [int(i) for i in np.random.default_rng([seed, epoch]).permutation(n)]
