"""Hierarchical roofline from Nsight Compute counters: points, ceilings, before/after arrows.

Every number comes from the report (docs/roofline.md says which metric gives what):
- work: tensor FLOPs from ``sm__ops_path_tensor_src_*`` (they count FLOPs: a cuBLAS GEMM
  reads exactly 2·M·N·K), CUDA-core FLOPs from the SASS thread-instruction counters
  (add + mul + 2·fma, FP32 and FP64);
- traffic per level: DRAM, L2 and L1 bytes; time: ``gpu__time_duration``;
- ceilings: ``*.peak_sustained`` (per cycle) × the clock the kernel ran at. The tensor
  ``ops_path`` peak is the structured-sparsity rate: the dense pipe does half of it (the
  achieved/peak ratio times two equals ncu's tensor-pipe utilisation on every GEMM shipped).

Measured peaks (copy bandwidth, cuBLAS and _scaled_mm throughput from benchmarks/results/)
are drawn as dashed "measured" ceilings when they were taken on the run's GPU.
"""
from __future__ import annotations

import json
import os
import sqlite3
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from . import selection
from .errors import BadArgument, NoSuchRun
from .metrics import BY_SHORT, lookup
from .classify import labels as _labels
from .store import Store

# memory levels, outermost first: (key, label, bytes, bytes per cycle at peak, clock, clock fallback)
LEVELS = (
    ("dram", "DRAM", "dram_bytes", "dram_bytes_peak", "dram_clock", None),
    ("l2", "L2", "l2_bytes", "l2_bytes_peak", "l2_clock", None),
    # L1/TEX sits in the SM: without its own clock metric it runs at the SM clock
    ("l1", "L1", "l1_bytes", "l1_bytes_peak", "l1_clock", "sm_clock"),
)
LEVEL_LABEL = {k: lab for k, lab, *_ in LEVELS}

# precisions: key -> (label, [(counter short name, FLOPs per count)], peak short name, FLOPs per
# peak unit per cycle). Tensor peaks are halved: ncu's ops_path peak is the 2:4-sparse rate.
# FP32 peak: FMA-pipe warp instructions x 32 threads x 2 FLOPs.
PRECISIONS = {
    "bf16_tensor": ("BF16 tensor", [("tensor_ops_bf16", 1)], "tensor_ops_bf16_peak", 0.5),
    "fp16_tensor": ("FP16 tensor", [("tensor_ops_fp16", 1), ("tensor_ops_fp16_fp16", 1)], "tensor_ops_fp16_peak", 0.5),
    "fp8_tensor": ("FP8 tensor", [("tensor_ops_fp8", 1)], "tensor_ops_fp8_peak", 0.5),
    "tf32_tensor": ("TF32 tensor", [("tensor_ops_tf32", 1)], "tensor_ops_tf32_peak", 0.5),
    "fp32": ("FP32", [("fadd", 1), ("fmul", 1), ("ffma", 2)], "ffma_peak", 64),
    "fp64": ("FP64", [("dadd", 1), ("dmul", 1), ("dfma", 2)], "dfma_peak", 2),
}
# the fp16 tensor path runs at the bf16 rate on Hopper; used only when its own peak is absent
_PEAK_FALLBACK = {"fp16_tensor": "tensor_ops_bf16_peak"}

# measured peaks in benchmarks/results/*.json: key there -> ceiling key here
_MEASURED_FLOPS = {"bf16_tflops": "bf16_tensor", "fp16_tflops": "fp16_tensor", "fp8_tflops": "fp8_tensor",
                   "tf32_tflops": "tf32_tensor", "fp32_tflops": "fp32", "fp64_tflops": "fp64"}

LABEL_COLOURS = {"dram": "#1f77b4", "tensor_core": "#d62728", "compute": "#ff7f0e", "occupancy": "#9467bd",
                 "launch_overhead": "#8c564b", "latency": "#2ca02c", "communication": "#17becf", "unknown": "#7f7f7f",
                 None: "#7f7f7f"}
