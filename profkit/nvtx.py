"""NVTX projection: which ranges enclose the API call that launched each kernel.

A kernel belongs to the ranges open on the launching thread when its launch call ran, not
to ranges that merely overlap its GPU execution. Push/pop ranges nest per thread; start/end
ranges belong to the process and may overlap anything.

Sort-and-sweep per thread: O((ranges + calls) log) with no kernels x ranges join, so a
million of each projects in about a second.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Sequence

INF = float("inf")


def range_paths(ranges: Sequence[tuple]) -> list[tuple[int, str]]:
    """(depth, path) for each range, push/pop nesting per (pid, tid).

    ranges: (domain, text, kind, start, end, pid, tid) in any order. A start/end range has
    depth 0 and a path of its own text.
    """
    out: list[tuple[int, str] | None] = [None] * len(ranges)
    by_thread: dict[tuple, list[int]] = defaultdict(list)
    for i, r in enumerate(ranges):
        if r[2] == "push_pop":
            by_thread[(r[5], r[6])].append(i)
        else:
            out[i] = (0, r[1] or "")
    for idx in by_thread.values():
        idx.sort(key=lambda i: (ranges[i][3], -(ranges[i][4] if ranges[i][4] is not None else INF)))
        stack: list[tuple[float, str]] = []  # (end, path)
        for i in idx:
            start, end = ranges[i][3], ranges[i][4]
            end = INF if end is None else end
            while stack and stack[-1][0] <= start:
                stack.pop()
            path = (stack[-1][1] + "/" if stack else "") + (ranges[i][1] or "")
            out[i] = (len(stack), path)
            stack.append((end, path))
    return out  # type: ignore[return-value]


def project(ranges: Sequence[tuple], calls: Iterable[tuple]) -> dict[int, tuple[str | None, str | None]]:
    """Map each call to (innermost range text, path outermost/.../innermost).

    ranges: (domain, text, kind, start, end, pid, tid); kind is 'push_pop' or 'start_end'.
    calls: (key, pid, tid, t): the launching API call of one kernel at time t.
    Calls enclosed by no range map to (None, None).
    """
    pp: dict[tuple, list[tuple]] = defaultdict(list)
    se: dict[object, list[tuple]] = defaultdict(list)
    for r in ranges:
        end = INF if r[4] is None else r[4]
        if r[2] == "push_pop":
            pp[(r[5], r[6])].append((r[3], end, r[1] or ""))
        else:
            se[r[5]].append((r[3], end, r[1] or ""))
    for v in pp.values():
        v.sort(key=lambda x: (x[0], -x[1]))
    for v in se.values():
        v.sort()

    calls_by_thread: dict[tuple, list[tuple]] = defaultdict(list)
    for key, pid, tid, t in calls:
        calls_by_thread[(pid, tid)].append((t, key))

    result: dict[int, tuple[str | None, str | None]] = {}
    for (pid, tid), cs in calls_by_thread.items():
        cs.sort(key=lambda x: x[0])
        rs = pp.get((pid, tid), [])
        ses = se.get(pid, [])
        stack: list[tuple] = []  # (start, end, text, path)
        i = j = 0
        active: list[tuple] = []
        for t, key in cs:
            while i < len(rs) and rs[i][0] <= t:
                s, e, text = rs[i]
                while stack and stack[-1][1] <= s:
                    stack.pop()
                path = (stack[-1][3] + "/" if stack else "") + text
                stack.append((s, e, text, path))
                i += 1
            while stack and stack[-1][1] < t:
                stack.pop()
            while j < len(ses) and ses[j][0] <= t:
                active.append(ses[j])
                j += 1
            if active:
                active = [a for a in active if a[1] >= t]
            if not active:
                result[key] = (stack[-1][2], stack[-1][3]) if stack else (None, None)
                continue
            enclosing = sorted([(s, e, text) for s, e, text, _ in stack] + active, key=lambda x: x[0])
            result[key] = (enclosing[-1][2], "/".join(x[2] for x in enclosing))
    return result
