"""Label each kernel launch with what bounds it, and keep the evidence beside the label.

Rules run in order; the first that fires names the label. Each rule's thresholds and source
are in RULES (docs/classification.md is written from the same table). Works with counters
only, timeline only, or both.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from itertools import chain
from typing import Any, TypedDict

import numpy as np

from profkit.analyses import hotspots, shape_labels
from profkit.analyses.selection import id_bounds
from profkit.core import columns
from profkit.core.dbfile import Pending, Ready
from profkit.core.families import warp_specialised
from profkit.core.metrics import BY_SHORT, lookup
from profkit.core.names import is_comm
from profkit.model import gpus
from profkit.model.perf import FROM_TABLE, compute_capability, kernel_ridge, precision, rates, run_ridge, work
from profkit.store.store import Store

LABELS = ("dram", "launch_overhead", "occupancy", "tensor_core", "communication", "compute", "latency", "unknown")


class Rule(TypedDict):
    threshold: dict[str, Any]  # numbers, and the communication rule's name prefix
    citation: str


RULES: dict[str, Rule] = {
    "communication": {
        "threshold": {"name_prefix": "nccl"},
        "citation": "HolisticTraceAnalysis's kernel-type split (NCCL kernels are COMMUNICATION, the rest computation): "
        "an NCCL kernel's time is set by the other ranks and the links, not by its own counters, "
        "so the single-GPU rules below do not apply (profkit ranks reports its overlap and waits).",
    },
    "tensor_core": {
        "threshold": {"tensor_pipe_pct": 60.0},
        "citation": "Nsight Compute HighPipeUtilization: a pipe at >= 60 % of peak is high, >= 80 % likely the "
        "bottleneck. Occupancy is deliberately not consulted: Hopper GEMMs run one CTA per SM by design.",
    },
    "launch_overhead": {
        "threshold": {"duration_ns": 10_000, "tiny_duration_ns": 5_000},
        "citation": "nsys-ai launch-overhead rule (mean kernel < 10 us over many launches) and HolisticTraceAnalysis "
        "'short kernel' (GPU time shorter than its CPU launch call, or than the idle gap before it); "
        "from counters alone: Nsight Compute LaunchStatistics (grid smaller than the SM count) with a "
        "kernel under 5 us.",
    },
    "dram": {
        "threshold": {"dram_pct_high": 60.0, "dram_pct_dominant": 40.0, "gap_points": 10.0},
        "citation": "Nsight Compute SpeedOfLight: memory throughput >= 60 % is high; below that, the larger of SM "
        "and memory throughput bounds the kernel when they differ by >= 10 points. Roofline: arithmetic "
        "intensity below the ridge point (peak FLOP/s / peak DRAM B/s) is memory-bound.",
    },
    "occupancy": {
        "threshold": {"theoretical_pct": 50.0, "busy_pct": 60.0},
        "citation": "Nsight Compute Theoretical/AchievedOccupancy: theoretical warps well under the maximum name the "
        "limiter (registers, shared memory, warps, blocks); with SM and memory throughput both low the "
        "kernel cannot hide latency.",
    },
    "dram_roofline": {
        "threshold": {"below_ridge_factor": 1.0, "other_level_busy_pct": 60.0, "dram_quiet_pct": 40.0},
        "citation": "Roofline (Williams et al. 2009): arithmetic intensity below the ridge point of the precision the "
        "kernel computes in (peak FLOP/s / peak DRAM B/s) with idle tensor pipes: DRAM bandwidth is its "
        "roof even when it reaches only part of it (an efficiency gap, shown in the reason) - unless another "
        "memory level is the busy one (>= 60 % while DRAM < 40 %): then it is bound in L1/L2, not DRAM.",
    },
    "warp_specialised": {
        "threshold": {"theoretical_pct": 50.0, "busy_pct": 60.0, "pipe_pct": 60.0, "issue_pct": 60.0},
        "citation": "A warp-specialised Hopper/Blackwell kernel (wgmma/tcgen05: nvjet, cuDNN's sm90 SDPA, "
        "FlashAttention-3, CUTLASS *WarpSpecialized*) runs one CTA per SM by design, so theoretical "
        "occupancy names no limit (an H200 cuBLAS GEMM ran at 14.6 % achieved occupancy with 90 % "
        "tensor-pipe activity). Nsight Compute's IssueSlotUtilization and HighPipeUtilization decide: "
        "a pipe or the issue slots >= 60 % bound it; both lower, its warps wait (latency).",
    },
    "compute": {
        "threshold": {"sm_pct": 60.0},
        "citation": "Nsight Compute SpeedOfLight: SM throughput >= 60 % and above memory; tensor pipes idle.",
    },
    "latency": {
        "threshold": {"busy_pct": 60.0},
        "citation": "Nsight Compute SpeedOfLight: SM and memory throughput both < 60 % of peak: latency-bound.",
    },
    "l1l2": {
        "threshold": {"busy_pct": 60.0, "dram_quiet_pct": 40.0},
        "citation": "Nsight Compute SpeedOfLight and Memory Workload Analysis: memory throughput (the busiest of "
        "DRAM, L2 and L1) >= 60 % while DRAM is quiet: the kernel is bound in L1/L2 (re-reads, "
        "uncoalesced or bank-conflicted access), not by DRAM bandwidth nor by latency.",
    },
}

_THRESHOLDS = {k: r["threshold"] for k, r in RULES.items()}  # classify_one's view of RULES, made once

# how each percentage in a reason is named (one definition each; docs/classification.md)
SM_PCT = "SM throughput"
MEM_PCT = "memory throughput (busiest of DRAM, L2, L1)"


def _own_paths(store: Store, run: str) -> dict[int, tuple]:
    """{launch id: (nvtx range, nvtx path)} of the launches whose own range is not their path row's."""
    return dict(
        (r[0], (r[1], r[2]))
        for r in store.conn.execute(
            "SELECT o.launch_id, o.nvtx_range, o.nvtx_path FROM launch_nvtx o JOIN launch_row l ON l.id = o.launch_id"
            " WHERE l.run = ?",
            (run,),
        )
    )


def _families(store: Store, run: str) -> dict[tuple, str | None]:
    """{(name id, launch-call id): the kernels view's family}, read once per kernel name and
    launch call."""
    c = store.conn
    first = {
        (n, a): i
        for n, a, i in c.execute(
            "SELECT name_id, api_id, min(id) FROM launch_row WHERE run = ? AND timeline_id IS NULL GROUP BY 1, 2",
            (run,),
        )
    }
    fam_of = dict(
        c.execute(
            "SELECT kernel_id, family FROM kernels WHERE kernel_id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(first.values())),),
        )
    )
    return {k: fam_of.get(i) for k, i in first.items()}


# each launch of a run with its timeline facts: duration, launch-call time, and the idle gap
# before it on its stream (on the timeline: source not ncu, a start)
_GAP = """start_ns - lag(end_ns) OVER (PARTITION BY source != 'ncu' AND start_ns IS NOT NULL, device, stream
                                      ORDER BY start_ns)"""
_TIMED = f"""
    SELECT id, name_id, coalesce(i.path_id, launch_row.path_id) AS path_id, i.launch_id IS NOT NULL AS inherited,
           api_id, sampled_from, source != 'ncu' AND start_ns IS NOT NULL AS timed, duration_ns,
           api_end_ns - api_start_ns AS api_ns, {_GAP} AS gap_ns
    FROM launch_row LEFT JOIN launch_inherit i ON i.launch_id = launch_row.id
    WHERE run = ? AND timeline_id IS NULL"""


def _launches(store: Store, run: str, only: list[int] | None = None) -> Iterator[tuple[tuple, tuple | None]]:
    """Each launch of the kernels view, by kernel id, as (kernel id, kernel name, nvtx range,
    nvtx path, sampled from, family), with its timeline facts where it is on the timeline
    (source not ncu, a start): (kernel id, duration, launch-call time, idle gap before it on its
    stream). One pass over launch_row, the names read once each (the view's per-row lookups cost
    more than the labelling at a million launches). `only`: these launches alone (their gaps
    still those of the whole run)."""
    c = store.conn
    names = dict(c.execute("SELECT id, name FROM launch_name"))
    paths = {i: (t, p) for i, t, p in c.execute("SELECT id, text, path FROM nvtx_path")}
    own = _own_paths(store, run)
    family = _families(store, run)
    if only is None:
        rows = c.execute(f"{_TIMED} ORDER BY id", (run,))
    else:
        rows = c.execute(
            f"SELECT * FROM ({_TIMED}) WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id",
            (run, json.dumps(only)),
        )
    none = (None, None)
    # the kernels view's path: the lead thread's where the launch inherited it (profkit.store.inherit)
    for kid, name_id, path_id, inherited, api_id, sampled_from, timed, dur, api_ns, gap_ns in rows:
        rng, path = (not inherited and own.get(kid)) or paths.get(path_id, none)
        k = (kid, names[name_id], rng, path, sampled_from, family[name_id, api_id])
        yield k, ((kid, dur, api_ns, gap_ns) if timed else None)


def _facts(row: tuple | None) -> dict | None:
    """A _timeline row as the dict classify_one reads."""
    if not row:
        return None
    return {"kernel_id": row[0], "duration_ns": row[1], "api_ns": row[2], "gap_ns": row[3]}


