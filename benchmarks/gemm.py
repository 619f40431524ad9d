#!/usr/bin/env python3
"""GEMM family benchmark: every workload the registry marks bench="gemm" (the matmul ladder, fp8
GEMM, fused RMSNorm + linear, the fused gated MLP).

    python3 benchmarks/gemm.py --out DIR [--quick | --full]
    python3 benchmarks/gemm.py --selftest [--out DIR]      # CPU, TRITON_INTERPRET=1, tiny shapes

On the GPU: measures the bf16 peak (cuBLAS 8192^3, random data) and the fp8 peak
(torch._scaled_mm 8192^3, per-tensor scales); then for every workload x variant x shape
checks the output against the float64 reference (Workload.check, policy "gemm", computed on
the GPU), times it with kernels/timing.timer (do_bench median), and reports TFLOP/s, GB/s (minimum HBM bytes of the
model), % of the variant's peer in the same run (Workload.peers, else the workload's first baseline:
cuBLAS / _scaled_mm / eager) and % of the measured peak. The fused RMSNorm + linear rows also give, per projection, the crossover M: the
smallest M at which eager (norm + cuBLAS) beats the fused kernel.

Writes DIR/gemm.json (rows, each stamped with GPU, driver, torch/triton and date; GPU, driver, torch/triton versions, date, autotune choices) and
prints a markdown table. The registered shapes keep the default run within ~4 minutes;
--quick runs each workload's quick shapes, --full a module's all_shapes() (every LLM
projection x M in 1..8192; much longer).
Import path: profkit.kernels (run from any cwd with the package installed).
"""
from __future__ import annotations

import os
import sys

if "--selftest" in sys.argv:  # before triton is imported anywhere
    os.environ["TRITON_INTERPRET"] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def timer(device: str, quick: bool):
    from profkit.kernels.timing import timer as mk_timer

    return mk_timer(device, *((5, 25) if quick else (10, 60)))


