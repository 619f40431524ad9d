"""Was the advice right? For a before/after pair, the gain `advise` predicted for the BEFORE
side against the gain `compare` measured between the two.

Predicted: over the advise items of the BEFORE range (its scope), per call,
    predicted speed-up = time / (time - recoverable)
where time and recoverable are GPU time for operator (range) items and the GPU window for
graph items: a graph replay does not shorten kernels, it closes the gaps between them. The
pair's measure follows the fix: `gpu` pairs are compared on GPU time per call (compare's
speed-up), `span` pairs on the window per call (first kernel start to last kernel end).
ratio = predicted / measured (1.0: exact; > 1: advise promised more than the fix gave).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from profkit.analyses import timeline as tl
from profkit.analyses.advise import advise
from profkit.analyses.compare import compare
from profkit.analyses.selection import key_of, parse
from profkit.store.store import Store

OFF_BY = 0.25  # a prediction further than this from the measured gain needs its reason


@dataclass
class Calibration:
    before: str
    after: str
    measure: str  # gpu | span
    range: str
    predicted: float | None
    measured: float
    recoverable_us: float
    time_us: float
    basis: str  # what the prediction rests on (the top item's how)
    why: str = ""  # where |ratio - 1| > OFF_BY: the reason, from the evidence

    @property
    def ratio(self) -> float | None:
        return None if self.predicted is None else self.predicted / self.measured

    @property
    def within(self) -> bool:
        return self.ratio is not None and abs(self.ratio - 1) <= OFF_BY

    def row(self) -> dict:
        return {**asdict(self), "ratio": self.ratio, "within_25pct": self.within}


def _windows(store: Store, selector: str) -> dict[str, tuple[str, dict]]:
    """Repeated calls of a selection by pairing key: key -> (path, timeline row), with child
    ranges' kernels included (a step's window holds its operators)."""
    sel = parse(selector)
    out = {}
    for r in tl.calls(tl.ranges(store, sel.run)):
        k = key_of(r["path"], sel.component)
        if k is not None:
            out[k] = (r["path"], r)
    return out


def calibrate(
    store: Store, before: str, after: str, measure: str = "gpu", peaks: list[dict] | None = None, why: str = ""
) -> list[Calibration]:
    """One row per range the pair shares: compare's pairing on GPU time (`gpu`), or the
    repeated calls (timeline.calls) on their window (`span`)."""
    out = []
    if measure == "span":
        bw, aw = _windows(store, before), _windows(store, after)
        for key in (k for k in bw if k in aw):
            (path, b), (_, a) = bw[key], aw[key]
            time = b["window_ns"] / b["instances"] / 1e3
            measured = time / (a["window_ns"] / a["instances"] / 1e3)
            out.append(_row(store, before, after, measure, key, path, time, measured, "graph", peaks, why))
        return out
    for c in compare(store, before, after):
        row = _row(
            store, before, after, measure, c.key, c.before.path, c.before.median_us, c.speedup, "range", peaks, why
        )
        if not row.why and row.ratio is not None and not row.within:
            row.why = _why(store, parse(after).run, c.after.path, row)
        out.append(row)
    return out


def _why(store: Store, run: str, path: str, row: Calibration) -> str:
    """What the after side's own label says about the gap left to the predicted floor."""
    from profkit.analyses.classify import label_rows

    ratio = row.ratio
    assert ratio is not None  # asked only of a row with a ratio (calibrate)
    ids = {
        k["kernel_id"]: k["duration_ns"] or 0
        for k in store.query("SELECT kernel_id, duration_ns FROM kernels WHERE run = ? AND nvtx_path = ?", (run, path))
    }
    share: dict[tuple, float] = {}
    for r in label_rows(store, run):
        if r["kernel_id"] in ids:
            key = (r["label"], r["reason"])
            share[key] = share.get(key, 0.0) + ids[r["kernel_id"]]
    if not share:
        return f"the fix reached {100 / ratio:.0f} % of the predicted floor"
    label, reason = max(share, key=share.__getitem__)
    return f"the fix reached {100 / ratio:.0f} % of the predicted floor: it is {label}-bound ({reason})"


def _row(store, before, after, measure, key, path, time, measured, kind, peaks, why) -> Calibration:
    adv = advise(store, parse(before).run, scope=path, peaks=peaks)
    items = [i for i in adv.items if i.kind == kind]
    calls = max((i.calls for i in items), default=1) or 1
    rec = sum(i.recoverable_ns for i in items) / calls / 1e3
    known = any(i.floor_ns is not None for i in items)
    predicted = time / (time - rec) if known and time > rec else None
    basis = items[0].how if items else "no item"
    return Calibration(before, after, measure, key, predicted, measured, rec, time, basis, why)


