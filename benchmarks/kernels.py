#!/usr/bin/env python3
"""Memory-bound LLM operators: eager vs torch.compile vs Liger vs the lab's Triton kernels.

    python3 benchmarks/kernels.py --out DIR [--quick] [--ops rmsnorm,rope] [--shapes t32768,scores] [--dtype bf16]
                                  [--no-backward] [--no-compile] [--variants triton,liger]
    python3 benchmarks/kernels.py --selftest [--out DIR]   # CPU, TRITON_INTERPRET=1, tiny shapes

Every workload the registry marks ``bench="kernels"`` (profkit.kernels.benched), forward and
backward (``<op>_bwd``), at its registered shapes (``--quick``: the workload's quick shapes;
``--selftest``: its selftest shapes). On the GPU: first the device-to-device copy bandwidth
in the same run (kernels/timing.copy_bandwidth); then per operator x shape x variant the output
checked once against the float64 reference (Workload.check, on the GPU), the median time of
kernels/timing.timer (do_bench; inputs rotated over copies so each shape's working set passes
the L2), GB/s from the operator's minimum-bytes model, % of the copy bandwidth, and the
speed-up of the lab's variants over each baseline (eager, compile, liger) of the same shape
and over the better of compile and Liger ("x best peer"). Backward rows time
torch.autograd.grad of each variant's forward graph.

Writes DIR/kernels.json (rows, each with GPU, driver, torch/triton versions and date) and
prints a markdown table. Imports the operators from the installed package (profkit.kernels),
so it runs from any cwd. torch.compile: mode=None, dynamic=False, one compile per shape;
past --budget-s seconds compile variants are skipped (said so in their rows).
"""
from __future__ import annotations

import os
import sys

if "--selftest" in sys.argv:  # before triton is imported anywhere
    os.environ["TRITON_INTERPRET"] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

DEADLINE = [float("inf")]  # perf_counter() after which torch.compile variants are skipped
PEERS = ("compile", "liger")  # the bar: the faster of torch.compile and Liger
# backward rows timed through a direct launcher call meet torch.compile of the backward written out,
# called the same way (their kernels run on the calling thread: graph-capturable and profilable)
DIRECT_PEERS = ("compile_direct",)


def _peers(variant: str) -> tuple[str, ...]:
    return DIRECT_PEERS if variant.endswith("_direct") else PEERS


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# kept for benchmarks/cuda_lab.py, which borrows this script's harness
def timer(device: str):
    from profkit.kernels.timing import timer as t

    return t(device)


def env_info(device: str) -> dict:
    from profkit.kernels.timing import header

    return header(device)


def copy_bandwidth(device: str, bench) -> dict:
    from profkit.kernels.timing import copy_bandwidth as cb

    return cb(device, bench)


def _variants(w, wanted) -> list[str]:
    """The variants to time: `wanted`, else all but the CUDA C++ ones (benchmarks/cuda_lab.py
    times those: their first call builds with nvcc)."""
    names = list(w.variants) + [v for v in w.requires if v not in w.variants]
    return [v for v in names if (v in wanted if wanted is not None else v not in w.gpu_only)]


