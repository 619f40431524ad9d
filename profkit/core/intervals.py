"""Time intervals (start, end) on one clock: their union, its length, and overlaps.

The one place intervals are merged: a range's busy time (timeline), a call's GPU time
(compare), a rank's compute and communication time and what of it overlaps (ranks), a range's
GPU time (advise).
"""
from __future__ import annotations


def union(intervals) -> list[tuple[int, int]]:
    """The intervals merged into disjoint ones, in time order."""
    out: list[list[int]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


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
