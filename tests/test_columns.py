"""The column-at-a-time reductions agree with the plain Python ones they stand in for."""
import numpy as np

from profkit.core import intervals
from profkit.core.columns import row_key, slice_covered, slice_max, slice_min


def test_slice_reductions_match_python():
    rng = np.random.default_rng(1)
    for _ in range(200):
        n = int(rng.integers(1, 60))
        start = rng.integers(0, 1000, n)
        end = start + rng.integers(0, 200, n)
        lo = rng.integers(0, n, int(rng.integers(1, 30)))
        hi = np.array([rng.integers(a + 1, n + 1) for a in lo])
        got = slice_covered(start, end, lo, hi, chunk=int(rng.integers(1, 50)))
        assert got.tolist() == [intervals.covered(zip(start[a:b].tolist(), end[a:b].tolist())) for a, b in zip(lo, hi)]
        assert slice_max(end, lo, hi).tolist() == [end[a:b].max() for a, b in zip(lo, hi)]
        assert slice_min(start, lo, hi).tolist() == [start[a:b].min() for a, b in zip(lo, hi)]


def test_row_key_equal_exactly_for_equal_rows():
    a = np.array([[1, 5, 7], [1, 5, 8], [2, 5, 7], [1, 5, 7], [-1, -1, 3]])
    k = row_key(a)
    assert [k[i] == k[j] for i, j in ((0, 3), (0, 1), (0, 2), (1, 4))] == [True, False, False, False]


def test_large_union_is_the_python_union(monkeypatch):
    rng = np.random.default_rng(2)
    start = rng.integers(0, 10**6, 9000)
    pairs = list(zip(start.tolist(), (start + rng.integers(0, 3000, 9000)).tolist()))
    fast = intervals.union(pairs)
    monkeypatch.setattr(intervals, "_VECTOR", 10**9)
    assert fast == intervals.union(pairs) and all(type(x) is int for x in fast[0])


def test_segment_lengths_match_python():
    rng = np.random.default_rng(3)
    for scale in (1, 1 << 52):  # (spans of 2^60 and more: the lifted segments pass 62 bits, so chunks)
        for _ in range(100):
            sizes = rng.integers(1, 8, int(rng.integers(1, 12)))
            start = rng.integers(0, 1000, int(sizes.sum())) * scale
            end = start + rng.integers(-50, 300, len(start)) * scale  # (some backwards: they cover nothing)
            first = np.concatenate([[0], np.cumsum(sizes)[:-1]])
            seg = np.repeat(np.arange(len(sizes)), sizes)
            order = np.lexsort((start, seg))
            start, end = start[order], end[order]
            want = [
                intervals.covered((s, max(s, e)) for s, e in zip(start[a:b].tolist(), end[a:b].tolist()))
                for a, b in zip(first, np.append(first[1:], len(start)))
            ]
            assert intervals.segment_lengths(first, start, end).tolist() == want
