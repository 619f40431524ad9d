"""Column-at-a-time helpers: query results as numpy columns, and per-slice reductions.

The analyses read up to millions of launches and ranges; a Python dict per row costs more than
the work done on it. These read integer columns straight into arrays and reduce many slices
[lo, hi) of one array at once (a range's launches are a slice of its thread's launches).
"""

from __future__ import annotations

import numpy as np


def ints(conn, sql: str, params=(), ncols: int | None = None, chunk: int = 1 << 16) -> np.ndarray:
    """An (n, ncols) int64 array of a query whose every value is an integer (no NULLs:
    COALESCE them in the SQL). Read a chunk of rows at a time: a million rows as Python
    tuples would hold several times the array's memory."""
    cur = conn.execute(sql, params)
    parts = []
    while rows := cur.fetchmany(chunk):
        parts.append(np.array(rows, dtype=np.int64))
    if not parts:
        return np.zeros((0, ncols or len(cur.description or ())), dtype=np.int64)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def row_key(a) -> np.ndarray:
    """One int64 per row of an (n, k) int array (or a list of k columns), equal where the rows
    are equal (a 1-D unique per column: sorting rows as tuples is an order of magnitude slower)."""
    cols = list(a.T) if isinstance(a, np.ndarray) else list(a)
    key = np.zeros(len(cols[0]) if cols else 0, dtype=np.int64)
    for col in cols:
        if not len(col):
            continue
        lo, hi = int(col.min()), int(col.max())
        if lo == hi:
            continue  # (one value: nothing to tell apart)
        if hi - lo < min(1 << 22, 4 * len(col)):  # small codes: counted, not sorted
            seen = np.bincount(col - lo, minlength=hi - lo + 1) > 0
            rank = np.cumsum(seen) - 1
            key = key * int(rank[-1] + 1) + rank[col - lo]
            continue
        values, ix = np.unique(col, return_inverse=True)
        key = key * len(values) + ix.reshape(-1)
    return key


def unique_inverse(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(a, return_inverse=True) of an int array, counted instead of sorted where its
    values span little more than its length (ids, codes)."""
    if not len(a):
        return a[:0], np.zeros(0, dtype=np.intp)
    lo, hi = int(a.min()), int(a.max())
    if hi - lo >= 4 * len(a) + 1024:
        u, inv = np.unique(a, return_inverse=True)
        return u, inv.reshape(-1)
    seen = np.bincount(a - lo, minlength=hi - lo + 1) > 0
    rank = np.cumsum(seen) - 1
    return np.flatnonzero(seen) + lo, rank[a - lo]


def lex_order(cols: list[np.ndarray]) -> np.ndarray:
    """np.lexsort(cols) (the last column the primary key; equal rows kept in their order), by
    one stable sort of a single integer made of them where their spans multiply within 62
    bits: a fraction of lexsort's passes over millions of rows."""
    if not len(cols[0]):
        return np.zeros(0, dtype=np.intp)
    lows = [int(c.min()) for c in cols]
    spans = [int(c.max()) - lo + 1 for c, lo in zip(cols, lows)]
    total = 1
    for w in spans:
        total *= w
    if total >= 1 << 62:
        return np.lexsort(cols)
    key = np.zeros(len(cols[0]), dtype=np.int64)
    for c, lo, w in zip(reversed(cols), reversed(lows), reversed(spans)):
        key = key * w + (c - lo)
    return np.argsort(key, kind="stable")


def slice_max(a: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """max(a[lo[i]:hi[i]]) for every i; every slice non-empty."""
    return _reduce(np.maximum, a, lo, hi)


def slice_min(a: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """min(a[lo[i]:hi[i]]) for every i; every slice non-empty."""
    return _reduce(np.minimum, a, lo, hi)


def _reduce(op, a, lo, hi):
    if not len(lo):
        return np.zeros(0, dtype=a.dtype)
    # reduceat over [lo0, hi0, lo1, hi1, ...]: its even entries are the slices (odd ones are
    # the stretches between, dropped); one pad element keeps every hi a valid index
    padded = np.append(a, a[-1:])
    idx = np.empty(2 * len(lo), dtype=np.int64)
    idx[0::2], idx[1::2] = lo, hi
    return op.reduceat(padded, idx)[0::2]


def slice_covered(
    start: np.ndarray, end: np.ndarray, lo: np.ndarray, hi: np.ndarray, chunk: int = 1 << 22
) -> np.ndarray:
    """Length of the union of the intervals [start[j], end[j]) for j in each slice [lo[i], hi[i]);
    every slice non-empty. Each slice's intervals are sorted by start and swept together, in
    chunks of about `chunk` intervals in all (nested slices repeat their intervals)."""
    out = np.zeros(len(lo), dtype=np.int64)
    # a slice of one interval covers its length (most slices, where each call has its range)
    one = hi - lo == 1
    out[one] = np.maximum(end[lo[one]] - start[lo[one]], 0)
    many = np.flatnonzero(~one)
    lo, hi = lo[many], hi[many]
    total = np.cumsum(hi - lo)
    first = 0
    while first < len(lo):
        done = total[first - 1] if first else 0
        last = max(first + 1, int(np.searchsorted(total, done + chunk, side="right")))
        out[many[first:last]] = _covered(start, end, lo[first:last], hi[first:last])
        first = last
    return out


def _covered(start, end, lo, hi):
    n = hi - lo
    seg = np.repeat(np.arange(len(lo)), n)
    # the index of each member of each slice: lo of its slice plus its place in it
    j = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n) + np.repeat(lo, n)
    base = np.repeat(slice_min(start, lo, hi), n)
    s, e = start[j] - base, end[j] - base  # from 0 within each slice
    width = int(e.max()) + 1
    if len(lo) > 1 and len(lo) * width >= 1 << 62:  # the lift below would overflow: halve
        m = len(lo) // 2
        return np.concatenate([_covered(start, end, lo[:m], hi[:m]), _covered(start, end, lo[m:], hi[m:])])
    order = np.lexsort((s, seg))
    seg, s, e = seg[order], s[order], e[order]
    # a running max of the ends within each slice: each slice lifted above every earlier one
    run_max = np.maximum.accumulate(e + seg * width) - seg * width
    prev = np.empty_like(run_max)
    prev[1:] = run_max[:-1]
    first = np.ones(len(seg), dtype=bool)
    first[1:] = seg[1:] != seg[:-1]
    prev[first] = s[first]
    gain = np.clip(e - np.maximum(s, prev), 0, None)
    return np.add.reduceat(gain, np.flatnonzero(first))
