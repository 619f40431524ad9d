"""Where the GPU time of an NVTX range goes: busy, idle (launch overhead), and per operator.

Read from the store's timeline launches (nsys or CUPTI tracer) and NVTX ranges; nothing else.

For each *instance* of a push/pop range (one push and its pop on one thread), its kernels
are those whose launching API call ran on that thread inside the range: the parsers' own
NVTX projection, applied per instance. A kernel replayed from a CUDA graph belongs to the
range around its cudaGraphLaunch (capture nsys with --cuda-graph-trace=node to see them).

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

import bisect
import json
from collections import defaultdict

from profkit.core.errors import BadArgument
from profkit.core.intervals import covered
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
            return names[:len(want)] == want
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
    return store.query("""
        SELECT id AS kernel_id, file_id, short_name, kernel_name, nvtx_range, nvtx_path, start_ns, end_ns,
               pid, tid, api_start_ns, correlation_id, (SELECT names FROM nvtx_path p WHERE p.id = path_id) AS nvtx_names
        FROM launch WHERE run = ? AND source = ? AND timeline_id IS NULL
          AND start_ns IS NOT NULL AND end_ns IS NOT NULL""", (run, src))


def ranges(store: Store, run: str | None = None, prefix: str | None = None,
           window: tuple[int, int] | None = None) -> list[dict]:
    """One row per push/pop range path (under `prefix`) that launched kernels: instances,
    kernels, launch calls, and window / busy / idle time summed over its instances.
    `window`: only launches starting in this GPU window (a phase, profkit.analyses.phases)."""
    run = store.require_run(run)
    by_thread: dict[tuple, list[tuple]] = defaultdict(list)
    for k in _launches(store, run):
        if window is not None and not window[0] <= k["start_ns"] < window[1]:
            continue
        if k["api_start_ns"] is not None:
            by_thread[(k["file_id"], k["pid"], k["tid"])].append(
                (k["api_start_ns"], k["start_ns"], k["end_ns"], k["correlation_id"]))
    for v in by_thread.values():
        v.sort()
    keys = {t: [x[0] for x in v] for t, v in by_thread.items()}
    agg: dict[str, dict] = {}
    for r in store.query("""SELECT file_id, pid, tid, path, names, start_ns, end_ns FROM nvtx_range
                            WHERE run = ? AND kind = 'push_pop' AND path IS NOT NULL AND end_ns IS NOT NULL
                            ORDER BY path, start_ns""", (run,)):
        if not _under(_names(r["names"], r["path"]), prefix):
            continue
        t = (r["file_id"], r["pid"], r["tid"])
        ks = by_thread.get(t)
        if not ks:
            continue
        lo = bisect.bisect_left(keys[t], r["start_ns"])
        hi = bisect.bisect_right(keys[t], r["end_ns"])
        mine = ks[lo:hi]
        if not mine:
            continue
        window = max(k[2] for k in mine) - min(k[1] for k in mine)
        busy = covered((k[1], k[2]) for k in mine)
        a = agg.setdefault(r["path"], {"path": r["path"], "names": r["names"], "instances": 0, "kernels": 0, "launch_calls": 0,
                                        "cpu_ns": 0, "window_ns": 0, "busy_ns": 0, "kernel_ns": 0})
        a["instances"] += 1
        a["kernels"] += len(mine)
        a["launch_calls"] += len({(k[0], k[3]) for k in mine})
        a["cpu_ns"] += r["end_ns"] - r["start_ns"]
        a["window_ns"] += window
        a["busy_ns"] += busy
        a["kernel_ns"] += sum(k[2] - k[1] for k in mine)
    out = []
    for a in agg.values():
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
        out.append({"scope": scope, "operator": b["operator"], "kernels": b["kernels"], "kernel_ns": b["kernel_ns"],
                    "share_pct": 100.0 * b["kernel_ns"] / total if total else 0.0, "top_kernel": top})
    return sorted(out, key=lambda b: (-b["kernel_ns"], b["operator"]))


def workload_split(rows: list[dict], op: str | None) -> tuple[list[dict], list[dict]]:
    """`ranges` rows inside a lab workload's operator range `op` and those outside it. A lab
    workload's warm-up (compilation, autotuning, graph capture) runs outside its op/variant/shape
    ranges but pushes the same operator ranges: kept apart, so they are not read as the workload.
    Every row is inside where `op` is None (not a lab run)."""
    inside = [r for r in rows if op is None or r["path"] == op or r["path"].startswith(op + "/")]
    return inside, [r for r in rows if r not in inside]