LEVEL_SYMBOLS = {"dram": "circle", "l2": "square", "l1": "diamond"}
CEILING_COLOURS = {"dram": "#000000", "l2": "#555555", "l1": "#999999", "bf16_tensor": "#b2182b",
                   "fp16_tensor": "#e7298a", "fp8_tensor": "#6a3d9a", "tf32_tensor": "#e6550d", "fp32": "#d95f02",
                   "fp64": "#1b9e77"}


@dataclass
class Ceiling:
    key: str            # a PRECISIONS or LEVELS key
    kind: str           # "compute" (FLOP/s) or "memory" (byte/s)
    label: str
    value: float
    source: str         # how it was obtained, shown on hover
    measured: bool = False


@dataclass
class Point:
    """One kernel (all its profiled launches at one place in a call) or one NVTX range."""

    run: str
    path: str | None
    nvtx_range: str | None
    kernel: str                       # short name(s)
    label: str | None
    labels: dict[str, float]          # label -> share of time
    launches: int
    calls: int
    time_ns: float                    # per call
    flops: dict[str, float]           # precision -> FLOPs per call
    bytes: dict[str, float]           # level -> bytes per call (only levels the report has)
    roof_ns: float | None             # lower-bound time per call from the ceilings (None: no peaks)
    binding: str | None               # the ceiling that sets roof_ns
    side: str = ""                    # "", "before", "after"
    key: str | None = None            # pairing key (compare) or chain step
    kind: str = "kernel"              # "kernel" or "range"

    @property
    def total_flops(self) -> float:
        return sum(self.flops.values())

    @property
    def precision(self) -> str | None:
        return max(self.flops, key=self.flops.get) if self.total_flops else None

    @property
    def flop_rate(self) -> float:
        return self.total_flops / (self.time_ns * 1e-9)

    def intensity(self, level: str) -> float | None:
        b = self.bytes.get(level)
        return self.total_flops / b if b else None

    @property
    def roofline_pct(self) -> float | None:
        return 100.0 * self.roof_ns / self.time_ns if self.roof_ns is not None and self.time_ns else None


