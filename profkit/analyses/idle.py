"""Why the GPU is idle: each gap between kernels split by cause, from the timeline.

The GPU idles when nothing is queued. Which host activity kept the queue empty decides the fix,
so each idle gap (the GPU window minus the union of kernels and memory operations, all streams)
goes to one cause, the first that applies:

    copy        memory copies or memsets ran at least half the gap (the copy engine, not a
                kernel), or a pageable one ran in it: `pageable` when either side was pageable
                host memory (the copy is synchronous and stages through a bounce buffer: pin the
                memory). A 4-byte memset in a launch gap leaves it a launch gap
    sync        the host sat in a synchronising call (cudaStreamSynchronize, cudaDeviceSynchronize,
                cudaEventSynchronize, a synchronous cudaMemcpy, `.item()`) that returned inside the
                gap: the queue drained while the host waited, then it had to start filling it again
    alloc       the host was in cudaMalloc / cudaFree / cudaHostAlloc (the caching allocator
                growing: preallocate, or keep the allocator warm)
    module      the host was loading modules or compiling (cuModuleLoad*, cuLibraryLoad*, NVRTC,
                lazy loading on a first launch): start-up work, or JIT in the loop
    launch      the next kernel's launch call began after the gap began: the queue was empty and
                the CPU was busy elsewhere (Python between launches): CPU-bound
    latency     the next launch call began before the gap: the kernel was queued but started
                late (launch latency, a dependency on another stream or event)
    other       none of the above

A gap is ascribed whole to its cause (`gaps` gives each gap with its cause, the call that
explains it and how long that call held the host; `analyse` sums them). Host calls are those of the launching process (all its
threads). Sources: the host calls and memory operations the parsers keep (nsys exports,
torch.profiler traces, profkit's CUPTI traces); a database without them gets `launch` /
`latency` / `other` only, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from profkit.analyses.selection import id_bounds
from profkit.store.store import Store

CAUSES = ("copy", "sync", "alloc", "module", "launch", "latency", "other")
FIX = {
    "copy": "overlap copies with compute on a second stream, and pin host memory (pageable copies are synchronous)",
    "sync": "remove the synchronisation from the loop (.item(), .cpu(), printing a tensor, "
    "torch.cuda.synchronize): keep values on the GPU or read them every N steps",
    "alloc": "preallocate: the caching allocator is growing inside the loop (steady shapes, "
    "torch.cuda.set_per_process_memory_fraction, or warm up first)",
    "module": "module loading or compilation inside the measured region: warm up first "
    "(CUDA_MODULE_LOADING=EAGER, compile before the loop)",
    "launch": "the CPU cannot feed the GPU: CUDA graphs (torch.compile mode='reduce-overhead'), "
    "fuse kernels, or larger work per launch (batch)",
    "latency": "queued kernels start late: check cross-stream waits and events",
    "other": "",
}


@dataclass
class Idle:
    run: str
    window_ns: float
    busy_ns: float
    idle_ns: float
    by_cause: dict[str, float]
    gaps: dict[str, int]
    top_calls: dict[str, list[dict]] = field(default_factory=dict)  # cause -> [{name, ns, count}]
    note: str = ""

    def as_dict(self) -> dict:
        return {
            "run": self.run,
            "window_ns": self.window_ns,
            "busy_ns": self.busy_ns,
            "idle_ns": self.idle_ns,
            "by_cause": self.by_cause,
            "gaps": self.gaps,
            "top_calls": self.top_calls,
            "note": self.note,
        }


def _intervals(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of [start, end) intervals, sorted."""
    if not len(starts):
        return starts, ends
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], np.maximum.accumulate(ends[order])
    new = np.concatenate(([True], s[1:] > e[:-1]))
    idx = np.flatnonzero(new)
    return s[idx], np.concatenate((e[idx[1:] - 1], [e[-1]]))


def _rows(store: Store, sql: str, params) -> list[tuple]:
    try:
        return store.conn.execute(sql, params).fetchall()
    except Exception:  # noqa: BLE001 - a database from before host calls were kept
        return []


