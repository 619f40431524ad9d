"""What to fix first, how much it will save, and how that figure was computed.

For a run (or the ranges under one NVTX path) advise ranks *items* by the GPU time they could
give back (`recoverable_ns`), each with its share of the time, its label, the next step for
that label and the rows of evidence behind the figure. Two kinds of item:

- **range** (an operator: the innermost NVTX range that launched kernels, e.g. `norm`,
  `rmsnorm/eager/llama8b-t32768`; kernels outside any range form one item per kernel name).
  Its floor per call is the time at the roofline of what it must do:
    * the operator's own minimum (lab workloads: `bytes`/`flops` of the operator's model, moved
      at the DRAM bandwidth and computed at the peak of its precision), else
    * a chain of kernels fused: the bytes the chain reads from outside plus the bytes its last
      kernel writes (DRAM reads - writes + 2 x the last kernel's writes; the intermediates stay on
      chip), needing ncu's DRAM read/write split, else
    * each kernel at its own roofline (profkit.model.perf.roof_time_ns: the slowest of its bytes per
      memory level and its FLOPs per precision at their peaks).
  recoverable = measured GPU time - floor, over every call. Launches ncu did not measure borrow
  the measured fraction of a launch of the same kernel at the same place (said in evidence).
  Bandwidth: the measured copy bandwidth of the GPU when the caller passes measured peaks (what a
  real kernel can reach), else the report's DRAM peak.
- **graph** (a repeated call: a decode `step`, a `forward`; profkit.analyses.timeline.calls): the GPU
  sits idle between launches while the CPU launches the next one. A CUDA-graph replay removes
  that, except the device's own gap between back-to-back kernels, measured in the same run (the
  median gap between kernels that were already queued when the previous one ended):
  recoverable = idle - kernels x that gap, over every call.

ncu's own estimated speed-ups (the `rules` view, where a report carries rule results) are shown
beside profkit's figure. Nothing is written here: `profkit advise` stores the list (the `advice`
view) as an explicit step, like `classify`.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass, field

from profkit.analyses import fusion, phases, selection
from profkit.analyses import timeline as tl
from profkit.analyses.classify import MEM_PCT, SM_PCT, label_facts
from profkit.core.errors import BadArgument
from profkit.core.intervals import covered, length, union
from profkit.core.metrics import lookup
from profkit.core.names import is_comm
from profkit.core.steps import STEP_RE
from profkit.model import attainable, families
from profkit.model.ops.lab import model_of as lab_model_of
from profkit.model.perf import rates, roof_time_ns, work
from profkit.store.store import Store, lab_op

# a call whose launches are fewer than this is already graphed (a replay is one launch call)
GRAPHED_CALLS_PER_KERNEL = 0.5
# fewer queued back-to-back pairs than this: the device gap is not measured, this stands in
DEFAULT_DEVICE_GAP_NS = 1_000
MIN_GAP_PAIRS = 20
# the next step per classify rule (the rule that gave the label: reason, evidence and next step
# read the same numbers); a library kernel's step names its family's levers instead of its code
ACTIONS = {
    "launch_overhead": "fuse or CUDA-graph the launches: each kernel is shorter than its launch",
    "occupancy": "raise occupancy: {limiter}",
    "tensor_core": "at the tensor pipe's limit: a better tile, or a lower precision (fp8)",
    "compute": "compute-bound on the CUDA cores: move the math to the tensor pipe or cut instructions",
    "latency": (
        f"latency-bound ({SM_PCT} and {MEM_PCT} both under 60 %): more independent work per SM, fewer dependent steps"
    ),
    "l1l2": "bound in L1/L2, not DRAM: cut re-reads (tile in shared memory or registers), coalesce the accesses",
    "warp_specialised": (
        "warp-specialised and waiting (issue slots and pipes under 60 %): deeper pipelining "
        "(more stages), larger tiles per CTA, or a persistent schedule"
    ),
    "communication": "overlap the collective with compute (profkit ranks shows how much is hidden)",
    "unknown": "no counters: capture with `profkit capture --metrics lean` to name the bound",
    "unmeasured": (
        "ncu measured other kernels of this run, not these: capture them (profkit capture --metrics "
        "lean, or widen ncu's --kernel-name/--launch-count filter) to name the bound"
    ),
    "unnamed": "the counters do not name the bound ({why}): capture with `profkit capture --metrics lean`",
    "no_floor": "{step} (no roofline floor: {why})",
}
# what a library kernel's label means for its user, before the levers
LIBRARY_STEP = {
    "occupancy": "its occupancy is the library's ({limiter})",
    "tensor_core": "at the tensor pipe's limit",
    "compute": "compute-bound inside the library",
    "latency": "latency-bound inside the library",
    "l1l2": "bound in L1/L2 inside the library",
    "warp_specialised": "warp-specialised and waiting inside the library",
    "dram": "memory-bound",
}
# DRAM this busy (% of peak) is at its roof: only fewer bytes help
DRAM_AT_ROOF_PCT = 80.0
# an item predicted below this never ranks above one predicted at or above it
MIN_SPEEDUP = 1.05


@dataclass
class Item:
    kind: str  # range | graph
    nvtx_path: str | None
    kernel_name: str  # the kernels it covers (short names, most time first)
    label: str | None  # the label holding most of its GPU time
    calls: int
    launches: int
    gpu_ns: float  # GPU time of the item over all its calls
    window_ns: float | None  # wall (GPU window) of the item over all calls, where a timeline has it
    recoverable_ns: float
    floor_ns: float | None  # GPU time (range) or window (graph) per call after the fix
    how: str  # how recoverable_ns was computed
    action: str  # the next step
    evidence: list[dict] = field(default_factory=list)
    ncu_speedup_pct: float | None = None  # ncu's own estimate, where the report carries rule results
    share_gpu: float = 0.0  # of the scope's GPU time
    share_wall: float | None = None  # of the scope's wall time
    rank: int = 0
    family: str | None = None  # the kernel family holding most of its GPU time (profkit.model.families)
    predicted_speedup: float | None = None  # attainable: the roof bounded by the family and ncu (ranked by)
    predicted_how: str = ""  # what bounded predicted_speedup
    roof_recoverable_ns: float = 0.0  # recoverable at the roof (recoverable_ns: at the attainable figure)

    @property
    def per_call_ns(self) -> float:
        span = self.window_ns if self.kind == "graph" else self.gpu_ns
        assert span is not None  # a graph item is made from its timeline window, never without one
        return span / max(self.calls, 1)

    @property
    def roof_speedup(self) -> float | None:
        """The item's own time per call now over its floor (window for graph items): the headroom
        to the roof."""
        if self.floor_ns is None or self.floor_ns <= 0:
            return None
        return self.per_call_ns / self.floor_ns

    def row(self) -> dict:
        d = asdict(self)
        d["roof_speedup"] = self.roof_speedup
        return d


@dataclass
class Advice:
    run: str
    scope: str | None  # the NVTX path advised on (None: the whole run)
    gpu_ns: float
    wall_ns: float | None
    idle_ns: float | None
    items: list[Item]
    device_gap_ns: float
    device_gap_how: str
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "run": self.run,
            "scope": self.scope,
            "gpu_ns": self.gpu_ns,
            "wall_ns": self.wall_ns,
            "idle_ns": self.idle_ns,
            "device_gap_ns": self.device_gap_ns,
            "device_gap_how": self.device_gap_how,
            "notes": self.notes,
            "items": [i.row() for i in self.items],
        }


# --- reading ---------------------------------------------------------------------------------

_COLUMNS = (
    "kernel_id, kernel_name, short_name, nvtx_range, nvtx_path, start_ns, end_ns, duration_ns, "
    "api_start_ns, api_end_ns, stream, device, source, rank, grid_x, grid_y, grid_z, block_x, block_y, block_z, "
    "family"
)


def _under(path: str | None, scope: str | None) -> bool:
    return scope is None or (path is not None and (path == scope or path.startswith(scope.rstrip("/") + "/")))


def _launches(store: Store, run: str, scope: str | None) -> list[dict]:
    rows = store.query(
        f"SELECT {_COLUMNS} FROM kernels WHERE run = ? ORDER BY coalesce(start_ns, 0), kernel_id", (run,)
    )
    return [r for r in rows if _under(r["nvtx_path"], scope) and r["duration_ns"]]


def _step_free(path: str) -> str:
    """A path with its step ranges' numbers as `*` (`step 3/forward/attn` -> `step */forward/attn`):
    the same operator in every step is one item, its steps its calls."""
    parts = path.split("/")
    if not any(STEP_RE.match(p.strip()) for p in parts):
        return path
    return "/".join(
        STEP_RE.sub(lambda m: m.group(0)[: m.start(1) - m.start(0)] + "*", p.strip()) if STEP_RE.match(p.strip()) else p
        for p in parts
    )


def _rules(store: Store, run: str) -> dict[int, float]:
    """kernel_id -> ncu's largest estimated speed-up (%), where the report carried rule results."""
    try:
        rows = store.query(
            "SELECT kernel_id, max(estimated_speedup_pct) AS s FROM rules WHERE run = ? "
            "AND estimated_speedup_pct IS NOT NULL GROUP BY kernel_id",
            (run,),
        )
    except Exception:  # a database from before the rules view
        return {}
    return {r["kernel_id"]: r["s"] for r in rows}