def run_forward(op: str, shapes: dict, dtype: str, device: str, bench, copy_gbps: float, variants, rows: list,
                stamp: dict | None = None, graph_bench=None):
    """Every (shape, variant) of workload `op`: check, time, append one row each."""
    import torch
    from profkit.kernels import get
    from profkit.kernels.timing import first_call_checked, input_sets, rotating

    w = get(op)
    for shape, p in shapes.items():
        t0 = time.perf_counter()
        try:
            states = input_sets(w, p, dtype, device)
            state = states[0]
        except Exception as e:  # noqa: BLE001
            rows.append({**(stamp or {}), "op": op, "shape": shape, "dtype": dtype, "variant": "-",
                         "error": repr(e)[:300]})
            log(f"{op}/{shape}: setup failed: {e!r}")
            continue
        mdl = w.model(p, dtype)
        for v in _variants(w, variants):
            row = {**(stamp or {}), "op": op, "shape": shape, "dtype": dtype, "variant": v, "params": p,
                   "model_bytes": mdl["bytes"], "model_flops": mdl["flops"], "own": v not in w.baselines}
            why = w.available(v)
            if v.startswith("compile") and time.perf_counter() > DEADLINE[0]:
                why = "time budget (--budget-s) spent: compile skipped"
            if why:
                row["skipped"] = why
                rows.append(row)
                continue
            fn = w.variants[v]
            try:
                r = first_call_checked(w, v, state, dtype)
                row.update(rel_err=r.rel_err, tol=r.tol, ok=r.ok)
                ms = bench(rotating(fn, states))
                row["ms"] = ms
                row["gbps"] = mdl["bytes"] / ms / 1e6
                row["pct_copy"] = 100 * row["gbps"] / copy_gbps
                if graph_bench is not None:
                    try:
                        row["graph_ms"] = gms = graph_bench(rotating(fn, states))
                        row["graph_pct_copy"] = 100 * mdl["bytes"] / gms / 1e6 / copy_gbps
                    except Exception as e:  # noqa: BLE001  (a variant that cannot be captured)
                        row["graph_error"] = repr(e)[:200]
                        torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001
                row["error"] = repr(e)[:300]
                log(f"{op}/{v}/{shape}: {e!r}")
                if os.environ.get("PROFKIT_BENCH_TRACE"):
                    traceback.print_exc()
            rows.append(row)
            log(f"{op}/{v}/{shape} {dtype}: " + (f"{row['ms']:.4f} ms {row['gbps']:.0f} GB/s "
                                                   f"({row['pct_copy']:.0f}% copy) err {row['rel_err']:.1e}"
                                                   if "ms" in row else row.get("error", "")))
        del state, states
        if device == "cuda":
            torch.cuda.empty_cache()
        log(f"  {op}/{shape}: {time.perf_counter() - t0:.1f}s")


def add_speedups(rows: list) -> None:
    """Per row of an own variant (and Liger): time of each baseline / its time, and x the
    better of compile and Liger ('best_peer')."""
    groups: dict = {}
    for r in rows:
        if "ms" in r:
            groups.setdefault((r["op"], r["shape"], r["dtype"]), {})[r["variant"]] = r["ms"]
    ggroups: dict = {}
    for r in rows:
        if "graph_ms" in r:
            ggroups.setdefault((r["op"], r["shape"], r["dtype"]), {})[r["variant"]] = r["graph_ms"]
    for r in rows:
        g = groups.get((r["op"], r["shape"], r["dtype"]), {})
        if "ms" not in r:
            continue
        if r.get("own") or r["variant"] == "liger":
            for base in ("eager", "compile", "liger"):
                if base != r["variant"] and base in g:
                    r[f"speedup_vs_{base}"] = g[base] / r["ms"]
        for key in ("best_peer", "speedup_vs_best_peer", "graph_best_peer", "graph_speedup_vs_best_peer"):
            r.pop(key, None)
        peers = {p: g[p] for p in _peers(r["variant"]) if p in g and p != r["variant"]}
        if r.get("own") and peers:
            best = min(peers, key=peers.get)
            r["best_peer"], r["speedup_vs_best_peer"] = best, peers[best] / r["ms"]
        gg = ggroups.get((r["op"], r["shape"], r["dtype"]), {})
        gpeers = {p: gg[p] for p in _peers(r["variant"]) if p in gg and p != r["variant"]}
        if r.get("own") and gpeers and "graph_ms" in r:
            best = min(gpeers, key=gpeers.get)
            r["graph_best_peer"], r["graph_speedup_vs_best_peer"] = best, gpeers[best] / r["graph_ms"]


def fmt(v, spec):
    return "" if v is None else format(v, spec)