def measure_peaks(device: str, bench) -> dict:
    import torch

    out = {}
    n = 8192 if device == "cuda" else 64
    flops = 2 * n ** 3
    torch.manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    ms = bench(lambda: a @ b)
    out["bf16_tflops"] = flops / ms / 1e9
    out["bf16_how"] = f"cuBLAS torch.matmul bf16 {n}^3 random, median"
    try:
        af = a.to(torch.float8_e4m3fn)
        bf = b.to(torch.float8_e4m3fn).t().contiguous().t()  # column-major, as _scaled_mm wants
        one = torch.ones((), device=device, dtype=torch.float32)
        ms = bench(lambda: torch._scaled_mm(af, bf, scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
        out["fp8_tflops"] = flops / ms / 1e9
        out["fp8_how"] = f"torch._scaled_mm e4m3 {n}^3 per-tensor scales, bf16 out, median"
    except Exception as e:  # CPU builds without fp8 _scaled_mm
        out["fp8_tflops"] = None
        out["fp8_how"] = f"unavailable: {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
    del a, b
    return out


GRAPH_MAX_M = 64  # --graph: decode shapes also timed as CUDA-graph replays


def run_workload(w, shapes: dict, dtype: str, device: str, bench, peak: float | None, rows: list,
                 stamp: dict | None = None, variants=None, graph_bench=None):
    """Every (shape, variant) of GEMM workload `w`: check (Workload.check, policy gemm), time,
    TFLOP/s, GB/s, % of the variant's peer (Workload.peers, else the first baseline) of the same
    shape in the same run, % of the measured peak."""
    import torch

    for sname, p in shapes.items():
        t0 = time.perf_counter()
        torch.manual_seed(0)
        state = w.setup(p, dtype, device)
        model = w.model(p, dtype)
        shape_rows = []
        for vname, fn in w.variants.items():
            if variants and vname not in variants:
                continue
            row = {**(stamp or {}), "op": w.op, "variant": vname, "shape": sname, "dtype": dtype,
                   **{k: p[k] for k in ("M", "N", "K")}, "flops": model["flops"], "bytes": model["bytes"],
                   "own": vname not in w.baselines}
            why = w.available(vname)
            if why:
                shape_rows.append({**row, "ok": None, "error": f"skipped: {why}"})
                continue
            try:
                out = fn(state)  # first call: compile / autotune, outside the timing
                r = w.check(state, vname, out, dtype)
                row.update(ok=r.ok, rel_fro=r.rel_err, max_rel=r.max_rel, tol_rel_fro=r.tol,
                           expected_inexact=vname in w.inexact)
                del out
                ms = bench(lambda: fn(state))
                row.update(ms=ms, tflops=model["flops"] / ms / 1e9, gbps=model["bytes"] / ms / 1e6,
                           pct_peak=(100 * model["flops"] / ms / 1e9 / peak) if peak else None)
                if graph_bench is not None and p["M"] <= GRAPH_MAX_M:
                    try:
                        row["graph_ms"] = graph_bench(lambda: fn(state))
                        row["graph_gbps"] = model["bytes"] / row["graph_ms"] / 1e6
                    except Exception as e:  # noqa: BLE001
                        row["graph_error"] = repr(e)[:200]
                        torch.cuda.synchronize()
            except Exception as e:
                msg = str(e).strip().splitlines()
                row.update(ok=None, error=f"{type(e).__name__}: {msg[0][:240] if msg else ''}")
                if not isinstance(e, NotImplementedError):
                    log(traceback.format_exc(limit=3))
            shape_rows.append(row)
        for row in shape_rows:  # % of the peer measured in this run, same shape
            base = w.peers.get(row["variant"]) or (w.baselines[0] if w.baselines else None)
            b = next((r for r in shape_rows if r["variant"] == base and r.get("ms")), None)
            row["baseline"] = base
            row["pct_baseline"] = 100 * b["ms"] / row["ms"] if (b and row.get("ms")) else None
            # against the fastest baseline (eager only where it is the only one), by each timer
            for t, pre in (("ms", ""), ("graph_ms", "graph_")):
                timed = {r["variant"]: r[t] for r in shape_rows if r["variant"] in w.baselines and r.get(t)}
                if len(timed) > 1:
                    timed.pop("eager", None)
                if row["own"] and timed and row.get(t):
                    best = min(timed, key=timed.get)
                    row[f"{pre}best_baseline"], row[f"{pre}speedup_vs_best"] = best, timed[best] / row[t]
        rows.extend(shape_rows)
        del state
        if device == "cuda":
            torch.cuda.empty_cache()
        log(f"{w.op} {sname}: " + ", ".join(
            f"{r['variant']}={r['ms']:.4g}ms{'' if r['ok'] else ' WRONG'}" if r.get("ms") else f"{r['variant']}=ERR"
            for r in shape_rows) + f"  ({time.perf_counter() - t0:.1f}s)")


def crossovers(rows: list) -> list[dict]:
    """Per rmsnorm_linear projection: fused vs eager over M, and the first M where eager wins."""
    out = {}
    for r in rows:
        if r["op"] != "rmsnorm_linear" or not r.get("ms"):
            continue
        proj = r["shape"].rsplit("-m", 1)[0]
        out.setdefault(proj, {}).setdefault(r["M"], {})[r["variant"]] = r["ms"]
    res = []
    for proj, by_m in out.items():
        ms = sorted(m for m in by_m if {"triton", "eager"} <= set(by_m[m]))
        speed = {m: by_m[m]["eager"] / by_m[m]["triton"] for m in ms}
        eager_wins = [m for m in ms if speed[m] < 1.0]
        res.append({"proj": proj, "M": ms, "fused_speedup": [round(speed[m], 3) for m in ms],
                    "crossover_M": eager_wins[0] if eager_wins else None,
                    "note": ("eager faster from M=%d" % eager_wins[0]) if eager_wins
                    else f"fused faster at every M measured (up to {ms[-1] if ms else '-'})"})
    return res


def fmt(v, spec):
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def markdown(rows: list, peaks: dict, info: dict, xo: list) -> str:
    lines = [f"GPU: {info.get('gpu')} (driver {info.get('driver')}), torch {info['torch']}, triton {info['triton']}, {info['date']}",
             f"peak bf16 {fmt(peaks.get('bf16_tflops'), '.0f')} TFLOP/s, fp8 {fmt(peaks.get('fp8_tflops'), '.0f')} TFLOP/s (measured)",
             "",
             "| op | variant | shape | ms | TFLOP/s | GB/s | % baseline | x best baseline | graph ms | graph x best "
             "| % peak | rel err | max rel | ok |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        if r.get("error"):
            lines.append(f"| {r['op']} | {r['variant']} | {r['shape']} | - | - | - | - | - | - | - | - | - | - | "
                         f"{r['error'][:60]} |")
            continue
        ok = "yes" if r["ok"] else ("NO (expected: fast accumulation)" if r.get("expected_inexact") else "NO")
        lines.append(f"| {r['op']} | {r['variant']} | {r['shape']} | {fmt(r['ms'], '.4f')} | {fmt(r['tflops'], '.1f')} | "
                     f"{fmt(r['gbps'], '.0f')} | {fmt(r.get('pct_baseline'), '.0f')} | "
                     f"{fmt(r.get('speedup_vs_best'), '.2f')} | {fmt(r.get('graph_ms'), '.4f')} | "
                     f"{fmt(r.get('graph_speedup_vs_best'), '.2f')} | {fmt(r.get('pct_peak'), '.0f')} | "
                     f"{fmt(r['rel_fro'], '.1e')} | {fmt(r.get('max_rel'), '.1e')} | {ok} |")
    if xo:
        lines += ["", "fused rmsnorm+linear vs eager (speedup = eager ms / fused ms):"]
        for x in xo:
            lines.append(f"- {x['proj']}: " + ", ".join(f"M={m}: {s}x" for m, s in zip(x["M"], x["fused_speedup"]))
                         + f" -> {x['note']}")
    return "\n".join(lines)


def summary(paths: list[str]) -> str:
    """The lab's variants of several gemm.json files (one per GPU) side by side: % of the
    variant's peer (cuBLAS / _scaled_mm / cuBLAS + SwiGLU), x the fastest baseline, by do_bench
    and (decode shapes) by CUDA-graph replay; max_rel marks the fp8 accuracy."""
    runs = [json.load(open(p)) for p in paths]
    gpus = [r["env"].get("gpu") or "cpu" for r in runs]
    lines = ["| op | shape | variant | " + " | ".join(f"{g}: % peer | {g}: x best (graph) | {g}: ok (max rel)"
                                                       for g in gpus) + " |",
             "|---|---|---|" + "---:|---:|---|" * len(runs)]
    keys = []
    for r in runs:
        for row in r["rows"]:
            k = (row["op"], row["shape"], row["variant"])
            if row.get("own") and row.get("ms") and k not in keys:
                keys.append(k)
    for k in keys:
        cells = []
        for r in runs:
            row = next((x for x in r["rows"] if (x["op"], x["shape"], x["variant"]) == k and x.get("ms")), None)
            if row is None:
                cells += ["-", "-", "-"]
                continue
            cells.append(fmt(row.get("pct_baseline"), ".0f"))
            cells.append(f"{fmt(row.get('speedup_vs_best'), '.2f')} ({fmt(row.get('graph_speedup_vs_best'), '.2f')})")
            ok = "yes" if row["ok"] else ("no, expected" if row.get("expected_inexact") else "NO")
            cells.append(f"{ok} ({fmt(row.get('max_rel'), '.1e')})")
        lines.append(f"| {k[0]} | {k[1]} | {k[2]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="directory for gemm.json")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="each workload's quick shapes, shorter timing")
    g.add_argument("--full", action="store_true", help="every LLM projection x M (long)")
    ap.add_argument("--selftest", action="store_true", help="tiny CPU run under TRITON_INTERPRET=1")
    ap.add_argument("--only", action="append", help="run only these workloads (repeatable)")
    ap.add_argument("--variants", help="comma list of variants (default: all)")
    ap.add_argument("--graph", action="store_true", help=f"decode shapes (M <= {GRAPH_MAX_M}) also as CUDA-graph replays")
    ap.add_argument("--skip-shapes", default="", help="comma list of shape names not to run (e.g. measured already)")
    ap.add_argument("--summary", nargs="+", metavar="GEMM_JSON", help="only: print these result files side by side")
    a = ap.parse_args(argv)
    if a.summary:
        print(summary(a.summary))
        return 0
    if not a.out and not a.selftest:
        ap.error("--out DIR is required (except with --selftest)")

    import importlib

    import torch
    from profkit.kernels import benched
    from profkit.kernels.timing import header, stamp

    device = "cpu" if a.selftest else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        log("no CUDA device: use --selftest for the CPU smoke run")
        return 2
    t_start = time.perf_counter()
    bench = timer(device, a.quick)
    info = header(device)
    row_stamp = stamp(info)
    log(f"{info.get('gpu') or 'CPU (interpreter)'} torch {info['torch']} triton {info['triton']}")
    peaks = measure_peaks(device, bench)
    log(f"peaks: bf16 {peaks['bf16_tflops']:.1f} TFLOP/s, fp8 {fmt(peaks['fp8_tflops'], '.1f')} TFLOP/s")
    registry = benched("gemm")
    if a.only:
        unknown = [op for op in a.only if op not in registry]
        if unknown:
            ap.error(f"not a gemm workload: {', '.join(unknown)}; known: {', '.join(registry)}")
    variants = set(a.variants.split(",")) if a.variants else None

    rows: list = []
    choices: dict = {}
    extra: dict = {}
    for op, w in registry.items():
        if a.only and op not in a.only:
            continue
        mod = importlib.import_module(w.setup.__module__)
        if a.selftest:
            shapes = dict(w.selftest)
        elif a.full and hasattr(mod, "all_shapes"):
            shapes = mod.all_shapes()
        elif a.quick:
            shapes = {k: w.shapes[k] for k in (w.quick or tuple(w.shapes)[:2])}
        else:
            shapes = dict(w.shapes)
        shapes = {k: v for k, v in shapes.items() if k not in a.skip_shapes.split(",")}
        peak = peaks["fp8_tflops"] if w.default_dtype == "fp8" else peaks["bf16_tflops"]
        t = time.perf_counter()
        gb = None
        if a.graph and device == "cuda":
            from profkit.kernels.timing import graph_timer

            gb = graph_timer(25 if a.quick else 60)
        run_workload(w, shapes, w.default_dtype, device, bench, peak, rows, row_stamp, variants, gb)
        log(f"== {op}: {time.perf_counter() - t:.1f}s")
        if hasattr(mod, "autotune_choices"):
            choices.update(mod.autotune_choices())
        if hasattr(mod, "warp_specialize_status"):
            extra["warp_specialize"] = mod.warp_specialize_status()
        if hasattr(mod, "TILED_CONFIG"):
            extra["tiled_config"] = mod.TILED_CONFIG
        if a.out:  # partial results survive a time limit
            os.makedirs(a.out, exist_ok=True)
            with open(os.path.join(a.out, "gemm.json"), "w") as f:
                json.dump({"env": info, "peaks": peaks, "rows": rows, "partial": True}, f, indent=1, default=str)

    xo = crossovers(rows)
    from profkit.kernels.timing import tuned_choices

    result = {"env": info, "peaks": peaks, "rows": rows, "rmsnorm_linear_crossover": xo,
              "autotune_configs": choices, "tuned": tuned_choices(), **extra,
              "timing": "kernels/timing.timer: triton.testing.do_bench median",
              "mode": "selftest" if a.selftest else "quick" if a.quick else "full" if a.full else "default",
              "wall_s": round(time.perf_counter() - t_start, 1)}
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        path = os.path.join(a.out, "gemm.json")
        with open(path, "w") as f:
            json.dump(result, f, indent=1, default=str)
        log(f"wrote {path}")
    print(markdown(rows, peaks, info, xo))
    bad = [r for r in rows if r.get("ok") is False and not r.get("expected_inexact")]
    if bad:
        log(f"{len(bad)} WRONG results: " + ", ".join(f"{r['op']}/{r['variant']}/{r['shape']}" for r in bad))
    log(f"total {result['wall_s']}s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
