"""Label each kernel launch with what bounds it, and keep the evidence beside the label.

Rules run in order; the first that fires names the label. Each rule's thresholds and source
are in RULES (docs/classification.md is written from the same table). Works with counters
only, timeline only, or both.
"""
from __future__ import annotations

import json

from .metrics import lookup
from .model import kernel_ridge, run_ridge
from .names import is_comm
from .store import Store

LABELS = ("dram", "launch_overhead", "occupancy", "tensor_core", "communication", "compute", "latency", "unknown")

RULES = {
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
    "compute": {
        "threshold": {"sm_pct": 60.0},
        "citation": "Nsight Compute SpeedOfLight: SM throughput >= 60 % and above memory; tensor pipes idle.",
    },
    "latency": {
        "threshold": {"busy_pct": 60.0},
        "citation": "Nsight Compute SpeedOfLight: SM and memory throughput both < 60 % of peak: latency-bound.",
    },
}


def _timeline(store: Store, run: str) -> dict[int, dict]:
    """Per timeline launch: duration, idle gap before it on its stream, launch-call time."""
    rows = store.query("""
        SELECT kernel_id, duration_ns, api_end_ns - api_start_ns AS api_ns,
               start_ns - lag(end_ns) OVER (PARTITION BY device, stream ORDER BY start_ns) AS gap_ns
        FROM kernels WHERE run = ? AND source != 'ncu' AND start_ns IS NOT NULL""", (run,))
    return {r["kernel_id"]: r for r in rows}


def _values(c: dict[str, float]) -> dict:
    v = {k: lookup(c, k) for k in ("duration", "sm_pct", "mem_pct", "dram_pct", "tensor_pct", "tensor_gmma_pct",
                                   "achieved_occupancy", "theoretical_occupancy", "grid_size", "waves_per_sm",
                                   "sm_count", "dram_bytes", "limit_registers", "limit_shared_mem", "limit_warps",
                                   "limit_blocks", "fadd", "fmul", "ffma", "tensor_ops_bf16", "tensor_ops_fp16",
                                   "tensor_ops_fp8", "issue_pct", "l2_bytes_pct", "l1_bytes_pct")}
    # The lean metric set skips ncu's SM and memory speed-of-light breakdowns (9 and 6 replay
    # passes on their own): SM busy is then the issue-slot utilisation, memory busy the
    # busiest of DRAM, L2 and L1 by bytes over peak. The evidence says which was used.
    if v["sm_pct"] is None and v["issue_pct"] is not None:
        v["sm_pct"], v["sm_pct_from"] = v["issue_pct"], "issue_pct"
    if v["mem_pct"] is None:
        levels = [x for x in (v["dram_pct"], v["l2_bytes_pct"], v["l1_bytes_pct"]) if x is not None]
        if levels:
            v["mem_pct"], v["mem_pct_from"] = max(levels), "max(dram_pct, l2_bytes_pct, l1_bytes_pct)"
    flops = sum(x or 0 for x in (v["fadd"], v["fmul"])) + 2 * (v["ffma"] or 0) + \
        sum(x or 0 for x in (v["tensor_ops_bf16"], v["tensor_ops_fp16"], v["tensor_ops_fp8"]))
    if v["dram_bytes"]:
        v["arithmetic_intensity"] = flops / v["dram_bytes"]
    return {k: x for k, x in v.items() if x is not None}


def _limiter(v: dict) -> str | None:
    lims = {k[6:]: v[k] for k in ("limit_registers", "limit_shared_mem", "limit_warps", "limit_blocks") if k in v}
    return min(lims, key=lims.get) if lims else None