def _values(c: dict[str, float], gpu: gpus.Gpu | None = None) -> tuple[dict, dict, dict]:
    """(values the rules read, {value: what would supply it} for those the counters cannot give,
    {ceiling: where its peak came from} for the peaks used) of one launch."""
    # numbers from the counters, and beside some of them a "<name>_from" string naming their source
    v: dict[str, Any] = {
        k: lookup(c, k)
        for k in (
            "duration",
            "sm_pct",
            "mem_pct",
            "dram_pct",
            "tensor_pct",
            "tensor_gmma_pct",
            "achieved_occupancy",
            "theoretical_occupancy",
            "grid_size",
            "waves_per_sm",
            "sm_count",
            "dram_bytes",
            "limit_registers",
            "limit_shared_mem",
            "limit_warps",
            "limit_blocks",
            "fadd",
            "fmul",
            "ffma",
            "tensor_ops_bf16",
            "tensor_ops_fp16",
            "tensor_ops_fp8",
            "issue_pct",
            "l2_bytes_pct",
            "l1_bytes_pct",
            "fma_pct",
            "alu_pct",
        )
    }
    peaks: dict[str, str] = {}
    r = rates(c, gpu) if c else {}
    dur = v["duration"]
    # A report without DRAM %: its DRAM bytes over the duration at the DRAM peak the report's
    # device attributes (or the known-GPU table) give.
    moved, part = v["dram_bytes"], ""
    if moved is None:  # a --metrics list with only one direction: what it moved at least
        one = [
            (x, d)
            for x, d in ((lookup(c, "dram_read_bytes"), "read"), (lookup(c, "dram_write_bytes"), "written"))
            if x is not None
        ]
        if one:
            moved, part = one[0][0], f" (bytes {one[0][1]} only: a lower bound)"
    if v["dram_pct"] is None and moved is not None and dur and "dram" in r:
        v["dram_pct"] = 100.0 * moved / (r["dram"][0] * dur * 1e-9)
        v["dram_pct_from"] = "dram_bytes / duration / DRAM peak" + part
        peaks["dram"] = r["dram"][1]
    # The lean metric set skips ncu's SM and memory speed-of-light breakdowns (9 and 6 replay
    # passes on their own): SM busy is then the issue-slot utilisation, memory busy the
    # busiest of DRAM, L2 and L1 by bytes over peak. The evidence says which was used.
    if v["sm_pct"] is None and v["issue_pct"] is not None:
        v["sm_pct"], v["sm_pct_from"] = v["issue_pct"], "issue_pct"
    prec, flops = precision(c), work(c)
    if dur and prec in r:
        pct = 100.0 * flops[prec] / (r[prec][0] * dur * 1e-9)
        # the FLOP rate of the precision a kernel computes in, over its peak: for a tensor
        # precision that is the tensor pipe's use; for FP32/FP64 a lower bound of SM throughput
        if prec.endswith("_tensor") and v["tensor_pct"] is None:
            v["tensor_pct"], v["tensor_pct_from"] = pct, f"{prec} FLOPs / duration / peak"
            peaks[prec] = r[prec][1]
        elif not prec.endswith("_tensor") and v["sm_pct"] is None:
            v["sm_pct"], v["sm_pct_from"] = pct, f"{prec} FLOPs / duration / peak (a lower bound of SM throughput)"
            peaks[prec] = r[prec][1]
    if v["mem_pct"] is None:
        levels = [x for x in (v["dram_pct"], v["l2_bytes_pct"], v["l1_bytes_pct"]) if x is not None]
        if levels:
            v["mem_pct"], v["mem_pct_from"] = max(levels), "max(dram_pct, l2_bytes_pct, l1_bytes_pct)"
    flops_all = (
        sum(x or 0 for x in (v["fadd"], v["fmul"]))
        + 2 * (v["ffma"] or 0)
        + sum(x or 0 for x in (v["tensor_ops_bf16"], v["tensor_ops_fp16"], v["tensor_ops_fp8"]))
    )
    counted = any(
        v[k] is not None for k in ("fadd", "fmul", "ffma", "tensor_ops_bf16", "tensor_ops_fp16", "tensor_ops_fp8")
    )
    if v["dram_bytes"] and counted:  # no FLOP counter collected is not zero FLOPs
        v["arithmetic_intensity"] = flops_all / v["dram_bytes"]
    if v["sm_count"] is None and gpu is not None and gpu.sms:  # the launch-overhead rule weighs the grid
        v["sm_count"], v["sm_count_from"] = gpu.sms, "known GPU table"
        peaks["sm_count"] = f"{FROM_TABLE}: {gpu.describe()}"
    missing = {k: _SUPPLIES[k] for k in _SUPPLIES if v.get(k) is None} if c else {}
    return {k: x for k, x in v.items() if x is not None}, missing, peaks


def _first(short: str) -> str:
    return BY_SHORT[short].names[0]


# what the rules read, and which metrics (or peaks) would supply each: named in the evidence
# of a launch whose report lacks them
_SUPPLIES = {
    "duration": _first("duration"),
    "sm_pct": f"{_first('sm_pct')}, or {_first('issue_pct')}, or FLOP counters with a peak of their precision",
    "mem_pct": f"{_first('mem_pct')}, or DRAM/L2/L1 bytes with their peaks",
    "dram_pct": f"{_first('dram_pct')}, or {_first('dram_bytes')} (or read + write) with a DRAM peak "
    "(report peaks, device attributes, or `profkit ingest --gpu NAME`)",
    "tensor_pct": f"{_first('tensor_pct')}, or tensor FLOP counters with a tensor peak",
    "theoretical_occupancy": _first("theoretical_occupancy"),
    "arithmetic_intensity": f"FLOP counters ({_first('ffma')}, {_first('tensor_ops_bf16')}, ...) and DRAM bytes",
}


def _limiter(v: dict) -> str | None:
    lims = {k[6:]: v[k] for k in ("limit_registers", "limit_shared_mem", "limit_warps", "limit_blocks") if k in v}
    return min(lims, key=lims.__getitem__) if lims else None


def _warp_specialised(v: dict, sm: float, mem: float, tensor: float, theo: float) -> tuple[str, str, str]:
    """A warp-specialised kernel whose throughputs are low: the issue slots and the pipes say
    whether it is bound by a pipe, by instruction issue, or waits (latency)."""
    Rw = RULES["warp_specialised"]["threshold"]
    measured_pipes = {
        "tensor pipe": tensor if ("tensor_pct" in v or "tensor_gmma_pct" in v) else None,
        "FMA pipe": v.get("fma_pct"),
        "ALU pipe": v.get("alu_pct"),
    }
    pipes: dict[str, float] = {k: x for k, x in measured_pipes.items() if x is not None}
    issue = v.get("issue_pct")
    head = f"warp-specialised by design (one CTA per SM): theoretical occupancy {theo:.0f} % is not its limit"
    top = max(pipes, key=pipes.__getitem__) if pipes else None
    if top and pipes[top] >= Rw["pipe_pct"]:
        return "compute", f"{head}; {top} {pipes[top]:.0f} % of peak (>= {Rw['pipe_pct']:.0f})", "warp_specialised"
    if issue is not None and issue >= Rw["issue_pct"]:
        return (
            "compute",
            (f"{head}; issue slots {issue:.0f} % busy (>= {Rw['issue_pct']:.0f}): bound by instruction issue"),
            "warp_specialised",
        )
    seen = ([f"issue slots {issue:.0f} %"] if issue is not None else []) + (
        [f"{top} {pipes[top]:.0f} %"] if top else []
    )
    grid, sms = v.get("grid_size"), v.get("sm_count")
    few = (
        f"; its grid of {grid:.0f} CTAs fills {grid / sms:.0%} of the {sms:.0f} SMs (the problem shape)"
        if grid is not None and sms and grid < sms
        else ""
    )
    if not seen:
        return (
            "latency",
            (
                f"{head}; {SM_PCT} {sm:.0f} % and {MEM_PCT} {mem:.0f} % both under "
                f"{Rw['busy_pct']:.0f} %: latency-bound (no issue-slot or pipe counters to say more)"
                f"{few}"
            ),
            "warp_specialised",
        )
    return (
        "latency",
        (
            f"{head}; {' and '.join(seen)} under {Rw['issue_pct']:.0f} %, {SM_PCT} {sm:.0f} %, "
            f"{MEM_PCT} {mem:.0f} %: latency-bound (its warps wait on memory or barriers){few}"
        ),
        "warp_specialised",
    )


# a launch-overhead reason from the timeline: (kernel us, launch-call us) and (kernel us, gap us)
BY_CALL = "{:.1f} us kernel, shorter than its {:.1f} us launch call"
BY_GAP = "{:.1f} us kernel after a {:.1f} us idle gap on its stream"


