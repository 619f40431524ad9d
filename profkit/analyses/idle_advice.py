"""Advise items for the idle time a CUDA graph does not give back (issue 50 items 4 and 5).

A graph replay removes the launch gaps of a CPU-bound loop (the queue empty while Python
launches the next kernel). It does not remove the gaps whose cause is host work a graph cannot
hold (profkit.analyses.idle): the host blocked in a synchronising call, a copy from pageable
memory or a long copy on the copy engine, the caching allocator growing, module loading. So
`split` takes those gaps out of each graph item's figure, and each cause becomes an item of its
own that names the call, its NVTX place and its fix.

Per gap, what removing the cause gives back is bounded by the gap (the GPU cannot gain more than
it idled) and by how long the cause held the host (a sync's whole call: without it the host
would have launched the next kernel that much earlier; an allocation's or module load's call; a
copy's time in the gap), less the device's own gap before the next kernel:

    recoverable = sum over its gaps of max(0, min(gap - device gap, held))
    predicted_speedup = window / (window - recoverable)     (the scope's GPU window)
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from profkit.analyses import idle
from profkit.analyses.advice_item import LAUNCH_GAP_NS, Item
from profkit.core.intervals import union_arrays
from profkit.core.steps import step_free
from profkit.store.store import Store

# causes whose idle time a CUDA graph keeps
NOT_GRAPHED = ("sync", "copy", "alloc", "module")
# a device-to-host copy this small just before a sync is a scalar read (.item())
SCALAR_BYTES = 64
# how far before the sync call that copy may start
SCALAR_LEAD_NS = 500_000
# the host calls whose place is looked up (each a scan of the NVTX ranges open during the calls)
MAX_PLACES = 500
# cause items kept per cause (largest first)
PER_CAUSE = 3
# a cause item predicted under this is noise beside the window: not listed
MIN_LISTED = 1.005

LABEL = {
    "sync": "host_sync",
    "pageable": "pageable_copy",
    "copy": "copy",
    "alloc": "allocation",
    "module": "module_load",
}
ACTION = {
    "sync": (
        "remove the host sync: {what}{where} blocks the host until the GPU drains its queue; keep the value on "
        "the GPU (accumulate a loss in a tensor) and read it every N steps or after the loop"
    ),
    "pageable": (
        "pin the memory: {what}{where} is synchronous (it stages through a bounce buffer while the host "
        "waits); DataLoader(pin_memory=True) or tensor.pin_memory(), then .to(device, non_blocking=True)"
    ),
    "copy": (
        "overlap the copies with compute: {what}{where} ran alone on the copy engine while no kernel ran; "
        "copy the next batch on a second stream from pinned memory (non_blocking=True), or keep the data on the GPU"
    ),
    "alloc": (
        "preallocate: {what}{where} inside the loop means the caching allocator is growing; keep shapes "
        "steady, warm up before the loop, no torch.cuda.empty_cache() in it"
    ),
    "module": (
        "warm up before the measured loop: {what}{where} loads modules or compiles (lazy loading on a first "
        "launch, JIT); CUDA_MODULE_LOADING=EAGER, compile and run one step first"
    ),
}


def _covered(ws: np.ndarray, we: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return idle._covered(ws, we, lo, hi)


def _events(store: Store, run: str) -> list[tuple[int, int, int, str]]:
    """The run's push/pop NVTX ranges: (start, end, tid, path)."""
    return [
        (s, e, t, p)
        for s, e, t, p in store.conn.execute(
            "SELECT e.start_ns, e.end_ns, coalesce(e.tid, -1), p.path FROM nvtx_event e "
            "JOIN nvtx_path p ON p.id = e.path_id WHERE e.run = ? AND e.kind = 'push_pop' "
            "AND e.start_ns IS NOT NULL AND e.end_ns IS NOT NULL",
            (run,),
        )
    ]