def classify_one(v: dict, t: dict | None, ridge: float | None = None, name: str | None = None,
                 ridge_of: str = "bf16_tensor") -> tuple[str, str, str]:
    """(label, reason, rule) for one launch from counter values v, timeline facts t, and the
    ridge point (FLOP/B) of the precision it computes in (ridge_of)."""
    R = {k: r["threshold"] for k, r in RULES.items()}
    if is_comm(name):
        return "communication", "NCCL kernel: bound by the collective across ranks (see profkit ranks)", "communication"
    dur = v.get("duration") or (t or {}).get("duration_ns")
    tensor = max(v.get("tensor_pct", 0), v.get("tensor_gmma_pct", 0))
    if tensor >= R["tensor_core"]["tensor_pipe_pct"]:
        return "tensor_core", f"tensor pipe {tensor:.0f} % of peak (>= {R['tensor_core']['tensor_pipe_pct']:.0f})", "tensor_core"
    if dur is not None and dur < R["launch_overhead"]["duration_ns"]:
        if t and t.get("api_ns") is not None and t["api_ns"] >= dur:
            return "launch_overhead", f"{dur / 1e3:.1f} us kernel, shorter than its {t['api_ns'] / 1e3:.1f} us launch call", "launch_overhead"
        if t and t.get("gap_ns") is not None and t["gap_ns"] >= dur:
            return "launch_overhead", f"{dur / 1e3:.1f} us kernel after a {t['gap_ns'] / 1e3:.1f} us idle gap on its stream", "launch_overhead"
        grid, sms = v.get("grid_size"), v.get("sm_count")
        if grid is not None and sms and grid < sms and dur < R["launch_overhead"]["tiny_duration_ns"]:
            return "launch_overhead", f"{dur / 1e3:.1f} us kernel over {grid:.0f} blocks (< {sms:.0f} SMs)", "launch_overhead"
    if "dram_pct" not in v and "sm_pct" not in v:
        return "unknown", "no counters for this launch and the timeline shows no launch overhead", "none"
    sm, mem, dram = v.get("sm_pct", 0.0), v.get("mem_pct", v.get("dram_pct", 0.0)), v.get("dram_pct", 0.0)
    ai = v.get("arithmetic_intensity")
    below_ridge = ai is None or ridge is None or ai < ridge
    Rd = R["dram"]
    if dram >= Rd["dram_pct_high"] or (dram >= Rd["dram_pct_dominant"] and dram >= sm + Rd["gap_points"] and below_ridge):
        extra = ("" if ai is None or not ridge else ", no FLOPs counted (memory traffic only)" if ai == 0 else
                 f", intensity {ai:.2f} FLOP/B below the {ridge_of} ridge {ridge:.0f}")
        return "dram", f"DRAM throughput {dram:.0f} % of peak vs SM {sm:.0f} %{extra}", "dram"
    theo = v.get("theoretical_occupancy")
    if theo is not None and theo < R["occupancy"]["theoretical_pct"] and max(sm, mem) < R["occupancy"]["busy_pct"]:
        lim = _limiter(v)
        return "occupancy", (f"theoretical occupancy {theo:.1f} % (limited by {lim}), achieved "
                             f"{v.get('achieved_occupancy', float('nan')):.1f} %; SM {sm:.0f} %, memory {mem:.0f} %"), "occupancy"
    Rr = R["dram_roofline"]
    l1l2_bound = mem >= Rr["other_level_busy_pct"] and dram < Rr["dram_quiet_pct"]
    if ai is not None and ridge and ai < ridge * Rr["below_ridge_factor"] and tensor < 1 and not l1l2_bound:
        why = ("no floating-point work counted (0 FLOP/B)" if ai == 0 else
               f"intensity {ai:.2f} FLOP/B, far below the {ridge_of} ridge at {ridge:.0f}")
        return "dram", (f"{why}: memory-bound on the roofline though DRAM runs at only {dram:.0f} % "
                        f"(SM {sm:.0f} %)"), "dram_roofline"
    if sm >= R["compute"]["sm_pct"] and sm >= mem:
        return "compute", f"SM throughput {sm:.0f} % with tensor pipes at {tensor:.0f} %", "compute"
    if max(sm, mem) < R["latency"]["busy_pct"]:
        return "latency", f"SM {sm:.0f} % and memory {mem:.0f} % both under 60 % of peak", "latency"
    return "latency", f"memory {mem:.0f} % busy but DRAM only {dram:.0f} %: bound in L1/L2, not DRAM", "latency"


def label_rows(store: Store, run: str | None = None) -> list[dict]:
    """The label of every launch of a run, with its reason and evidence; writes nothing."""
    run = store.require_run(run)
    timeline = _timeline(store, run)
    counters = store.counters(run)
    ridge = run_ridge(counters.values())
    kernels = store.query("SELECT kernel_id, kernel_name, nvtx_range, nvtx_path FROM kernels WHERE run = ? "
                          "ORDER BY kernel_id", (run,))
    out = []
    for k in kernels:
        c = counters.get(k["kernel_id"], {})
        v = _values(c)
        t = timeline.get(k["kernel_id"])
        kr, ridge_of = kernel_ridge(c, ridge)
        label, reason, rule = classify_one(v, t, kr, k["kernel_name"], ridge_of)
        evidence = {"rule": rule, "values": v, "timeline": t and {x: t[x] for x in ("duration_ns", "gap_ns", "api_ns")},
                    "thresholds": RULES.get(rule, {}).get("threshold"), "citation": RULES.get(rule, {}).get("citation"),
                    "ridge_flop_per_byte": kr, "ridge_of": ridge_of}
        out.append({"run": run, "kernel_id": k["kernel_id"], "kernel_name": k["kernel_name"],
                    "nvtx_range": k["nvtx_range"], "nvtx_path": k["nvtx_path"], "label": label, "reason": reason,
                    "evidence": json.dumps(evidence, sort_keys=True)})
    return out


def classify(store: Store, run: str | None = None) -> list[dict]:
    """Label a run and store the labels (the `classifications` view): the explicit step."""
    rows = label_rows(store, run)
    if rows:
        store.replace_labels(rows[0]["run"], rows)
    return rows


def labels(store: Store, run: str) -> dict[int, str]:
    """{kernel_id: label} of a run: the stored labels, else computed here without storing them."""
    rows = store.query("SELECT kernel_id, label FROM classifications WHERE run = ?", (run,))
    return {r["kernel_id"]: r["label"] for r in (rows or label_rows(store, run))}
