"""Hierarchical roofline of a run from its Nsight Compute counters: points (per kernel or per
NVTX range), ceilings and before/after arrows, as data. Drawing is profkit.outputs.roofline_plot.

Every number comes from the shared performance model (profkit.model.perf: work, traffic, peak rates,
roof time) over the report's own counters and peaks. Measured peaks (copy bandwidth, cuBLAS
throughput) come from the caller (profkit.model.peaks) and are kept apart as "measured" ceilings.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from profkit.analyses import selection
from profkit.analyses.classify import gpu_context
from profkit.analyses.classify import labels as _labels
from profkit.core.errors import BadArgument, NoSuchRun
from profkit.core.metrics import BY_SHORT, lookup
from profkit.model.perf import (
    FROM_TABLE,
    LEVEL_LABEL,
    LEVELS,
    PEAK_FALLBACK,
    PRECISIONS,
    rates,
    roof_time_ns,
    traffic,
    work,
)
from profkit.store.store import Store

# the metrics the model reads: the roofline reads only these of a run's counters
MODEL_METRICS = sorted({n for m in BY_SHORT.values() for n in m.read})


@dataclass
class Ceiling:
    key: str  # a PRECISIONS or LEVELS key
    kind: str  # "compute" (FLOP/s) or "memory" (byte/s)
    label: str
    value: float
    source: str  # how it was obtained, shown on hover
    measured: bool = False


@dataclass
class Point:
    """One kernel (all its profiled launches at one place in a call) or one NVTX range."""

    run: str
    path: str | None
    nvtx_range: str | None
    kernel: str  # short name(s)
    label: str | None
    labels: dict[str | None, float]  # label -> share of time (None: launches without a label)
    launches: int
    calls: int
    time_ns: float  # per call
    flops: dict[str, float]  # precision -> FLOPs per call
    bytes: dict[str, float]  # level -> bytes per call (only levels the report has)
    roof_ns: float | None  # lower-bound time per call from the ceilings (None: no peaks)
    binding: str | None  # the ceiling that sets roof_ns
    side: str = ""  # "", "before", "after"
    key: str | None = None  # pairing key (compare) or chain step
    kind: str = "kernel"  # "kernel", "range", or "shapes" (an operator from the model)

    @property
    def total_flops(self) -> float:
        return sum(self.flops.values())

    @property
    def precision(self) -> str | None:
        return max(self.flops, key=self.flops.__getitem__) if self.total_flops else None

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
    levels: list[str] = field(default_factory=list)  # levels drawn
    primary: str = "dram"  # level the arrows join


# --- reading the database ----------------------------------------------------------------


def _kernels(store: Store, sel: selection.Selector) -> dict[str, list[dict]]:
    """The selector's launches that carry counters, grouped by pairing key, in launch order."""
    if sel.run not in store.runs():
        raise NoSuchRun(f"no run {sel.run!r} in {store.path}; runs: {', '.join(store.runs()) or 'none'}")
    rows = store.query(
        """
        SELECT kernel_id, kernel_name, short_name, nvtx_range, nvtx_path, start_ns, nvtx_names FROM kernels
        WHERE run = :run AND kernel_id IN (SELECT kernel_id FROM counters WHERE run = :run)
        ORDER BY coalesce(start_ns, 0), kernel_id""",
        {"run": sel.run},
    )
    if not rows:
        raise BadArgument(
            f"run {sel.run!r} has no Nsight Compute counters (a timeline only): capture it with "
            f"`profkit capture --metrics roofline`, or ingest an .ncu-rep of the same workload into it"
        )
    out: dict[str, list[dict]] = {}
    for r in rows:
        key = selection.key_of(selection.names(r), sel.component) if r["nvtx_path"] else (None if sel.component else "")
        if key is not None:
            out.setdefault(key, []).append(r)
    if not out:
        raise BadArgument(f"{sel}: no profiled kernels under an NVTX path holding {sel.component!r}")
    return out


