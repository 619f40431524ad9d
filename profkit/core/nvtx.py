"""NVTX projection: which ranges enclose the API call that launched each kernel.

A kernel belongs to the ranges open on the launching thread when its launch call ran, not
to ranges that merely overlap its GPU execution. Push/pop ranges nest per thread; start/end
ranges belong to the process and may overlap anything.

A path is the list of enclosing range names, outermost first. `NvtxPath` is its readable
form ('/'-joined, as in `kernels.nvtx_path`) that keeps the exact names: a TensorRT layer
named `/conv1/Conv + /relu/Relu` stays one name. Parsers hand over names (`path_of`); the
store keeps them as a JSON array (`names_json`).

Two implementations of one projection: `project` / `range_paths` (a sort-and-sweep per thread
over Python tuples, for reports of thousands of ranges) and `project_columns` (the same result
from numpy columns: depth by a running sum of push/pop events per thread, parents by
searchsorted per depth level, each distinct path built once; for millions of ranges).
tests/test_nvtx.py checks that both agree on random nestings.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence

from profkit.core.errors import ProfkitError

INF = float("inf")
I64_MAX = (1 << 63) - 1  # an unclosed range's end in integer columns
# Paths repeat their ancestors' names: ranges nested N deep make N^2 text from N names. Real
# traces nest a few to a few tens deep; the paths may take 256x the names' own text (+64 MB)
# before a file is refused as built to explode (10,000 nested ranges: 5 GB of paths from 1 MB).
PATH_TEXT_RATIO, PATH_TEXT_FLOOR = 256, 64 << 20


class PathsTooLarge(ProfkitError):
    """NVTX paths far larger than the names they are made of (the parser's caller names the file)."""

    exit_code = 2


class _Budget:
    """The text the paths of one file may take: spent as each path is made (a push/pop range's
    before its name tuple is built; a call's path through start/end ranges when first made)."""

    def __init__(self, names: int):
        self.left = PATH_TEXT_FLOOR + PATH_TEXT_RATIO * names
        self.names = names

    @classmethod
    def of(cls, ranges: Sequence[tuple]) -> _Budget:
        return cls(sum(len(r[1]) for r in ranges if r[1]))

    def spend(self, chars: int) -> int:
        self.left -= chars
        if self.left < 0:
            raise PathsTooLarge(
                f"NVTX paths over {PATH_TEXT_RATIO}x the text of the {self.names:,} characters of "
                "range names they are made of: ranges nested thousands deep (a hostile or corrupt file)"
            )
        return chars


class NvtxPath(str):
    """'/'-joined range names (what `nvtx_path` shows) that remembers the names themselves."""

    names: tuple[str | None, ...]

    def __new__(cls, names: Iterable[str | None]):
        names = tuple(names)
        self = super().__new__(cls, "/".join("" if n is None else n for n in names))
        self.names = names
        return self

    def __reduce__(self):  # pickled across the ncu reader's child process
        return (NvtxPath, (self.names,))


def path_of(names: Sequence[str | None]) -> NvtxPath | None:
    """The path of enclosing range names (outermost first); None when there is none."""
    return NvtxPath(names) if names else None


def names_of(path) -> tuple | None:
    """The exact names of a path: an NvtxPath knows them; a plain string (a parser that
    predates NvtxPath) is split at '/', which is ambiguous for names holding '/'."""
    if path is None:
        return None
    names = getattr(path, "names", None)
    if names is not None:
        return tuple(names)
    return tuple(str(path).split("/"))


def names_json(names: Sequence[str | None] | None) -> str | None:
    """The structured path as stored (`kernels.nvtx_names`, `nvtx_range.names`)."""
    return None if names is None else json.dumps(list(names), ensure_ascii=False)


def range_paths(ranges: Sequence[tuple]) -> list[tuple[int, NvtxPath]]:
    """(depth, path) for each range, push/pop nesting per (pid, tid).

    ranges: (domain, text, kind, start, end, pid, tid) in any order. A start/end range has
    depth 0 and a path of its own text.
    """
    out: list[tuple[int, NvtxPath] | None] = [None] * len(ranges)
    cache: dict[tuple, NvtxPath] = {}
    budget = _Budget.of(ranges)

    def interned(names: tuple) -> NvtxPath:
        p = cache.get(names)
        if p is None:
            p = cache[names] = NvtxPath(names)
        return p

    by_thread: dict[tuple, list[int]] = defaultdict(list)
    for i, r in enumerate(ranges):
        if r[2] == "push_pop":
            by_thread[(r[5], r[6])].append(i)
        else:
            out[i] = (0, interned((r[1],)))
    for idx in by_thread.values():
        idx.sort(key=lambda i: (ranges[i][3], -(ranges[i][4] if ranges[i][4] is not None else INF)))
        stack: list[tuple] = []  # (start, end, text, names, characters of its path)
        tangled = False  # a range outlived the one it opened in: closed ranges may lie below the top
        for i in idx:
            start, end = ranges[i][3], ranges[i][4]
            end = INF if end is None else end
            stack = _open_at(stack, start, True, tangled, budget)
            tangled = tangled or bool(stack) and end > stack[-1][1]
            chars = budget.spend((stack[-1][4] + 1 if stack else 0) + len(ranges[i][1] or ""))
            names = (stack[-1][3] if stack else ()) + (ranges[i][1],)
            out[i] = (len(stack), interned(names))
            stack.append((start, end, ranges[i][1], names, chars))
    return out  # type: ignore[return-value]


def _open_at(stack: list[tuple], t, opening: bool, tangled: bool, budget: _Budget) -> list[tuple]:
    """The push/pop ranges of `stack` (start, end, text, names, chars) still open at t: at a
    range's start (`opening`) one ending there is closed, at a call it is still open.

    Ranges that nest close from the top. Where one outlived the range it opened in (`tangled`:
    each NVTX domain keeps its own stack on a thread), a range below the top may have closed
    first; the path is then the ranges still open, outermost first, so a call after A closed
    is in B, not in A/B."""

    def closed(x):
        return x[1] <= t if opening else x[1] < t

    if not tangled:
        while stack and closed(stack[-1]):
            stack.pop()
        return stack
    keep = [x for x in stack if not closed(x)]
    if len(keep) == len(stack):
        return stack
    out: list[tuple] = []
    for s, e, text, _, _ in keep:
        chars = budget.spend((out[-1][4] + 1 if out else 0) + len(text or ""))
        out.append((s, e, text, (out[-1][3] if out else ()) + (text,), chars))
    return out


def project(ranges: Sequence[tuple], calls: Iterable[tuple]) -> dict[int, tuple[str | None, NvtxPath | None]]:
    """Map each call to (innermost range text, path outermost/.../innermost).

    ranges: (domain, text, kind, start, end, pid, tid); kind is 'push_pop' or 'start_end'.
    calls: (key, pid, tid, t): the launching API call of one kernel at time t.
    Calls enclosed by no range map to (None, None).
    """
    pp: dict[tuple, list[tuple]] = defaultdict(list)
    se: dict[object, list[tuple]] = defaultdict(list)
    budget = _Budget.of(ranges)
    for r in ranges:
        end = INF if r[4] is None else r[4]
        if r[2] == "push_pop":
            pp[(r[5], r[6])].append((r[3], end, r[1]))
        else:
            se[r[5]].append((r[3], end, r[1]))
    for v in pp.values():
        v.sort(key=lambda x: (x[0], -x[1]))
    for v in se.values():
        v.sort(key=lambda x: (x[0], x[1], "" if x[2] is None else x[2]))

    calls_by_thread: dict[tuple, list[tuple]] = defaultdict(list)
    for key, pid, tid, t in calls:
        calls_by_thread[(pid, tid)].append((t, key))

    cache: dict[tuple, NvtxPath] = {}
    result: dict[int, tuple[str | None, NvtxPath | None]] = {}
    for (pid, tid), cs in calls_by_thread.items():
        cs.sort(key=lambda x: x[0])
        rs = pp.get((pid, tid), [])
        ses = se.get(pid, [])
        stack: list[tuple] = []  # (start, end, text, names, characters of its path)
        tangled = False  # a range outlived the one it opened in (two domains' stacks on one thread)
        i = j = 0
        active: list[tuple] = []
        for t, key in cs:
            while i < len(rs) and rs[i][0] <= t:
                s, e, text = rs[i]
                stack = _open_at(stack, s, True, tangled, budget)
                tangled = tangled or bool(stack) and e > stack[-1][1]
                chars = budget.spend((stack[-1][4] + 1 if stack else 0) + len(text or ""))
                stack.append((s, e, text, (stack[-1][3] if stack else ()) + (text,), chars))
                i += 1
            stack = _open_at(stack, t, False, tangled, budget)
            while j < len(ses) and ses[j][0] <= t:
                active.append(ses[j])
                j += 1
            if active:
                active = [a for a in active if a[1] >= t]
            if not active:
                names = stack[-1][3] if stack else None
            else:
                enclosing = sorted([(s, e, text) for s, e, text, *_ in stack] + active, key=lambda x: x[0])
                names = tuple(x[2] for x in enclosing)
            if names is None:
                result[key] = (None, None)
                continue
            p = cache.get(names)
            if p is None:  # a path not made before (start/end ranges join the push/pop chain): spent
                if active:
                    budget.spend(sum(len(x or "") + 1 for x in names) - 1)
                p = cache[names] = NvtxPath(names)
            result[key] = (names[-1], p)
    return result


# --- columns ------------------------------------------------------------------------------


class Projection:
    """What project_columns finds: per range its depth and path, per call its path (-1: none),
    and the distinct paths as name tuples (path id = index)."""

    def __init__(self, range_depth, range_path, call_path, paths: list[tuple]):
        self.range_depth, self.range_path, self.call_path, self.paths = range_depth, range_path, call_path, paths


def project_columns(
    names: Sequence[str | None],
    r_thread,
    r_pid,
    r_start,
    r_end,
    r_name,
    r_pushpop,
    c_thread,
    c_pid,
    c_time,
    pid_of=None,
) -> Projection:
    """project + range_paths over numpy columns, with the same results.

    names: the distinct range names (r_name indexes it; no two equal). Ranges: thread key
    (a push/pop range nests with the others of its thread), process key (a start/end range
    encloses calls of its process), start, end (I64_MAX: never closed), name index, push/pop
    flag. Calls: thread key, process key, time. Thread and process keys are int64; ranges
    without a thread use a key no call has. r_pid and c_pid may be None with `pid_of`, the
    process key of thread keys (computed only where start/end ranges need it).
    """
    nest = Nesting(names, r_thread, r_pid, r_start, r_end, r_name, r_pushpop, pid_of)
    call_path = nest.place(c_thread, c_pid, c_time)
    return Projection(nest.depth, nest.range_path, call_path, nest.paths)


class Nesting:
    """The ranges' half of project_columns: depth, parent and path of every range (`depth`,
    `range_path`, `paths`); place() then finds the path of calls (which may add paths). The
    column path of the nsys parser writes the ranges while a thread places the calls."""

    def __init__(self, names, r_thread, r_pid, r_start, r_end, r_name, r_pushpop, pid_of=None):
        import numpy as np

        n = len(r_start)
        self.names, self.pid_of = names, pid_of
        self.r_start = r_start = np.asarray(r_start, dtype=np.int64)
        self.r_end = r_end = np.asarray(r_end, dtype=np.int64)
        self.r_name = r_name = np.asarray(r_name)
        r_thread = np.asarray(r_thread, dtype=np.int64)
        pushpop = np.asarray(r_pushpop, dtype=bool)
        # start/end ranges and their process keys (kept for those ranges only: 16 M push/pop
        # ranges need none, and a full column would be 128 MB)
        self.se = se = np.flatnonzero(~pushpop)
        se_pid = pid_of(r_thread[se]) if r_pid is None else np.asarray(r_pid, dtype=np.int64)[se]
        self.se_pid = np.asarray(se_pid, dtype=np.int64)
        ix = np.int32 if n < 2**31 else np.int64  # range indices: 16 M ranges in half the memory
        # push/pop ranges sorted by (thread, start, -end); ties keep input order. All ranges are
        # sorted, push/pop first, and the rest cut off: subsets of the keys would be three more
        # copies of the columns
        neg_end = -r_end
        order = np.lexsort((neg_end, r_start, r_thread, ~pushpop))
        del neg_end
        self.order = order = order[: n - len(se)].astype(ix)
        th = r_thread[order]
        cuts = np.flatnonzero(th[1:] != th[:-1]) + 1
        self.bounds = bounds = np.concatenate(([0], cuts, [len(order)]))
        self.tkeys = th[bounds[:-1]] if len(order) else th[:0]
        del th, cuts
        self.depth = depth = np.zeros(n, dtype=np.int32)
        self.parent = parent = np.full(n, -1, dtype=ix)
        self.fast_threads = []  # (index into tkeys, this thread's ranges sorted) of threads that nest
        self.slow_threads = slow_threads = []  # (index into tkeys, ranges) of threads that do not: the sweep decides
        for k_th, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
            if a == b:
                continue
            idx = order[a:b]  # this thread's ranges, sorted
            if _nest(idx, r_start, r_end, depth, parent):
                self.fast_threads.append((k_th, a, b))
            else:
                slow_threads.append((k_th, idx))

        # paths of push/pop ranges, one depth level at a time: (parent path, name) -> path id
        self.paths = paths = []
        self.index = index = {}
        # the paths' text, spent as each distinct path is made (ranges nested thousands deep: N^2)
        name_len = np.fromiter((len(x or "") for x in names), dtype=np.int64, count=len(names))
        self.budget = budget = _Budget(sum(int(name_len[r_name[a : a + _CHUNK]].sum()) for a in range(0, n, _CHUNK)))
        self.chars = chars = []  # of each path
        self.range_path = range_path = np.full(n, -1, dtype=ix)
        width = len(names) + 1
        max_depth = int(depth[pushpop].max()) if pushpop.any() else -1
        fast = pushpop.copy()
        for _, idx in slow_threads:
            fast[idx] = False
        for d in range(max_depth + 1):
            lvl = np.flatnonzero(fast & (depth == d))
            if not len(lvl):
                continue
            up = range_path[parent[lvl]] if d else np.full(len(lvl), -1, dtype=np.int64)
            up = up.astype(np.int64)
            keys = (up + 1) * width + r_name[lvl]
            uniq, inv = np.unique(keys, return_inverse=True)
            ids = np.empty(len(uniq), dtype=np.int64)
            for k, key in enumerate(uniq.tolist()):
                p, nm = divmod(key, width)
                names_ = (paths[p - 1] if p else ()) + (names[nm],)
                pid_ = index.get(names_)
                if pid_ is None:
                    chars.append(budget.spend((chars[p - 1] + 1 if p else 0) + int(name_len[nm])))
                    pid_ = index[names_] = len(paths)
                    paths.append(names_)
                ids[k] = pid_
            range_path[lvl] = ids[inv]
        del fast

        # threads that do not nest: the sweep (range_paths / project semantics), on those only
        self.slow_rows = []
        for _, idx in slow_threads:
            rows = [self._row(i, "push_pop") for i in idx.tolist()]
            for i, (dp, p) in zip(idx.tolist(), range_paths(rows)):
                depth[i] = dp
                range_path[i] = self.intern(p.names)
            self.slow_rows.append(rows)
        # start/end ranges: depth 0, their own name; they join the path of calls they enclose
        for i in se.tolist():
            range_path[i] = self.intern((names[r_name[i]],))

    def _row(self, i, kind):
        end = self.r_end[i]
        return (
            None,
            self.names[self.r_name[i]],
            kind,
            int(self.r_start[i]),
            None if end == I64_MAX else int(end),
            0,
            0,
        )

    def intern(self, names_: tuple) -> int:
        pid_ = self.index.get(names_)
        if pid_ is None:
            self.chars.append(self.budget.spend(sum(len(x or "") + 1 for x in names_) - 1))
            pid_ = self.index[names_] = len(self.paths)
            self.paths.append(names_)
        return pid_

    def place(self, c_thread, c_pid, c_time):
        """Per call its path (index into `paths`, -1: none)."""
        import numpy as np

        r_start, r_end, parent, range_path = self.r_start, self.r_end, self.parent, self.range_path
        c_thread = np.asarray(c_thread, dtype=np.int64)
        c_time = np.asarray(c_time, dtype=np.int64)
        if c_pid is None:
            c_pid = self.pid_of(c_thread)
        c_pid = np.asarray(c_pid, dtype=np.int64)
        call_range = np.full(len(c_time), -1, dtype=np.int64)  # innermost enclosing push/pop range
        c_order = np.argsort(c_thread, kind="stable")
        c_th = c_thread[c_order]
        for k_th, a, b in self.fast_threads:
            tkey = self.tkeys[k_th]
            lo, hi = np.searchsorted(c_th, tkey, "left"), np.searchsorted(c_th, tkey, "right")
            calls = c_order[lo:hi]
            if not len(calls):
                continue
            idx = self.order[a:b]
            s = r_start[idx]
            cand = np.searchsorted(s, c_time[calls], "right") - 1
            got = np.where(cand >= 0, idx[np.maximum(cand, 0)], -1)
            while True:  # leave ranges that closed before the call for their parents
                closed = (got >= 0) & (r_end[np.maximum(got, 0)] < c_time[calls])
                if not closed.any():
                    break
                got[closed] = parent[got[closed]]
            call_range[calls] = got
            del s, cand, got
        slow = []  # (ranges, calls) of threads that do not nest
        for k_th, idx in self.slow_threads:
            tkey = self.tkeys[k_th]
            lo, hi = np.searchsorted(c_th, tkey, "left"), np.searchsorted(c_th, tkey, "right")
            slow.append((idx, c_order[lo:hi]))
        for (idx, calls), rows in zip(slow, self.slow_rows):
            for pid in np.unique(c_pid[calls]).tolist():  # with the start/end ranges of the calls' process
                mine = calls[c_pid[calls] == pid].tolist()
                rows_p = rows + [self._row(i, "start_end") for i in self.se[self.se_pid == pid].tolist()]
                got = project(rows_p, [(c, 0, 0, int(c_time[c])) for c in mine])
                for c in mine:
                    p = got[c][1]
                    call_range[c] = -2 if p is None else -3 - self.intern(p.names)  # a path, not a range
        call_path = np.full(len(c_time), -1, dtype=np.int64)
        has = call_range >= 0
        call_path[has] = range_path[call_range[has]]
        swept = call_range <= -3
        call_path[swept] = -3 - call_range[swept]
        if len(self.se) and len(c_time):
            _start_end(
                self.names,
                self.se,
                self.se_pid,
                r_start,
                r_end,
                self.r_name,
                c_pid,
                c_time,
                call_range,
                parent,
                call_path,
                self.intern,
                slow,
            )
        return call_path


def _nest(idx, r_start, r_end, depth, parent) -> bool:
    """Depth and parent of one thread's push/pop ranges (sorted by start, -end); False if they
    do not nest (a parent not enclosing its child, a range ending before it starts).

    depth_i = i - #{j before i that closed by s_i}: a range ending where the next begins is
    closed (project's rule). Every range with e_j <= s_i that is not before i is a zero-length
    range at s_i sorted after it (they sort last among ranges starting there), so the count is
    one searchsorted over the sorted ends less those. Parents: the last range before i one
    level up. All in arrays of one thread's size, no events array of twice it."""
    import numpy as np

    m = len(idx)
    s, e = r_start[idx], r_end[idx]
    if (e < s).any():
        return False
    e_sorted = np.sort(e)
    d = np.searchsorted(e_sorted, s, "right")  # closed by s_i
    del e_sorted
    zero = np.flatnonzero(e == s)
    if len(zero):  # zero-length ranges at s_i from i on: counted as closed, yet not before i
        d -= np.searchsorted(s[zero], s, "right") - np.searchsorted(zero, np.arange(m), "left")
    np.subtract(np.arange(m, dtype=d.dtype), d, out=d)
    if (d < 0).any():
        return False
    d = d.astype(np.int32)  # a depth (16 M ranges: 64 MB, not 128)
    par = np.full(m, -1, dtype=np.int32 if m < 2**31 else np.int64)
    ups = np.flatnonzero(d == 0)
    for level in range(1, int(d.max()) + 1 if m else 0):
        kids = np.flatnonzero(d == level)
        if not len(kids):
            ups = kids
            continue
        k = np.searchsorted(ups, kids) - 1
        if not len(ups) or (k < 0).any():
            return False
        par[kids] = ups[k]
        ups = kids
    for a in range(0, m, _CHUNK):  # in chunks: whole-thread temporaries would be 6 columns
        seg = par[a : a + _CHUNK]
        child = np.flatnonzero(seg >= 0)
        p = seg[child]
        child += a
        if (s[p] > s[child]).any() or (e[p] < e[child]).any() or (e[p] <= s[child]).any():
            return False
    del s, e
    depth[idx] = d
    for a in range(0, m, _CHUNK):
        seg = par[a : a + _CHUNK]
        parent[idx[a : a + _CHUNK]] = np.where(seg >= 0, idx[np.maximum(seg, 0)], -1)
    return True


_CHUNK = 1 << 20


def _start_end(
    names, se, se_pid, r_start, r_end, r_name, c_pid, c_time, call_range, parent, call_path, intern, slow_threads
) -> None:
    """Calls inside start/end ranges of their process: path = push/pop chain and start/end
    ranges together, by start (project's rule). Only those calls are walked in Python.
    se_pid: the process key of each start/end range se."""
    import numpy as np

    slow_calls = {int(c) for _, calls in slow_threads for c in calls.tolist()}
    o = np.lexsort((r_end[se], r_start[se], se_pid))
    se_sorted, pids = se[o], se_pid[o]
    c_order = np.lexsort((c_time, c_pid))
    for pid in np.unique(pids).tolist():
        rs = se_sorted[pids == pid]
        mine = c_order[c_pid[c_order] == pid]
        if not len(mine):
            continue
        t = c_time[mine]
        cover = np.zeros(len(mine) + 1, dtype=np.int64)
        np.add.at(cover, np.searchsorted(t, r_start[rs], "left"), 1)
        np.add.at(cover, np.searchsorted(t, r_end[rs], "right"), -1)
        inside = np.cumsum(cover)[:-1] > 0
        if not inside.any():
            continue
        ses = sorted(
            ((int(r_start[i]), int(r_end[i]), names[r_name[i]]) for i in rs.tolist()),
            key=lambda x: (x[0], x[1], "" if x[2] is None else x[2]),
        )
        j, active = 0, []  # indices into ses
        done: dict = {}  # (innermost push/pop range, active start/end ranges) -> path: calls share few
        calls = mine[inside]
        for c, tc, r0 in zip(calls.tolist(), c_time[calls].tolist(), call_range[calls].tolist()):
            while j < len(ses) and ses[j][0] <= tc:
                active.append(j)
                j += 1
            active = [a for a in active if ses[a][1] >= tc]
            if not active:
                continue
            if c in slow_calls:
                continue  # the sweep placed it, start/end ranges included
            key = (r0, tuple(active))
            got = done.get(key)
            if got is None:
                chain = []
                r = r0
                while r >= 0:
                    chain.append((int(r_start[r]), names[r_name[r]]))
                    r = int(parent[r])
                chain.reverse()
                enclosing = sorted([(s, None, nm) for s, nm in chain] + [ses[a] for a in active], key=lambda x: x[0])
                got = done[key] = intern(tuple(x[2] for x in enclosing))
            call_path[c] = got
