"""harness/adapters/numpy/np_schedule.py: the segments of scheme=segments, the recompute counts of scheme=recursive
(what validate's check 3 holds the numpy adapter to) and the saved bytes of a tape, each storage once."""

import math

import numpy as np
from np_schedule import array_bytes, recursive_recompute_counts, segment_bounds


def test_segments_cover_the_chain_in_near_equal_parts():
    for n in range(1, 21):
        for k in range(1, n + 1):
            b = segment_bounds(n, k)
            assert len(b) == k
            assert b[0][0] == 0 and b[-1][1] == n
            assert all(b[j][1] == b[j + 1][0] for j in range(k - 1))
            sizes = [hi - lo for lo, hi in b]
            assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1


def test_recursive_counts_on_powers_of_two():
    # For L = 2^d, block i lies in a left half at each level where its bit is 0, plus its forward with tape.
    for d in range(6):
        n = 1 << d
        assert recursive_recompute_counts(n) == [1 + d - bin(i).count("1") for i in range(n)]


def test_recursive_counts_bounded_by_log():
    for n in range(1, 65):
        c = recursive_recompute_counts(n)
        assert len(c) == n
        assert c[-1] == 1  # the last block is never in a left half
        assert min(c) >= 1 and max(c) <= math.ceil(math.log2(n)) + 1


def test_array_bytes_counts_each_storage_once():
    a = np.zeros((4, 8), dtype=np.float32)  # 128 bytes
    b = np.zeros(3, dtype=np.float64)  # 24 bytes
    view = a[1:3]  # a's storage again
    assert array_bytes((a, view, (b, [a.T, None, 7]), "x")) == 128 + 24
    assert array_bytes(()) == 0
    assert array_bytes((view,)) == 128  # a view counts its whole base
