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
    s, e = union_arrays(a[:, 0], a[:, 1])
    return list(zip(s.tolist(), e.tolist()))


def union_arrays(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """union() of intervals given as two integer columns: the merged starts and ends."""
    if not len(start):
        return start[:0], end[:0]
    order = np.lexsort((end, start))
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)  # the furthest end so far
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > reach[:-1]  # a gap before it: a new merged interval starts
    first = np.flatnonzero(new)
    return s[first], reach[np.append(first[1:] - 1, len(s) - 1)]


def segment_lengths(first: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Length of the union of each segment's intervals, for rows sorted by segment, then start;
    `first`: the row each segment starts at (ascending, from 0). A backwards interval covers
    nothing."""
    out = np.zeros(len(first), dtype=np.int64)
    if not len(first):
        return out
    end = np.maximum(end, start)
    span = np.maximum.reduceat(end, first) - start[first] + 1
    # each segment lifted past the ones before it (a gap of one between): one running max of the
    # ends then serves them all, no segment reaching into the next. Segments a chunk at a time
    # where their lifted spans would pass 62 bits.
    last = np.append(first[1:], len(start))
    total = np.cumsum(span.astype(np.float64))  # (as floats: in order past 63 bits)
    lo = 0
    while lo < len(first):
        done = float(total[lo - 1]) if lo else 0.0
        hi = max(lo + 1, int(np.searchsorted(total, done + 2.0**62, side="left")))
        n = last[lo:hi] - first[lo:hi]
        base = np.repeat(start[first[lo:hi]], n)
        offset = np.repeat(np.cumsum(span[lo:hi]) - span[lo:hi], n)
        rows = slice(int(first[lo]), int(last[hi - 1]))
        s, e = start[rows] - base + offset, end[rows] - base + offset
        before = np.empty_like(e)
        before[0] = s[0]
        before[1:] = np.maximum.accumulate(e)[:-1]
        gain = np.maximum(e - np.maximum(s, before), 0)
        out[lo:hi] = np.add.reduceat(gain, first[lo:hi] - first[lo])
        lo = hi
    return out


def minus_arrays(start: np.ndarray, end: np.ndarray, bs: np.ndarray, be: np.ndarray) -> np.ndarray:
    """The lengths of the pieces of merged intervals [start, end) outside merged intervals
    [bs, be) (each piece a maximal stretch of positive length), in no particular order."""
    # the complement of b: the stretches before, between and after its intervals
    lo = np.concatenate([[np.iinfo(np.int64).min], be])
    hi = np.concatenate([bs, [np.iinfo(np.int64).max]])
    # per interval of a, the complement stretches that overlap it: [first, last)
    first = np.searchsorted(hi, start, side="right")
    last = np.searchsorted(lo, end, side="left")
    n = np.maximum(last - first, 0)
    which = np.repeat(np.arange(len(start)), n)
    j = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n) + np.repeat(first, n)
    pieces = np.minimum(end[which], hi[j]) - np.maximum(start[which], lo[j])
    return pieces[pieces > 0]


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
