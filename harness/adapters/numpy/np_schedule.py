"""The numpy adapter's bookkeeping that needs no tensors' values: the bytes a forward leaves for backward, the
segments of `scheme=segments` and the recompute counts of `scheme=recursive` (adapter.py)."""

from __future__ import annotations

from typing import Any

import numpy as np


def array_bytes(objs: Any) -> int:
    """Bytes of the distinct arrays among objs (nested tuples), counting each buffer once."""
    seen = {}

    def walk(o: Any) -> None:
        if isinstance(o, np.ndarray):
            base = o
            while base.base is not None and isinstance(base.base, np.ndarray):
                base = base.base
            seen[id(base)] = base.nbytes
        elif isinstance(o, (tuple, list)):
            for e in o:
                walk(e)

    walk(objs)
    return sum(seen.values())


def segment_bounds(n: int, k: int) -> list[tuple[int, int]]:
    """[a, b) of each of k equal segments of n blocks (sizes differing by at most one)."""
    return [(j * n // k, (j + 1) * n // k) for j in range(k)]


def recursive_recompute_counts(n: int) -> list[int]:
    """How often the recursive scheme recomputes each block, from its definition alone (no tensors)."""
    counts = [0] * n

    def walk(a: int, b: int) -> None:
        if b - a == 1:
            counts[a] += 1  # the forward with tape
            return
        m = (a + b) // 2
        for i in range(a, m):
            counts[i] += 1  # advancing to the midpoint
        walk(m, b)
        walk(a, m)

    walk(0, n)
    return counts