def _meta(store: Store, run: str) -> dict:
    row = store.query("SELECT meta, gpu_name FROM runs WHERE run = ?", (run,))
    meta = json.loads(row[0]["meta"] or "{}") if row else {}
    meta.setdefault("gpu_name", row[0]["gpu_name"] if row else None)
    return meta


# --- the device's own gap between back-to-back kernels -----------------------------------------


def device_gap(launches: list[dict]) -> tuple[float, str]:
    """Median gap between consecutive kernels of a stream where the second was already launched
    (its launch call ended) before the first ended: no CPU in the way, only the device's own
    launch latency, which a graph replay keeps."""
    by_stream: dict[tuple, list[dict]] = defaultdict(list)
    for k in launches:
        if k["start_ns"] is not None and k["end_ns"] is not None and k["source"] != "ncu":
            by_stream[(k["rank"], k["device"], k["stream"])].append(k)
    gaps = []
    for ks in by_stream.values():
        ks.sort(key=lambda k: k["start_ns"])
        for a, b in zip(ks, ks[1:]):
            if b["api_end_ns"] is not None and b["api_end_ns"] < a["end_ns"] and b["start_ns"] >= a["end_ns"]:
                gaps.append(b["start_ns"] - a["end_ns"])
    if len(gaps) >= MIN_GAP_PAIRS:
        return statistics.median(gaps), f"median of {len(gaps)} gaps between queued back-to-back kernels in this run"
    return DEFAULT_DEVICE_GAP_NS, (
        f"{DEFAULT_DEVICE_GAP_NS / 1e3:.1f} us assumed: only {len(gaps)} queued "
        f"back-to-back kernel pairs in this run (need {MIN_GAP_PAIRS})"
    )


# --- the floor of an operator -----------------------------------------------------------------


def _bandwidth(counters: list[dict], measured: list[dict] | None, gpu: str | None) -> tuple[float | None, str]:
    for p in measured or ():
        if p["ceiling"] == "dram" and p["gpu"] == gpu:
            return p["value"], f"measured copy bandwidth {p['value'] / 1e12:.2f} TB/s ({p['how']})"
    bws = [rates(c)["dram"][0] for c in counters if "dram" in rates(c)]
    if bws:
        bw = statistics.median(bws)
        return bw, f"report's DRAM peak {bw / 1e12:.2f} TB/s"
    return None, "no DRAM bandwidth known"


def _flop_floor(flops: dict[str, float], counters: list[dict], measured, gpu) -> tuple[float, str]:
    """Time for `flops` ({precision: FLOPs}) at the peaks: the slowest precision (pipes overlap)."""
    best, how = 0.0, ""
    for prec, n in flops.items():
        peak = next((p["value"] for p in measured or () if p["ceiling"] == prec and p["gpu"] == gpu), None)
        src = "measured"
        if peak is None:
            rs = [rates(c)[prec][0] for c in counters if prec in rates(c)]
            peak, src = (statistics.median(rs), "report peak") if rs else (None, "")
        if peak:
            t = n / peak * 1e9
            if t > best:
                best, how = t, f"{n / 1e9:.3g} GFLOP {prec} at {peak / 1e12:.0f} TFLOP/s ({src})"
    return best, how