def _aggregate(
    run: str,
    key: str,
    launches: list[dict],
    counters: dict[int, dict],
    labels: dict[int, str],
    calls: int,
    kind: str,
    gpu=None,
) -> Point | None:
    """One point from launches (summed, then per call)."""
    if not launches:
        return None
    time = 0.0
    flops: dict[str, float] = {}
    byts: dict[str, list[float]] = {}
    roof: float | None = 0.0
    binding: dict[str, float] = {}
    share: dict[str | None, float] = {}
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
        rt = roof_time_ns(c, gpu)
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
    return Point(
        run=run,
        path=launches[0]["nvtx_path"],
        nvtx_range=launches[0]["nvtx_range"],
        kernel=", ".join(names) if len(names) <= 3 else f"{', '.join(names[:3])} +{len(names) - 3} more",
        label=max(share, key=share.__getitem__),
        labels={lab: v / total for lab, v in share.items()},
        launches=len(launches),
        calls=calls,
        time_ns=time / calls,
        flops={p: v / calls for p, v in flops.items()},
        bytes={lev: v / calls for lev, v in levels.items()},
        roof_ns=None if roof is None else roof / calls,
        binding=max(binding, key=binding.__getitem__) if binding else None,
        key=key,
        kind=kind,
    )


def _points(
    store: Store,
    sel: selection.Selector,
    by: str,
    keys: list[str] | None = None,
    counters: dict | None = None,
    gpu=None,
) -> tuple[list[Point], list[Point], dict]:
    """(kernel or range points, range points, counters) of a selection."""
    groups = _kernels(store, sel)
    if keys is not None:
        groups = {k: groups[k] for k in keys if k in groups}
    counters = counters if counters is not None else {}
    mine = store.counters(sel.run, MODEL_METRICS)
    counters.update({k["kernel_id"]: mine.get(k["kernel_id"], {}) for g in groups.values() for k in g})
    labels = _labels(store, sel.run)
    ranges, points = [], []
    for key, launches in groups.items():
        calls = selection.iterations(launches)
        r = _aggregate(sel.run, key, launches, counters, labels, len(calls), "range", gpu)
        if r is not None:
            ranges.append(r)
        if by == "kernel":
            for pos in range(len(calls[0])):  # the same kernel at the same place of each call
                p = _aggregate(sel.run, key, [c[pos] for c in calls], counters, labels, len(calls), "kernel", gpu)
                if p is not None:
                    points.append(p)
    return (points if by == "kernel" else ranges), ranges, counters


# --- ceilings ----------------------------------------------------------------------------


def measured_ceilings(peaks: list[dict] | None, gpu: str | None) -> list[Ceiling]:
    """Ceilings measured on this GPU model (profkit.model.peaks records), dashed on the plot."""
    return [
        Ceiling(p["ceiling"], p["kind"], p["label"], p["value"], p["how"], True)
        for p in peaks or ()
        if gpu and p["gpu"] == gpu
    ]


def _ceilings(per_kernel: list[dict[str, float]], gpu=None) -> tuple[list[Ceiling], list[str]]:
    """One ceiling per precision and level that the reports give peaks for, at the median clock
    (for reports with no peak at all: `gpu`'s datasheet peaks, profkit.model.gpus)."""
    got: dict[str, list[float]] = {}
    how: dict[str, str] = {}
    for c in per_kernel:
        for key, (v, h) in rates(c, gpu).items():
            got.setdefault(key, []).append(v)
            how.setdefault(key, h)
    out: list[Ceiling] = []
    notes: list[str] = []
    worked = {p for c in per_kernel for p in work(c)}
    for key, (label, *_rest) in PRECISIONS.items():
        if key in PEAK_FALLBACK and "not collected" in how.get(key, "") and key not in worked:
            continue  # a stand-in peak is drawn only for kernels that need it
        if how.get(key, "").startswith(FROM_TABLE) and key not in worked:
            continue  # a datasheet's precisions the kernels did not compute in
        if key in got:
            dense = " (dense: ncu peak / 2)" if key.endswith("_tensor") else ""
            out.append(
                Ceiling(
                    key,
                    "compute",
                    label + dense,
                    statistics.median(got[key]),
                    f"median over {len(got[key])} launches of {how[key]}",
                )
            )
    for key, label, *_ in LEVELS:
        if key in got:
            out.append(
                Ceiling(
                    key,
                    "memory",
                    label,
                    statistics.median(got[key]),
                    f"median over {len(got[key])} launches of {how[key]}",
                )
            )
    return out, notes