# --- ordinary programs: one realised change each, its prediction from the BEFORE's steady state ---

PROGRAM_OFF_BY = 0.35  # issue 50: a realised gain within this of the prediction holds

# kernels a channels-last model no longer launches (cuDNN's own layout conversions) and ATen
# kernels with a channels-last variant of their own (NCHW-strided batch norm and pooling)
LAYOUT_REMOVED = ("nchwToNhwc", "nhwcToNchw")
LAYOUT_NATIVE = ("batch_norm", "max_pool")


@dataclass
class ProgramPair:
    before: str
    after: str
    fix: str  # graph | reduce-overhead | sync | batch | layout | compile | backend
    change: str  # the change, in words
    measure: str  # step (window per step) | gpu (kernel time per step) | sample (window per sample)
    batch: tuple[int, int] = (1, 1)  # samples per step, before and after (measure `sample`)
    statement: str = ""  # where the prediction cannot hold: why, plainly


@dataclass
class ProgramCalibration:
    pair: str
    change: str
    measure: str
    predicted: float | None
    realised: float
    basis: str
    statement: str
    step_before_ms: float
    step_after_ms: float
    gpu_before_ms: float
    gpu_after_ms: float

    @property
    def ratio(self) -> float | None:
        return None if self.predicted is None else self.predicted / self.realised

    @property
    def within(self) -> bool:
        return self.ratio is not None and abs(self.ratio - 1) <= PROGRAM_OFF_BY

    @property
    def holds(self) -> bool:
        """Within the band, or said plainly why not."""
        return self.within or bool(self.statement)

    def row(self) -> dict:
        return {**asdict(self), "ratio": self.ratio, "within_35pct": self.within}


def _steady(store: Store, run: str) -> tuple[float, float, int, tuple[int, int]]:
    """(median window per step, kernel time per step, steps, window) of a run's steady state:
    every kernel in the window, whatever thread launched it (autograd's backward runs on a
    thread of its own, outside the step's NVTX range)."""
    from profkit.analyses import phases

    p = phases.of_run(store, run).steady
    if p is None or not p.steps or not p.step_ns:
        raise ValueError(f"run {run!r}: no steady state of steps")
    gpu = store.query(
        "SELECT coalesce(sum(duration_ns), 0) AS t FROM kernels WHERE run = ? AND start_ns >= ? AND start_ns < ?",
        (run, p.start_ns, p.end_ns),
    )[0]["t"]
    return float(p.step_ns), float(gpu) / p.steps, p.steps, (p.start_ns, p.end_ns)


def _predict_program(
    store: Store, p: ProgramPair, step: float, gpu: float, steps: int, win
) -> tuple[float | None, str]:
    """advise's prediction for the change, from the BEFORE's steady state only."""
    a = advise(store, p.before, include_unranged=True)
    if p.fix == "graph":
        items = [i for i in a.items if i.kind == "graph" and i.predicted_speedup]
        if not items:
            return None, "no idle item"
        top = items[0]
        return top.predicted_speedup, f"advise's idle item: {top.how}"
    if p.fix == "reduce-overhead":
        return _reduce_overhead(store, p.before, a, step, steps, win)
    if p.fix == "sync":
        items = [i for i in a.items if i.kind == "idle" and i.label == "host_sync" and i.predicted_speedup]
        if not items:
            return None, "no host-sync item"
        top = items[0]
        return top.predicted_speedup, f"advise's host-sync item: {top.how}"
    if p.fix == "batch":
        k = p.batch[1] / p.batch[0]
        after = max(step, k * gpu)
        return k * step / after, (
            f"step {step / 1e6:.2f} ms, the GPU busy {gpu / 1e6:.2f} ms of it; x{k:g} the batch: the host's step "
            f"stays, the kernels' time grows at most x{k:g} (the step is the larger), per sample"
        )
    if p.fix == "layout":
        rec, names = 0.0, list[str]()
        for i in a.items:
            if i.kind != "range":
                continue
            if any(n in i.kernel_name for n in LAYOUT_REMOVED):
                rec, names = rec + i.gpu_ns, names + [f"{i.kernel_name} (removed)"]
            elif any(n in i.kernel_name for n in LAYOUT_NATIVE) and i.predicted_speedup:
                rec, names = rec + i.recoverable_ns, names + [f"{i.kernel_name} ({i.predicted_speedup:.1f}x)"]
        rec /= steps
        return gpu / (gpu - rec), (
            f"advise's items channels-last addresses, {rec / 1e6:.2f} ms of {gpu / 1e6:.2f} ms a step: "
            + ", ".join(names)
        )
    if p.fix == "backend":
        items = [i for i in a.items if i.kind == "switch"]
        if not items:
            return None, "no attention-in-pieces item"
        rec = sum(i.recoverable_ns for i in items) / steps
        now = gpu if p.measure == "gpu" else step  # the item's time is kernel time
        return now / (now - rec), (
            f"advise's switch item, {rec / 1e3:,.0f} us a step recoverable: {items[0].predicted_how}"
        )
    if p.fix == "compile":
        items = [i for i in a.items if i.kind == "range" and i.nvtx_path and i.predicted_speedup]
        if not items:
            return None, "no range item"
        top = items[0]
        return top.predicted_speedup, f"advise's range item: {top.predicted_how}"
    return None, "advise has no figure for this change"