def classify_one(
    v: dict,
    t: dict | None,
    ridge: float | None = None,
    name: str | None = None,
    ridge_of: str = "bf16_tensor",
    family: str | None = None,
) -> tuple[str, str, str]:
    """(label, reason, rule) for one launch from counter values v, timeline facts t, the
    ridge point (FLOP/B) of the precision it computes in (ridge_of), and its kernel family
    (profkit.model.families: a warp-specialised kernel is never occupancy-bound by its
    theoretical occupancy alone)."""
    R = _THRESHOLDS
    if family == "nccl" or is_comm(name):
        return "communication", "NCCL kernel: bound by the collective across ranks (see profkit ranks)", "communication"
    dur = v.get("duration") or (t or {}).get("duration_ns")
    tensor = max(v.get("tensor_pct", 0), v.get("tensor_gmma_pct", 0))
    if tensor >= R["tensor_core"]["tensor_pipe_pct"]:
        return (
            "tensor_core",
            f"tensor pipe {tensor:.0f} % of peak (>= {R['tensor_core']['tensor_pipe_pct']:.0f})",
            "tensor_core",
        )
    if dur is not None and dur < R["launch_overhead"]["duration_ns"]:
        if t and t.get("api_ns") is not None and t["api_ns"] >= dur:
            return "launch_overhead", BY_CALL.format(dur / 1e3, t["api_ns"] / 1e3), "launch_overhead"
        if t and t.get("gap_ns") is not None and t["gap_ns"] >= dur:
            return "launch_overhead", BY_GAP.format(dur / 1e3, t["gap_ns"] / 1e3), "launch_overhead"
        grid, sms = v.get("grid_size"), v.get("sm_count")
        if grid is not None and sms and grid < sms and dur < R["launch_overhead"]["tiny_duration_ns"]:
            return (
                "launch_overhead",
                f"{dur / 1e3:.1f} us kernel over {grid:.0f} blocks (< {sms:.0f} SMs)",
                "launch_overhead",
            )
    if "dram_pct" not in v and "sm_pct" not in v:
        # (a launch without counters has the GPU table's SM count at most)
        if any(not k.endswith("_from") and k != "sm_count" for k in v):
            return (
                "unknown",
                (
                    "the counters hold neither DRAM nor SM throughput, nor bytes and FLOPs with a peak to "
                    "rate them against (evidence: missing)"
                ),
                "none",
            )
        return "unknown", "no counters for this launch and the timeline shows no launch overhead", "none"
    sm, mem, dram = v.get("sm_pct", 0.0), v.get("mem_pct", v.get("dram_pct", 0.0)), v.get("dram_pct", 0.0)
    ai = v.get("arithmetic_intensity")
    below_ridge = ai is None or ridge is None or ai < ridge
    Rd = R["dram"]
    smt = f"{sm:.0f} %" if "sm_pct" in v else "unknown"
    if dram >= Rd["dram_pct_high"] or (
        dram >= Rd["dram_pct_dominant"] and dram >= sm + Rd["gap_points"] and below_ridge and "sm_pct" in v
    ):
        extra = (
            ""
            if ai is None or not ridge
            else ", no FLOPs counted (memory traffic only)"
            if ai == 0
            else f", intensity {ai:.2f} FLOP/B below the {ridge_of} ridge {ridge:.0f}"
        )
        return "dram", f"DRAM throughput {dram:.0f} % of peak vs {SM_PCT} {smt}{extra}", "dram"
    if "sm_pct" not in v:  # the rules below weigh SM against memory
        return (
            "unknown",
            (
                f"DRAM at {dram:.0f} % of peak: not DRAM-bound; without SM throughput compute, "
                f"latency and occupancy cannot be told apart (evidence: missing)"
            ),
            "none",
        )
    memt = f"{mem:.0f} %" if ("mem_pct" in v or "dram_pct" in v) else "unknown"
    theo = v.get("theoretical_occupancy")
    if theo is not None and theo < R["occupancy"]["theoretical_pct"] and max(sm, mem) < R["occupancy"]["busy_pct"]:
        if warp_specialised(name):
            return _warp_specialised(v, sm, mem, tensor, theo)
        lim = _limiter(v)
        return (
            "occupancy",
            (
                f"theoretical occupancy {theo:.1f} % (limited by {lim}), achieved "
                f"{v.get('achieved_occupancy', float('nan')):.1f} %; {SM_PCT} {sm:.0f} %, "
                f"{MEM_PCT} {memt}"
            ),
            "occupancy",
        )
    Rr = R["dram_roofline"]
    l1l2_bound = mem >= Rr["other_level_busy_pct"] and dram < Rr["dram_quiet_pct"]
    if ai is not None and ridge and ai < ridge * Rr["below_ridge_factor"] and tensor < 1 and not l1l2_bound:
        why = (
            "no floating-point work counted (0 FLOP/B)"
            if ai == 0
            else f"intensity {ai:.2f} FLOP/B, far below the {ridge_of} ridge at {ridge:.0f}"
        )
        return (
            "dram",
            (f"{why}: memory-bound on the roofline though DRAM runs at only {dram:.0f} % (SM {sm:.0f} %)"),
            "dram_roofline",
        )
    if sm >= R["compute"]["sm_pct"] and sm >= mem:
        return "compute", f"SM throughput {sm:.0f} % with tensor pipes at {tensor:.0f} %", "compute"
    if max(sm, mem) < R["latency"]["busy_pct"]:
        if memt == "unknown":
            return "unknown", f"SM {sm:.0f} % of peak, memory throughput unknown (evidence: missing)", "none"
        lower = " (SM from FLOPs: a lower bound)" if "lower bound" in v.get("sm_pct_from", "") else ""
        return "latency", (f"{SM_PCT} {sm:.0f} % and {MEM_PCT} {mem:.0f} % both under 60 % of peak{lower}"), "latency"
    return (
        "latency",
        (f"{MEM_PCT} {mem:.0f} % but DRAM only {dram:.0f} %: bound in L1/L2, not DRAM ({SM_PCT} {sm:.0f} %)"),
        "l1l2",
    )


# ncu's guided-analysis rules whose result names what bounds a kernel, read from the rule and
# its message (as ncu 2022.3 to 2025.3 word them): shown beside profkit's label, with whether
# the two agree. Other rules (issue slots, stalls, access patterns) advise; they name no bound.
NCU_VERDICTS = (
    ("SOLBottleneck", "low compute throughput and memory bandwidth", ("latency",)),
    ("SOLBottleneck", "Memory is more heavily utilized", ("dram",)),
    ("SOLBottleneck", "Compute is more heavily utilized", ("compute", "tensor_core")),
    ("SOLBottleneck", "of the available compute or memory performance", ("dram", "compute", "tensor_core")),
    ("SOLBottleneck", "grid is too small", ("launch_overhead",)),
    ("LaunchConfiguration", "which is less than the GPU", ("launch_overhead",)),
    ("TheoreticalOccupancy", "", ("occupancy",)),
    ("Occupancy", "is limited by", ("occupancy",)),
    ("HighPipeUtilization", "likely a performance bottleneck", ("compute", "tensor_core")),
)


def _ncu_verdict(rule: str, message: str) -> tuple[str, ...]:
    for name, words, labels in NCU_VERDICTS:
        if rule == name and words in (message or ""):
            return labels
    return ()


def _rules(store: Store, run: str) -> dict[int, list[dict]]:
    """kernel_id -> ncu's rule results (the `rules` view), largest estimated speed-up first."""
    rows = store.query(
        "SELECT kernel_id, rule, severity, message, estimated_speedup_pct, speedup_type FROM rules "
        "WHERE run = ? ORDER BY kernel_id, coalesce(estimated_speedup_pct, -1) DESC, rule",
        (run,),
    )
    out: dict[int, list[dict]] = {}
    for r in rows:
        out.setdefault(r.pop("kernel_id"), []).append(r)
    return out


def _ncu_side(label: str, rules: list[dict]) -> dict:
    """ncu's own advice beside profkit's label: its rule results, what they say bounds the
    kernel, and whether that is profkit's label."""
    says = sorted({x for r in rules for x in _ncu_verdict(r["rule"], r["message"])})
    return {"ncu_rules": rules, "ncu_says": says, "ncu_agrees": (label in says) if says else None}


def gpu_context(store: Store, run: str, counters: dict | None = None) -> tuple[list[gpus.Gpu], str]:
    """The known-GPU rows a run may have run on (profkit.model.gpus): by its GPU name, else by its
    compute capability (several rows: any of them), with how they were found."""
    row = store.query("SELECT gpu_name, meta FROM run WHERE run = ?", (run,))
    name = row[0]["gpu_name"] if row else None
    try:
        cc = json.loads(row[0]["meta"] or "{}").get("compute_capability") if row else None
    except ValueError:
        cc = None
    if cc is None:
        if counters is None:  # one launch's device attributes say it
            names = [n for short in ("cc_major", "cc_minor") for n in BY_SHORT[short].read]
            one = store.query(
                f"SELECT kernel_id FROM counters WHERE run = ? AND metric IN ({','.join('?' * len(names))}) LIMIT 1",
                (run, *names),
            )
            counters = store.counters(run, names) if one else {}
        cc = next((x for c in counters.values() if (x := compute_capability(c))), None)
    return gpus.candidates(name, cc)


_NO_COUNTERS: dict = {}


def _no_counter_values(gpu: gpus.Gpu | None) -> tuple[dict, dict, dict]:
    """_values of a launch without counters on this GPU row (its SM count at most), made once
    per row: shared, read them only."""
    hit = _NO_COUNTERS.get(id(gpu))
    if hit is None or hit[0] is not gpu:
        hit = _NO_COUNTERS[id(gpu)] = (gpu, _values({}, gpu))
    return hit[1]