def _launches(store: Store, run: str, src, rank, window) -> np.ndarray:
    """The timeline's launches of one rank (in `window`): start, end, api start (-1: none), by
    start. Read as columns (a Python tuple per launch costs more than the rest of gaps()); a
    run whose launches share a start is read in SQLite's order instead, so that the launch
    after a gap is the one it always was."""
    bounds = id_bounds(store, "launch_row", run)
    if bounds is None or src is None:
        return np.zeros((0, 3), dtype=np.int64)
    where = "" if window is None else f" AND start_ns >= {int(window[0])} AND start_ns < {int(window[1])}"
    on_rank = "rank IS NULL" if rank is None else f"rank = {int(rank)}"
    start, end, api = store.int_columns_by_ids(
        f"""
        SELECT start_ns, end_ns, coalesce(api_start_ns, -1) FROM launch_row
        WHERE id {{between}} AND +run = ? AND source = ? AND timeline_id IS NULL
          AND start_ns IS NOT NULL AND end_ns IS NOT NULL AND {on_rank}{where}""",
        (run, src),
        3,
        bounds,
    )[0]
    order = np.argsort(start, kind="stable")
    k = np.column_stack([start[order], end[order], api[order]])
    if len(k) > 1 and not (np.diff(k[:, 0]) > 0).all():
        lo, hi = window if window else (None, None)
        k = np.array(
            store.conn.execute(
                "SELECT start_ns, end_ns, coalesce(api_start_ns, -1) FROM launch WHERE run = ? AND source = ? "
                "AND timeline_id IS NULL AND start_ns IS NOT NULL AND end_ns IS NOT NULL AND rank IS ? "
                "AND (? IS NULL OR (start_ns >= ? AND start_ns < ?)) ORDER BY start_ns",
                (run, src, rank, lo, lo, hi),
            ).fetchall(),
            dtype=np.int64,
        ).reshape(-1, 3)
    return k


@dataclass
class Gaps:
    """Each idle gap of a window with its cause: the columns `analyse` sums. `call_*` and `tid`:
    the host call (or copy) that explains the gap, -1 where none; `held`: how long that call held
    the host (a sync's or allocation's whole call, a copy's time inside the gap)."""

    start: np.ndarray
    end: np.ndarray
    cause: np.ndarray  # object: one of CAUSES
    name: np.ndarray  # object: the call, `copy` or `pageable copy`; "" where none
    call_start: np.ndarray
    call_end: np.ndarray
    tid: np.ndarray
    held: np.ndarray
    window: tuple[int, int]
    busy_ns: float
    note: str = ""

    @property
    def length(self) -> np.ndarray:
        return self.end - self.start


# a copy explains a gap when the copy engine ran this much of it (a 4-byte memset in a launch
# gap leaves it a launch gap), or when it was pageable (the host waited in it)
COPY_SHARE = 0.5


