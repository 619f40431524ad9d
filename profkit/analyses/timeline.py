"""Where the GPU time of an NVTX range goes: busy, idle (launch overhead), and per operator.

Read from the store's timeline launches (nsys or CUPTI tracer) and NVTX ranges; nothing else.

For each *instance* of a push/pop range (one push and its pop on one thread), its kernels
are those whose launching API call ran on that thread inside the range: the parsers' own
NVTX projection, applied per instance. A launch from a worker thread that inherited its
process's lead thread's ranges (profkit.store.inherit: autograd's backward inside `step N`)
counts for the lead thread's ranges as well as its own thread's. A kernel replayed from a CUDA
graph belongs to the range around its cudaGraphLaunch (capture nsys with --cuda-graph-trace=node
to see them).

    window  first kernel start .. last kernel end of the instance, on the GPU
    busy    length of the union of its kernel intervals (all streams merged)
    idle    window - busy: the GPU ran none of the range's kernels. Inside a range that only
            launches and does not wait, this is the GPU waiting for the CPU to launch the
            next kernel: launch overhead. idle_pct = idle / window
    launch_calls  distinct launching API calls (a graph replay is one call for all its kernels)

A path's row sums its instances; `calls` picks the repeated unit (a decode `step`, a prefill
`forward`) whose idle share is the launch overhead of one call. Memory copies and memsets are not in the store, so time a
range spends in them counts as idle.

Operator shares: inside a scope path, each kernel counts toward its innermost range (the
operator ranges a forward pushes: `norm`, `attn`, `mlp`...); share = that range's kernel time
over all kernel time of the scope. Kernels outside any operator range count under the
innermost range they have (e.g. the call range itself).
"""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np

from profkit.analyses.selection import NULL, id_bounds, id_span
from profkit.core import columns
from profkit.core.columns import slice_covered, slice_max, slice_min
from profkit.core.errors import BadArgument
from profkit.store.store import Store


def _under(names: list | None, prefix: str | None) -> bool:
    """Whether a path (its range names) lies under `prefix`: the readable path of its first
    names, cut at a name boundary (a name holding '/' is one name), or a JSON array of names."""
    if prefix is None:
        return True
    if not names:
        return False
    if prefix.startswith("["):
        try:
            want = json.loads(prefix)
        except ValueError:
            want = None
        if isinstance(want, list):
            return names[: len(want)] == want
    prefix = prefix.rstrip("/")
    joined = ""
    for i, n in enumerate(names):
        joined = (joined + "/" if i else "") + ("" if n is None else n)
        if joined == prefix:
            return True
        if len(joined) >= len(prefix):
            return False
    return False


def _names(js: str | None, path: str | None) -> list | None:
    if js:
        return json.loads(js)
    return path.split("/") if path is not None else None


def _launches(store: Store, run: str) -> list[dict]:
    """Timeline launches with their GPU interval and launching call (nsys wins over cupti)."""
    src = store.timeline_source(run)
    if not src:
        return []
    return store.query(
        """
        SELECT kernel_id, short_name, kernel_name, nvtx_range, nvtx_path, start_ns, end_ns,
               pid, nvtx_tid AS tid, api_start_ns, nvtx_names
        FROM kernels WHERE run = ? AND source = ? AND start_ns IS NOT NULL AND end_ns IS NOT NULL""",
        (run, src),
    )