def _inputs(
    c: dict, gpu: gpus.Gpu | None, ridge: float | None, sampled: bool = False
) -> tuple[dict, dict, dict, float | None, str]:
    """(values, missing, peaks, ridge, ridge_of) of a launch's counters on one GPU row: all of
    _label_one but the rules, the same for every launch that reads these counters."""
    if c:
        v, missing, peaks = _values(c, gpu)
        kr, ridge_of = kernel_ridge(c, ridge, gpu)
    else:  # most timeline launches have no counters: their values (the GPU's SM count at most) once per GPU
        v, missing, peaks = (
            dict(x) for x in _no_counter_values(gpu)
        )  # each launch's own dicts (its evidence holds them)
        kr, ridge_of = ridge, "bf16_tensor"  # kernel_ridge without counters: no precision, the run's ridge
    if sampled:  # another launch's counters: its duration is not this launch's (the timeline's is)
        v.pop("duration", None)
    if kr is not None and "arithmetic_intensity" in v:  # the ridge is weighed: name its peaks
        r = rates(c, gpu)
        for key in (ridge_of, "dram"):
            if key in r:
                peaks.setdefault(key, r[key][1])
    return v, missing, peaks, kr, ridge_of


def _label_one(
    c: dict,
    t: dict | None,
    name: str | None,
    gpu: gpus.Gpu | None,
    ridge: float | None,
    sampled: bool = False,
    family: str | None = None,
    inputs: tuple | None = None,
) -> dict:
    """The label of one launch on one GPU row; `inputs`: its _inputs where already made (they
    are read, not changed)."""
    v, missing, peaks, kr, ridge_of = inputs or _inputs(c, gpu, ridge, sampled)
    label, reason, rule = classify_one(v, t, kr, name, ridge_of, family)
    return {
        "label": label,
        "reason": reason,
        "rule": rule,
        "values": v,
        "missing": missing,
        "peaks": peaks,
        "ridge": kr,
        "ridge_of": ridge_of,
    }


def _gpu_name(g: gpus.Gpu | None) -> str:
    """The name of a candidate GPU; None stands for a run with no known GPU (report peaks only)."""
    return g.name if g is not None else "no known GPU"


def _impossible(e: dict) -> str | None:
    """Why a launch cannot have run on the GPU whose peaks gave these values (None: it can)."""
    v = e["values"]
    for key in ("dram_pct", "sm_pct", "tensor_pct"):
        if key in v and v.get(f"{key}_from") and v[key] > 105:  # 5 %: rounding of the counters
            return f"{key.replace('_pct', '').upper()} at {v[key]:.0f} % of its peak"
    return None


_EVIDENCE = json.JSONEncoder(sort_keys=True)  # json.dumps(x, sort_keys=True), without a new encoder a launch


_fast = True  # the launches-without-counters path of label_rows (tests compare it with the general one)


def _number(x) -> str:
    """A JSON number or null, as json.dumps writes it (ints and finite floats: their repr)."""
    if x is None:
        return "null"
    if type(x) is int or (type(x) is float and math.isfinite(x)):
        return repr(x)
    return _EVIDENCE.encode(x)


def _timeline_json(t: dict | None) -> str:
    """_EVIDENCE.encode of a launch's timeline facts (sorted keys), written directly: a million
    launches pass here."""
    if not t:
        return _EVIDENCE.encode(t and {})
    return (
        f'{{"api_ns": {_number(t["api_ns"])}, "duration_ns": {_number(t["duration_ns"])}, '
        f'"gap_ns": {_number(t["gap_ns"])}}}'
    )


def _no_counter_evidence(label: str, rule: str, gpu: gpus.Gpu | None, ridge: float | None, found: str) -> dict:
    """The evidence of a launch without counters on the run's one GPU row, but its timeline
    (and ncu's rules): the same for every such launch of this label and rule."""
    v0, missing0, peaks0 = _no_counter_values(gpu)
    r = RULES.get(rule)
    evidence: dict[str, Any] = {
        "rule": rule,
        "values": v0,
        "thresholds": r["threshold"] if r else None,
        "citation": r["citation"] if r else None,
        "ridge_flop_per_byte": ridge,
        "ridge_of": "bf16_tensor",
    }
    if peaks0:
        evidence["peaks"] = peaks0
    if missing0:
        evidence["missing"] = missing0
    if any(h.startswith(FROM_TABLE) for h in peaks0.values()):
        evidence["gpu"] = {"found": found, "candidates": [{"gpu": _gpu_name(gpu), "label": label}]}
    return evidence


def label_rows(store: Store, run: str | None = None) -> list[dict]:
    """The label of every launch of a run, with its reason and evidence; writes nothing
    (iter_labels one launch at a time)."""
    run = store.require_run(run)
    return list(_with_shapes(store, run, iter_labels(store, run)))


def _with_shapes(store: Store, run: str, rows: Iterator[dict], chunk: int = 50_000) -> Iterator[dict]:
    """The rows, those of launches without counters left `unknown` labelled from their operators'
    shapes where the run recorded them (shape_labels.relabel), a chunk at a time."""
    counted = store.counters(run, sampled=False)
    batch: list[dict] = []
    for r in rows:
        batch.append(r)
        if len(batch) >= chunk:
            yield from shape_labels.relabel(store, run, batch, counted)
            batch = []
    if batch:
        yield from shape_labels.relabel(store, run, batch, counted)