# --- building ----------------------------------------------------------------------------


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
        hits = [k for k in groups if groups[k] and item in selection.names(groups[k][0])]
        if len(hits) != 1:
            raise BadArgument(
                f"chain step {item!r} names {len(hits)} NVTX paths; use one of: "
                f"{', '.join(k for k in groups if k) or 'none'}"
            )
        keys.append(hits[0])
    if len(keys) < 2:
        raise BadArgument("a chain needs at least two NVTX paths")
    return keys


def collect(
    store: Store,
    run: str | None = None,
    compare: str | None = None,
    by: str = "kernel",
    chain=None,
    peaks: list[dict] | None = None,
) -> Roofline:
    """The roofline's data: points, ceilings, arrows and notes (outputs.roofline_plot draws it).
    `peaks`: measured peak records (profkit.model.peaks) to draw beside the report's own."""
    if by not in ("kernel", "range"):
        raise BadArgument(f"--by {by!r}: use kernel or range")
    before = selection.parse(run) if run else selection.Selector(store.require_run(None))
    counters: dict[int, dict] = {}
    arrows: list[tuple[Point, Point]] = []
    notes: list[str] = []
    # datasheet peaks (reports that carry none): only for a GPU known by name
    known, found = gpu_context(store, before.run) if before.run in store.runs() else ([], "")
    gpu = known[0] if len(known) == 1 and found.startswith("by name") else None
    if compare:
        after = selection.parse(compare)
        pairs = selection.pair(store, before, after)
        keys = [p.key for p in pairs]
        pb, rb, _ = _points(store, before, by, keys, counters, gpu)
        pa, ra, _ = _points(store, after, by, keys, counters, gpu)
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
        points, ranges, _ = _points(store, before, "range", keys, counters, gpu)
        order: dict[str | None, int] = {k: i for i, k in enumerate(keys)}
        points.sort(key=lambda p: order[p.key])
        arrows = list(zip(points, points[1:]))
        ranges = []
        title = f"Roofline: {before}, chain {' → '.join(step_names([p.key for p in points if p.key is not None]))}"
        runs = [before.run]
    else:
        no_counters: BadArgument | None = None
        try:
            points, _, _ = _points(store, before, by, None, counters, gpu)
        except BadArgument as e:  # a timeline: the operators' shapes may still place it
            points, no_counters = [], e
        ranges = []
        title = f"Roofline: {before} (by {by})"
        runs = [before.run]
    ceilings, cnotes = _ceilings(list(counters.values()), gpu)
    notes += cnotes
    if not compare and not chain and not points and not ranges:  # a timeline: its operators' shapes
        points, shape_ceilings = _shape_points(store, before.run, gpu)
        ceilings += shape_ceilings
        if points:
            notes.append(
                f"{len(points)} operator(s) from recorded shapes (diamonds): the operator model's FLOPs and "
                "minimum DRAM bytes over the measured time; no counters in this run"
            )
        elif no_counters is not None:
            raise no_counters
    if gpu is not None and any(c.source.split("of ", 1)[-1].startswith(FROM_TABLE) for c in ceilings):
        notes.append(f"ceilings from datasheet peaks of {gpu.name}: the report has none ({gpu.source})")
    elif not ceilings and len(known) > 1:
        notes.append(
            f"no ceilings: the report has no peaks and names no GPU ({found}); name it with profkit ingest --gpu NAME"
        )
    gpus = list(dict.fromkeys(_gpu(store, r) for r in runs))
    if len(gpus) > 1:
        notes.append(f"runs on different GPUs ({', '.join(str(g) for g in gpus)}): ceilings are medians over both")
    elif gpus[0]:
        measured = measured_ceilings(peaks, gpus[0])
        ceilings += measured
        if measured:
            notes.append(f"dashed: measured on {gpus[0]} (benchmarks/results)")
    # levels: drawn where every point has them; say which are missing and why
    everything = points + ranges
    levels = []
    for key, label, *_ in LEVELS:
        have = [p for p in everything if key in p.bytes]
        if not have:
            notes.append(
                f"no {label} points: the report has no {BY_SHORT[dict((k, b) for k, _, b, *_ in LEVELS)[key]].names[0]}"
            )
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
        notes.append(
            f"{len(no_flops)} point(s) with no counted FLOPs not drawn (log axes): "
            f"{', '.join(names[:3])}{' …' if len(names) > 3 else ''}"
        )
    for a, b in list(arrows):
        if not a.total_flops or not b.total_flops or primary not in a.bytes or primary not in b.bytes:
            arrows.remove((a, b))
            notes.append(f"no arrow for {a.key}: a side has no FLOPs or no {LEVEL_LABEL[primary]} bytes")
    return Roofline(
        points=points + ranges,
        ceilings=ceilings,
        arrows=arrows,
        notes=notes,
        title=title,
        levels=levels,
        primary=primary,
    )