def _launch_columns(store: Store, run: str, window: tuple[int, int] | None):
    """The timeline's launches that have a launching call, as columns sorted by thread, then
    call (api start, correlation id): thread, api start, start, end, correlation id; and the
    threads' keys (file, pid, tid: one row per thread number). A launch that inherited its lead
    thread's ranges (profkit.store.inherit) is on both threads: the lead thread's ranges and
    its own thread's each hold it."""
    src = store.timeline_source(run)
    if not src:
        return None, None
    n = NULL
    within, at_most = id_span(store, "launch_row", run)
    kid, file_id, pid, tid, api, start, end, corr = store.int_columns(
        f"""
        SELECT id, coalesce(file_id, -2), coalesce(pid, -1), coalesce(tid, -1), coalesce(api_start_ns, {n}),
               coalesce(start_ns, {n}), coalesce(end_ns, {n}), coalesce(correlation_id, -1)
        FROM launch_row WHERE {within} AND +run = ? AND source = ? AND timeline_id IS NULL""",
        (run, src),
        8,
        at_most=at_most,
    )[0]
    keep = (api != n) & (start != n) & (end != n)
    if window is not None:
        keep &= (start >= window[0]) & (start < window[1])
    # the inherited launches once more, on the lead thread (CROSS JOIN: SQLite walks the few
    # rows of launch_inherit, not every launch of the run)
    inherit = columns.ints(
        store.conn,
        "SELECT i.launch_id, coalesce(i.tid, -1) FROM launch_inherit i CROSS JOIN launch_row l "
        "ON l.id = i.launch_id WHERE l.run = ? AND l.source = ? AND l.timeline_id IS NULL",
        (run, src),
        2,
    )
    rows = np.flatnonzero(keep)
    if len(inherit):
        order = np.argsort(kid)
        at = np.minimum(np.searchsorted(kid, inherit[:, 0], sorter=order), len(kid) - 1)
        at = order[at]
        found = (kid[at] == inherit[:, 0]) & keep[at]
        at, lead_tid = at[found], inherit[found, 1]
        rows = np.concatenate([rows, at])
        tid = np.concatenate([tid[rows[: len(rows) - len(at)]], lead_tid])
    else:
        tid = tid[rows]
    if not len(rows):
        return None, None
    file_id, pid, api, start, end, corr = (x[rows] for x in (file_id, pid, api, start, end, corr))
    key = np.column_stack([file_id, pid, tid])
    _, first, thread = np.unique(columns.row_key(key), return_index=True, return_inverse=True)
    threads, thread = key[first], thread.reshape(-1)
    ks = np.column_stack([thread, api, start, end, corr])
    ks = ks[np.lexsort((ks[:, 4], ks[:, 1], ks[:, 0]))]
    return ks, threads


def _range_chunks(store: Store, run: str, chunk: int = 1 << 21):
    """The run's push/pop ranges, in row order, a stretch of about `chunk` row ids at a time:
    (n, 6) arrays of file, pid, tid, path id, start, end (the whole table at once would hold
    gigabytes at 16 M ranges)."""
    bounds = id_bounds(store, "nvtx_event", run)
    if bounds is None:
        return
    lo, hi = bounds
    for a in range(lo, hi + 1, chunk):
        b = min(hi, a + chunk - 1)
        cols = store.int_columns(
            f"""
            SELECT file_id, coalesce(pid, -1), coalesce(tid, -1), path_id, start_ns, end_ns FROM nvtx_event
            WHERE id BETWEEN {a} AND {b} AND +run = ? AND kind = 'push_pop' AND path_id IS NOT NULL
              AND end_ns IS NOT NULL AND start_ns IS NOT NULL""",
            (run,),
            6,
            at_most=b - a + 1,
        )[0]
        if len(cols[0]):
            yield np.column_stack(cols)