@dataclass
class Roofline:
    points: list[Point]
    ceilings: list[Ceiling]
    arrows: list[tuple[Point, Point]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    title: str = ""
    levels: list[str] = field(default_factory=list)   # levels drawn
    primary: str = "dram"                              # level the arrows join


# --- one kernel's numbers ----------------------------------------------------------------

def _clock(c: dict[str, float], short: str, fallback: str | None) -> float | None:
    return lookup(c, short) or (lookup(c, fallback) if fallback else None)


def work(c: dict[str, float]) -> dict[str, float]:
    """FLOPs per precision of one launch ({metric: value}); precisions with none left out."""
    out = {}
    for key, (_, counters, _, _) in PRECISIONS.items():
        n = sum((lookup(c, short) or 0) * per for short, per in counters)
        if n:
            out[key] = n
    return out


def traffic(c: dict[str, float]) -> dict[str, float]:
    """Bytes per memory level of one launch; a level the report did not collect is absent."""
    return {key: v for key, _, b, *_ in LEVELS if (v := lookup(c, b)) is not None}


def rates(c: dict[str, float]) -> dict[str, tuple[float, str]]:
    """Peak FLOP/s per precision and byte/s per level at this launch's clocks, with how."""
    out: dict[str, tuple[float, str]] = {}
    sm = lookup(c, "sm_clock")
    for key, (label, _, peak, per) in PRECISIONS.items():
        p = lookup(c, peak)
        name = BY_SHORT[peak].names[0]
        if p is None and key in _PEAK_FALLBACK:
            p, name = lookup(c, _PEAK_FALLBACK[key]), BY_SHORT[_PEAK_FALLBACK[key]].names[0] + " (fp16 path not collected)"
        if p and sm:
            out[key] = (p * per * sm, f"{name} {p:g}/cycle x {per:g} x SM clock {sm / 1e9:.3f} GHz")
    for key, label, _, peak, clock, fallback in LEVELS:
        p, hz = lookup(c, peak), _clock(c, clock, fallback)
        if p and hz:
            how = BY_SHORT[clock].names[0] if lookup(c, clock) else f"SM clock (no {BY_SHORT[clock].names[0]})"
            out[key] = (p * hz, f"{BY_SHORT[peak].names[0]} {p:g} B/cycle x {how} {hz / 1e9:.3f} GHz")
    return out


def roof_time_ns(c: dict[str, float]) -> tuple[float, str] | None:
    """(lower-bound time in ns, binding ceiling key) of one launch from its counters and peaks.

    The slowest of: each level's bytes at that level's peak bandwidth, each precision's FLOPs
    at its peak (pipes overlap, so the max, not the sum, is a true lower bound). None when the
    report has no peak for some work or traffic the kernel did.
    """
    r = rates(c)
    bounds = {}
    for key, n in work(c).items():
        if key not in r:
            return None
        bounds[key] = n / r[key][0] * 1e9
    for key, b in traffic(c).items():
        if key in r:
            bounds[key] = b / r[key][0] * 1e9
        elif key == "dram":
            return None  # DRAM is the one level every roofline needs
    if not bounds:
        return None
    key = max(bounds, key=bounds.get)
    return bounds[key], key


# --- reading the database ----------------------------------------------------------------

_WANTED = sorted({n for m in BY_SHORT.values() for n in m.names})


def _counters(store: Store, run: str) -> dict[int, dict[str, float]]:
    """{kernel_id: {ncu metric: value}} of a run, only the metrics the metric table names."""
    out: dict[int, dict[str, float]] = {}
    q = f"SELECT kernel_id, metric, value FROM counters WHERE run = ? AND metric IN ({','.join('?' * len(_WANTED))})"
    for kid, metric, value in store.conn.execute(q, (run, *_WANTED)):
        out.setdefault(kid, {})[metric] = value
    return out


def _kernels(store: Store, sel: selection.Selector) -> dict[str, list[dict]]:
    """The selector's launches that carry counters, grouped by pairing key, in launch order."""
    if sel.run not in store.runs():
        raise NoSuchRun(f"no run {sel.run!r} in {store.path}; runs: {', '.join(store.runs()) or 'none'}")
    rows = store.query("""
        SELECT kernel_id, kernel_name, short_name, nvtx_range, nvtx_path, start_ns FROM kernels
        WHERE run = :run AND kernel_id IN (SELECT kernel_id FROM counters WHERE run = :run)
        ORDER BY coalesce(start_ns, 0), kernel_id""", {"run": sel.run})
    if not rows:
        raise BadArgument(f"run {sel.run!r} has no Nsight Compute counters: load its .ncu-rep "
                          f"(profkit ingest) or capture with `profkit capture --metrics roofline`")
    out: dict[str, list[dict]] = {}
    for r in rows:
        key = selection.key_of(r["nvtx_path"], sel.component) if r["nvtx_path"] else (
            None if sel.component else "")
        if key is not None:
            out.setdefault(key, []).append(r)
    if not out:
        raise BadArgument(f"{sel}: no profiled kernels under an NVTX path holding {sel.component!r}")
    return out


def _aggregate(run: str, key: str, launches: list[dict], counters: dict[int, dict], labels: dict[int, str],
               calls: int, kind: str) -> Point | None:
    """One point from launches (summed, then per call)."""
    if not launches:
        return None
    time = 0.0
    flops: dict[str, float] = {}
    byts: dict[str, list[float]] = {}
    roof, binding, share = 0.0, {}, {}
    for k in launches:
        c = counters.get(k["kernel_id"], {})
        t = lookup(c, "duration")
        if not t:
            return None
        time += t
        for p, n in work(c).items():
            flops[p] = flops.get(p, 0.0) + n
        for lev, b in traffic(c).items():
            byts.setdefault(lev, []).append(b)
        rt = roof_time_ns(c)
        if rt is None or roof is None:
            roof = None
        else:
            roof += rt[0]
            binding[rt[1]] = binding.get(rt[1], 0.0) + rt[0]
        lab = labels.get(k["kernel_id"])
        share[lab] = share.get(lab, 0.0) + t
    levels = {lev: sum(v) for lev, v in byts.items() if len(v) == len(launches)}  # a level all launches have
    names = list(dict.fromkeys(k["short_name"] or k["kernel_name"] for k in launches))
    total = sum(share.values())
    return Point(run=run, path=launches[0]["nvtx_path"], nvtx_range=launches[0]["nvtx_range"],
                 kernel=", ".join(names) if len(names) <= 3 else f"{', '.join(names[:3])} +{len(names) - 3} more",
                 label=max(share, key=share.get), labels={lab: v / total for lab, v in share.items()},
                 launches=len(launches), calls=calls, time_ns=time / calls,
                 flops={p: v / calls for p, v in flops.items()}, bytes={lev: v / calls for lev, v in levels.items()},
                 roof_ns=None if roof is None else roof / calls,
                 binding=max(binding, key=binding.get) if binding else None, key=key, kind=kind)


def _points(store: Store, sel: selection.Selector, by: str, keys: list[str] | None = None,
            counters: dict | None = None) -> tuple[list[Point], list[Point], dict]:
    """(kernel or range points, range points, counters) of a selection."""
    groups = _kernels(store, sel)
    if keys is not None:
        groups = {k: groups[k] for k in keys if k in groups}
    counters = counters if counters is not None else {}
    mine = _counters(store, sel.run)
    counters.update({k["kernel_id"]: mine.get(k["kernel_id"], {}) for g in groups.values() for k in g})
    labels = _labels(store, sel.run)
    ranges, points = [], []
    for key, launches in groups.items():
        calls = selection.iterations(launches)
        r = _aggregate(sel.run, key, launches, counters, labels, len(calls), "range")
        if r is not None:
            ranges.append(r)
        if by == "kernel":
            for pos in range(len(calls[0])):  # the same kernel at the same place of each call
                p = _aggregate(sel.run, key, [c[pos] for c in calls], counters, labels, len(calls), "kernel")
                if p is not None:
                    points.append(p)
    return (points if by == "kernel" else ranges), ranges, counters


# --- ceilings ----------------------------------------------------------------------------

def measured_peaks(gpu: str | None, results: Path | None = None) -> list[Ceiling]:
    """Ceilings measured on this GPU model by benchmarks/ (copy bandwidth, GEMM throughput)."""
    if not gpu:
        return []
    dirs = [results] if results else [Path.cwd() / "benchmarks" / "results",
                                      Path(__file__).resolve().parents[1] / "benchmarks" / "results"]
    folder = next((d for d in dirs if d and d.is_dir()), None)
    if folder is None:
        return []
    out: dict[str, Ceiling] = {}
    for f in sorted(folder.glob("*.json")):
        try:
            d = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(d, dict):
            continue
        info = d.get("env") or d.get("info") or {}
        if not isinstance(info, dict) or info.get("gpu") != gpu:
            continue
        when = f"{f.name}, {str(info.get('date', '?'))[:10]}"
        copy = d.get("copy")
        if isinstance(copy, dict) and copy.get("gbps"):
            out["dram"] = Ceiling("dram", "memory", "DRAM copy (measured)", copy["gbps"] * 1e9,
                                  f"measured device-to-device copy, {copy.get('bytes', 0) / 2**30:.0f} GiB ({when})", True)
        peaks = d.get("peaks")
        if isinstance(peaks, dict):
            for name, key in _MEASURED_FLOPS.items():
                if peaks.get(name):
                    how = peaks.get(name.replace("_tflops", "_how"), "measured")
                    out[key] = Ceiling(key, "compute", f"{PRECISIONS[key][0]} (measured)", peaks[name] * 1e12,
                                       f"{how} ({when})", True)
    return list(out.values())


def _ceilings(per_kernel: list[dict[str, float]]) -> tuple[list[Ceiling], list[str]]:
    """One ceiling per precision and level that the reports give peaks for, at the median clock."""
    got: dict[str, list[float]] = {}
    how: dict[str, str] = {}
    for c in per_kernel:
        for key, (v, h) in rates(c).items():
            got.setdefault(key, []).append(v)
            how.setdefault(key, h)
    out, notes = [], []
    worked = {p for c in per_kernel for p in work(c)}
    for key, (label, *_rest) in PRECISIONS.items():
        if key in _PEAK_FALLBACK and "not collected" in how.get(key, "") and key not in worked:
            continue  # a stand-in peak is drawn only for kernels that need it
        if key in got:
            dense = " (dense: ncu peak / 2)" if key.endswith("_tensor") else ""
            out.append(Ceiling(key, "compute", label + dense, statistics.median(got[key]),
                               f"median over {len(got[key])} launches of {how[key]}"))
    for key, label, *_ in LEVELS:
        if key in got:
            out.append(Ceiling(key, "memory", label, statistics.median(got[key]),
                               f"median over {len(got[key])} launches of {how[key]}"))
    return out, notes


# --- building ----------------------------------------------------------------------------

def _open(store_or_path) -> tuple[Store, bool]:
    if isinstance(store_or_path, Store):
        return store_or_path, False
    if isinstance(store_or_path, sqlite3.Connection):
        path = store_or_path.execute("PRAGMA database_list").fetchone()[2]
        if not path:
            raise BadArgument("roofline needs a database file, not an in-memory connection")
        return Store(path), True
    return Store(store_or_path), True


def _gpu(store: Store, run: str) -> str | None:
    row = store.conn.execute("SELECT gpu_name FROM run WHERE run = ?", (run,)).fetchone()
    return row[0] if row else None


def _chain_keys(groups: dict[str, list[dict]], chain) -> list[str]:
    if chain in ("auto", ["auto"]):
        return list(groups)  # groups keep launch order: capture order
    keys = []
    for item in chain:
        if item in groups:
            keys.append(item)
            continue
        hits = [k for k in groups if item in (k or "").split("/")]
        if len(hits) != 1:
            raise BadArgument(f"chain step {item!r} names {len(hits)} NVTX paths; use one of: "
                              f"{', '.join(k for k in groups if k) or 'none'}")
        keys.append(hits[0])
    if len(keys) < 2:
        raise BadArgument("a chain needs at least two NVTX paths")
    return keys


def collect(store: Store, run: str | None = None, compare: str | None = None, by: str = "kernel",
            chain=None, results: Path | None = None) -> Roofline:
    """The roofline's data: points, ceilings, arrows and notes (build() draws it)."""
    if by not in ("kernel", "range"):
        raise BadArgument(f"--by {by!r}: use kernel or range")
    before = selection.parse(run) if run else selection.Selector(store.require_run(None))
    counters: dict[int, dict] = {}
    arrows: list[tuple[Point, Point]] = []
    notes: list[str] = []
    if compare:
        after = selection.parse(compare)
        pairs = selection.pair(store, before, after)
        keys = [p.key for p in pairs]
        pb, rb, _ = _points(store, before, by, keys, counters)
        pa, ra, _ = _points(store, after, by, keys, counters)
        for p in pb + rb:
            p.side = "before"
        for p in pa + ra:
            p.side = "after"
        rb_by, ra_by = {p.key: p for p in rb}, {p.key: p for p in ra}
        arrows = [(rb_by[k], ra_by[k]) for k in keys if k in rb_by and k in ra_by]
        missing = [k for k in keys if k not in rb_by or k not in ra_by]
        if missing:
            notes.append(f"no counters on one side for {', '.join(missing)}: no arrow")
        points = pb + pa
        ranges = rb + ra if by == "kernel" else []
        title = f"Roofline: {before} → {after}"
        runs = [before.run, after.run]
    elif chain:
        keys = _chain_keys(_kernels(store, before), chain)
        points, ranges, _ = _points(store, before, "range", keys, counters)
        order = {k: i for i, k in enumerate(keys)}
        points.sort(key=lambda p: order[p.key])
        arrows = list(zip(points, points[1:]))
        ranges = []
        title = f"Roofline: {before}, chain {' → '.join(_step_names([p.key for p in points]))}"
        runs = [before.run]
    else:
        points, _, _ = _points(store, before, by, None, counters)
        ranges = []
        title = f"Roofline: {before} (by {by})"
        runs = [before.run]
    ceilings, cnotes = _ceilings(list(counters.values()))
    notes += cnotes
    gpus = list(dict.fromkeys(_gpu(store, r) for r in runs))
    if len(gpus) > 1:
        notes.append(f"runs on different GPUs ({', '.join(str(g) for g in gpus)}): ceilings are medians over both")
    elif gpus[0]:
        measured = measured_peaks(gpus[0], results)
        ceilings += measured
        if measured:
            notes.append(f"dashed: measured on {gpus[0]} (benchmarks/results)")
    # levels: drawn where every point has them; say which are missing and why
    everything = points + ranges
    levels = []
    for key, label, *_ in LEVELS:
        have = [p for p in everything if key in p.bytes]
        if not have:
            notes.append(f"no {label} points: the report has no {BY_SHORT[dict((k, b) for k, _, b, *_ in LEVELS)[key]].names[0]}")
            continue
        levels.append(key)
        if key not in {c.key for c in ceilings if not c.measured}:
            clock = dict((k, c) for k, _, _, _, c, _ in LEVELS)[key]
            notes.append(f"no {label} ceiling: the report has no {BY_SHORT[clock].names[0]}")
    if not levels:
        raise BadArgument(f"{before}: the counters hold no DRAM, L2 or L1 bytes (capture with --metrics roofline)")
    primary = levels[0]
    no_flops = [p for p in everything if not p.total_flops]
    if no_flops:
        names = list(dict.fromkeys(p.kernel for p in no_flops))
        notes.append(f"{len(no_flops)} point(s) with no counted FLOPs not drawn (log axes): "
                     f"{', '.join(names[:3])}{' …' if len(names) > 3 else ''}")
    for a, b in list(arrows):
        if not a.total_flops or not b.total_flops or primary not in a.bytes or primary not in b.bytes:
            arrows.remove((a, b))
            notes.append(f"no arrow for {a.key}: a side has no FLOPs or no {LEVEL_LABEL[primary]} bytes")
    return Roofline(points=points + ranges, ceilings=ceilings, arrows=arrows, notes=notes, title=title,
                    levels=levels, primary=primary)


def _step_names(keys: list[str]) -> list[str]:
    """The part of each path that differs across a chain (the variant), else the path."""
    parts = [(k or "").split("/") for k in keys]
    common = set(parts[0]).intersection(*parts[1:]) if parts else set()
    return ["/".join(x for x in p if x not in common) or k for p, k in zip(parts, keys)]


# --- drawing -----------------------------------------------------------------------------

def _fmt(v: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {prefix}{unit}"
    return f"{v:.3g} {unit}"


def _hover(p: Point, level: str, ceilings: dict[str, Ceiling]) -> str:
    ai = p.intensity(level)
    bw = p.bytes[level] / (p.time_ns * 1e-9)
    lines = [f"<b>{p.kernel}</b>" + (f" ({p.side})" if p.side else ""),
             f"NVTX: {p.path or '(none)'}",
             f"label: {p.label}" + ("" if len(p.labels) == 1 else " (" + ", ".join(
                 f"{k} {100 * v:.0f} %" for k, v in sorted(p.labels.items(), key=lambda x: -x[1])) + " of time)"),
             f"time: {p.time_ns / 1e3:,.1f} µs per call ({p.launches} launches, {p.calls} calls)",
             f"{LEVEL_LABEL[level]}: AI {ai:.3g} FLOP/B, {_fmt(bw, 'B/s')}",
             f"achieved: {_fmt(p.flop_rate, 'FLOP/s')} ({p.precision and PRECISIONS[p.precision][0]})"]
    c = ceilings.get(level)
    if c:
        lines.append(f"{100 * bw / c.value:.0f} % of {LEVEL_LABEL[level]} peak bandwidth")
    if p.roofline_pct is not None:
        lines.append(f"<b>{p.roofline_pct:.0f} % of roofline</b> (bound: {_bound_name(p.binding)}, "
                     f"at its own clocks)")
    return "<br>".join(lines)


def _bound_name(key: str | None) -> str:
    if key in PRECISIONS:
        return PRECISIONS[key][0]
    return LEVEL_LABEL.get(key, str(key))


def _drawn(r: Roofline):
    """(point, level) pairs that appear on the log-log axes.

    With kernel points beside range points (compare by kernel), a range is one star at the
    arrows' level; otherwise each point appears at every level it has bytes for. Points with
    no FLOPs or no bytes at a level have no place on log axes.
    """
    mixed = {p.kind for p in r.points} == {"kernel", "range"}
    for p in r.points:
        for lev in ([r.primary] if mixed and p.kind == "range" else r.levels):
            if p.total_flops and p.bytes.get(lev):
                yield p, lev


def figure(r: Roofline):
    """A plotly Figure of the roofline (log-log), ceilings as lines, points coloured by label."""
    import math

    import plotly.graph_objects as go

    fig = go.Figure()
    mixed = {p.kind for p in r.points} == {"kernel", "range"}
    drawn = list(_drawn(r))
    xs = [p.intensity(lev) for p, lev in drawn]
    ys = [p.flop_rate for p, _ in drawn]
    comp = [c for c in r.ceilings if c.kind == "compute"]
    mem = [c for c in r.ceilings if c.kind == "memory" and c.key in r.levels]
    ridges = [f.value / m.value for f in comp for m in mem]
    x_lo = min(xs + ridges + [1.0]) / 4
    x_hi = max(xs + ridges + [1.0]) * 4
    y_top = max([c.value for c in comp] + ys + [1.0]) * 2
    y_lo = min(ys + [m.value * x_lo for m in mem] + [y_top / 1e4]) / 2
    top = max((c.value for c in comp if not c.measured), default=y_top / 2)
    model = {c.key: c for c in r.ceilings if not c.measured}

    # ceilings: horizontal FLOP/s roofs from the DRAM ridge on, diagonal bandwidths up to the top roof
    for c in mem:
        x_end = top / c.value
        fig.add_trace(go.Scatter(
            x=[x_lo, x_end], y=[c.value * x_lo, top], mode="lines", name=f"{c.label} {_fmt(c.value, 'B/s')}",
            line=dict(color=CEILING_COLOURS[c.key], width=1.5, dash="dash" if c.measured else "solid"),
            hovertemplate=f"{c.label}: {_fmt(c.value, 'B/s')}<br>{c.source}<extra></extra>", meta="ceiling"))
    slowest = min((c.value for c in mem if not c.measured), default=None)
    for c in comp:
        x0 = c.value / slowest if slowest else x_lo
        fig.add_trace(go.Scatter(
            x=[max(x0, x_lo), x_hi], y=[c.value, c.value], mode="lines", name=f"{c.label} {_fmt(c.value, 'FLOP/s')}",
            line=dict(color=CEILING_COLOURS[c.key], width=1.5, dash="dash" if c.measured else "solid"),
            hovertemplate=f"{c.label}: {_fmt(c.value, 'FLOP/s')}<br>{c.source}<extra></extra>", meta="ceiling"))

    # points: one trace per (side, label); symbol per level; open markers before, filled after
    traces: dict[tuple, list] = {}
    for p, lev in drawn:
        kind = "range" if mixed and p.kind == "range" else "point"
        traces.setdefault((kind, p.side, p.label), []).append((p, lev))
    for (kind, side, label), items in traces.items():
        sym = [("star" if kind == "range" else LEVEL_SYMBOLS[lev]) + ("-open" if side == "before" else "")
               for _, lev in items]
        name = f"{label}" + (f" ({side})" if side else "") + (" range" if kind == "range" else "")
        fig.add_trace(go.Scatter(
            x=[p.intensity(lev) for p, lev in items], y=[p.flop_rate for p, _ in items], mode="markers", name=name,
            marker=dict(color=LABEL_COLOURS.get(label, "#7f7f7f"), symbol=sym, size=14 if kind == "range" else 10,
                        line=dict(width=1.5, color=LABEL_COLOURS.get(label, "#7f7f7f"))),
            text=[_hover(p, lev, model) for p, lev in items], hovertemplate="%{text}<extra></extra>",
            meta="points"))
    # a key for the level symbols (no points: nothing to count)
    if len(r.levels) > 1:
        for lev in r.levels:
            fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=f"{LEVEL_LABEL[lev]} intensity",
                                     marker=dict(symbol=LEVEL_SYMBOLS[lev], color="#999", size=9), meta="key"))

    for a, b in r.arrows:
        fig.add_annotation(
            # log axes: annotation positions are log10 of the data values
            x=math.log10(b.intensity(r.primary)), y=math.log10(b.flop_rate),
            ax=math.log10(a.intensity(r.primary)), ay=math.log10(a.flop_rate),
            xref="x", yref="y", axref="x", ayref="y", showarrow=True, arrowhead=3, arrowsize=1.3,
            arrowwidth=1.8, arrowcolor="#333", text="", name=f"arrow:{a.key}",
            hovertext=(f"{a.key}: {a.time_ns / 1e3:,.1f} → {b.time_ns / 1e3:,.1f} µs per call "
                       f"({a.time_ns / b.time_ns:.2f}x)"))
    if r.arrows and r.arrows[0][0].side == "":  # chain: name each step
        for p, name in zip([r.arrows[0][0]] + [b for _, b in r.arrows],
                           _step_names([r.arrows[0][0].key] + [b.key for _, b in r.arrows])):
            fig.add_annotation(x=math.log10(p.intensity(r.primary)), y=math.log10(p.flop_rate), text=name,
                               showarrow=False, yshift=14, font=dict(size=11))

    notes = r.notes or ["all levels and ceilings from the report"]
    fig.add_annotation(xref="paper", yref="paper", x=0, y=-0.1, xanchor="left", yanchor="top", align="left",
                       showarrow=False, font=dict(size=11, color="#555"), text="<br>".join(notes))
    fig.update_layout(
        title=dict(text=f"{r.title}<br><sup>solid: from the report's peak metrics at the median clocks; "
                        f"hover a point or line for its numbers and sources</sup>", x=0.01),
        margin=dict(b=90 + 16 * len(notes)),
        xaxis=dict(type="log", title="arithmetic intensity (FLOP / byte at the level)",
                   range=[math.log10(x_lo), math.log10(x_hi)]),
        yaxis=dict(type="log", title="achieved FLOP/s", range=[math.log10(y_lo), math.log10(y_top)]),
        template="plotly_white", height=700, legend=dict(font=dict(size=10)), hovermode="closest",
        meta={"points": len(drawn), "arrows": len(r.arrows), "levels": r.levels, "notes": r.notes})
    return fig


