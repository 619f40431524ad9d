"""Time intervals (start, end) on one clock: their union, its length, and overlaps.

The one place intervals are merged: a range's busy time (timeline), a call's GPU time
(compare), a rank's compute and communication time and what of it overlaps (ranks), a range's
GPU time (advise).
"""

from __future__ import annotations

import numpy as np

# above this many intervals, merged by numpy: the Python loop costs ~1 s per million
_VECTOR = 4096


def union(intervals) -> list[tuple[int, int]]:
    """The intervals merged into disjoint ones, in time order (touching ones merged)."""
    if not isinstance(intervals, (list, tuple)):
        intervals = list(intervals)
    if len(intervals) > _VECTOR:
        merged = _union_array(intervals)
        if merged is not None:
            return merged
    out: list[list[int]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _union_array(intervals) -> list[tuple[int, int]] | None:
    """union() of integer intervals, column-at-a-time; None where they are not all integers."""
    a = np.array(intervals)
    if a.dtype.kind not in "iu" or a.ndim != 2 or a.shape[1] != 2:
        return None
    a = a[np.lexsort((a[:, 1], a[:, 0]))]
    s, e = a[:, 0], a[:, 1]
    reach = np.maximum.accumulate(e)  # the furthest end so far
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > reach[:-1]  # a gap before it: a new merged interval starts
    first = np.flatnonzero(new)
    ends = reach[np.append(first[1:] - 1, len(s) - 1)]
    return list(zip(s[first].tolist(), ends.tolist()))


def length(merged) -> int:
    """Total length of disjoint intervals (union() output)."""
    return sum(e - s for s, e in merged)


def covered(intervals) -> int:
    """Total length covered by possibly overlapping intervals."""
    return length(union(intervals))


def intersection(a, b) -> int:
    """Total length of the intersection of two merged interval lists."""
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total