def ranges(
    store: Store, run: str | None = None, prefix: str | None = None, window: tuple[int, int] | None = None
) -> list[dict]:
    """One row per push/pop range path (under `prefix`) that launched kernels: instances,
    kernels, launch calls, and window / busy / idle time summed over its instances.
    `window`: only launches starting in this GPU window (a phase, profkit.analyses.phases).

    Column-at-a-time: a range instance's launches are the slice of its thread's launches whose
    call starts inside it, found by one binary search per range over all threads at once; the
    ranges are read and summed a stretch at a time (16 M of them at once: gigabytes)."""
    run = store.require_run(run)
    ks, threads = _launch_columns(store, run, window)
    if ks is None:
        return []
    thread, api, start, end, corr = ks.T
    # the paths under `prefix`, numbered by their readable path (several name lists may share one)
    paths: list[str] = []
    number: dict[str, int] = {}
    names: dict[int, str | None] = {}
    path_rows = store.conn.execute("SELECT id, path, names FROM nvtx_path").fetchall()
    of_id = np.full(max((r[0] for r in path_rows), default=0) + 1, -1, dtype=np.int64)
    for pid_, path, js in path_rows:
        names[pid_] = js
        if _under(_names(js, path), prefix):
            of_id[pid_] = number.setdefault(path, len(number))
            if len(paths) < len(number):
                paths.append(path)
    if not paths:
        return []
    # (thread, api start) as one sortable key: threads far apart on one axis; a range's ends
    # are clamped into the launches' span (the same launches lie inside it)
    zero = int(api.min()) - 1
    span = int(api.max()) + 1 - zero + 1
    flat = thread * span + (api - zero)
    kernel_ns = np.concatenate([[0], np.cumsum(end - start)])
    new_call = np.ones(len(api), dtype=bool)  # a launch whose call differs from the one before it
    new_call[1:] = (api[1:] != api[:-1]) | (corr[1:] != corr[:-1]) | (thread[1:] != thread[:-1])
    calls_before = np.concatenate([[0], np.cumsum(new_call)])
    keys = ("instances", "kernels", "launch_calls", "cpu_ns", "window_ns", "busy_ns", "kernel_ns")
    sums = {k: np.zeros(len(paths), dtype=np.int64) for k in keys}
    # each path's first instance (by start, then row order): its names are the path's
    first_start = np.full(len(paths), np.iinfo(np.int64).max, dtype=np.int64)
    first_id = np.full(len(paths), -1, dtype=np.int64)
    for rs in _range_chunks(store, run):
        group = of_id[rs[:, 3]]
        rs, group = rs[group >= 0], group[group >= 0]
        on = _thread_of(threads, rs[:, :3])
        rs, group, on = rs[on >= 0], group[on >= 0], on[on >= 0]
        lo = np.searchsorted(flat, on * span + (np.clip(rs[:, 4], zero, zero + span - 1) - zero), side="left")
        hi = np.searchsorted(flat, on * span + (np.clip(rs[:, 5], zero, zero + span - 1) - zero), side="right")
        some = hi > lo
        rs, group, lo, hi = rs[some], group[some], lo[some], hi[some]
        if not len(rs):
            continue
        per = {
            "instances": np.ones(len(rs), dtype=np.int64),
            "kernels": hi - lo,
            "launch_calls": 1 + calls_before[hi] - calls_before[lo + 1],
            "cpu_ns": rs[:, 5] - rs[:, 4],
            "window_ns": slice_max(end, lo, hi) - slice_min(start, lo, hi),
            "busy_ns": slice_covered(start, end, lo, hi),
            "kernel_ns": kernel_ns[hi] - kernel_ns[lo],
        }
        for k, v in per.items():
            sums[k] += _sum_by(group, v, len(paths))
        first = np.lexsort((rs[:, 4], group))
        lead = first[np.concatenate([[True], group[first][1:] != group[first][:-1]])]
        g = group[lead]
        earlier = rs[lead, 4] < first_start[g]  # (a tie: the earlier stretch's instance)
        first_start[g[earlier]], first_id[g[earlier]] = rs[lead[earlier], 4], rs[lead[earlier], 3]
    out = []
    for g in np.flatnonzero(first_id >= 0).tolist():
        a = {"path": paths[g], "names": names[int(first_id[g])], **{k: int(v[g]) for k, v in sums.items()}}
        n = a["instances"]
        a["idle_ns"] = a["window_ns"] - a["busy_ns"]
        a["idle_pct"] = 100.0 * a["idle_ns"] / a["window_ns"] if a["window_ns"] else 0.0
        a["window_us_per_instance"] = a["window_ns"] / n / 1e3
        a["busy_us_per_instance"] = a["busy_ns"] / n / 1e3
        a["idle_us_per_instance"] = a["idle_ns"] / n / 1e3
        a["kernels_per_instance"] = a["kernels"] / n
        a["launch_calls_per_instance"] = a["launch_calls"] / n
        out.append(a)
    return sorted(out, key=lambda a: a["path"])