def build(store, run: str | None = None, compare: str | None = None, by: str = "kernel", chain=None,
          results: Path | None = None):
    """The roofline figure of a run (or a selector RUN:COMPONENT), optionally against another.

    ``store`` is a Store, a database path, or an sqlite3 connection to a database file.
    ``chain``: NVTX paths (or variant names) in order, or "auto" for capture order; the
    points are joined by arrows in that order.
    """
    s, close = _open(store)
    try:
        return figure(collect(s, run, compare, by, chain, results))
    finally:
        if close:
            s.close()


def write_html(fig, path) -> Path:
    """One self-contained HTML file: plotly.js inline, no CDN, works offline."""
    path = Path(path)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    fig.write_html(str(tmp), include_plotlyjs=True, full_html=True, config={"displaylogo": False})
    tmp.replace(path)  # never a half-written file under the final name
    return path



def write_runs(store: Store, path: Path | str = "roofline.html") -> list[dict]:
    """The main job's output: one HTML file holding the roofline of every run with counters.

    plotly.js is inlined once, before the first figure; each run gets a heading and a figure.
    Returns one row per run: run, points drawn (None: no roofline) and notes or the reason.
    """
    import html

    rows, parts = [], []
    for run in store.runs():
        try:
            r = collect(store, run)
        except BadArgument as e:
            rows.append({"run": run, "points": None, "why": str(e)})
            continue
        first = not parts
        parts.append(f'<h2 id="{html.escape(run)}">{html.escape(run)}</h2>')
        parts.append(figure(r).to_html(full_html=False, include_plotlyjs=first, config={"displaylogo": False}))
        rows.append({"run": run, "points": sum(1 for _ in _drawn(r)), "why": "; ".join(r.notes)})
    if parts:
        toc = " · ".join(f'<a href="#{html.escape(x["run"])}">{html.escape(x["run"])}</a>'
                         for x in rows if x["points"] is not None)
        doc = ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>profkit rooflines</title></head>"
               f"<body style=\"font-family: sans-serif\"><h1>profkit rooflines</h1><p>{toc}</p>"
               f"<p>How points and ceilings are computed: docs/roofline.md</p>{''.join(parts)}</body></html>\n")
        path = Path(path)
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        tmp.write_text(doc, encoding="utf-8")
        tmp.replace(path)
    return rows