def _item_windows(item: Item, ks: Any, events) -> tuple[np.ndarray, np.ndarray]:
    """The GPU windows of a graph item's calls: each instance of its NVTX range (any thread:
    autograd's backward launches inside its lead thread's step), from its first kernel's start
    to its last kernel's end; the whole span for an item with no range."""
    t = ks.timed()
    if item.nvtx_path is None:
        return ks.start[t].min(keepdims=True), ks.end[t].max(keepdims=True)
    want = item.nvtx_path
    under = np.array(
        [(f := step_free(p)) == want or f.startswith(want.rstrip("/") + "/") for p in ks.paths] + [False], dtype=bool
    )
    mine = under[ks.path] & t & ks.has_api_end
    inst = sorted((s, e) for s, e, _, p in events if step_free(p) == want)
    if not mine.any() or not inst:
        return ks.start[:0], ks.end[:0]
    i0 = np.array([s for s, _ in inst], dtype=np.int64)
    i1 = np.array([e for _, e in inst], dtype=np.int64)
    at = np.searchsorted(i0, ks.api_end[mine], "right") - 1
    ok = (at >= 0) & (ks.api_end[mine] <= i1[np.maximum(at, 0)])
    at, st, en = at[ok], ks.start[mine][ok], ks.end[mine][ok]
    if not len(at):
        return ks.start[:0], ks.end[:0]
    u, inv = np.unique(at, return_inverse=True)
    ws = np.full(len(u), np.iinfo(np.int64).max, dtype=np.int64)
    we = np.full(len(u), np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(ws, inv, st)
    np.maximum.at(we, inv, en)
    return union_arrays(ws, we)


def _places(gaps: idle.Gaps, idx: np.ndarray, events) -> list[str | None]:
    """Per gap (of idx): the innermost NVTX range open on the calling thread at its host call.
    Past MAX_PLACES calls, a call takes the place its name had most often before."""
    out: list[str | None] = [None] * len(idx)
    calls = [(n, int(gaps.call_start[i]), int(gaps.tid[i])) for n, i in enumerate(idx.tolist())]
    calls = [c for c in calls if c[1] >= 0]
    if not events or not calls:
        return out
    lo, hi = min(c[1] for c in calls), max(c[1] for c in calls)
    tids = {c[2] for c in calls}
    near = [e for e in events if e[2] in tids and e[0] <= hi and e[1] >= lo]  # open at some call
    if not near:
        return out
    ev = np.array([(s, e, t) for s, e, t, _ in near], dtype=np.int64)
    paths = [p for *_, p in near]
    seen: dict[str, dict[str | None, int]] = defaultdict(lambda: defaultdict(int))
    for k, (n, at, tid) in enumerate(calls):
        name = str(gaps.name[idx[n]])
        if k >= MAX_PLACES:
            got = seen.get(name)
            out[n] = max(got, key=got.__getitem__) if got else None
            continue
        open_ = np.flatnonzero((ev[:, 2] == tid) & (ev[:, 0] <= at) & (ev[:, 1] >= at))
        if len(open_):
            out[n] = step_free(paths[int(open_[np.argmax(ev[open_, 0])])])
        seen[name][out[n]] += 1
    return out


def _scalar_reads(store: Store, run: str, gaps: idle.Gaps, idx: np.ndarray) -> dict[int, int]:
    """Gap index -> bytes, for syncs just after a small device-to-host copy (a scalar read)."""
    if not len(idx):
        return {}
    lo = int(gaps.call_start[idx].min()) - SCALAR_LEAD_NS
    hi = int(gaps.call_end[idx].max())
    try:
        rows = store.conn.execute(
            "SELECT start_ns, bytes FROM gpu_copies WHERE run = ? AND kind = 'memcpy' AND direction = 'DtoH' "
            "AND bytes <= ? AND start_ns >= ? AND start_ns <= ? ORDER BY start_ns",
            (run, SCALAR_BYTES, lo, hi),
        ).fetchall()
    except Exception:  # noqa: BLE001 - a database from before memory operations were kept
        return {}
    if not rows:
        return {}
    cs = np.array([r[0] for r in rows], dtype=np.int64)
    out = {}
    for i in idx.tolist():
        j = np.searchsorted(cs, gaps.call_end[i], "right") - 1
        if j >= 0 and cs[j] >= gaps.call_start[i] - SCALAR_LEAD_NS:
            out[i] = int(rows[j][1] or 0)
    return out


def _has_causes(store: Store, run: str) -> bool:
    try:
        return bool(
            store.conn.execute(
                "SELECT EXISTS (SELECT 1 FROM host_calls WHERE run = ?) OR EXISTS (SELECT 1 FROM gpu_copies WHERE run = ?)",
                (run, run),
            ).fetchone()[0]
        )
    except Exception:  # noqa: BLE001 - a database from before host calls were kept
        return False


def split(store: Store, run: str, win, ks: Any, items: list[Item], gap: float) -> list[Item]:
    """Take the idle time a graph keeps out of each graph item (in place) and return one item
    per cause and place of it, largest first."""
    if not _has_causes(store, run):
        return []  # no host calls or copies stored: every gap is a launch gap (idle.py's note)
    g = idle.gaps(store, run, win)
    if g is None or not len(g.start):
        return []
    bad = np.array([c in NOT_GRAPHED for c in g.cause], dtype=bool)
    if not bad.any():
        return []
    events = _events(store, run)
    short = bad & (g.length < LAUNCH_GAP_NS)
    for it in items:
        if it.kind != "graph" or it.window_ns is None or not short.any():
            continue
        ws, we = _item_windows(it, ks, events)
        over = _covered(ws, we, g.start[short], g.end[short]).astype(np.float64)
        kept = float(np.maximum(over - gap, 0).sum())
        if kept <= 0:
            continue
        kept = min(kept, it.recoverable_ns)
        it.recoverable_ns -= kept
        it.floor_ns = (it.window_ns - it.recoverable_ns) / max(it.calls, 1)
        it.how += f"; less {kept / 1e3:,.1f} us idle in gaps a graph keeps (host syncs, copies, allocations)"
        it.evidence[0]["kept_by_graph_us"] = kept / 1e3
    t = ks.timed()
    if not t.any():
        return []
    t0, t1 = int(ks.start[t].min()), int(ks.end[t].max())
    span = float(t1 - t0)
    idx = np.flatnonzero(bad & (g.start >= t0) & (g.end <= t1))  # inside the scope's span
    places = dict(zip(idx.tolist(), _places(g, idx, events)))
    scalars = _scalar_reads(store, run, g, idx[g.cause[idx] == "sync"])
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i in idx.tolist():
        cause = "pageable" if g.name[i] == "pageable copy" else str(g.cause[i])
        what = {"pageable": "a copy from pageable host memory", "copy": "a memory copy"}.get(cause, str(g.name[i]))
        if i in scalars:
            what = f"{what} after a {scalars[i]}-byte device-to-host copy (.item(), .tolist(), printing a tensor)"
        groups[(cause, what, places[i])].append(i)
    out = []
    for (cause, what, place), members in groups.items():
        m = np.array(members, dtype=np.int64)
        length = g.length[m]
        rec = float(np.maximum(np.minimum(length - gap, g.held[m]), 0).sum())
        if rec <= 0 or span / (span - rec) < MIN_LISTED:
            continue
        idle_ns = float(length.sum())
        where = f" in {place}" if place else ""
        out.append(
            Item(
                "idle",
                place,
                what,
                LABEL[cause],
                1,
                0,
                0.0,
                span,
                rec,
                span - rec,
                (
                    f"{len(m):,} idle gaps ({idle_ns / 1e3:,.1f} us) where the GPU waited on {what}; each bounded by "
                    f"how long it held the host ({float(g.held[m].sum()) / 1e3:,.1f} us in all), less the device's "
                    f"own gap {gap / 1e3:.2f} us: {rec / 1e3:,.1f} us of a {span / 1e6:,.2f} ms window"
                ),
                ACTION[cause].format(what=what, where=where),
                [
                    {
                        "cause": cause,
                        "call": what,
                        "place": place,
                        "gaps": len(m),
                        "idle_us": idle_ns / 1e3,
                        "held_us": float(g.held[m].sum()) / 1e3,
                        "recoverable_us": rec / 1e3,
                        "window_us": span / 1e3,
                        "device_gap_us": gap / 1e3,
                    }
                ],
            )
        )
        out[-1].predicted_speedup = span / (span - rec)
        out[-1].predicted_how = "the window less the idle time this cause holds (bounded by the gap and the call)"
    out.sort(key=lambda i: -i.recoverable_ns)
    kept_n: dict[str, int] = defaultdict(int)
    keep = []
    for it in out:
        kept_n[it.label or ""] += 1
        if kept_n[it.label or ""] <= PER_CAUSE:
            keep.append(it)
    return keep