def iter_labels(store: Store, run: str | None = None, only: list[int] | None = None) -> Iterator[dict]:
    """The label of every launch of a run, with its reason and evidence, one at a time.

    Peaks come from the report (profkit.model.perf.rates); where it has none, from the known-GPU
    table: the run's GPU by name, else every known GPU of its compute capability. With several
    candidates a launch is labelled under each; one label for all stands (the evidence names
    them), different labels make it `unknown` with the labels per GPU in the reason. `only`:
    these launches alone."""
    run = store.require_run(run)
    counters = store.counters(run, sampled=False)  # a sampled launch's label says whose counters it read
    candidates, found = gpu_context(store, run, counters)
    options: list[gpus.Gpu | None] = [*candidates] if candidates else [None]
    ridges = [run_ridge(counters.values(), g) for g in options]
    # ranks of one job on different GPU models: each launch is labelled on the GPU its own
    # report names (the run's GPU is its first report's)
    per_file = shape_labels.gpus_by_file(store, run)
    file_of: dict[int, int] = {}
    by_gpu: dict[str, tuple[list, list, str]] = {}
    if per_file:
        file_of = dict(
            store.conn.execute("SELECT id, file_id FROM launch WHERE run = ? AND timeline_id IS NULL", (run,))
        )
        for name in set(per_file.values()):
            rows_g, found_g = gpus.candidates(name, None)
            opts: list[gpus.Gpu | None] = [*rows_g] if rows_g else [None]
            by_gpu[name] = (opts, [run_ridge(counters.values(), g) for g in opts], found_g)
    ncu_rules = _rules(store, run)
    hot = hotspots.evidence(store, run)
    # Most launches of a timeline have no counters. On one GPU row their label rests on the
    # timeline alone, and their values, peaks and ridge are the GPU's and the run's: labelled
    # here as the general path below would (one candidate, nothing ruled out), without its
    # per-candidate lists (35 k launches in the main job).
    one = len(options) == 1 and _fast and not per_file
    if one:
        v0 = _no_counter_values(options[0])[0]
        around: dict = {}  # (label, rule) -> the evidence's JSON before and after its timeline
    default = (options, ridges, found)
    shared: dict = {}  # (measured launch, GPU of the file) -> _inputs per GPU row
    # (measured launch, GPU of the file, (label, rule) per GPU row) -> a sibling's evidence JSON
    # before and after its timeline: the same for every sibling but the timeline
    sibling_json: dict = {}
    for (kid, name, nvtx_range, nvtx_path, sampled_from, family), trow in _launches(store, run, only):
        t = _facts(trow)
        if one and kid not in counters and sampled_from not in counters:
            label, reason, rule = classify_one(v0, t, ridges[0], name, "bf16_tensor", family)
            if kid in ncu_rules or (label, rule) not in around:
                evidence = _no_counter_evidence(label, rule, options[0], ridges[0], found)
            if kid in ncu_rules:
                evidence.update(_ncu_side(label, ncu_rules[kid]))
                text = _EVIDENCE.encode(
                    {**evidence, "timeline": t and {x: t[x] for x in ("duration_ns", "gap_ns", "api_ns")}}
                )
            else:  # the same for every such launch but the timeline: its JSON made once ("timeline" sorts
                # after every other key but "values")
                if (label, rule) not in around:
                    whole = _EVIDENCE.encode({**evidence, "timeline": None})
                    cut = whole.index(', "timeline": null, "values": ')
                    around[label, rule] = (whole[: cut + 14], whole[cut + 18 :])
                head, tail = around[label, rule]
                text = head + _timeline_json(t) + tail
            yield {
                "run": run,
                "kernel_id": kid,
                "kernel_name": name,
                "nvtx_range": nvtx_range,
                "nvtx_path": nvtx_path,
                "label": label,
                "reason": reason,
                "evidence": text,
                "sampled_from": None,
            }
            continue
        c = counters.get(kid, {})
        # a sampled capture measured another launch of this kernel and configuration: its
        # counters stand for this one; the time facts (duration, gaps) stay this launch's own
        sampled = sampled_from if not c and sampled_from in counters else None
        if sampled is not None:
            c = counters[sampled]
        gpu_of = per_file.get(file_of.get(kid, -1), "")
        options, ridges, found = by_gpu.get(gpu_of, default)
        if sampled is None:
            each = [_label_one(c, t, name, g, rg, False, family) for g, rg in zip(options, ridges)]
        else:  # the siblings of one measured launch read its counters: their values made once
            ins = shared.get((sampled, gpu_of))
            if ins is None:
                ins = shared[sampled, gpu_of] = [_inputs(c, g, rg, True) for g, rg in zip(options, ridges)]
            each = [_label_one(c, t, name, g, rg, True, family, i) for g, rg, i in zip(options, ridges, ins)]
        # a GPU on which this launch would have run above 100 % of a peak did not run it
        fits = [(g, e) for g, e in zip(options, each) if not _impossible(e)]
        ruled_out = [f"{_gpu_name(g)} ({_impossible(e)})" for g, e in zip(options, each) if _impossible(e)]
        if fits and ruled_out:
            options_k, each = [g for g, _ in fits], [e for _, e in fits]
        else:
            options_k, ruled_out = options, []
        first = each[0]
        label, reason, rule = first["label"], first["reason"], first["rule"]
        table = any(h.startswith(FROM_TABLE) for e in each for h in e["peaks"].values())
        r = RULES.get(rule)
        evidence = {
            "rule": rule,
            "values": first["values"],
            "timeline": t and {x: t[x] for x in ("duration_ns", "gap_ns", "api_ns")},
            "thresholds": r["threshold"] if r else None,
            "citation": r["citation"] if r else None,
            "ridge_flop_per_byte": first["ridge"],
            "ridge_of": first["ridge_of"],
        }
        if first["peaks"]:
            evidence["peaks"] = first["peaks"]
        if first["missing"]:
            evidence["missing"] = first["missing"]
        if table:  # the label rests on datasheet peaks: say which GPU(s) and how they were chosen
            evidence["gpu"] = {
                "found": found,
                "candidates": [{"gpu": _gpu_name(g), "label": e["label"]} for g, e in zip(options_k, each)],
            }
            if ruled_out:
                evidence["gpu"]["ruled_out"] = ruled_out
            if len({e["label"] for e in each}) > 1:
                per = "; ".join(f"{e['label']} on {_gpu_name(g)}" for g, e in zip(options_k, each))
                label, rule = "unknown", "none"
                reason = f"depends on which GPU ran it ({found}): {per}. Name the GPU: profkit ingest --gpu NAME"
                evidence["rule"], evidence["thresholds"], evidence["citation"] = rule, None, None
            elif len(options_k) > 1:
                reason += f" (the same on every known GPU of its compute capability: {', '.join(_gpu_name(g) for g in options_k)})"
            elif len(options) > 1:
                reason += f" (on {_gpu_name(options_k[0])}, the one known GPU of its compute capability it fits)"
        if kid in ncu_rules:
            evidence.update(_ncu_side(label, ncu_rules[kid]))
        if kid in hot:  # Source Counters: the line and stall behind the label
            evidence["hotspot"] = hot[kid]
        if sampled is not None:
            evidence["sampled_from"] = sampled
            reason = f"{reason} (counters of launch {sampled}, the sampled launch of this kernel and configuration)"
        if sampled is not None and kid not in ncu_rules and kid not in hot:
            # ("timeline" sorts after every other key but "values")
            key = (sampled, gpu_of, tuple((e["label"], e["rule"]) for e in each))
            if key not in sibling_json:
                whole = _EVIDENCE.encode({**evidence, "timeline": None})
                cut = whole.rindex(', "timeline": null, "values": ')
                sibling_json[key] = (whole[: cut + 14], whole[cut + 18 :])
            head, tail = sibling_json[key]
            text = head + _timeline_json(t) + tail
        else:
            text = _EVIDENCE.encode(evidence)
        yield {
            "run": run,
            "kernel_id": kid,
            "kernel_name": name,
            "nvtx_range": nvtx_range,
            "nvtx_path": nvtx_path,
            "label": label,
            "reason": reason,
            "evidence": text,
            "sampled_from": sampled,
        }


def classify(store: Store, run: str | None = None) -> list[dict]:
    """Label a run and store the labels (the `classifications` view): the explicit step."""
    rows = label_rows(store, run)
    if rows:
        store.replace_labels(rows[0]["run"], rows)
        shape_labels.model_ops(store, rows[0]["run"], write=True)  # the ops view's model columns
    return rows


def classify_by_range(store: Store, run: str | None = None, tick=None) -> list[dict]:
    """classify() and by_range() in one pass, without holding every launch's row: the labels
    are written as they come (one transaction) and summed per path and label. `tick(n)`: n
    more launches labelled (a progress bar)."""
    run = store.require_run(run)
    done = _classify_columns(store, run, tick)
    if done is not None:
        return done
    return by_range(store, run, store.replace_labels_iter(run, _with_shapes(store, run, iter_labels(store, run)), tick))


_NULL = -(1 << 63)  # a NULL among _classify_columns' integers (no time is this)
# what of a launch is not integers: 1 its duration or call, 2 its grid, 4 its start or end
_ODD = (
    "(typeof(duration_ns) NOT IN ('integer', 'null') OR typeof(api_end_ns - api_start_ns) NOT IN ('integer', 'null'))"
    " | (typeof(grid_x) NOT IN ('integer', 'null') OR typeof(grid_y) NOT IN ('integer', 'null')"
    " OR typeof(grid_z) NOT IN ('integer', 'null')) * 2"
    " | (typeof(start_ns) NOT IN ('integer', 'null') OR typeof(end_ns) NOT IN ('integer', 'null')) * 4"
)
# a launch's grid in blocks as shape_labels.family_labels reads it (_NULL: none)
_GRID_BLOCKS = (
    "coalesce(CASE WHEN grid_x THEN grid_x * coalesce(nullif(grid_y, 0), 1)"
    f" * coalesce(nullif(grid_z, 0), 1) END, {_NULL})"
)


# _TIMED's columns (the idle gap from the times, below) and the grid (family_labels reads its
# blocks), as they are: a clean run's are all integers, which ADBC's strictly typed read proves
_LAUNCH_COLUMNS = (
    "id",
    "name_id",
    "coalesce(path_id, -1)",
    "coalesce(sampled_from, -1)",
    "source != 'ncu' AND start_ns IS NOT NULL",
    f"coalesce(duration_ns, {_NULL})",
    f"coalesce(api_end_ns - api_start_ns, {_NULL})",
    f"coalesce(start_ns, {_NULL})",
    f"coalesce(end_ns, {_NULL})",
    f"coalesce(device, {_NULL})",
    f"coalesce(stream, {_NULL})",
    "coalesce(grid_x, 0)",
    "coalesce(grid_y, 0)",
    "coalesce(grid_z, 0)",
)
# ({between}: the run's stretch of row ids; +run: SQLite reads that stretch, not the run's index)
_LAUNCHES = (
    f"SELECT {', '.join(_LAUNCH_COLUMNS)} FROM launch_row WHERE id {{between}} AND +run = ? AND timeline_id IS NULL"
)


def _read_launches(store: Store, run: str):
    """_LAUNCHES read strictly typed on threads of their own (result() is the answer): the run's
    stretch of row ids (selection.id_bounds), its halves at once on a large run."""
    ids = id_bounds(store, "launch_row", run) or (1, 0)
    return store.int_columns_by_ids(_LAUNCHES, (run,), len(_LAUNCH_COLUMNS), ids, strict=True, later=True)


def _launch_columns(store: Store, run: str, read) -> list | None:
    """The launches' columns (id, name, path, sampled from, timed, duration, call, grid blocks,
    start, end, device, stream, _ODD) from `read`, _read_launches' answer; where a value is not
    an integer, read again with typeof() saying which launches. None: not read as integers at
    all (a damaged file: the general path says what)."""
    try:
        *cols, gx, gy, gz = read.result()[0]
        gy, gz = np.where(gy != 0, gy, 1), np.where(gz != 0, gz, 1)
        # blocks past 64 bits (a damaged grid: SQLite's product, a real number) are no grid
        fits = np.abs(gx.astype(np.float64) * gy * gz) < 2.0**62
        blocks = np.where((gx != 0) & fits, gx * gy * gz, _NULL)
        return [*cols[:7], blocks, *cols[7:], np.zeros(len(blocks), dtype=np.int64)]
    except Exception:  # (a value of another type: which ones, typeof() says)
        read.stop()
    try:
        return store.int_columns(
            f"SELECT id, name_id, coalesce(path_id, -1), coalesce(sampled_from, -1),"
            f" source != 'ncu' AND start_ns IS NOT NULL, coalesce(duration_ns, {_NULL}),"
            f" coalesce(api_end_ns - api_start_ns, {_NULL}), {_GRID_BLOCKS}, coalesce(start_ns, {_NULL}),"
            f" coalesce(end_ns, {_NULL}), coalesce(device, {_NULL}), coalesce(stream, {_NULL}), {_ODD}"
            " FROM launch_row WHERE run = ? AND timeline_id IS NULL",
            (run,),
            13,
        )[0]
    except Exception:  # a value no integer column holds (a damaged file): the general path says what
        return None


