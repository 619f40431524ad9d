#!/usr/bin/env python3
"""Kernel lab IV on the GPU: CUDA C++ beside Triton (RMSNorm, RoPE, SwiGLU) and the SGEMM ladder.

    python3 benchmarks/cuda_lab.py --out DIR [--quick]
    python3 benchmarks/cuda_lab.py --markdown DIR/cuda.json      # re-render the tables

One process, in this order, writing DIR/cuda.json after each part (a crash keeps what ran):
1. builds the four CUDA libraries (nvcc, in parallel; cache hits are reported as such);
2. measures the device-to-device copy bandwidth (benchmarks/kernels.py's copy_bandwidth);
3. Triton vs CUDA C++ per operator and registered shape through benchmarks/kernels.py's
   run_forward: the output checked once against the float64 reference with the lab
   tolerance, then do_bench median over rotated input copies, GB/s from the minimum-bytes
   model and % of the copy bandwidth of this run;
4. correctness only, for the code paths the timed shapes do not take: fp16 and fp32, Gemma
   RMSNorm, element-by-element rows, GPT-J and partial RoPE, in-place RoPE on a fused qkv
   buffer, unaligned SwiGLU;
5. the SGEMM ladder: every step and cuBLAS (TF32 off) per shape, checked against float64
   (kernels/_numerics.measure, policy gemm, fp32), timed with do_bench median as benchmarks/gemm.py
   (warmup 10 ms, rep 60 ms), GFLOP/s and % of cuBLAS of the same shape in the same run;
   the tile shapes the tuned / warptile steps picked, with the times they were picked on.
With --graph, every timed row is also timed as CUDA-graph replays (triton.testing.
do_bench_cudagraph, median): do_bench times one call between two events after an L2 flush,
so where a launcher's host time outlasts the flush (Triton's Python launcher at a few tens of
microseconds) its number holds host time too; the replay holds only GPU time.
Exit status 1 if any CUDA variant fails its check.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent

OPS = {  # operator -> timed shapes (the registry's)
    "rmsnorm": ["llama8b-t1", "llama8b-t4096", "qwen7b-t4096", "llama8b-t32768", "qwen7b-t32768"],
    "rope": ["llama8b-t1", "llama8b-t4096", "qwen7b-t4096", "llama8b-t32768", "phi2partial-t4096"],
    "swiglu": ["llama8b-t1", "llama8b-t4096", "qwen7b-t4096", "llama8b-t32768"],
}
QUICK_OPS = {"rmsnorm": ["llama8b-t4096"], "rope": ["llama8b-t4096"], "swiglu": ["llama8b-t4096"]}
SGEMM_SHAPES = ["1024", "2048", "4096", "m4096-n2048-k1024"]
QUICK_SGEMM = ["1024"]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def bench_kernels():
    """benchmarks/kernels.py as a module (timer, env_info, copy_bandwidth, run_forward)."""
    spec = importlib.util.spec_from_file_location("profkit_bench_kernels", HERE / "kernels.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build_all() -> list[dict]:
    from profkit.kernels import _cuda_build

    def one(name):
        t = time.perf_counter()
        cached = _cuda_build.library_path(name).exists()
        path = _cuda_build.build(name)
        return {"lib": name, "cached": cached, "s": round(time.perf_counter() - t, 2), "path": str(path)}

    with ThreadPoolExecutor(len(_cuda_build.NAMES)) as pool:
        out = list(pool.map(one, _cuda_build.NAMES))
    for r in out:
        log(f"build {r['lib']}: {'cached' if r['cached'] else 'compiled'} in {r['s']} s")
    return out


def add_cuda_vs_triton(rows: list) -> None:
    ms = {(r["op"], r["shape"], r["dtype"], r["variant"]): r["ms"] for r in rows if "ms" in r}
    for r in rows:
        t = ms.get((r["op"], r["shape"], r["dtype"], "triton"))
        if r["variant"] == "cuda" and "ms" in r and t:
            r["speedup_vs_triton"] = t / r["ms"]


def graph_ms(fn) -> float:
    """Median ms per call over CUDA-graph replays of many calls (no host time in it)."""
    from triton.testing import do_bench_cudagraph

    return float(do_bench_cudagraph(fn, rep=100, return_mode="median"))


def add_graph_times(kb, op: str, names: list[str], rows: list, copy_gbps: float) -> None:
    """graph_ms / graph_gbps / graph_pct_copy on the timed rows of `op`, same rotated inputs."""
    import torch

    w = importlib.import_module(f"profkit.kernels.{op}").WORKLOAD
    for shape in names:
        p = w.shapes[shape]
        state = w.setup(p, "bf16", "cuda")
        states = [state] + [w.setup(p, "bf16", "cuda") for _ in range(kb._n_copies(state, "cuda") - 1)]
        nbytes = w.model(p, "bf16")["bytes"]
        for r in rows:
            if (r["op"], r["shape"]) != (op, shape) or "ms" not in r:
                continue
            try:
                r["graph_ms"] = ms = graph_ms(kb._rotating(w.variants[r["variant"]], states))
                r["graph_gbps"] = nbytes / ms / 1e6
                r["graph_pct_copy"] = 100 * r["graph_gbps"] / copy_gbps
                log(f"{op}/{r['variant']}/{shape} graph: {ms:.4f} ms ({r['graph_pct_copy']:.0f}% copy)")
            except Exception as e:  # noqa: BLE001
                r["graph_error"] = repr(e)[:300]
                log(f"{op}/{r['variant']}/{shape} graph: {e!r}")
        del state, states
        torch.cuda.empty_cache()
    ms = {(r["shape"], r["variant"]): r["graph_ms"] for r in rows if r["op"] == op and "graph_ms" in r}
    for r in rows:
        t = ms.get((r["shape"], "triton"))
        if r["op"] == op and r["variant"] == "cuda" and "graph_ms" in r and t:
            r["graph_speedup_vs_triton"] = t / r["graph_ms"]


# ---- correctness of the paths the timed shapes do not take ------------------------------------

def _check(name, dtype, outs, refs):
    from profkit.kernels._numerics import rel_err, tolerance

    outs = outs if isinstance(outs, tuple) else (outs,)
    refs = refs if isinstance(refs, tuple) else (refs,)
    e = max(rel_err(o, r) for o, r in zip(outs, refs))
    tol = tolerance(dtype)
    return {"check": name, "dtype": dtype, "rel_err": e, "tol": tol, "ok": bool(e <= tol)}


def path_checks(device: str) -> list[dict]:
    """Each check on a GPU-sized problem; on the CPU (tests, emulated build) a tiny one."""
    import torch
    from profkit.kernels import rmsnorm, rope, swiglu, torch_dtype
    from profkit.kernels._cuda_ops import rmsnorm_cuda, rope_cuda, swiglu_cuda

    out = []

    def add(name, dtype, fn):
        try:
            out.append(_check(name, dtype, *fn(torch_dtype(dtype))))
        except Exception as e:  # noqa: BLE001
            out.append({"check": name, "dtype": dtype, "ok": False, "error": repr(e)[:300]})
        r = out[-1]
        log(f"check {name} {dtype}: " + (f"err {r['rel_err']:.1e} ({'ok' if r['ok'] else 'FAIL'})" if "rel_err" in r
                                         else r["error"]))

    def rms(n, gemma=False, rows=64):
        def f(dt):
            x = torch.randn(rows, n, device=device, dtype=dt) * 3
            w = (1 + 0.1 * torch.randn(n, device=device)).to(dt)
            return rmsnorm_cuda(x, w, gemma=gemma), rmsnorm.rmsnorm_reference(x, w, gemma=gemma)
        return f

    def rot(t, hq, hk, d, rd=None, inter=False, fused=False):
        def f(dt):
            cos, sin = rope.rope_cache(4096, rd or d, device=device)
            pos = torch.randint(0, 4096, (t,), device=device)
            if fused:  # q, k as views of one qkv buffer, rotated in place
                qkv = torch.randn(t, (hq + 2 * hk) * d, device=device, dtype=dt)
                q = qkv[:, : hq * d].view(t, hq, d)
                k = qkv[:, hq * d: (hq + hk) * d].view(t, hk, d)
                ref = rope.rope_reference(q, k, cos, sin, pos, rd, inter)
                return rope_cuda(q, k, cos, sin, pos, rd, inter, q_out=q, k_out=k), ref
            q = torch.randn(t, hq, d, device=device, dtype=dt)
            k = torch.randn(t, hk, d, device=device, dtype=dt)
            return rope_cuda(q, k, cos, sin, pos, rd, inter), rope.rope_reference(q, k, cos, sin, pos, rd, inter)
        return f

    def glu(n, offset=0):
        def f(dt):
            g = torch.randn(n + offset, device=device, dtype=dt)[offset:] * 4
            u = torch.randn(n + offset, device=device, dtype=dt)[offset:]
            return swiglu_cuda(g, u), swiglu.swiglu_reference(g, u)
        return f

    big = device == "cuda"
    rows, tok, n = (64, 512, (1 << 20) + 3) if big else (2, 3, 1003)
    for dt in ("bf16", "fp16", "fp32"):
        add(f"rmsnorm {rows}x4096", dt, rms(4096, rows=rows))
        add(f"rmsnorm {rows}x4096 gemma", dt, rms(4096, gemma=True, rows=rows))
        add(f"rmsnorm {rows}x203 (element path)", dt, rms(203, rows=rows))
        add("rmsnorm 2x70000 (loop kernel)", dt, rms(70000, rows=2))
        add(f"rope {tok} tok llama NeoX", dt, rot(tok, 32, 8, 128))
        add(f"rope {tok} tok GPT-J", dt, rot(tok, 16, 16, 64, inter=True))
        add(f"rope {tok} tok partial 32/80", dt, rot(tok, 32, 32, 80, rd=32))
        add(f"rope {tok} tok partial GPT-J 32/80", dt, rot(tok, 8, 8, 80, rd=32, inter=True))
        add(f"rope {tok} tok in place, fused qkv", dt, rot(tok, 32, 8, 128, fused=True))
        add(f"swiglu {n}", dt, glu(n))
        add(f"swiglu {n} unaligned", dt, glu(n, offset=1))
    return out


# ---- the SGEMM ladder -------------------------------------------------------------------------

def sgemm_rows(shapes: list[str], device: str, bench, rows: list, save, graph: bool = False) -> dict:
    import torch
    from profkit.kernels import sgemm
    from profkit.kernels._numerics import measure

    w = sgemm.WORKLOAD
    for shape in shapes:
        p = w.shapes[shape] if shape in w.shapes else _shape(shape)
        s = w.setup(p, "fp32", device)
        ref = w.reference(s, "cublas")
        flops = 2 * p["M"] * p["N"] * p["K"]
        for v in [*sgemm.STEPS, "cublas"]:
            row = {"op": "sgemm", "shape": shape, "variant": v, "params": p, "flops": flops}
            try:
                out = w.variants[v](s)  # first call: autotunes tuned / warptile
                r = measure(out, ref, "fp32", policy="gemm")
                row.update(ok=r.ok, rel_fro=r.rel_err, max_rel=r.max_rel, tol_rel_fro=r.tol, tol_max_rel=r.tol_max_rel)
                del out
                row["ms"] = ms = bench(lambda: w.variants[v](s))
                row["gflops"] = flops / ms / 1e6
                if graph:
                    row["graph_ms"] = gms = graph_ms(lambda: w.variants[v](s))
                    row["graph_gflops"] = flops / gms / 1e6
            except Exception as e:  # noqa: BLE001
                row["ok"] = False
                row["error"] = repr(e)[:300]
                if os.environ.get("PROFKIT_BENCH_TRACE"):
                    traceback.print_exc()
            rows.append(row)
            log(f"sgemm/{v}/{shape}: " + (f"{row['ms']:.3f} ms {row['gflops']:.0f} GFLOP/s err {row['rel_fro']:.1e}"
                                          if "ms" in row else row.get("error", "")))
        base = next((r["ms"] for r in rows if r["shape"] == shape and r["variant"] == "cublas" and "ms" in r), None)
        gbase = next((r["graph_ms"] for r in rows if r["shape"] == shape and r["variant"] == "cublas"
                      and "graph_ms" in r), None)
        for r in rows:
            if r["shape"] == shape and "ms" in r and base:
                r["pct_cublas"] = 100 * base / r["ms"]
            if r["shape"] == shape and "graph_ms" in r and gbase:
                r["graph_pct_cublas"] = 100 * gbase / r["graph_ms"]
        del s, ref
        if device == "cuda":
            torch.cuda.empty_cache()
        save()
    return sgemm.autotune_choices()


def _shape(name: str) -> dict:
    """'MxNxK' or one number for a square problem (for --sgemm-shapes beyond the registry)."""
    dims = [int(x) for x in name.split("x")]
    m, n, k = dims if len(dims) == 3 else dims * 3
    return {"M": m, "N": n, "K": k}


# ---- tables -----------------------------------------------------------------------------------

def fmt(v, spec):
    return "" if v is None else format(v, spec)


def markdown(res: dict) -> str:
    info, copy = res["info"], res.get("copy") or {}
    lines = [f"GPU: {info.get('gpu')}  driver {info.get('driver')}  CUDA (torch) {info.get('cuda')}  "
             f"nvcc {info.get('nvcc', '-')}  arch {info.get('arch', '-')}  torch {info.get('torch')}  "
             f"triton {info.get('triton')}  {info.get('date')}",
             f"copy bandwidth (d2d torch copy_, read+write): {fmt(copy.get('gbps'), '.0f')} GB/s", "",
             "### Triton vs CUDA C++", "",
             "do_bench: one call after an L2 flush (host time included where it outlasts the flush); "
             "graph: CUDA-graph replay, GPU time only", "",
             "| op | shape | dtype | variant | ms | GB/s | % copy | CUDA vs Triton | graph ms | graph % copy | "
             "CUDA vs Triton (graph) | rel err | ok |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in res.get("rows", []):
        if "ms" not in r:
            lines.append(f"| {r['op']} | {r['shape']} | {r['dtype']} | {r['variant']} | | | | | | | | | "
                         f"{'skip: ' + r['skipped'] if 'skipped' in r else 'ERROR: ' + r.get('error', '')[:60]} |")
            continue
        lines.append(f"| {r['op']} | {r['shape']} | {r['dtype']} | {r['variant']} | {r['ms']:.4f} | {r['gbps']:.0f} | "
                     f"{r['pct_copy']:.0f} | {fmt(r.get('speedup_vs_triton'), '.2f')} | {fmt(r.get('graph_ms'), '.4f')} | "
                     f"{fmt(r.get('graph_pct_copy'), '.0f')} | {fmt(r.get('graph_speedup_vs_triton'), '.2f')} | "
                     f"{fmt(r.get('rel_err'), '.1e')} | {'yes' if r.get('ok') else 'NO'} |")
    checks = res.get("checks", [])
    if checks:
        bad = [c for c in checks if not c["ok"]]
        lines += ["", f"Correctness of the other code paths (CUDA C++ vs float64): {len(checks) - len(bad)} of "
                  f"{len(checks)} pass" + ("" if not bad else ": failing " + ", ".join(
                      f"{c['check']} {c['dtype']}" for c in bad))]
    sg = res.get("sgemm", [])
    if sg:
        lines += ["", "### SGEMM ladder (fp32, CUDA C++) vs cuBLAS (TF32 off)", "",
                  "| shape | step | ms | GFLOP/s | % of cuBLAS | graph GFLOP/s | graph % of cuBLAS | rel err | ok |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---|"]
        for r in sg:
            if "ms" not in r:
                lines.append(f"| {r['shape']} | {r['variant']} | | | | | | | ERROR: {r.get('error', '')[:60]} |")
                continue
            lines.append(f"| {r['shape']} | {r['variant']} | {r['ms']:.3f} | {r['gflops']:.0f} | "
                         f"{fmt(r.get('pct_cublas'), '.1f')} | {fmt(r.get('graph_gflops'), '.0f')} | "
                         f"{fmt(r.get('graph_pct_cublas'), '.1f')} | {fmt(r.get('rel_fro'), '.1e')} | "
                         f"{'yes' if r.get('ok') else 'NO'} |")
    tuned = res.get("autotune") or {}
    if tuned:
        lines += ["", "Tile shapes picked by timing (tuned / warptile):", ""]
        for key, rec in sorted(tuned.items()):
            lines.append(f"- `{key.split('|')[-2]}` {key.split('|')[-1]}: `{rec['config']}`" +
                         (f" ({min(rec['ms'].values()):.3f} ms; slowest candidate {max(rec['ms'].values()):.3f} ms)"
                          if rec.get("ms") else ""))
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="directory for cuda.json")
    ap.add_argument("--quick", action="store_true", help="one shape per operator, SGEMM at 1024 only")
    ap.add_argument("--sgemm-shapes", help="comma list (registry names or MxNxK)")
    ap.add_argument("--no-ops", action="store_true", help="skip the RMSNorm / RoPE / SwiGLU part")
    ap.add_argument("--no-sgemm", action="store_true", help="skip the SGEMM ladder")
    ap.add_argument("--graph", action="store_true", help="also time every row as CUDA-graph replays")
    ap.add_argument("--markdown", metavar="JSON", help="print the tables of an earlier run and exit")
    ap.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # cpu: tests, emulated build
    a = ap.parse_args(argv)
    if a.markdown:
        print(markdown(json.loads(Path(a.markdown).read_text())))
        return 0
    if not a.out:
        ap.error("--out DIR is required")
    import torch
    from profkit.kernels import _cuda_build

    device = a.device
    if device == "cuda" and not torch.cuda.is_available():
        log("no CUDA device")
        return 2
    t0 = time.perf_counter()
    kb = bench_kernels()
    info = kb.env_info(device)
    info["timing"] = "do_bench median" + (" and do_bench_cudagraph median" if a.graph else "")
    res: dict = {"info": info, "rows": [], "checks": [], "sgemm": []}
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)

    def save():
        info["wall_s"] = round(time.perf_counter() - t0, 1)
        (out / "cuda.json").write_text(json.dumps(res, indent=1, default=str))

    if device == "cuda":
        info["nvcc"] = _cuda_build.nvcc_version(_cuda_build.find_nvcc())
        info["arch"] = _cuda_build.target_arch()
        info["nvcc_flags"] = _cuda_build.build_flags(info["arch"])
        res["builds"] = build_all()
        save()
        bench = kb.timer(device)
        import triton.testing

        def gemm_bench(fn):  # benchmarks/gemm.py's settings
            return float(triton.testing.do_bench(fn, warmup=10, rep=60, return_mode="median"))
    else:
        bench = gemm_bench = kb.timer(device)
    res["copy"] = copy = kb.copy_bandwidth(device, bench)
    log(f"copy bandwidth: {copy['gbps']:.0f} GB/s")
    if not a.no_ops:
        ops = QUICK_OPS if a.quick else OPS
        for op, names in ops.items():
            w = importlib.import_module(f"profkit.kernels.{op}").WORKLOAD
            shapes = {n: w.shapes[n] for n in names} if device == "cuda" else {
                n: dict(w.shapes[n], tokens=2) for n in names}
            kb.run_forward(op, shapes, "bf16", device, bench, copy["gbps"], {"triton", "cuda"}, res["rows"])
            if a.graph and device == "cuda":
                add_graph_times(kb, op, names, res["rows"], copy["gbps"])
            save()
        add_cuda_vs_triton(res["rows"])
        res["checks"] = path_checks(device)
        save()
    if not a.no_sgemm:
        shapes = a.sgemm_shapes.split(",") if a.sgemm_shapes else (QUICK_SGEMM if a.quick else SGEMM_SHAPES)
        res["autotune"] = sgemm_rows(shapes, device, gemm_bench, res["sgemm"], save, a.graph and device == "cuda")
        # cuBLAS fp32 at the largest shape: a measured FP32 ceiling for profkit roofline
        top = max((r for r in res["sgemm"] if r["variant"] == "cublas" and "ms" in r), key=lambda r: r["flops"],
                  default=None)
        if top and device == "cuda":
            res["peaks"] = {"fp32_tflops": top["gflops"] / 1e3,
                            "fp32_how": f"cuBLAS SGEMM {top['shape']} fp32, TF32 off, do_bench median"}
    save()
    print(markdown(res))
    bad = [r for r in res["rows"] if r["variant"] == "cuda" and not r.get("ok")]
    bad += [c for c in res["checks"] if not c["ok"]]
    bad += [r for r in res["sgemm"] if not r.get("ok")]
    log(f"{len(res['rows'])} operator rows, {len(res['checks'])} checks, {len(res['sgemm'])} SGEMM rows; "
        f"{len(bad)} failing; {info['wall_s']} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