def _shape_points(store: Store, run: str, gpu) -> tuple[list[Point], list[Ceiling]]:
    """One point per operator and shapes of a run without counters: the operator model's FLOPs
    and minimum DRAM bytes (profkit.analyses.shape_labels) over its kernels' time per call, with
    the GPU's datasheet ceilings of the precisions drawn."""
    from profkit.analyses import shape_labels

    groups: dict[tuple, list[dict]] = {}
    for o in {r["op_id"]: r for r in shape_labels.model_ops(store, run).values()}.values():
        if o["flops"] and o["min_bytes"] and o["gpu_ns"] and o["family"] != "collective":
            groups.setdefault((o["op"], o["input_dims"], o["input_types"]), []).append(o)
    labels = _labels(store, run)
    launch_of = {
        r["op_id"]: r["launch_id"]
        for r in store.query(
            "SELECT l.op_id, min(l.launch_id) AS launch_id FROM op_launch l JOIN op_row o ON o.id = l.op_id"
            " WHERE o.run = ? GROUP BY l.op_id",
            (run,),
        )
    }
    points, used = [], set()
    for (op, _dims, _types), os_ in groups.items():
        o = os_[0]
        key = shape_labels._ceiling(o["family"], o["precision"])
        used.add(key)
        launch = launch_of.get(o["op_id"])
        label = labels.get(launch) if launch is not None else None
        points.append(
            Point(
                run=run,
                path=None,
                nvtx_range=None,
                kernel=shape_labels.aten.describe(op, shape_labels._operands(o)),
                label=label,
                labels={label: 1.0} if label else {},
                launches=sum(x["kernels"] for x in os_),
                calls=len(os_),
                time_ns=statistics.mean(x["gpu_ns"] for x in os_),
                flops={key: o["flops"]},
                bytes={"dram": o["min_bytes"]},
                roof_ns=None,
                binding=None,
                kind="shapes",
            )
        )
    ceilings = []
    if gpu is not None:
        for k in sorted(used | {"dram"}):
            v = gpu.ceilings.get(k)
            if v:
                kind = "memory" if k == "dram" else "compute"
                label = LEVEL_LABEL["dram"] if k == "dram" else PRECISIONS[k][0]
                ceilings.append(Ceiling(k, kind, label, v, f"{gpu.name} datasheet ({gpu.source})"))
    return points, ceilings


def step_names(keys: list[str]) -> list[str]:
    """The part of each path that differs across a chain (the variant), else the path."""
    parts = [(k or "").split("/") for k in keys]
    common = set(parts[0]).intersection(*parts[1:]) if parts else set()
    return ["/".join(x for x in p if x not in common) or k for p, k in zip(parts, keys)]