def _covered(us: np.ndarray, ue: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per [lo, hi): its length inside the merged intervals [us, ue)."""
    if not len(us):
        return np.zeros(len(lo), dtype=np.int64)
    cum = np.concatenate(([0], np.cumsum(ue - us)))

    def upto(t: np.ndarray) -> np.ndarray:  # covered length before t
        i = np.searchsorted(us, t, "right") - 1
        inside = np.where(i >= 0, np.minimum(t, ue[np.maximum(i, 0)]) - us[np.maximum(i, 0)], 0)
        return np.where(i >= 0, cum[np.maximum(i, 0)] + inside, 0)

    return upto(hi) - upto(lo)


def gaps(store: Store, run: str, window: tuple[int, int] | None = None, rank=None) -> Gaps | None:
    """The idle gaps of a run (of a phase: `window`, GPU start times) with their causes; None
    without a timeline."""
    lo, hi = window if window else (None, None)
    src = store.timeline_source(run)
    if rank is None:
        rank = store.query("SELECT min(rank) AS r FROM launch_row WHERE run = ?", (run,))[0]["r"]
    k = _launches(store, run, src, rank, window)
    if not len(k):
        return None
    w0, w1 = int(k[:, 0].min()), int(k[:, 1].max())
    copies = np.array(
        _rows(
            store,
            "SELECT start_ns, end_ns, pageable FROM gpu_copies WHERE run = ? AND rank IS ? "
            "AND end_ns > ? AND start_ns < ?",
            (run, rank, w0, w1),
        ),
        dtype=np.int64,
    ).reshape(-1, 3)
    calls = _rows(
        store,
        "SELECT kind, name, start_ns, end_ns, coalesce(tid, -1) FROM host_calls WHERE run = ? AND rank IS ? "
        "AND end_ns > ? AND start_ns < ? ORDER BY start_ns",
        (run, rank, w0, w1),
    )
    ks, ke = _intervals(k[:, 0], k[:, 1])
    busy = float((ke - ks).sum())
    # the gaps between busy kernel intervals, inside the window
    g0, g1 = ke[:-1], ks[1:]
    keep = g1 > g0
    g0, g1 = g0[keep], g1[keep]
    n = len(g0)
    cause = np.full(n, "other", dtype=object)
    name = np.full(n, "", dtype=object)
    c0, c1, tid, held = (np.full(n, -1, dtype=np.int64) for _ in range(4))
    # the next kernel after each gap: its launch call's start says whether the queue was empty
    nxt = np.searchsorted(k[:, 0], g1, "left")
    api_next = k[np.minimum(nxt, len(k) - 1), 2]
    cause[(api_next >= 0) & (api_next > g0)] = "launch"
    cause[(api_next >= 0) & (api_next <= g0)] = "latency"
    # a copy in the gap first: a host call that explains the gap overrides it (the small
    # device-to-host copy of an .item() is the sync's, not the copy engine's)
    if len(copies) and n:
        us, ue = _intervals(copies[:, 0], copies[:, 1])
        cov = _covered(us, ue, g0, g1)
        pg = copies[copies[:, 2] > 0]
        ps, pe = _intervals(pg[:, 0], pg[:, 1]) if len(pg) else (us[:0], ue[:0])
        paged = _covered(ps, pe, g0, g1) > 0
        hit = paged | (cov >= COPY_SHARE * (g1 - g0))
        cause[hit] = "copy"
        name[hit] = np.where(paged[hit], "pageable copy", "copy")
        held[hit] = cov[hit]
    for kind in ("module", "alloc", "sync"):
        # a synchronous copy call (cudaMemcpy, no Async) blocks the host as a sync does
        mine = [
            (nm, s, e, t)
            for kd, nm, s, e, t in calls
            if kd == kind or (kind == "sync" and kd in ("memcpy", "memset") and "Async" not in nm)
        ]
        if not mine or not n:
            continue
        names = np.array([c[0] for c in mine], dtype=object)
        cs = np.array([c[1] for c in mine], np.int64)
        ce = np.array([c[2] for c in mine], np.int64)
        ct = np.array([c[3] for c in mine], np.int64)
        if kind == "sync":  # a sync that returned inside the gap: it drained the queue
            order = np.argsort(ce, kind="stable")
            j = order[np.minimum(np.searchsorted(ce[order], g0, "left"), len(ce) - 1)]
            hit = (ce[j] >= g0) & (ce[j] <= g1)
        else:  # the call overlaps the gap
            j = np.searchsorted(cs, g1, "left") - 1
            reach = np.maximum.accumulate(ce)
            hit = (j >= 0) & (reach[np.maximum(j, 0)] > g0)
            j = np.maximum(j, 0)
        idx = np.flatnonzero(hit)
        cause[idx], name[idx] = kind, names[j[idx]]
        c0[idx], c1[idx], tid[idx] = cs[j[idx]], ce[j[idx]], ct[j[idx]]
        held[idx] = ce[j[idx]] - cs[j[idx]]
    note = (
        ""
        if calls or len(copies)
        else (
            "no host calls or memory operations in this database: idle split into "
            "launch / latency / other only (re-ingest the report to keep them)"
        )
    )
    return Gaps(g0, g1, cause, name, c0, c1, tid, held, (w0, w1), busy, note)


def analyse(store: Store, run: str, window: tuple[int, int] | None = None, rank=None) -> Idle:
    """The idle time of a run (of a phase: `window`, GPU start times) split by cause."""
    g = gaps(store, run, window, rank)
    if g is None:
        return Idle(run, 0.0, 0.0, 0.0, dict.fromkeys(CAUSES, 0.0), dict.fromkeys(CAUSES, 0), note="no timeline")
    length = g.length.astype(np.float64)
    by = {c: float(length[g.cause == c].sum()) for c in CAUSES}
    n = {c: int((g.cause == c).sum()) for c in CAUSES}
    top: dict[str, dict[str, list[float]]] = {}
    for i in np.flatnonzero(g.name != "").tolist():
        t = top.setdefault(g.cause[i], {}).setdefault(str(g.name[i]), [0.0, 0])
        t[0] += float(length[i])
        t[1] += 1
    tops = {
        c: [{"name": nm, "ns": v[0], "gaps": v[1]} for nm, v in sorted(d.items(), key=lambda x: -x[1][0])[:5]]
        for c, d in top.items()
    }
    w0, w1 = g.window
    return Idle(run, float(w1 - w0), g.busy_ns, float(length.sum()), by, n, tops, g.note)


def main_cause(idle: Idle) -> str | None:
    """The cause with most idle time, if any idle time has one."""
    named = {c: v for c, v in idle.by_cause.items() if c != "other" and v > 0}
    return max(named, key=lambda c: named[c]) if named else None


def describe(idle: Idle) -> str:
    """One line: the idle share and its causes, largest first."""
    if not idle.window_ns:
        return "no timeline"
    parts = [
        f"{c} {100 * v / idle.window_ns:.0f} %"
        for c, v in sorted(idle.by_cause.items(), key=lambda x: -x[1])
        if v >= 0.005 * idle.window_ns
    ]
    return f"GPU idle {100 * idle.idle_ns / idle.window_ns:.0f} % of the window" + (
        f" ({', '.join(parts)})" if parts else ""
    )