def _operator_model(path: str | None, meta: dict) -> tuple[dict | None, str]:
    """The lab operator's minimum bytes and FLOPs per call for a path op/variant/shape, when the
    run came from a lab workload (the formulas live in the model layer: no lab import)."""
    if not path or not lab_op(meta):
        return None, ""
    return lab_model_of(path, meta.get("dtype"))


def _operator_floor(
    calls: list[list[dict]],
    counters: dict[int, dict],
    meta: dict,
    measured,
    gpu,
    path: str | None,
    ops: dict | None = None,
) -> tuple[float | None, str, str, float | None]:
    """(floor ns per call, how, what it is: operator|fused|chain|kernels|none, bytes the operator
    needs). A range with recorded shapes and no lab model floors at its fusion floor (fusion.py):
    its operators' external inputs and outputs, beside the per-kernel floor in `how`."""
    t, how, kind, need = _floor(calls, counters, meta, measured, gpu, path)
    if ops and kind != "operator" and len(calls[0]) > 1:
        bw = _bandwidth([c for c in (counters.get(k["kernel_id"]) for k in calls[0]) if c], measured, gpu)[0]
        fused = fusion.floor(calls[0], ops, bw, gpu, measured)
        if fused is not None:
            beside = f"; per kernel: {how}" if t is not None else ""
            return fused[0], fused[1] + beside, "fused", fused[2]
    return t, how, kind, need


def _floor(calls, counters, meta, measured, gpu, path):
    first = calls[0]
    cs = [counters.get(k["kernel_id"]) for k in first]
    have = [c for c in cs if c]
    model_, model_how = _operator_model(path, meta)
    bw, bw_how = _bandwidth(have, measured, gpu)
    if model_ and bw:
        t_bytes = model_["bytes"] / bw * 1e9
        done: dict[str, float] = defaultdict(float)
        for c in have:
            for p, n in work(c).items():
                done[p] += n
        prec = max(done, key=done.get) if done else None  # the precision the operator computes in
        t_flops, f_how = _flop_floor({prec: model_["flops"]}, have, measured, gpu) if prec else (0.0, "")
        if t_flops > t_bytes:
            return t_flops, f"{model_how}: {f_how}", "operator", model_["bytes"]
        return t_bytes, f"{model_how}: {model_['bytes'] / 1e6:,.1f} MB at the {bw_how}", "operator", model_["bytes"]
    if len(have) == len(cs) and len(cs) > 1 and bw:
        reads = [lookup(c, "dram_read_bytes") for c in cs]
        writes = [lookup(c, "dram_write_bytes") for c in cs]
        if None not in reads and None not in writes:
            chain = sum(reads) - sum(writes) + 2 * writes[-1]
            flops: dict[str, float] = {}
            for c in cs:
                for p, n in work(c).items():
                    flops[p] = flops.get(p, 0.0) + n
            t_flops, f_how = _flop_floor(flops, have, measured, gpu)
            t_bytes = max(chain, 0) / bw * 1e9
            moved = sum(reads) + sum(writes)
            how = (
                f"{len(cs)} kernels fused: {max(chain, 0) / 1e6:,.1f} MB from outside and out (they move "
                f"{moved / 1e6:,.1f} MB now) at the {bw_how}"
            )
            if t_flops > t_bytes:
                return t_flops, f"{len(cs)} kernels fused: {f_how}", "chain", max(chain, 0)
            return t_bytes, how, "chain", max(chain, 0)
    if have and len(have) == len(cs):
        roofs = [roof_time_ns(c) for c in cs]
        if None not in roofs:
            bound = max(roofs, key=lambda r: r[0])[1]
            return (
                sum(r[0] for r in roofs),
                f"each kernel at its own roofline (bound mostly by {bound}; report peaks at the kernel's clocks)",
                "kernels",
                None,
            )
    if have:
        why = (
            f"ncu measured {len(have)} of the {len(cs)} kernels of the first call: a floor needs them all"
            if len(have) < len(cs)
            else "the counters lack a peak or the DRAM bytes of the work they count"
        )
    else:
        why = "no counters for these launches"
    return None, why + (f"; {model_how}" if model_how else ""), "none", None


def _around_library(call: list[dict], counters: dict, measured, gpu) -> tuple[float, str] | None:
    """What fusing a chain can attain when library GEMMs are in it: torch.compile (the lever a
    user holds) calls cuBLAS/CUTLASS for the matmuls and fuses the kernels between them, not into
    them. So the GEMMs keep their time, bounded by the GEMM family's attainable share of their
    roof, and each run of other kernels between them fuses into one (its external DRAM bytes at
    the bandwidth: reads - writes + 2 x its last kernel's writes). None: no library GEMM in the
    chain, or a counter missing."""
    gemm = [families.get(k.get("family")).attain == "gemm" for k in call]
    if not any(gemm) or all(gemm):
        return None
    cs = [counters.get(k["kernel_id"]) for k in call]
    if not all(cs):
        return None
    bw, bw_how = _bandwidth([c for c in cs if c], measured, gpu)
    if not bw:
        return None
    eff = attainable.of("gemm").efficiency
    t_gemm = 0.0
    segments: list[list[dict]] = [[]]  # the runs of other kernels, split at each GEMM
    for k, c, is_gemm in zip(call, cs, gemm):
        if is_gemm:
            roof = roof_time_ns(c) if c else None
            own = k["duration_ns"] or 0
            t_gemm += min(own, roof[0] / eff) if roof else own
            segments.append([])
        elif c:
            segments[-1].append(c)
    moved, runs = 0.0, 0
    for seg in (s for s in segments if s):
        reads = [lookup(c, "dram_read_bytes") for c in seg]
        writes = [lookup(c, "dram_write_bytes") for c in seg]
        if None in reads or None in writes:
            return None
        moved += max(0.0, sum(r or 0.0 for r in reads) - sum(w or 0.0 for w in writes) + 2 * (writes[-1] or 0.0))
        runs += 1
    t_rest = moved / bw * 1e9
    how = (
        f"torch.compile fuses around library GEMMs, not into them: {sum(gemm)} GEMMs at "
        f"{t_gemm / 1e3:,.1f} us (their time, or {eff:.0%} of their roof where faster), the {runs} runs of "
        f"kernels between them fused: {moved / 1e6:,.1f} MB at the {bw_how}"
    )
    return t_gemm + t_rest, how


# --- the analysis ----------------------------------------------------------------------------