def stream_gaps(
    timed: np.ndarray, device: np.ndarray, stream: np.ndarray, start: np.ndarray, end: np.ndarray, null: int
):
    """_GAP of the timed launches as a column (`null` for the first on its stream and for the
    untimed, whose gap no rule reads): start minus the end of the launch before it on its
    device and stream. None where two timed launches of a stream start together (which one
    comes first is SQLite's sort's to say)."""
    at = np.flatnonzero(timed)
    at = at[np.lexsort((start[at], stream[at], device[at]))]
    same = (device[at][1:] == device[at][:-1]) & (stream[at][1:] == stream[at][:-1])
    if (same & (start[at][1:] == start[at][:-1])).any():
        return None
    gap = np.full(len(timed), null, dtype=np.int64)
    after = at[1:][same]
    gap[after] = start[after] - end[at[:-1][same]]
    return gap


def _classify_columns(store: Store, run: str, tick=None) -> list[dict] | None:
    """classify_by_range with the launches without counters labelled as columns: their label
    rests on the timeline alone (communication by name, launch overhead by duration against the
    launch call or the idle gap, else unknown), their evidence is one JSON per label and rule
    with each launch's timeline beside it (label_evidence). The launches with counters (their
    own or a sampled sibling's), with ncu rule results, or with a timeline value that is not an
    integer, or that the timeline leaves unknown (shape_labels labels them from shapes or the
    kernel family) go through iter_labels; the stored labels and the table are the same as its.
    None where the run needs iter_labels throughout: several candidate GPUs, or reports naming
    different GPUs."""
    c = store.conn
    # the launches' columns come on a thread of their own while the run's context is read here
    read = _read_launches(store, run)
    counters = store.counters(run, sampled=False)
    candidates, found = gpu_context(store, run, counters)
    options: list[gpus.Gpu | None] = [*candidates] if candidates else [None]
    v0 = _no_counter_values(options[0])[0]
    if (
        len(options) != 1
        or not _fast
        or shape_labels.gpus_by_file(store, run)
        or set(v0) - {"sm_count", "sm_count_from"}
    ):
        read.stop()
        return None
    ridge = run_ridge(counters.values(), options[0])
    cols = _launch_columns(store, run, read)
    del read  # (it holds the columns as read: sorted below, they go)
    if cols is None:
        return None
    by_id = np.argsort(cols[0], kind="stable")  # (sorted here: SQLite's sort of the rows costs more)
    cols = [x[by_id] for x in cols]
    kid, name_id, path_id, sampled, timed, dur, api, blocks, start, end, device, stream, flags = cols
    odd, odd_grid, odd_time = flags & 1, flags & 2, flags & 4
    gap = None if odd_time.any() else stream_gaps(timed != 0, device, stream, start, end, _NULL)
    if gap is None:  # times that are not integers, or launches that start together: SQLite's own order decides
        (gid, gap, odd_gap), _ = store.int_columns(
            f"SELECT id, coalesce(gap_ns, {_NULL}), typeof(gap_ns) NOT IN ('integer', 'null') FROM (SELECT id,"
            f" {_GAP} AS gap_ns FROM launch_row WHERE run = ? AND timeline_id IS NULL)",
            (run,),
            3,
        )
        by_id = np.argsort(gid, kind="stable")
        gap, odd = gap[by_id], odd | odd_gap[by_id]
    inherited = np.zeros(len(kid), dtype=bool)
    heir = columns.ints(
        c,
        "SELECT i.launch_id, i.path_id FROM launch_inherit i JOIN launch_row l ON l.id = i.launch_id"
        " WHERE l.run = ? AND l.timeline_id IS NULL",
        (run,),
        2,
    )
    at = np.searchsorted(kid, heir[:, 0])
    path_id[at], inherited[at] = heir[:, 1], True
    measured = np.array(sorted(counters), dtype=np.int64)
    general = (
        np.isin(kid, measured)
        | np.isin(sampled, measured)
        | np.isin(kid, np.array(sorted(_rules(store, run)), dtype=np.int64))
        | (odd != 0)
    )
    fast = ~general
    # communication: by the kernel's family or name (the kernels view's family is its name's
    # but for Triton's, which is never nccl), once per name
    names = {i: (n, f) for i, n, f in c.execute("SELECT id, name, family FROM launch_name")}
    comm_names = np.array(sorted(i for i, (n, f) in names.items() if f == "nccl" or is_comm(n)), dtype=np.int64)
    comm = np.isin(name_id, comm_names)
    # classify_one's timeline rules for a launch whose values are its GPU's SM count at most
    R = RULES["launch_overhead"]["threshold"]
    short = (timed != 0) & (dur != _NULL) & (dur < R["duration_ns"])
    by_call = ~comm & short & (api != _NULL) & (api >= dur)
    by_gap = ~comm & short & ~by_call & (gap != _NULL) & (gap >= dur)
    # 0 unknown, 1 communication, 2 launch overhead by its call, 3 by its gap
    cat = np.where(comm, 1, np.where(by_call, 2, np.where(by_gap, 3, 0))).astype(np.int64)
    # those the timeline leaves unknown: shape_labels labels them from their operator's shapes
    # or their kernel's family, a launch at a time (their rows made here, as iter_labels would)
    unknown = fast & (cat == 0)
    fast &= ~unknown
    outcome = [
        classify_one(v0, None, ridge, None, "bf16_tensor", None),
        classify_one(v0, None, ridge, None, "bf16_tensor", "nccl"),
    ]
    if outcome[0][0] != "unknown" or outcome[1][0] != "communication":
        return None  # (the rules changed under this path: the general one decides)
    outcome += [("launch_overhead", "", "launch_overhead")] * 2
    # launch-overhead reasons, one string per distinct (duration, call or gap)
    reasons = np.full(len(kid), None, dtype=object)
    reason_code = np.zeros(len(kid), dtype=np.int64)  # equal where the reason is (a kind's part)
    for k, fmt, other in ((2, BY_CALL, api), (3, BY_GAP, gap)):
        at = np.flatnonzero(fast & (cat == k))
        if len(at):
            key = columns.row_key([dur[at], other[at]])
            _, first, inv = np.unique(key, return_index=True, return_inverse=True)
            texts = np.array(
                [fmt.format(d / 1e3, o / 1e3) for d, o in zip(dur[at][first].tolist(), other[at][first].tolist())],
                dtype=object,
            )
            reasons[at] = texts[inv.reshape(-1)]
            reason_code[at] = inv.reshape(-1)
    for k in (0, 1):
        reasons[fast & (cat == k)] = outcome[k][1]
    general_rows: list[tuple] = []  # (kernel id, nvtx path, label, reason) of those labelled one at a time
    ncu: dict = {}
    # without operator shapes, the unknown ones are labelled from their kernel family as columns
    grid = blocks if unknown.any() and not odd_grid.any() and not shape_labels.has_shapes(store, run) else None
    by_family: dict = {}  # their labels and reasons (the table's), once labelled

    pending: list[tuple] = []  # (launch ids, kinds, kind of each, gap of each) written as columns
    table: list = []  # the table's sum, under way while the labels are written

    def fill(w) -> None:
        # each (label, rule)'s evidence: around the timeline (timed launches), whole (the others)
        eid_timed = np.zeros(4, dtype=np.int64)
        eid_whole = np.zeros(4, dtype=np.int64)
        shared = np.full(4 * 2, None, dtype=object)
        on = timed != 0
        for k, (lab, _, rule) in enumerate(outcome):
            whole = _EVIDENCE.encode({**_no_counter_evidence(lab, rule, options[0], ridge, found), "timeline": None})
            cut = whole.index(', "timeline": null, "values": ')
            for timeline, ids in ((True, eid_timed), (False, eid_whole)):
                at = np.flatnonzero(fast & (cat == k) & (on == timeline))
                if len(at):  # the reason of its first launch
                    head, tail = (whole[: cut + 14], whole[cut + 18 :]) if timeline else (whole, None)
                    ids[k], shared[2 * k + (not timeline)] = w.evidence(head, tail, reasons[at[0]], rule)
        at = np.flatnonzero(fast)
        # a kind per (label, timed, reason): the rows differ by their timeline facts alone
        _, first, kind = np.unique(
            columns.row_key([cat[at], on[at].astype(np.int64), reason_code[at]]), return_index=True, return_inverse=True
        )
        kinds = []
        for i in at[first].tolist():
            k, t_on = int(cat[i]), bool(on[i])
            own = reasons[i] if reasons[i] != shared[2 * k + (not t_on)] else None
            kinds.append((outcome[k][0], own, int((eid_timed if t_on else eid_whole)[k]), t_on))
        pending.append((kid[at], kinds, kind.reshape(-1), np.where(on[at], gap[at], _NULL)))

        def unknown_rows() -> Iterator[dict]:
            """iter_labels' rows of the launches the timeline leaves unknown."""
            label, reason, rule = outcome[0]
            whole = _EVIDENCE.encode({**_no_counter_evidence(label, rule, options[0], ridge, found), "timeline": None})
            cut = whole.index(', "timeline": null, "values": ')
            head, tail = whole[: cut + 14], whole[cut + 18 :]
            paths = {i: (t, p) for i, t, p in c.execute("SELECT id, text, path FROM nvtx_path")}
            own = _own_paths(store, run)
            at = np.flatnonzero(unknown)
            none = (None, None)

            def text(x) -> str:
                return "null" if x is None else str(x)

            for k, n, pid, heir, t_on, a, d, g in zip(
                kid[at].tolist(),
                name_id[at].tolist(),
                path_id[at].tolist(),
                inherited[at].tolist(),
                on[at].tolist(),
                fact_of(api, at),
                fact_of(dur, at),
                fact_of(gap, at),
            ):
                rng, path = (not heir and own.get(k)) or paths.get(pid, none)
                timeline = f'{{"api_ns": {text(a)}, "duration_ns": {text(d)}, "gap_ns": {text(g)}}}'
                yield {
                    "run": run,
                    "kernel_id": k,
                    "kernel_name": names[n][0],
                    "nvtx_range": rng,
                    "nvtx_path": path,
                    "label": label,
                    "reason": reason,
                    "evidence": head + timeline + tail if t_on else whole,
                    "sampled_from": None,
                }

        def fact_of(x, at):
            out = x[at].astype(object)
            out[(x[at] == _NULL) | ~on[at]] = None
            return out.tolist()

        def family_rows() -> None:
            """The unknown ones' rows as columns: shape_labels.relabel's, a label and reason per
            group of family_groups, each evidence row made once (in launch order, as one at a time)."""
            assert grid is not None  # (called only where the grids were read)
            at = np.flatnonzero(unknown)
            label, reason, rule = outcome[0]
            whole = _EVIDENCE.encode({**_no_counter_evidence(label, rule, options[0], ridge, found), "timeline": None})
            cut = whole.index(', "timeline": null, "values": ')
            head, tail = whole[: cut + 14], whole[cut + 18 :]
            group, groups = shape_labels.family_groups(
                store, run, {i: n for i, (n, _) in names.items()}, name_id[at], dur[at], grid[at], _NULL
            )
            made: dict = {}
            glabel, greason, keys = [], [], []
            for lab, why, ev, same in groups:
                if lab is None:
                    glabel.append(label)
                    greason.append(f"{reason}{shape_labels.NO_OP}; from the kernel family: {why}")
                    keys.append(((head, tail), (whole, None)))
                    continue
                glabel.append(lab)
                greason.append(why)
                text = shape_labels._with(whole, ev, same, made)
                i = text.rfind(', "timeline": null')
                keys.append(((text[: i + 14], text[i + 18 :]), (text, None)))
            on_at = on[at].astype(np.int64)
            combo = group * 2 + on_at
            uniq, first, inv = np.unique(combo, return_index=True, return_inverse=True)
            eids = np.zeros(len(uniq), dtype=np.int64)
            owns = np.full(len(uniq), None, dtype=object)
            for u in np.argsort(first, kind="stable").tolist():  # in the order their first launch comes
                g, t = divmod(int(uniq[u]), 2)
                eid, shared = w.evidence(*keys[g][0 if t else 1], greason[g])
                eids[u], owns[u] = eid, None if greason[g] == shared else greason[g]
            labs = np.array(glabel, dtype=object)[group]
            by_family.update(at=at, labels=labs, reasons=np.array(greason, dtype=object)[group])
            kinds = []
            for u, x in enumerate(uniq.tolist()):
                g, t = divmod(x, 2)
                kinds.append((glabel[g], owns[u], int(eids[u]), bool(t)))
            pending.append((kid[at], kinds, inv.reshape(-1), np.where(on[at], gap[at], _NULL)))

        # the others a launch at a time, written a chunk at a time; kept: what the table reads
        batch: list[tuple] = []
        ones = iter_labels(store, run, kid[general].tolist()) if general.any() else iter(())
        if grid is None:
            ones = chain(ones, unknown_rows())
        for r in _with_shapes(store, run, ones):
            batch.append(w.row(r))
            general_rows.append((r["kernel_id"], r["nvtx_path"], r["label"], r["reason"]))
            _ncu_add(ncu, (r["nvtx_path"] or NO_RANGE, r["label"]), r["evidence"])
            if len(batch) >= 50_000:
                w.add(batch)
                if tick:
                    tick(len(batch))
                batch = []
        w.add(batch)
        if tick:
            tick(len(batch))
        if grid is not None:
            family_rows()
        # the rows labelled as columns in one insert in id order: rows appended to the table and
        # its index, not put between others (a third less time)
        ids = np.concatenate([p[0] for p in pending])
        base = np.cumsum([0] + [len(p[1]) for p in pending[:-1]])
        codes = np.concatenate([p[2] + b for p, b in zip(pending, base.tolist())])
        order = np.argsort(ids, kind="stable")
        # the table, summed on a thread of its own while SQLite inserts (its reads made here)
        inputs = _table_inputs(store, run, kid, odd, np.where(dur == _NULL, 0, dur))
        table.append(
            Pending(
                _columns_table,
                kid,
                cat,
                [o[0] for o in outcome],
                reasons,
                path_id,
                inherited,
                inputs,
                general_rows,
                ncu,
                by_family,
                name="profkit-table",
            )
        )
        w.add_columns(
            ids[order],
            [k for p in pending for k in p[1]],
            codes[order],
            np.concatenate([p[3] for p in pending])[order],
            _NULL,
            tick=tick,
        )

    try:
        store.write_labels(run, fill)
    finally:
        for t in table:  # (an error or an interrupt meanwhile: its thread ends first)
            t.stop()
    return table[0].result()


