"""profkit export --perfetto: a run as a Chrome trace-event JSON file, for ui.perfetto.dev
(and chrome://tracing).

Tracks (one Chrome "process" each, with threads as its tracks):
- `GPU D (rank R)`: one thread per CUDA stream; one complete slice ("ph": "X") per kernel
  launch, named by its short name, its args the launch's label and reason, family (where the
  kernels view has one), % of roofline (from its ncu counters), its advice rank, NVTX path,
  grid and block.
- `host pid P (rank R)`: NVTX push/pop ranges on the thread that pushed them; start/end ranges
  (which need not nest) on tracks of their own.
- `analysis (rank R)`: the run's phases (profkit.analyses.phases) and the GPU's idle gaps
  per device, each gap with its cause.

A thread's slices must nest (Perfetto drops or misdraws a slice that straddles another's
end). Slices that would not (overlapping start/end ranges, two launches a stream overlapping by
a clock's tick) go to the next lane of the same track, `stream 7 (2)`, rather than being lost.

Times are microseconds, written as exact decimals of the nanoseconds (`16058015.104`), never
through a binary float: a float of a 10^10 ns clock can be off by a nanosecond after `* 1000`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profkit.analyses import phases as phases_mod
from profkit.analyses.classify import gpu_context
from profkit.core.errors import BadArgument
from profkit.core.intervals import union
from profkit.core.metrics import lookup
from profkit.model.perf import roof_time_ns
from profkit.store.store import Store

# the kernels view's columns a slice reads (family: where the operator model adds it)
_KERNEL_COLUMNS = (
    "kernel_id",
    "kernel_name",
    "short_name",
    "nvtx_path",
    "start_ns",
    "end_ns",
    "duration_ns",
    "stream",
    "device",
    "rank",
    "pid",
    "tid",
    "api_start_ns",
    "api_end_ns",
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
    "registers_per_thread",
    "sampled_from",
)


@dataclass
class Slice:
    name: str
    start_ns: int
    dur_ns: int
    cat: str
    args: dict = field(default_factory=dict)


@dataclass
class Track:
    """One thread of one process in the trace: its slices get lanes so each lane nests."""

    process: str
    thread: str
    slices: list[Slice] = field(default_factory=list)
    process_order: int = 0
    thread_order: int = 0


@dataclass
class Trace:
    run: str
    tracks: list[Track]
    notes: list[str]

    def launches(self) -> int:
        return sum(1 for t in self.tracks for s in t.slices if s.cat.startswith("kernel"))


def _columns(store: Store, view: str) -> set[str]:
    return {r["name"] for r in store.query(f"PRAGMA table_info({view})")}


def _roofline_pcts(store: Store, run: str, ids) -> dict[int, float]:
    """{kernel_id: % of roofline} of launches with ncu counters (their own or their measured
    sibling's): the roofline's lower-bound time over the measured duration."""
    from profkit.analyses.roofline import MODEL_METRICS

    counters = store.counters(run, MODEL_METRICS)
    known, found = gpu_context(store, run)
    gpu = known[0] if len(known) == 1 and found.startswith("by name") else None
    out = {}
    for k in ids:
        c = counters.get(k)
        if not c:
            continue
        t = lookup(c, "duration")
        r = roof_time_ns(c, gpu)
        if t and r:
            out[k] = 100.0 * r[0] / t
    return out


def _advice_ranks(store: Store, run: str, launches: list[dict]) -> tuple[dict[int, int], dict[int, int], str | None]:
    """({kernel_id: rank of its range or kernel item}, {kernel_id: rank of a launch-gap/graph
    item covering it}, note) from profkit advise on the run as a whole."""
    from profkit.analyses.advise import _step_free, advise

    try:
        a = advise(store, run, include_unranged=True, phase="all")
    except BadArgument as e:
        return {}, {}, f"no advice ranks: {e}"
    own: dict[int, int] = {}
    graph: dict[int, int] = {}
    by_path = {i.nvtx_path: i.rank for i in a.items if i.kind == "range" and i.nvtx_path}
    by_kernel = {i.kernel_name: i.rank for i in a.items if i.kind == "range" and not i.nvtx_path}
    graphs = [(i.nvtx_path, i.rank) for i in a.items if i.kind == "graph"]
    for k in launches:
        path = k["nvtx_path"]
        if path:
            r = by_path.get(_step_free(path))
        else:
            r = by_kernel.get(k["short_name"] or k["kernel_name"])
        if r is not None:
            own[k["kernel_id"]] = r
        for gp, rank in graphs:
            if gp is None or (
                path is not None and (path == gp or _step_free(path).startswith(gp + "/") or _step_free(path) == gp)
            ):
                graph.setdefault(k["kernel_id"], rank)
    return own, graph, None


def _labels(store: Store, run: str) -> dict[int, tuple[str, str]]:
    from profkit.analyses.classify import label_rows

    rows = store.query("SELECT kernel_id, label, reason FROM classifications WHERE run = ?", (run,))
    return {r["kernel_id"]: (r["label"], r["reason"]) for r in (rows or label_rows(store, run))}


def _rank_name(rank) -> str:
    return "" if rank is None else f" (rank {rank})"


def _idle(launches: list[dict]) -> list[Slice]:
    """The GPU's idle gaps between its kernels (any stream), each named by its cause: whether
    the host was still issuing the next kernel's launch call when the GPU went idle."""
    timed = [k for k in launches if k["start_ns"] is not None and k["end_ns"] is not None]
    busy = union((k["start_ns"], k["end_ns"]) for k in timed)
    firsts = sorted(timed, key=lambda k: (k["start_ns"], k["kernel_id"]))
    out = []
    j = 0
    for (_, end), (nxt, _) in zip(busy, busy[1:]):
        while firsts[j]["start_ns"] < nxt:
            j += 1
        k = firsts[j]
        if k["api_end_ns"] is None:
            cause, why = "idle", "no launch call recorded for the next kernel"
        elif k["api_end_ns"] >= end:
            cause = "idle: waiting for the launch"
            why = (
                f"the host's launch call of {k['short_name'] or k['kernel_name']} ended "
                f"{(k['api_end_ns'] - end) / 1e3:.3f} us into the gap"
            )
        else:
            cause = "idle: launched, not started"
            why = (
                f"{k['short_name'] or k['kernel_name']} was launched {(end - k['api_end_ns']) / 1e3:.3f} us "
                f"before the gap began (a dependency, a synchronisation or another device held it)"
            )
        out.append(
            Slice(
                cause,
                end,
                nxt - end,
                "idle",
                {"gap_us": (nxt - end) / 1e3, "why": why, "next_kernel_id": k["kernel_id"]},
            )
        )
    return out


def build(store: Store, run: str | None = None) -> Trace:
    """A run's trace tracks from the store (nothing is written to it)."""
    run = store.require_run(run)
    have = _columns(store, "kernels")
    cols = [c for c in _KERNEL_COLUMNS if c in have] + (["family"] if "family" in have else [])
    launches = store.query(
        f"SELECT {', '.join(cols)} FROM kernels WHERE run = ? AND start_ns IS NOT NULL "
        "AND end_ns IS NOT NULL ORDER BY start_ns, kernel_id",
        (run,),
    )
    if not launches:
        raise BadArgument(
            f"run {run!r} has no timeline (launch times): a Perfetto trace needs an nsys, CUPTI or "
            f"torch.profiler report in the run"
        )
    notes: list[str] = []
    labels = _labels(store, run)
    pct = _roofline_pcts(store, run, [k["kernel_id"] for k in launches])
    own_rank, graph_rank, note = _advice_ranks(store, run, launches)
    if note:
        notes.append(note)
    ranks = sorted({k["rank"] for k in launches}, key=lambda r: -1 if r is None else r)
    rank_order = {r: i for i, r in enumerate(ranks)}
    tracks: dict[tuple, Track] = {}

    def track(process: str, thread: str, porder: int, torder: int) -> Track:
        t = tracks.get((process, thread))
        if t is None:
            t = tracks[(process, thread)] = Track(process, thread, [], porder, torder)
        return t

    by_device: dict[tuple, list[dict]] = {}
    for k in launches:
        r, dev = k["rank"], k["device"]
        by_device.setdefault((r, dev), []).append(k)
        args = {"kernel_id": k["kernel_id"], "kernel": k["kernel_name"]}
        lab = labels.get(k["kernel_id"])
        if lab:
            args["label"], args["reason"] = lab
        if k.get("family") is not None:
            args["family"] = k["family"]
        if k["kernel_id"] in pct:
            args["roofline_pct"] = round(pct[k["kernel_id"]], 1)
        if k["kernel_id"] in own_rank:
            args["advice_rank"] = own_rank[k["kernel_id"]]
        if k["kernel_id"] in graph_rank:
            args["launch_gap_advice_rank"] = graph_rank[k["kernel_id"]]
        if k["nvtx_path"]:
            args["nvtx_path"] = k["nvtx_path"]
        if k["sampled_from"] is not None:
            args["counters_of_launch"] = k["sampled_from"]
        args["grid"] = [k["grid_x"], k["grid_y"], k["grid_z"]]
        args["block"] = [k["block_x"], k["block_y"], k["block_z"]]
        if k["registers_per_thread"] is not None:
            args["registers_per_thread"] = k["registers_per_thread"]
        p = f"GPU {'?' if dev is None else dev}{_rank_name(r)}"
        t = track(
            p,
            f"stream {'?' if k['stream'] is None else k['stream']}",
            10 * rank_order[r] + 1,
            0 if k["stream"] is None else int(k["stream"]),
        )
        t.slices.append(
            Slice(
                k["short_name"] or k["kernel_name"],
                k["start_ns"],
                k["end_ns"] - k["start_ns"],
                f"kernel,{lab[0] if lab else 'unlabelled'}",
                args,
            )
        )

    unclosed = 0
    for e in store.query(
        "SELECT id, rank, domain, text, kind, start_ns, end_ns, pid, tid, path FROM nvtx_range "
        "WHERE run = ? ORDER BY start_ns, id",
        (run,),
    ):
        if e["start_ns"] is None or e["end_ns"] is None:
            unclosed += 1
            continue
        p = f"host pid {e['pid']}{_rank_name(e['rank'])}"
        order = 10 * rank_order.get(e["rank"], len(ranks)) + 2
        thread = f"thread {e['tid']}" if e["kind"] == "push_pop" else "NVTX start/end ranges"
        args = {"path": e["path"], "kind": e["kind"]}
        if e["domain"]:
            args["domain"] = e["domain"]
        track(p, thread, order, e["tid"] or 0).slices.append(
            Slice(e["text"] or "", e["start_ns"], e["end_ns"] - e["start_ns"], "nvtx", args)
        )
    if unclosed:
        notes.append(f"{unclosed} NVTX ranges without an end left out")

    ph = phases_mod.of_run(store, run)
    steady = ph.steady
    first_rank = ranks[0]
    for phase in ph.phases:
        pargs: dict[str, Any] = {
            "kind": phase.kind,
            "launches": phase.launches,
            "gpu_us": phase.gpu_ns / 1e3,
            "how": phase.how,
            "steady": phase is steady,
        }
        if phase.steps:
            pargs["steps"] = phase.steps
        track(f"analysis{_rank_name(first_rank)}", "phases", 10 * rank_order[first_rank], 0).slices.append(
            Slice(phase.name, int(phase.start_ns), int(phase.end_ns) - int(phase.start_ns), "phase", pargs)
        )
    if ph.note:
        notes.append(f"phases: {ph.note}")
    for (r, dev), ks in by_device.items():
        gaps = _idle(ks)
        t = track(
            f"analysis{_rank_name(r)}", f"GPU {'?' if dev is None else dev} idle", 10 * rank_order[r], 1 + (dev or 0)
        )
        t.slices.extend(gaps)
    return Trace(run, list(tracks.values()), notes)


def lanes(slices: list[Slice]) -> list[list[Slice]]:
    """The slices split into lanes, each properly nested (a slice inside or after every open
    one), first lane first: greedy, in start order with longer slices first."""
    out: list[tuple[list[Slice], list[int]]] = []
    for s in sorted(slices, key=lambda s: (s.start_ns, -s.dur_ns)):
        end = s.start_ns + s.dur_ns
        for placed, stack in out:
            while stack and stack[-1] <= s.start_ns:
                stack.pop()
            if not stack or end <= stack[-1]:
                placed.append(s)
                stack.append(end)
                break
        else:
            out.append(([s], [end]))
    return [p for p, _ in out]


def _us(ns: int) -> str:
    """ns as microseconds with three decimals, exactly."""
    ns = int(ns)
    sign = "-" if ns < 0 else ""
    q, r = divmod(abs(ns), 1000)
    return f"{sign}{q}.{r:03d}"


def _event(
    ph: str,
    pid: int,
    tid: int,
    name: str,
    ts_ns: int | None = None,
    dur_ns: int | None = None,
    cat: str | None = None,
    args: dict | None = None,
) -> str:
    body = {"ph": ph, "pid": pid, "tid": tid, "name": name}
    if cat is not None:
        body["cat"] = cat
    if args is not None:
        body["args"] = args
    text = json.dumps(body, ensure_ascii=False, default=str, allow_nan=False)
    times = ""
    if ts_ns is not None:
        times += f'"ts": {_us(ts_ns)}, '
    if dur_ns is not None:
        times += f'"dur": {_us(dur_ns)}, '
    return "{" + times + text[1:]


def events(trace: Trace):
    """The trace's JSON events as text, metadata first."""
    pids: dict[str, int] = {}
    for t in sorted(trace.tracks, key=lambda t: (t.process_order, t.process)):
        pids.setdefault(t.process, len(pids) + 1)
    tid = 0
    meta, body = [], []
    for p, pid in pids.items():
        meta.append(_event("M", pid, 0, "process_name", args={"name": p}))
        order = min(t.process_order for t in trace.tracks if t.process == p)
        meta.append(_event("M", pid, 0, "process_sort_index", args={"sort_index": order}))
    for t in sorted(trace.tracks, key=lambda t: (pids[t.process], t.thread_order, t.thread)):
        for i, lane in enumerate(lanes(t.slices)):
            tid += 1
            pid = pids[t.process]
            name = t.thread if i == 0 else f"{t.thread} ({i + 1})"
            meta.append(_event("M", pid, tid, "thread_name", args={"name": name}))
            meta.append(_event("M", pid, tid, "thread_sort_index", args={"sort_index": tid}))
            for s in lane:
                body.append(_event("X", pid, tid, s.name, s.start_ns, s.dur_ns, s.cat, s.args))
    return meta + body


def write(trace: Trace, path: str | os.PathLike) -> Path:
    """Write the trace as a JSON object file (written aside, then renamed into place)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write('{"displayTimeUnit": "ns", "otherData": ')
            f.write(json.dumps({"run": trace.run, "producer": "profkit", "notes": trace.notes}, ensure_ascii=False))
            f.write(', "traceEvents": [\n')
            first = True
            for e in events(trace):
                f.write(e if first else ",\n" + e)
                first = False
            f.write("\n]}\n")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def export(store: Store, run: str | None, path: str | os.PathLike) -> tuple[Path, Trace]:
    t = build(store, run)
    return write(t, path), t