def _reduce_overhead(store: Store, run: str, a, step: float, steps: int, win) -> tuple[float | None, str]:
    """torch.compile(mode="reduce-overhead") is Inductor and a CUDA graph. Inductor calls the
    library for GEMMs and attention and fuses each run of other kernels between them into one;
    on a timeline without counters such a run of short, latency-bound kernels is taken to cost
    its longest member. The graph removes the launch gaps but keeps the device's own gap per
    kernel, the idle time the host spends in synchronising calls and copies (a graph does not
    remove them), and the gaps over a millisecond (host work)."""
    from profkit.analyses import idle
    from profkit.model import families

    gaps = [i for i in a.items if i.kind == "graph" and i.evidence and "idle_long_us" in i.evidence[0]]
    if not gaps:
        return None, "no launch-gap item"
    ks = store.query(
        "SELECT family, duration_ns FROM kernels WHERE run = ? AND start_ns >= ? AND start_ns < ? "
        "AND duration_ns IS NOT NULL ORDER BY start_ns",
        (run, *win),
    )
    lib_ns, lib_n, fused_ns, runs, longest = 0.0, 0, 0.0, 0, None
    for k in ks:
        if families.get(k["family"]).attain in ("gemm", "attention"):
            lib_ns, lib_n = lib_ns + k["duration_ns"], lib_n + 1
            if longest is not None:
                fused_ns, runs, longest = fused_ns + longest, runs + 1, None
        else:
            longest = max(longest or 0, k["duration_ns"])
    if longest is not None:
        fused_ns, runs = fused_ns + longest, runs + 1
    got = idle.analyse(store, run, win)
    kept = got.by_cause.get("sync", 0.0) + got.by_cause.get("copy", 0.0)
    long_ns = gaps[0].evidence[0]["idle_long_us"] * 1e3
    after = (lib_ns + fused_ns + (lib_n + runs) * a.device_gap_ns + kept + long_ns) / steps
    return step / after, (
        f"{len(ks) / steps:.0f} kernels a step -> {(lib_n + runs) / steps:.0f}: {lib_n / steps:.0f} library "
        f"(GEMM, attention) {lib_ns / steps / 1e3:,.0f} us kept, {runs / steps:.0f} fused runs of the others at "
        f"their longest member {fused_ns / steps / 1e3:,.0f} us; + the device's gap {a.device_gap_ns / 1e3:.2f} us "
        f"a kernel, + {kept / steps / 1e3:,.0f} us a step idle in host syncs and copies (a graph keeps them)"
    )


def calibrate_program(store: Store, p: ProgramPair) -> ProgramCalibration:
    step_b, gpu_b, steps_b, win_b = _steady(store, p.before)
    step_a, gpu_a, _, _ = _steady(store, p.after)
    if p.measure == "gpu":
        realised = gpu_b / gpu_a
    elif p.measure == "sample":
        realised = (step_b / p.batch[0]) / (step_a / p.batch[1])
    else:
        realised = step_b / step_a
    predicted, basis = _predict_program(store, p, step_b, gpu_b, steps_b, win_b)
    return ProgramCalibration(
        f"{p.before} -> {p.after}",
        p.change,
        p.measure,
        predicted,
        realised,
        basis,
        p.statement,
        step_b / 1e6,
        step_a / 1e6,
        gpu_b / 1e6,
        gpu_a / 1e6,
    )