def markdown(rows: list, info: dict, copy: dict) -> str:
    lines = [f"GPU: {info.get('gpu') or info['device']}  driver {info.get('driver') or '-'}  torch {info['torch']}  "
             f"triton {info['triton']}  {info['date']}",
             f"copy bandwidth (d2d torch copy_, read+write): {copy['gbps']:.0f} GB/s", "",
             "| op | shape | dtype | variant | ms | GB/s | % copy | x eager | x compile | x liger | x best peer "
             "| graph ms | graph % copy | graph x best peer | rel err | ok |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        if "skipped" in r or "error" in r:
            lines.append(f"| {r['op']} | {r['shape']} | {r['dtype']} | {r['variant']} | | | | | | | | | | | | "
                         f"{'skip: ' + r['skipped'] if 'skipped' in r else 'ERROR: ' + r['error'][:60]} |")
            continue
        lines.append(
            f"| {r['op']} | {r['shape']} | {r['dtype']} | {r['variant']} | {fmt(r.get('ms'), '.4f')} | "
            f"{fmt(r.get('gbps'), '.0f')} | {fmt(r.get('pct_copy'), '.0f')} | {fmt(r.get('speedup_vs_eager'), '.2f')} | "
            f"{fmt(r.get('speedup_vs_compile'), '.2f')} | {fmt(r.get('speedup_vs_liger'), '.2f')} | "
            f"{fmt(r.get('speedup_vs_best_peer'), '.2f')} | {fmt(r.get('graph_ms'), '.4f')} | "
            f"{fmt(r.get('graph_pct_copy'), '.0f')} | {fmt(r.get('graph_speedup_vs_best_peer'), '.2f')} | "
            f"{fmt(r.get('rel_err'), '.1e')} | {'yes' if r.get('ok') else 'NO'} |")
    return "\n".join(lines)


def summary(paths: list[str], variants=("triton", "triton_direct")) -> str:
    """One row per (op, shape, lab variant) across result files (one per GPU): % of that run's
    copy bandwidth and the speed-up over the faster of torch.compile and Liger (compile_direct
    for backward rows timed directly), by do_bench and by CUDA-graph replay."""
    runs = [json.load(open(p)) for p in paths]
    for r in runs:
        add_speedups(r["rows"])
    gpus = [r["info"].get("gpu") or "cpu" for r in runs]
    head = "| op | shape | variant | " + " | ".join(
        f"{g}: % copy (graph) | {g}: x best peer (graph) [peer]" for g in gpus) + " |"
    lines = [head, "|---|---|---|" + "---:|---:|" * len(runs)]
    keys = []
    for r in runs:
        for row in r["rows"]:
            k = (row["op"], row["shape"], row["variant"])
            if row["variant"] in variants and k not in keys:
                keys.append(k)
    for k in keys:
        cells = []
        for r in runs:
            row = next((x for x in r["rows"] if (x["op"], x["shape"], x["variant"]) == k and "ms" in x), None)
            if row is None:
                cells += ["-", "-"]
                continue
            peer = row.get("graph_best_peer") or row.get("best_peer") or "-"
            cells.append(f"{row['pct_copy']:.0f} ({fmt(row.get('graph_pct_copy'), '.0f') or '-'})")
            cells.append(f"{fmt(row.get('speedup_vs_best_peer'), '.2f') or '-'} "
                         f"({fmt(row.get('graph_speedup_vs_best_peer'), '.2f') or '-'}) [{peer}]")
        lines.append(f"| {k[0]} | {k[1]} | {k[2]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def pick_shapes(w, mode: str, only: list[str] | None = None) -> dict:
    """The shapes a run times: the workload's selftest, quick or registered shapes; only: of
    those, the ones whose name contains one of these strings."""
    if mode == "selftest":
        shapes = dict(w.selftest)
    elif mode == "quick":
        shapes = {s: w.shapes[s] for s in (w.quick or tuple(w.shapes)[:2])}
    else:
        shapes = dict(w.shapes)
    return {k: v for k, v in shapes.items() if not only or any(o in k for o in only)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="directory for kernels.json")
    ap.add_argument("--quick", action="store_true", help="each workload's quick shapes")
    ap.add_argument("--ops", help="comma list of workloads (default: every bench='kernels' workload)")
    ap.add_argument("--variants", help="comma list of variants (default: all)")
    ap.add_argument("--shapes", help="comma list: only the shapes whose names contain one of these")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile variant")
    ap.add_argument("--no-backward", action="store_true", help="skip the <op>_bwd workloads")
    ap.add_argument("--budget-s", type=float, default=400.0,
                    help="after this many seconds, skip the (slow to compile) torch.compile variant")
    ap.add_argument("--graph", action="store_true",
                    help="also time each row as CUDA-graph replays (GPU time only, no launcher host time)")
    ap.add_argument("--selftest", action="store_true", help="tiny CPU run under TRITON_INTERPRET=1")
    ap.add_argument("--summary", nargs="+", metavar="KERNELS_JSON",
                    help="only: print the lab variants (triton, triton_direct, or --variants) of these result "
                         "files (one per GPU) side by side")
    a = ap.parse_args(argv)
    if a.summary:  # --variants: the lab variants to list (default triton, triton_direct)
        print(summary(a.summary, *([tuple(a.variants.split(","))] if a.variants else [])))
        return 0
    from profkit.kernels import benched

    if not a.out and not a.selftest:
        ap.error("--out DIR is required (except with --selftest)")
    import torch
    from profkit.kernels.timing import copy_bandwidth as cb
    from profkit.kernels.timing import graph_timer, header, stamp, tuned_choices
    from profkit.kernels.timing import timer as mk_timer

    device = "cpu" if a.selftest else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        log("no CUDA device: use --selftest for the CPU smoke run")
        return 2
    t_start = time.perf_counter()
    DEADLINE[0] = t_start + a.budget_s
    info = header(device)
    row_stamp = stamp(info)
    bench = mk_timer(device)
    registry = benched("kernels")
    ops = a.ops.split(",") if a.ops else [op for op in registry if not (a.no_backward and op.endswith("_bwd"))]
    unknown = [op for op in ops if op not in registry]
    if unknown:
        ap.error(f"not a kernels workload: {', '.join(unknown)}; known: {', '.join(registry)}")
    variants = set(a.variants.split(",")) if a.variants else None
    if a.no_compile or a.selftest:
        variants = {v for v in (variants or {v for w in registry.values() for v in list(w.variants) + list(w.requires)
                                             if v not in w.gpu_only}) if not v.startswith("compile")}
    copy = cb(device, bench)
    log(f"copy bandwidth: {copy['gbps']:.0f} GB/s ({copy['ms']:.3f} ms for {copy['bytes'] / 2**30:.1f} GiB r+w)")
    mode = "selftest" if a.selftest else "quick" if a.quick else "default"
    rows: list = []
    for op in ops:
        run_forward(op, pick_shapes(registry[op], mode, a.shapes.split(",") if a.shapes else None), a.dtype, device, bench, copy["gbps"], variants, rows,
                    row_stamp, graph_timer() if (a.graph and device == "cuda") else None)
        if a.out:  # partial results survive a time limit
            os.makedirs(a.out, exist_ok=True)
            with open(os.path.join(a.out, "kernels.json"), "w") as f:
                json.dump({"info": info, "copy": copy, "rows": rows, "partial": True}, f, indent=1, default=str)
    add_speedups(rows)
    info["wall_s"] = round(time.perf_counter() - t_start, 1)
    info["mode"] = mode
    info["timing"] = ("kernels/timing.timer: triton.testing.do_bench median (warmup 25 ms, rep 100 ms)"
                      + ("; graph_*: kernels/timing.graph_timer (do_bench_cudagraph median)" if a.graph else ""))
    result = {"info": info, "copy": copy, "rows": rows, "tuned": tuned_choices()}
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "kernels.json"), "w") as f:
            json.dump(result, f, indent=1, default=str)
    print(markdown(rows, info, copy))
    bad = [r for r in rows if r.get("error") or (r.get("ok") is False)]
    own_bad = [r for r in bad if r.get("own")]
    log(f"{len(rows)} rows, {len(bad)} failing ({len(own_bad)} of the lab's own), {info['wall_s']}s")
    return 1 if own_bad else 0


if __name__ == "__main__":
    sys.exit(main())