def _table_inputs(store: Store, run: str, kid, odd, dur) -> tuple:
    """What _columns_table reads of the database: the paths' texts, the launches whose own
    path is not their path row's, and each launch's duration in us (a duration stored as a
    real number: its own value)."""
    c = store.conn
    paths = dict(c.execute("SELECT id, path FROM nvtx_path"))
    us = dur.astype(np.float64) / 1e3
    if odd.any():
        for k, d in c.execute(
            "SELECT id, coalesce(duration_ns, 0) FROM launch_row WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(kid[odd != 0].tolist()),),
        ):
            us[int(np.searchsorted(kid, k))] = d / 1e3
    return paths, _own_paths(store, run), us


def _columns_table(
    kid, cat, outcome, reasons, path_id, inherited, inputs, general_rows, ncu, by_family=None
) -> list[dict]:
    """by_range's table from _classify_columns' columns (the launches in kernel id order; those
    of general_rows, labelled one at a time, take their row's path, label and reason; `ncu`:
    their ncu rule results, counted; `inputs`: _table_inputs'). Reads nothing of the database."""
    paths, own, us = inputs
    texts: dict[str, int] = {}

    def code(text: str | None) -> int:
        return texts.setdefault(text or NO_RANGE, len(texts))

    # the kernels view's path (as _launches reads it), one code per distinct text
    distinct, inv = np.unique(path_id, return_inverse=True)
    where = np.array([code(paths.get(p)) for p in distinct.tolist()], dtype=np.int64)[inv.reshape(-1)]
    for k, (_, path) in own.items():
        i = int(np.searchsorted(kid, k))
        if i < len(kid) and kid[i] == k and not inherited[i]:
            where[i] = code(path)
    at = np.searchsorted(kid, np.array([r[0] for r in general_rows], dtype=np.int64))
    for i, (_, path, _, reason) in zip(at.tolist(), general_rows):
        where[i], reasons[i] = code(path), reason
    # a code per label: the outcomes' for the launches labelled as columns, then the others'
    names = list(dict.fromkeys(outcome))
    lcode = np.array([names.index(x) for x in outcome], dtype=np.int64)[cat]
    for i, (_, _, label, _) in zip(at.tolist(), general_rows):
        if label not in names:
            names.append(label)
        lcode[i] = names.index(label)
    if by_family:  # those labelled from their kernel family as columns: their labels and reasons
        at = by_family["at"]
        reasons[at] = by_family["reasons"]
        for label in dict.fromkeys(by_family["labels"].tolist()):
            if label not in names:
                names.append(label)
        lcode[at] = np.array([names.index(x) for x in by_family["labels"].tolist()], dtype=np.int64)
    key = where * len(names) + lcode
    groups, first, inv = np.unique(key, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    order = np.argsort(inv, kind="stable")  # each group's launches together, in kernel id order
    counts = np.bincount(inv, minlength=len(groups))
    ends = np.cumsum(counts)
    text_of = {v: k for k, v in texts.items()}
    summary: dict = {}
    for g in np.argsort(first, kind="stable").tolist():  # groups in the order their first launch comes
        i = int(first[g])
        lo, hi = int(ends[g] - counts[g]), int(ends[g])
        # summed one launch after another, as by_range does (a float sum depends on its order)
        total = float(np.cumsum(us[order[lo:hi]])[-1])
        summary[text_of[int(where[i])], names[int(lcode[i])]] = [int(counts[g]), total, reasons[i]]
    return _range_table(summary, ncu)


def labels(store: Store, run: str) -> dict[int, str]:
    """{kernel_id: label} of a run: the stored labels, else computed here without storing them."""
    rows = store.query("SELECT kernel_id, label FROM classifications WHERE run = ?", (run,))
    return {r["kernel_id"]: r["label"] for r in (rows or label_rows(store, run))}


class Facts:
    """A run's labels as advise reads them: the label of every launch as a code into `labels`
    ("unknown" for a launch without one), and (label, rule, reason) of one launch on demand."""

    def __init__(self, kid: np.ndarray, code: np.ndarray, labels: list[str], one) -> None:
        if "unknown" not in labels:
            labels = [*labels, "unknown"]
        order = np.argsort(kid)
        self._kid, self._code, self.labels, self._one = kid[order], code[order], labels, one

    def codes(self, kids: np.ndarray) -> np.ndarray:
        at = np.minimum(np.searchsorted(self._kid, kids), max(len(self._kid) - 1, 0))
        found = self._kid[at] == kids if len(self._kid) else np.zeros(len(kids), dtype=bool)
        return np.where(found, self._code[at] if len(self._kid) else 0, self.labels.index("unknown"))

    def get(self, kid: int) -> tuple[str, str, str] | None:
        return self._one(kid)

    def __len__(self) -> int:
        """Launches with a label."""
        return len(self._kid)


# a run's stored labels (those of its timeline launches, as the classifications view has them)
_HELD = "FROM label l JOIN launch_row r ON r.id = l.kernel_id WHERE r.run = ? AND r.timeline_id IS NULL"
# the same with each label's evidence row (schema 21), and the rule that gave a label: its
# evidence row's, or in the JSON of a label stored before
_WITH_EVIDENCE = (
    "FROM label l JOIN launch_row r ON r.id = l.kernel_id LEFT JOIN label_evidence e ON e.id = l.evidence_id"
    " WHERE r.run = ? AND r.timeline_id IS NULL"
)
_RULE = "coalesce(e.rule, json_extract(l.evidence, '$.rule'))"


def label_facts(store: Store, run: str, measured: set | None = None) -> Facts:
    """The labels of a run: the stored ones where they cover the run and none of them says "no
    counters" of a launch that has counters (`measured`: kernel ids with counters, their own or
    their sampled sibling's); else computed here, not stored, so that an answer never depends on
    whether `classify` ran, or ran before the counters came. Read as columns: a run may have a
    million labels."""
    c = store.conn
    stored = _stored_facts(store, run)
    n = c.execute("SELECT count(*) FROM launch_row WHERE run = ? AND timeline_id IS NULL", (run,)).fetchone()[0]
    stale = len(stored) != n
    if not stale and measured:
        ids = json.dumps(sorted(measured))
        stale = bool(
            c.execute(
                f"SELECT count(*) {_WITH_EVIDENCE} AND (l.kernel_id IN (SELECT value FROM json_each(?)) OR r.sampled_from"
                f" IN (SELECT value FROM json_each(?))) AND {_RULE} = 'none'",
                (run, ids, ids),
            ).fetchone()[0]
        )
    if stale:
        facts = {
            r["kernel_id"]: (r["label"], json.loads(r["evidence"]).get("rule") or "none", r["reason"])
            for r in label_rows(store, run)
        }
        names = list(dict.fromkeys(f[0] for f in facts.values()))
        kid = np.fromiter(facts, dtype=np.int64, count=len(facts))
        code = np.fromiter((names.index(f[0]) for f in facts.values()), dtype=np.int64, count=len(facts))
        return Facts(kid, code, names, facts.get)
    return stored


def label_codes(store: Store, run: str, later: bool = False):
    """labels() as columns: the stored labels, else computed here without storing them. With
    `later`, an answer whose result() is that: the stored labels' read under way meanwhile."""
    if store.conn.execute(f"SELECT 1 {_HELD} LIMIT 1", (run,)).fetchone():
        # every label of the run, a timeline launch's or not: codes() is asked of timeline launches
        # (in halves of the run's launch ids at once on a large run: the label index's stretches)
        ids = id_bounds(store, "launch_row", run) or (1, 0)
        read = store.int_columns_by_ids(
            "SELECT kernel_id, CAST(label AS BLOB) FROM label WHERE run = ? AND kernel_id {between}",
            (run,),
            1,
            ids,
            blob=True,
            later=True,
        )

        def stored() -> Facts:
            (kid,), (code, names) = read.result()
            return Facts(kid, code.astype(np.int64), [b.decode() for b in names], lambda kid: None)

        return Ready(stored, read) if later else stored()

    def computed() -> Facts:
        got = {r["kernel_id"]: r["label"] for r in label_rows(store, run)}
        names = list(dict.fromkeys(got.values()))
        code = {n: i for i, n in enumerate(names)}
        return Facts(
            np.fromiter(got, dtype=np.int64, count=len(got)),
            np.fromiter((code[x] for x in got.values()), dtype=np.int64, count=len(got)),
            names,
            lambda kid: None,
        )

    return Ready(computed) if later else computed()


def _stored_facts(store: Store, run: str) -> Facts:
    """The run's stored labels as Facts."""
    c = store.conn
    # (_HELD by the run's stretch of launch ids, its halves at once on a large run)
    (kid,), (code, names) = store.int_columns_by_ids(
        "SELECT l.kernel_id, CAST(l.label AS BLOB) FROM label l JOIN launch_row r ON r.id = l.kernel_id"
        " WHERE r.id {between} AND +r.run = ? AND r.timeline_id IS NULL",
        (run,),
        1,
        id_bounds(store, "launch_row", run) or (1, 0),
        blob=True,
    )

    def one(kid: int) -> tuple[str, str, str] | None:
        r = c.execute(
            f"SELECT l.label, {_RULE}, coalesce(l.reason, e.reason) {_WITH_EVIDENCE} AND l.kernel_id = ?", (run, kid)
        ).fetchone()
        return (r[0], r[1] or "none", r[2]) if r else None

    return Facts(kid, code.astype(np.int64), [b.decode() for b in names], one)


NO_RANGE = "(outside any NVTX range)"


def per_launch(rows: list[dict]) -> list[dict]:
    """One row a launch of `classify`'s rows: its range, kernel, label and reason."""
    return [
        {
            "kernel_id": r["kernel_id"],
            "nvtx_path": r["nvtx_path"] or NO_RANGE,
            "kernel": r["kernel_name"],
            "label": r["label"],
            "reason": r["reason"],
        }
        for r in rows
    ]


def by_range(store: Store, run: str, rows: Iterable[dict]) -> list[dict]:
    """`classify`'s rows of a run summed per NVTX path and label: launches, GPU time, an example
    reason, and where the report has ncu's own rule results, how often they agree with the label
    and ncu's largest estimated speed-up."""
    dur = dict(
        store.conn.execute(
            "SELECT id, coalesce(duration_ns, 0) FROM launch_row WHERE run = ? AND timeline_id IS NULL", (run,)
        )
    )
    summary: dict = {}
    ncu: dict = {}
    for r in rows:
        key = (r["nvtx_path"] or NO_RANGE, r["label"])
        e = summary.setdefault(key, [0, 0.0, r["reason"]])
        e[0] += 1
        e[1] += dur.get(r["kernel_id"], 0) / 1e3
        _ncu_add(ncu, key, r["evidence"])
    return _range_table(summary, ncu)


def _ncu_add(ncu: dict, key: tuple, text: str) -> None:
    """Count one launch's ncu rule results (in its evidence JSON) under its path and label."""
    # only evidence that names ncu's rules is read back (most launches have none)
    ev = json.loads(text) if '"ncu_rules"' in text else {}
    if ev.get("ncu_rules"):  # ncu's own rule results beside the label (where the report has them)
        n = ncu.setdefault(key, {"agree": 0, "judged": 0, "says": set(), "top": None})
        if ev.get("ncu_agrees") is not None:
            n["judged"] += 1
            n["agree"] += ev["ncu_agrees"]
        n["says"].update(ev.get("ncu_says") or ())
        top = ev["ncu_rules"][0]
        if top.get("estimated_speedup_pct") is not None and n["top"] is None:
            n["top"] = f"{top['rule']} {top['estimated_speedup_pct']:.0f} %"


def _range_table(summary: dict, ncu: dict) -> list[dict]:
    """by_range's rows: {(path, label): [launches, GPU us, example reason]} in their order."""
    table_rows = []
    for k, v in summary.items():
        row = {"nvtx_path": k[0], "label": k[1], "launches": v[0], "GPU us": v[1], "example reason": v[2]}
        if ncu:
            n = ncu.get(k)
            row["ncu's rules"] = (
                "-"
                if n is None
                else (
                    (
                        f"agree {n['agree']}/{n['judged']}: {', '.join(sorted(n['says']))}"
                        if n["judged"]
                        else "no verdict"
                    )
                    + (f"; top estimate {n['top']}" if n["top"] else "")
                )
            )
        table_rows.append(row)
    return table_rows


def stored_by_range(store: Store, run: str) -> list[dict]:
    """The stored labels of a run's launches inside NVTX ranges, per path and label: launches and
    GPU time."""
    return store.query(
        """
        SELECT k.nvtx_path, c.label, count(*) AS launches, sum(k.duration_ns) / 1e3 AS total_us
        FROM classifications c JOIN kernels k USING (kernel_id)
        WHERE c.run = ? AND k.nvtx_path IS NOT NULL GROUP BY 1, 2 ORDER BY 1, 2""",
        (run,),
    )