def _thread_of(threads: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The thread number of each (file, pid, tid) row among `threads` (-1: a thread that
    launched nothing)."""
    if len(threads) == 1:
        return np.where((rows == threads[0]).all(axis=1), 0, -1)
    key = columns.row_key(np.concatenate([threads, rows]))
    known, mine = key[: len(threads)], key[len(threads) :]
    order = np.argsort(known)
    at = np.minimum(np.searchsorted(known, mine, sorter=order), len(known) - 1)
    return np.where(known[order[at]] == mine, order[at], -1)


def _sum_by(group: np.ndarray, v: np.ndarray, n: int) -> np.ndarray:
    """Exact int64 sums of v per group (bincount's weights are floats)."""
    out = np.zeros(n, dtype=np.int64)
    np.add.at(out, group, v)
    return out


def calls(rows: list[dict]) -> list[dict]:
    """The repeated unit of each workload: rows of `ranges` pushed more than once inside a
    parent range pushed once (a `step` or `forward` inside its variant/shape range)."""
    n = {r["path"]: r["instances"] for r in rows}

    def parent(r):
        names = _names(r.get("names"), r["path"])
        return "/".join("" if x is None else x for x in names[:-1]) if len(names) > 1 else None

    return [r for r in rows if r["instances"] > 1 and parent(r) is not None and n.get(parent(r)) == 1]


def operators(store: Store, run: str | None, scope: str) -> list[dict]:
    """Kernel time under `scope` (an NVTX path) by innermost range, largest share first."""
    run = store.require_run(run)
    ks = [k for k in _launches(store, run) if _under(_names(k["nvtx_names"], k["nvtx_path"]), scope)]
    if not ks:
        raise BadArgument(f"no kernels under the NVTX path {scope!r} in run {run!r}")
    total = sum(k["end_ns"] - k["start_ns"] for k in ks)
    by: dict[str, dict] = {}
    for k in ks:
        op = k["nvtx_range"] or "(none)"
        b = by.setdefault(op, {"operator": op, "kernels": 0, "kernel_ns": 0, "names": defaultdict(int)})
        b["kernels"] += 1
        b["kernel_ns"] += k["end_ns"] - k["start_ns"]
        b["names"][k["short_name"] or k["kernel_name"]] += k["end_ns"] - k["start_ns"]
    out = []
    for b in by.values():
        top = max(b["names"].items(), key=lambda x: x[1])[0]
        out.append(
            {
                "scope": scope,
                "operator": b["operator"],
                "kernels": b["kernels"],
                "kernel_ns": b["kernel_ns"],
                "share_pct": 100.0 * b["kernel_ns"] / total if total else 0.0,
                "top_kernel": top,
            }
        )
    return sorted(out, key=lambda b: (-b["kernel_ns"], b["operator"]))


def workload_split(rows: list[dict], op: str | None) -> tuple[list[dict], list[dict]]:
    """`ranges` rows inside a lab workload's operator range `op` and those outside it. A lab
    workload's warm-up (compilation, autotuning, graph capture) runs outside its op/variant/shape
    ranges but pushes the same operator ranges: kept apart, so they are not read as the workload.
    Every row is inside where `op` is None (not a lab run)."""
    inside = [r for r in rows if op is None or r["path"] == op or r["path"].startswith(op + "/")]
    return inside, [r for r in rows if r not in inside]