def _moved(call: list[dict], counters: dict) -> float | None:
    """DRAM bytes one call moves, when ncu measured every kernel of it."""
    b = [lookup(counters.get(k["kernel_id"]) or {}, "dram_bytes") for k in call]
    got = [x for x in b if x is not None]
    return None if len(got) < len(b) else float(sum(got))


def _label_of(ks: list[dict], labels: dict[int, str]) -> tuple[str | None, dict[str, float]]:
    share: dict[str, float] = defaultdict(float)
    for k in ks:
        share[labels.get(k["kernel_id"], "unknown")] += k["duration_ns"] or 0
    return (max(share, key=share.__getitem__) if share else None), dict(share)


def _rule_of(ks: list[dict], facts: dict, label: str | None) -> tuple[str, str]:
    """(rule, reason) of the longest launch among `ks` that carries `label`."""
    best = max(
        (k for k in ks if facts.get(k["kernel_id"], ("unknown",))[0] == label),
        key=lambda k: k["duration_ns"] or 0,
        default=None,
    )
    f = facts.get(best["kernel_id"]) if best else None
    return (f[1], f[2]) if f else ("none", "")


def _family_of(ks: list[dict]) -> str | None:
    """The family holding most of these launches' GPU time."""
    t: dict[str, float] = defaultdict(float)
    for k in ks:
        t[k.get("family") or "other"] += k["duration_ns"] or 0
    return max(t, key=t.__getitem__) if t else None


def _dram_pct(ks: list[dict], counters: dict) -> float | None:
    """DRAM throughput (% of peak) of the measured launches, weighted by their duration."""
    raw = [(lookup(c, "dram_pct"), lookup(c, "duration")) for k in ks if (c := counters.get(k["kernel_id"]))]
    w: list[tuple[float, float]] = [(p, d) for p, d in raw if p is not None and d]
    return sum(p * d for p, d in w) / sum(d for _, d in w) if w else None


def _step(
    label: str | None, rule: str, reason: str, fam: str | None, c0: dict | None, dram: float | None, bytes_: str = ""
) -> str:
    """The next step for a label, read from the rule that gave it; for a library kernel, the
    levers its user holds (its family's), never a change to its code."""
    f = families.get(fam)
    if label == "launch_overhead":
        return ACTIONS["launch_overhead"]
    if label == "communication" or fam == "nccl":
        return ACTIONS["communication"]
    if label == "unknown" or label is None:
        if c0:
            return ACTIONS["unnamed"].format(why=reason.split(" (evidence")[0] or "see the evidence")
        return ACTIONS["unknown"]
    at_roof = label == "dram" and dram is not None and dram >= DRAM_AT_ROOF_PCT
    if f.is_library:
        if at_roof:
            what = f"at the memory roof (DRAM throughput {dram:.0f} % of peak): only fewer bytes help"
        elif label == "occupancy":
            what = LIBRARY_STEP["occupancy"].format(limiter=_limiter(c0))
        else:
            what = LIBRARY_STEP.get(rule, LIBRARY_STEP.get(label, f"{label}-bound"))
        return f"{f.title} ({what}{bytes_}): its code is the library's; the levers you hold: {families.levers(fam)}"
    if at_roof:
        return f"at the memory roof (DRAM throughput {dram:.0f} % of peak): move fewer bytes{bytes_}"
    if label == "occupancy":
        return ACTIONS["occupancy"].format(limiter=_limiter(c0))
    if label == "dram":
        return f"reach the memory roofline{bytes_}"
    return ACTIONS.get(rule if rule in ACTIONS else label, ACTIONS["unknown"])


def _limiter(c: dict | None) -> str:
    if not c:
        return "the occupancy limiter is not in the counters"
    found = {k: lookup(c, k) for k in ("limit_registers", "limit_shared_mem", "limit_warps", "limit_blocks")}
    lims: dict[str, float] = {k[6:]: v for k, v in found.items() if v is not None}
    if not lims:
        return "the occupancy limiter is not in the counters"
    lim = min(lims, key=lims.__getitem__)
    theo = lookup(c, "theoretical_occupancy")
    return f"limited by {lim.replace('_', ' ')} ({lims[lim]:.0f} blocks per SM" + (
        f", theoretical {theo:.0f} %)" if theo is not None else ")"
    )


def _names(ks: list[dict]) -> str:
    t: dict[str, float] = defaultdict(float)
    for k in ks:
        t[k["short_name"] or k["kernel_name"]] += k["duration_ns"] or 0
    names = sorted(t, key=t.__getitem__, reverse=True)
    return ", ".join(names[:3]) + (f" +{len(names) - 3} more" if len(names) > 3 else "")


def _range_item(
    path: str | None,
    ks: list[dict],
    counters: dict,
    facts: dict,
    meta: dict,
    measured,
    gpu,
    rules: dict,
    own: set,
    ops: dict | None = None,
) -> Item:
    labels = {k: f[0] for k, f in facts.items()}
    calls = selection.iterations(ks) if path is not None else [ks]  # outside any range: one call
    gpu_ns = float(sum(k["duration_ns"] for k in ks))
    per_call = gpu_ns / len(calls)
    # the label of the launches ncu measured, where some were (the others' labels rest on the timeline)
    judged = [k for k in ks if counters.get(k["kernel_id"])] or ks
    label, share = _label_of(judged, labels)
    rule, reason = _rule_of(judged, facts, label)
    fam = _family_of(ks)
    floor, how, what, need_bytes = _operator_floor(calls, counters, meta, measured, gpu, path, ops)
    # launches with counters: ncu's own, or (sampled captures) their measured sibling's
    measured_ids = {k["kernel_id"] for k in ks if counters.get(k["kernel_id"])}
    by_ncu = len(measured_ids & own)
    if floor is not None and what in ("kernels", "chain") and len(calls) > 1:
        first_ids = {k["kernel_id"] for k in calls[0]}
        if not first_ids <= measured_ids:  # the floor was computed on a call ncu did not measure
            floor, how = None, "ncu did not measure every kernel of the first call, which the floor is computed on"
    rec = max(0.0, per_call - floor) * len(calls) if floor is not None else 0.0
    kernels_per_call = len(calls[0])
    c0 = next((counters[k["kernel_id"]] for k in ks if counters.get(k["kernel_id"])), None)
    moved = _moved(calls[0], counters)
    bytes_ = ""
    if moved and need_bytes:
        whose = "the operator needs" if what == "operator" else "fused, the chain needs"
        bytes_ = f": they move {moved / 1e6:,.1f} MB per call, {whose} {need_bytes / 1e6:,.1f} MB"
    elif moved:
        bytes_ = f": {moved / 1e6:,.1f} MB per call"
    elif what == "fused" and need_bytes:
        bytes_ = f": fused, the operators need {need_bytes / 1e6:,.1f} MB per call"
    dram = _dram_pct(ks, counters)
    if (
        what in ("operator", "chain", "fused")
        and kernels_per_call > 1
        and label in ("dram", "launch_overhead", "latency", None)
    ):
        action = f"fuse the {kernels_per_call} kernels of each call into one{bytes_}"
    else:
        action = _step(
            label, rule, reason, fam, c0, dram if what == "kernels" else None, bytes_ if label == "dram" else ""
        )
    if floor is None and measured_ids:  # counters, but no floor from them: the label's step stands
        action = ACTIONS["no_floor"].format(step=action, why=how)
    elif floor is None:
        action = ACTIONS["unmeasured" if counters else "unknown"]
    how_text = (
        f"measured {per_call / 1e3:,.1f} us per call - floor {floor / 1e3:,.1f} us ({how}), x {len(calls)} calls"
        if floor is not None
        else how
    )
    if by_ncu < len(ks) and floor is not None:
        how_text += f"; {by_ncu} of {len(ks)} launches measured by ncu" + (
            f", {len(measured_ids) - by_ncu} through their measured sibling (sampled_from)"
            if len(measured_ids) > by_ncu
            else ""
        )
    evidence = []
    by_name: dict[str, list[dict]] = defaultdict(list)
    for k in ks:
        by_name[k["short_name"] or k["kernel_name"]].append(k)
    for name, group in sorted(by_name.items(), key=lambda x: -sum(k["duration_ns"] for k in x[1])):
        cs = [c for k in group if (c := counters.get(k["kernel_id"]))]
        roofs = [r for c in cs if (r := roof_time_ns(c)) is not None]
        durations = [d for c in cs if (d := lookup(c, "duration")) is not None]
        roof_pct = None
        if cs and len(roofs) == len(cs) and len(durations) == len(cs):
            roof_pct = 100.0 * sum(r[0] for r in roofs) / sum(durations)
        evidence.append(
            {
                "kernel": name,
                "launches": len(group),
                "gpu_us": sum(k["duration_ns"] for k in group) / 1e3,
                "label": _label_of(group, labels)[0],
                "measured_launches": len(cs),
                "roofline_pct": roof_pct,
                "dram_mb_per_launch": (statistics.mean(lookup(c, "dram_bytes") or 0 for c in cs) / 1e6 if cs else None),
                "ncu_speedup_pct": max((rules[k["kernel_id"]] for k in group if k["kernel_id"] in rules), default=None),
            }
        )
    ncu = max((e["ncu_speedup_pct"] for e in evidence if e["ncu_speedup_pct"] is not None), default=None)
    if is_comm(_names(ks)):
        action = ACTIONS["communication"]
    window = None
    if all(k["start_ns"] is not None for k in ks):
        window = float(sum(max(k["end_ns"] for k in c) - min(k["start_ns"] for k in c) for c in calls))
    it = Item(
        "range",
        path,
        _names(ks),
        label,
        len(calls),
        len(ks),
        gpu_ns,
        window,
        rec,
        floor,
        how_text,
        action,
        evidence,
        ncu,
        family=fam,
    )
    around = _around_library(calls[0], counters, measured, gpu) if what == "chain" else None
    _predict(it, what, ks, counters, measured, dram, around)
    return it


def _overlap(a: list, b: list) -> list[tuple[int, int]]:
    """The intersection of two merged interval lists, merged."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def _minus(a: list, b: list) -> list[tuple[int, int]]:
    """The parts of merged intervals `a` outside merged intervals `b`."""
    out, j = [], 0
    for s, e in a:
        while j < len(b) and b[j][1] <= s:
            j += 1
        k, cur = j, s
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            k += 1
        if cur < e:
            out.append((cur, e))
    return out


def _idle_items(ks: list[dict], every: list[dict], scope: str | None, gap: float) -> list[Item]:
    """One idle item per outermost range under the scope (the ranges just below it)."""
    timed = [(k["start_ns"], k["end_ns"]) for k in every if k["start_ns"] is not None and k["end_ns"] is not None]
    if not timed:
        return []
    busy_all = union(timed)
    depth = 0 if scope is None else scope.rstrip("/").count("/") + 1
    tops: dict[str, list[dict]] = defaultdict(list)
    for k in ks:
        if k["nvtx_path"] and k["start_ns"] is not None and k["end_ns"] is not None:
            tops["/".join(k["nvtx_path"].split("/")[: depth + 1])].append(k)
    out = []
    for path, group in tops.items():
        it = _idle_item(
            path,
            group,
            selection.iterations(group),
            float(sum(k["duration_ns"] for k in group)),
            gap,
            _family_of(group),
            busy_all,
        )
        if it is not None:
            out.append(it)
    return out


def _idle_item(
    path: str, ks: list[dict], calls: list[list[dict]], gpu_ns: float, gap: float, fam: str | None, busy_all: list
) -> Item | None:
    """A range on a timeline: the time the GPU runs no kernel at all inside its calls' windows,
    in gaps short enough to be launches, less the device's own gap per kernel, is what a graph
    (or removing what keeps the GPU waiting) gives back."""
    region = union((min(k["start_ns"] for k in c), max(k["end_ns"] for k in c)) for c in calls)
    window = float(length(region))
    gaps = [e - s for s, e in _minus(region, busy_all)]
    idle = float(sum(g for g in gaps if g < LAUNCH_GAP_NS))  # longer gaps: host work, not launches
    rec = max(0.0, idle - len(ks) * gap)
    if not window or rec <= 0:
        return None
    n, busy = len(calls), float(length(_overlap(region, busy_all)))
    host = window - busy - idle
    it = Item(
        "graph",
        path,
        _names(ks),
        "launch_overhead",
        n,
        len(ks),
        gpu_ns,
        window,
        rec,
        (window - rec) / n,
        (
            f"idle {idle / n / 1e3:,.1f} us of a {window / n / 1e3:,.1f} us window per call "
            f"({100 * idle / window:.0f} %, gaps under {LAUNCH_GAP_NS / 1e6:.0f} ms; {host / n / 1e3:,.1f} us "
            f"in longer gaps count as host work) - {len(ks) / n:.0f} kernels x the device's own gap "
            f"{gap / 1e3:.2f} us, x {n} calls (a timeline without counters: its kernels' own floors are not known)"
        ),
        (
            f"the GPU idles {100 * idle / window:.0f} % of this range between launches: CUDA-graph it or fuse "
            f"its kernels, and remove host syncs inside it (.item(), .cpu(), printing tensors)"
        ),
        [
            {
                "calls": n,
                "window_us_per_call": window / n / 1e3,
                "busy_us_per_call": busy / n / 1e3,
                "idle_us_per_call": idle / n / 1e3,
                "host_us_per_call": host / n / 1e3,
                "device_gap_us": gap / 1e3,
            }
        ],
        family=fam,
    )
    it.predicted_speedup, it.predicted_how = it.roof_speedup, "the idle time, less the device's own gap per kernel"
    return it


def _predict(
    it: Item,
    what: str,
    ks: list[dict],
    counters: dict,
    measured,
    dram: float | None,
    around: tuple[float, str] | None = None,
) -> None:
    """predicted_speedup: the headroom to the roof (roof_speedup) times the attainable efficiency
    of the item's family (profkit.model.attainable: estimates, to be calibrated), bounded by
    ncu's own estimate where the report carries one (for a kernel's own fix, not a fusion)."""
    roof = it.roof_speedup
    if roof is None:
        if it.ncu_speedup_pct is not None and 0 < it.ncu_speedup_pct < 100 and what in ("kernels", "item"):
            # no roofline floor: ncu's own estimate is the one figure there is
            it.predicted_speedup = 1.0 / (1.0 - it.ncu_speedup_pct / 100.0)
            it.predicted_how = f"ncu's own estimate {it.ncu_speedup_pct:.0f} % (no roofline floor)"
            it.recoverable_ns = it.gpu_ns * it.ncu_speedup_pct / 100.0
        return
    fam = families.get(it.family)
    sms = next((lookup(c, "sm_count") for k in ks if (c := counters.get(k["kernel_id"]))), None)
    grid = max(((k["grid_x"] or 1) * (k["grid_y"] or 1) * (k["grid_z"] or 1) for k in ks), default=None)
    small = bool(sms and grid and grid < sms)
    att = attainable.of("code" if what in ("operator", "chain") else fam.attain, small=small)
    eff, why = att.efficiency, f"{att.efficiency:.0%} of {att.of} ({att.provenance}: {att.source})"
    if what in ("operator", "chain") and ("measured copy bandwidth" in it.how or "(measured)" in it.how):
        eff, why = 1.0, "the floor is at a measured peak (copy bandwidth, FLOP rate): already what a kernel attains"
    pred = max(1.0, roof * eff)
    hows = [why]
    if around is not None and around[0] > 0:
        # a chain with library GEMMs: the fusion a user can apply leaves the GEMMs whole
        pred, hows = max(1.0, min(pred, it.per_call_ns / around[0])), [around[1]]
    if it.ncu_speedup_pct is not None and what in ("kernels", "item") and 0 < it.ncu_speedup_pct < 100:
        bound = 1.0 / (1.0 - it.ncu_speedup_pct / 100.0)
        if bound < pred:
            pred, hows = bound, hows + [f"ncu's own estimate {it.ncu_speedup_pct:.0f} % -> {bound:.2f}x"]
    it.predicted_speedup, it.predicted_how = pred, "; ".join(hows)
    it.roof_recoverable_ns = it.recoverable_ns
    per_call = it.per_call_ns
    it.recoverable_ns = max(0.0, per_call - per_call / pred) * it.calls


def _kernel_item(ks: list[dict], counters: dict, facts: dict, rules: dict, own: set) -> Item:
    """One kernel (by name) outside any range: each launch at its own roofline. Launches ncu
    did not measure take the measured fraction of launches of the same kernel and grid."""
    fractions: dict[tuple, list[float]] = defaultdict(list)
    for k in ks:
        c = counters.get(k["kernel_id"])
        r = roof_time_ns(c) if c else None
        d = lookup(c, "duration") if c else None
        if r and d:
            fractions[_config(k)].append(min(1.0, r[0] / d))
    rec, measured, sampled, borrowed = 0.0, 0, 0, 0
    for k in ks:
        f = fractions.get(_config(k))
        if not f:
            continue
        c = counters.get(k["kernel_id"])
        r = roof_time_ns(c) if c else None
        d = lookup(c, "duration") if c else None
        if r and d:
            if k["kernel_id"] in own:
                measured += 1
            else:
                sampled += 1
            rec += max(0.0, k["duration_ns"] * (1 - min(1.0, r[0] / d)))
        else:
            borrowed += 1
            rec += k["duration_ns"] * (1 - statistics.median(f))
    gpu_ns = float(sum(k["duration_ns"] for k in ks))
    judged = [k for k in ks if counters.get(k["kernel_id"])] or ks  # as in _range_item
    label, _ = _label_of(judged, {k: f[0] for k, f in facts.items()})
    rule, reason = _rule_of(judged, facts, label)
    fam = _family_of(ks)
    c0 = next((counters[k["kernel_id"]] for k in ks if counters.get(k["kernel_id"])), None)
    dram = _dram_pct(ks, counters)
    known = measured + sampled + borrowed
    if known:
        how = (
            f"{known} of {len(ks)} launches at their own roofline (report peaks at each kernel's clocks): "
            f"{measured} measured by ncu"
            + (
                f", {sampled} through the measured launch of their kernel and configuration (sampled_from)"
                if sampled
                else ""
            )
            + (f", {borrowed} take the measured fraction of the same kernel and grid" if borrowed else "")
        )
        floor = (gpu_ns - rec) / len(ks)
        action = _step(label, rule, reason, fam, c0, dram)
    elif c0:  # counters, but none gives a roofline time (a peak or the DRAM bytes are missing)
        how, floor = (
            (
                "no roofline floor: the counters lack a peak or the DRAM bytes of the work they count "
                "(profkit roofline says which)"
            ),
            None,
        )
        action = ACTIONS["no_floor"].format(
            step=_step(label, rule, reason, fam, c0, dram), why="a peak or the DRAM bytes are missing"
        )
    else:
        how, floor, action = "no counters for these launches", None, ACTIONS["unmeasured" if counters else "unknown"]
    ncu = max((rules[k["kernel_id"]] for k in ks if k["kernel_id"] in rules), default=None)
    evidence = [
        {
            "kernel": _names(ks),
            "launches": len(ks),
            "measured_launches": measured,
            "borrowed": borrowed,
            "gpu_us": gpu_ns / 1e3,
            "label": label,
            "ncu_speedup_pct": ncu,
        }
    ]
    window = None
    it = Item(
        "range",
        None,
        _names(ks),
        label,
        len(ks),
        len(ks),
        gpu_ns,
        window,
        rec,
        floor,
        how,
        action,
        evidence,
        ncu,
        family=fam,
    )
    _predict(it, "item", ks, counters, None, dram)
    return it


def _config(k: dict) -> tuple:
    return (
        k["short_name"] or k["kernel_name"],
        k["grid_x"],
        k["grid_y"],
        k["grid_z"],
        k["block_x"],
        k["block_y"],
        k["block_z"],
    )


# gaps between kernels longer than this are host work (data loading, a sync, start-up), not launches
LAUNCH_GAP_NS = 1_000_000


def _idle_step(store: Store, run: str, win, ks: list[dict]) -> str | None:
    """The idle item's next step from the idle time's main cause (idle.FIX), where one is not
    the empty queue; the empty queue's own step where the launches are replayed from CUDA
    graphs already (fuse, or more work per replay). None: the default step (CUDA graphs)."""
    from profkit.analyses import idle

    try:
        got = idle.analyse(store, run, win)
    except Exception:  # noqa: BLE001 - a database from before host calls were kept
        return None
    cause = idle.main_cause(got)
    graphed = any(k.get("family") == "cuda_graph" for k in ks)
    if cause in (None, "launch", "latency") and not graphed:
        return None
    if cause in (None, "launch") and graphed:
        return (
            "the GPU waits between CUDA graph replays (the host prepares each step): move the work between "
            "replays into the graph (sampling, copies), or more work per replay (batch)"
        )
    assert cause is not None  # both branches above return when no cause has idle time
    share = 100 * got.by_cause[cause] / got.idle_ns if got.idle_ns else 0
    top = (got.top_calls.get(cause) or [{}])[0].get("name")
    return (
        f"the GPU waits mostly on {cause} ({share:.0f} % of its idle time"
        + (f", {top}" if top else "")
        + f"): {idle.FIX[cause]}"
    )


def _launch_gap_item(ks: list[dict], gap: float, step: str | None = None) -> list[Item]:
    """Without repeated call ranges (an unannotated program): the GPU's idle time between its
    kernels, where the gap is short enough to be the next launch (under LAUNCH_GAP_NS)."""
    timed = sorted((k["start_ns"], k["end_ns"]) for k in ks if k["start_ns"] is not None and k["end_ns"] is not None)
    busy = union(timed)
    if len(busy) < 2:
        return []
    gaps = [b[0] - a[1] for a, b in zip(busy, busy[1:])]
    short = [g for g in gaps if g < LAUNCH_GAP_NS]
    rec = sum(max(0.0, g - gap) for g in short)
    if rec <= 0:
        return []
    window = float(busy[-1][1] - busy[0][0])
    return [
        Item(
            "graph",
            None,
            f"{len(timed):,} launches",
            "launch_overhead",
            1,
            len(timed),
            float(length(busy)),
            window,
            rec,
            window - rec,
            (
                f"{len(short):,} gaps under {LAUNCH_GAP_NS / 1e6:.0f} ms between the GPU's kernels add up to "
                f"{sum(short) / 1e3:,.1f} us; less the device's own gap {gap / 1e3:.2f} us each (longer gaps, "
                f"{len(gaps) - len(short):,} of them, count as host work)"
            ),
            step
            or (
                "the GPU waits for launches between its kernels: capture the repeated work (a training or decode "
                "step) in a CUDA graph (torch.compile mode='reduce-overhead', or torch.cuda.graphs), or fuse the "
                "small kernels; mark the step with NVTX (profkit capture --step) to see it per step"
            ),
            [
                {
                    "gaps": len(gaps),
                    "short_gaps": len(short),
                    "idle_short_us": sum(short) / 1e3,
                    "idle_long_us": (sum(gaps) - sum(short)) / 1e3,
                    "device_gap_us": gap / 1e3,
                }
            ],
        )
    ]


def _graph_items(store: Store, run: str, scope: str | None, gap: float, win=None) -> list[Item]:
    out = []
    rows = tl.ranges(store, run, scope, window=win)
    # the repeated unit: a call range inside a range pushed once, or the scope itself when it repeats
    calls = tl.calls(rows) + [r for r in rows if r["path"] == scope and r["instances"] > 1 and r not in tl.calls(rows)]
    for r in calls:
        n, kernels = r["instances"], r["kernels"]
        if r["launch_calls"] <= GRAPHED_CALLS_PER_KERNEL * kernels:
            continue  # already replayed from a graph
        residual = kernels * gap
        rec = max(0.0, r["idle_ns"] - residual)
        if rec <= 0:
            continue
        floor = (r["busy_ns"] + residual) / n
        out.append(
            Item(
                "graph",
                r["path"],
                f"{kernels / n:.0f} kernels per call",
                "launch_overhead",
                n,
                kernels,
                float(r["kernel_ns"]),
                float(r["window_ns"]),
                rec,
                floor,
                (
                    f"idle {r['idle_ns'] / n / 1e3:,.1f} us of a {r['window_ns'] / n / 1e3:,.1f} us window per call "
                    f"({r['idle_pct']:.0f} %) - {kernels / n:.0f} kernels x the device's own gap {gap / 1e3:.2f} us, "
                    f"x {n} calls"
                ),
                (
                    f"CUDA-graph each call ({r['launch_calls'] / n:.0f} launch calls per call today) or fuse its kernels: "
                    f"the GPU waits for the CPU to launch"
                ),
                [
                    {
                        "calls": n,
                        "kernels_per_call": kernels / n,
                        "launch_calls_per_call": r["launch_calls"] / n,
                        "window_us_per_call": r["window_ns"] / n / 1e3,
                        "busy_us_per_call": r["busy_ns"] / n / 1e3,
                        "idle_us_per_call": r["idle_ns"] / n / 1e3,
                        "device_gap_us": gap / 1e3,
                    }
                ],
            )
        )
    return out


def advise(
    store: Store,
    run: str | None = None,
    scope: str | None = None,
    peaks: list[dict] | None = None,
    include_unranged: bool = False,
    phase: str | None = None,
) -> Advice:
    """The ranked items of a run, or of the ranges under `scope` (an NVTX path).
    `peaks`: measured peak records (profkit.model.peaks) of the run's GPU, if any. A run with NVTX
    ranges is advised on the launches inside them unless `include_unranged`. `phase`: the steady
    state by default where one is found (profkit.analyses.phases), 'all', or a phase's name."""
    run = store.require_run(run)
    # a scope names the ranges asked about: the steady-state default applies to the whole run only
    win, phase_line = (None, "") if scope and phase is None else phases.selected(store, run, phase)
    ks = every = phases.keep(_launches(store, run, scope), win)
    notes = [phase_line] if phase_line else []
    if scope is None and not include_unranged and any(k["nvtx_path"] for k in ks):
        outside = [k for k in ks if not k["nvtx_path"]]
        ks = [k for k in ks if k["nvtx_path"]]
        if outside:
            share = sum(k["duration_ns"] for k in outside) / (sum(k["duration_ns"] for k in outside + ks) or 1)
            notes.append(
                f"{len(outside):,} launches ({100 * share:.0f} % of GPU time) outside any NVTX range left out "
                f"(warm-up, set-up or unannotated code; --all includes them)"
            )
    if not ks:
        where = f"under the NVTX path {scope!r}" if scope else "with a duration"
        raise BadArgument(f"run {run!r} has no kernels {where}")
    meta = _meta(store, run)
    gpu = meta.get("gpu_name")
    counters = store.counters(run)
    own = set(store.counters(run, ["gpu__time_duration.sum"], sampled=False))
    measured_ids = set(counters) | {k["kernel_id"] for k in ks if k["kernel_id"] in counters}
    facts = label_facts(store, run, measured_ids)
    rules = _rules(store, run)
    gap, gap_how = device_gap(ks)
    shapes = fusion.ops_of(store, run)  # operators with recorded shapes: the fusion floor
    # one item per operator: the innermost range that launched kernels (per kernel name outside ranges)
    by_path: dict = defaultdict(list)
    for k in ks:
        by_path[_step_free(k["nvtx_path"]) if k["nvtx_path"] else ("", k["short_name"] or k["kernel_name"])].append(k)
    items = []
    for key, group in by_path.items():
        if isinstance(key, str):
            items.append(_range_item(key, group, counters, facts, meta, peaks, gpu, rules, own, shapes))
        else:
            items.append(_kernel_item(group, counters, facts, rules, own))
    if any(k["start_ns"] is not None for k in ks):
        graphs = _graph_items(store, run, scope, gap, win)
        if not graphs and any(k["nvtx_path"] for k in ks):
            # no repeated call range (torch.profiler's ProfilerStep#N are all different): the
            # idle time of each outermost range is its item
            graphs = _idle_items(ks, every, scope, gap)
        # an unannotated program has no repeated call to graph: its launch gaps are the item
        items += graphs or (
            [] if any(k["nvtx_path"] for k in ks) else _launch_gap_item(ks, gap, _idle_step(store, run, win, ks))
        )
    else:
        notes.append("no timeline in this run: idle time and launch overhead are not known (counters only)")
    if not counters:
        notes.append("no Nsight Compute counters in this run: only timeline items (idle between launches)")
    gpu_total = float(sum(k["duration_ns"] for k in ks))
    timed = [k for k in ks if k["start_ns"] is not None and k["end_ns"] is not None]
    wall = float(max(k["end_ns"] for k in timed) - min(k["start_ns"] for k in timed)) if timed else None
    idle = wall - covered((k["start_ns"], k["end_ns"]) for k in timed) if wall is not None else None
    for it in items:
        it.share_gpu = it.gpu_ns / gpu_total if gpu_total else 0.0
        it.share_wall = (it.window_ns / wall) if wall and it.window_ns is not None else None
    for it in items:
        if it.predicted_speedup is None and it.roof_speedup is not None:  # graph items: the idle time is the gain
            it.predicted_speedup, it.predicted_how = it.roof_speedup, "the idle time, less the device's own gap"
        if not it.roof_recoverable_ns:
            it.roof_recoverable_ns = it.recoverable_ns
    items = [i for i in items if i.recoverable_ns > 0 or i.floor_ns is None]
    # ranked by the attainable gain; an item predicted under MIN_SPEEDUP never ranks above one
    # predicted at or above it
    items.sort(
        key=lambda i: (
            2 if i.predicted_speedup is None else int(i.predicted_speedup < MIN_SPEEDUP),
            -i.recoverable_ns,
            -i.gpu_ns,
        )
    )
    for n, it in enumerate(items, 1):
        it.rank = n
    return Advice(run, scope, gpu_total, wall, idle, items, gap, gap_how, notes)


def rows(a: Advice) -> list[dict]:
    """The `advice` table's rows of one advise run."""
    return [
        {
            "run": a.run,
            "rank": i.rank,
            "scope": a.scope or "",
            "kind": i.kind,
            "nvtx_path": i.nvtx_path,
            "kernel_name": i.kernel_name,
            "label": i.label,
            "share": i.share_gpu,
            "share_wall": i.share_wall,
            "recoverable_ns": i.recoverable_ns,
            "action": i.action,
            "how": i.how,
            "evidence": json.dumps(
                {
                    "evidence": i.evidence,
                    "floor_ns": i.floor_ns,
                    "calls": i.calls,
                    "launches": i.launches,
                    "gpu_ns": i.gpu_ns,
                    "window_ns": i.window_ns,
                    "ncu_speedup_pct": i.ncu_speedup_pct,
                    "roof_speedup": i.roof_speedup,
                    "predicted_speedup": i.predicted_speedup,
                    "predicted_how": i.predicted_how,
                    "family": i.family,
                    "roof_recoverable_ns": i.roof_recoverable_ns,
                },
                sort_keys=True,
                default=str,
            ),
        }
        for i in a.items
    ]
