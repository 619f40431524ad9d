#!/usr/bin/env python3
"""Memory-bound LLM operators: eager vs torch.compile vs Triton (vs Liger when installed).

    python3 benchmarks/kernels.py --out DIR [--quick] [--ops rmsnorm,rope] [--dtype bf16]
                                  [--no-backward] [--no-compile] [--tune]
    python3 benchmarks/kernels.py --selftest [--out DIR]   # CPU, TRITON_INTERPRET=1, tiny shapes

On the GPU: first measures device-to-device copy bandwidth (torch copy_ of a 2 GiB buffer,
bytes read + written / median time) in the same run; then for every operator x registered
shape x variant checks the output once against the float64 reference (on the GPU), times
it with triton.testing.do_bench (median; inputs rotated over several copies so that each
shape's working set exceeds the L2, and do_bench itself flushes L2 between calls), and
reports median ms, GB/s from the operator's minimum-bytes model, % of the measured copy
bandwidth, and the Triton speed-up over eager / compile / liger of the same shape.
Backward rows (rmsnorm_bwd, swiglu_bwd) time torch.autograd.grad of each variant's graph.

Writes DIR/kernels.json (rows + GPU name, driver, torch/triton versions, date) and prints a
markdown table. Imports the operators from the installed package (profkit.kernels.*), so it
runs from any cwd. Default run: well under 5 minutes on an H200 (torch.compile: mode=None,
dynamic=False; one compile per shape); --quick keeps 2-3 shapes per operator.
"""
from __future__ import annotations

import os
import sys

if "--selftest" in sys.argv:  # before triton is imported anywhere
    os.environ["TRITON_INTERPRET"] = "1"

import argparse  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

OPS = ("rmsnorm", "add_rmsnorm", "rope", "rmsnorm_rope", "swiglu", "softmax")
QUICK = {
    "rmsnorm": ["llama8b-t1", "llama8b-t4096", "qwen7b-t32768"],
    "add_rmsnorm": ["llama8b-t4096", "llama8b-t32768"],
    "rope": ["llama8b-t4096", "qwen7b-t4096"],
    "rmsnorm_rope": ["qwen3-8b-t4096", "qwen3-8b-t32768"],
    "swiglu": ["llama8b-t4096", "qwen7b-t4096"],
    "softmax": ["scores-r32768-n4096", "llama3vocab-t2048"],
}
BWD = {  # op -> (forward module, shapes)
    "rmsnorm_bwd": ("rmsnorm", ["llama8b-t4096", "qwen7b-t4096", "llama8b-t32768"]),
    "swiglu_bwd": ("swiglu", ["llama8b-t4096", "qwen7b-t4096"]),
}
SELFTEST_SHAPES = {
    "rmsnorm": {"t-3x200": {"tokens": 3, "hidden": 200}},
    "add_rmsnorm": {"t-3x200": {"tokens": 3, "hidden": 200}},
    "rope": {"t-3-gqa": {"tokens": 3, "q_heads": 4, "kv_heads": 2, "head_dim": 16},
             "t-3-partial": {"tokens": 3, "q_heads": 3, "kv_heads": 3, "head_dim": 20, "rotary_dim": 8}},
    "rmsnorm_rope": {"t-3-gqa": {"tokens": 3, "q_heads": 4, "kv_heads": 2, "head_dim": 16}},
    "swiglu": {"t-3x300": {"tokens": 3, "ffn": 300}},
    "softmax": {"t-2x300": {"rows": 2, "n": 300}, "t-1x20000": {"rows": 1, "n": 20000}},
}
ROTATE_BYTES = 512 << 20  # rotate input copies until the working set is ~8x the L2
COPY_BYTES = 2 << 30
DEADLINE = [float("inf")]  # perf_counter() after which torch.compile variants are skipped
OWN_KERNELS = ("triton", "cuda")  # the lab's own kernels: held to the lab tolerance, not the baselines'


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def timer(device: str):
    if device == "cuda":
        from triton.testing import do_bench

        def bench(fn):
            return do_bench(fn, warmup=25, rep=100, return_mode="median")

        return bench

    def bench_cpu(fn):  # interpreter: the number only checks the plumbing
        t = time.perf_counter()
        fn()
        return (time.perf_counter() - t) * 1e3

    return bench_cpu


def env_info(device: str) -> dict:
    from profkit.environment import result_header

    return result_header(device)


def copy_bandwidth(device: str, bench) -> dict:
    """Device-to-device torch copy: (bytes read + bytes written) / median time."""
    import torch

    nbytes = COPY_BYTES if device == "cuda" else 1 << 20
    src = torch.empty(nbytes // 2, dtype=torch.bfloat16, device=device).normal_()
    dst = torch.empty_like(src)
    ms = bench(lambda: dst.copy_(src))
    del src, dst
    if device == "cuda":
        torch.cuda.empty_cache()
    return {"bytes": 2 * nbytes, "ms": ms, "gbps": 2 * nbytes / ms / 1e6}


def _clone(state):
    import torch

    return {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in state.items()}


def _state_bytes(state) -> int:
    import torch

    return sum(v.numel() * v.element_size() for v in state.values() if isinstance(v, torch.Tensor))


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _available(w, variant: str) -> str | None:
    """None if runnable, else why not."""
    from profkit.kernels._numerics import has_module

    mod = w.requires.get(variant)
    if mod and not has_module(mod):
        return f"{mod} not installed"
    return None


def _rotating(fn, states):
    i = [0]

    def call():
        s = states[i[0] % len(states)]
        i[0] += 1
        return fn(s)

    return call


def _n_copies(state, device) -> int:
    if device != "cuda":
        return 1
    return max(1, min(8, math.ceil(ROTATE_BYTES / max(1, _state_bytes(state)))))


def run_forward(op: str, shapes: dict, dtype: str, device: str, bench, copy_gbps: float, variants, rows: list):
    import torch

    from profkit.kernels._numerics import rel_err, tolerance

    mod = importlib.import_module(f"profkit.kernels.{op}")
    w = mod.WORKLOAD
    for shape, p in shapes.items():
        t0 = time.perf_counter()
        try:
            state = w.setup(p, dtype, device)
            ref = _as_tuple(mod.reference_from_state(state))
            states = [state] + [w.setup(p, dtype, device) for _ in range(_n_copies(state, device) - 1)]
        except Exception as e:  # noqa: BLE001
            rows.append({"op": op, "shape": shape, "dtype": dtype, "variant": "-", "error": repr(e)[:300]})
            log(f"{op}/{shape}: setup failed: {e!r}")
            continue
        mdl = w.model(p, dtype)
        for v in [v for v in list(w.variants) + [r for r in w.requires if r not in w.variants] if v in variants]:
            row = {"op": op, "shape": shape, "dtype": dtype, "variant": v, "params": p,
                   "model_bytes": mdl["bytes"], "model_flops": mdl["flops"]}
            why = _available(w, v) or (None if v in w.variants else "variant not registered")
            if v == "compile" and time.perf_counter() > DEADLINE[0]:
                why = "time budget (--budget-s) spent: compile skipped"
            if why:
                row["skipped"] = why
                rows.append(row)
                continue
            fn = w.variants[v]
            try:
                outs = _as_tuple(fn(_clone(state)))  # first call: compiles, outside the timing
                errs = [rel_err(o, r) for o, r in zip(outs, ref)]
                row["rel_err"] = max(errs)
                row["tol"] = tolerance(dtype, baseline=v not in OWN_KERNELS)
                row["ok"] = bool(row["rel_err"] <= row["tol"]) and len(outs) >= 1
                del outs
                ms = bench(_rotating(fn, states))
                row["ms"] = ms
                row["gbps"] = mdl["bytes"] / ms / 1e6
                row["pct_copy"] = 100 * row["gbps"] / copy_gbps
            except Exception as e:  # noqa: BLE001
                row["error"] = repr(e)[:300]
                log(f"{op}/{v}/{shape}: {e!r}")
                if os.environ.get("PROFKIT_BENCH_TRACE"):
                    traceback.print_exc()
            rows.append(row)
            log(f"{op}/{v}/{shape} {dtype}: " + (f"{row['ms']:.4f} ms {row['gbps']:.0f} GB/s "
                                                   f"({row['pct_copy']:.0f}% copy) err {row['rel_err']:.1e}"
                                                   if "ms" in row else row.get("error", "")))
        del state, states, ref
        if device == "cuda":
            torch.cuda.empty_cache()
        log(f"  {op}/{shape}: {time.perf_counter() - t0:.1f}s")


def _bwd_fns(op: str, mod):
    """variant -> (inputs names, forward fn taking the inputs) for the backward rows."""
    from profkit.kernels._numerics import compiled, has_module

    if op == "rmsnorm_bwd":
        names = ("x", "w")
        fns = {"eager": mod.rmsnorm_eager, "compile": compiled("rmsnorm_bwd", mod.rmsnorm_eager),
               "triton": mod.rmsnorm}
        if has_module("liger_kernel"):
            fns["liger"] = mod._liger
        return names, fns, mod.rmsnorm_reference, mod.model_bwd
    names = ("gate", "up")
    fns = {"eager": mod.swiglu_eager, "compile": compiled("swiglu_bwd", mod.swiglu_eager), "triton": mod.swiglu}
    if has_module("liger_kernel"):
        fns["liger"] = lambda g, u: mod._liger({"gate": g, "up": u})
    return names, fns, mod.swiglu_reference, mod.model_bwd


def run_backward(op: str, shapes: dict, dtype: str, device: str, bench, copy_gbps: float, variants, rows: list):
    import torch

    from profkit.kernels._numerics import rel_err, tolerance

    mod = importlib.import_module(f"profkit.kernels.{BWD[op][0]}")
    names, fns, ref_fn, model_bwd = _bwd_fns(op, mod)
    for shape, p in shapes.items():
        state = mod.WORKLOAD.setup(p, dtype, device)
        ins = [state[n] for n in names]
        y0 = ref_fn(*ins)
        dy = torch.randn(y0.shape, dtype=ins[0].dtype, device=device)
        x64 = [t.detach().double().requires_grad_() for t in ins]
        ref = torch.autograd.grad(ref_fn(*x64), x64, dy.double())
        del y0, x64
        mdl = model_bwd(p, dtype)
        for v, f in fns.items():
            if v not in variants or (v == "compile" and time.perf_counter() > DEADLINE[0]):
                continue
            row = {"op": op, "shape": shape, "dtype": dtype, "variant": v, "params": p,
                   "model_bytes": mdl["bytes"], "model_flops": mdl["flops"]}
            try:
                leaves = [t.detach().clone().requires_grad_() for t in ins]
                y = f(*leaves)
                grads = torch.autograd.grad(y, leaves, dy, retain_graph=True)
                row["rel_err"] = max(rel_err(g, r) for g, r in zip(grads, ref))
                row["tol"] = tolerance(dtype, grad=True)
                row["ok"] = bool(row["rel_err"] <= row["tol"])
                del grads
                ms = bench(lambda: torch.autograd.grad(y, leaves, dy, retain_graph=True))
                row["ms"] = ms
                row["gbps"] = mdl["bytes"] / ms / 1e6
                row["pct_copy"] = 100 * row["gbps"] / copy_gbps
                del y, leaves
            except Exception as e:  # noqa: BLE001
                row["error"] = repr(e)[:300]
                log(f"{op}/{v}/{shape}: {e!r}")
            rows.append(row)
            if "ms" in row:
                log(f"{op}/{v}/{shape} {dtype}: {row['ms']:.4f} ms {row['gbps']:.0f} GB/s err {row['rel_err']:.1e}")
        del state, ins, ref, dy
        if device == "cuda":
            torch.cuda.empty_cache()


def add_speedups(rows: list) -> None:
    groups: dict = {}
    for r in rows:
        if "ms" in r:
            groups.setdefault((r["op"], r["shape"], r["dtype"]), {})[r["variant"]] = r["ms"]
    for r in rows:
        g = groups.get((r["op"], r["shape"], r["dtype"]), {})
        if "ms" in r and r["variant"] in ("triton", "liger"):
            for base in ("eager", "compile", "liger"):
                if base != r["variant"] and base in g:
                    r[f"speedup_vs_{base}"] = g[base] / r["ms"]


def tune(device: str, bench, copy_gbps: float, dtype: str) -> list:
    """Small sweep of the RMSNorm forward launch (rows per program x num_warps) and the
    softmax chunk, to see what is left on the table versus the heuristics."""
    import torch

    from profkit.kernels import rmsnorm, softmax
    from profkit.kernels import torch_dtype

    out = []
    dt = torch_dtype(dtype)
    small = device != "cuda"  # selftest: the plumbing only
    for M, N in ((4, 200),) if small else ((32768, 4096), (32768, 3584), (262144, 128)):
        x = torch.randn(M, N, dtype=dt, device=device)
        w = torch.randn(N, dtype=dt, device=device)
        y = torch.empty_like(x)
        nbytes = rmsnorm.model({"tokens": M, "hidden": N}, dtype)["bytes"]
        for bm in (1, 2) if small else (1, 2, 4, 16):
            for nw in (2, 4) if small else (2, 4, 8, 16):
                if bm * triton_np2(N) > 65536:
                    continue
                ms = bench(lambda: rmsnorm.rmsnorm_fwd(x, w, out=y, block_m=bm, num_warps=nw))
                out.append({"kernel": "rmsnorm_fwd", "M": M, "N": N, "block_m": bm, "num_warps": nw,
                            "ms": ms, "pct_copy": 100 * nbytes / ms / 1e6 / copy_gbps,
                            "default": (bm, nw) == rmsnorm.fwd_config(N)[::2]})
        del x, w, y
    x = torch.randn(*((2, 20000) if small else (2048, 128256)), dtype=dt, device=device)
    y = torch.empty_like(x)
    nbytes = 2 * x.numel() * x.element_size()
    for chunk in (1024, 2048, 4096, 8192):
        ms = bench(lambda: softmax.softmax(x, out=y, chunk=chunk))
        out.append({"kernel": "softmax_online", "M": x.shape[0], "N": x.shape[1], "chunk": chunk, "ms": ms,
                    "pct_copy": 100 * nbytes / ms / 1e6 / copy_gbps})
    for r in out:
        log(json.dumps(r))
    return out


def triton_np2(n: int) -> int:
    return 1 << (n - 1).bit_length()


def fmt(v, spec):
    return "" if v is None else format(v, spec)


def markdown(rows: list, info: dict, copy: dict) -> str:
    lines = [f"GPU: {info.get('gpu', info['device'])}  driver {info.get('driver', '-')}  torch {info['torch']}  "
             f"triton {info['triton']}  {info['date']}",
             f"copy bandwidth (d2d torch copy_, read+write): {copy['gbps']:.0f} GB/s", "",
             "| op | shape | dtype | variant | ms | GB/s | % copy | x eager | x compile | x liger | rel err | ok |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        if "skipped" in r or "error" in r:
            lines.append(f"| {r['op']} | {r['shape']} | {r['dtype']} | {r['variant']} | | | | | | | | "
                         f"{'skip: ' + r['skipped'] if 'skipped' in r else 'ERROR: ' + r['error'][:60]} |")
            continue
        lines.append(
            f"| {r['op']} | {r['shape']} | {r['dtype']} | {r['variant']} | {fmt(r.get('ms'), '.4f')} | "
            f"{fmt(r.get('gbps'), '.0f')} | {fmt(r.get('pct_copy'), '.0f')} | {fmt(r.get('speedup_vs_eager'), '.2f')} | "
            f"{fmt(r.get('speedup_vs_compile'), '.2f')} | {fmt(r.get('speedup_vs_liger'), '.2f')} | "
            f"{fmt(r.get('rel_err'), '.1e')} | {'yes' if r.get('ok') else 'NO'} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="directory for kernels.json")
    ap.add_argument("--quick", action="store_true", help="2-3 shapes per operator")
    ap.add_argument("--ops", help=f"comma list (default all): {','.join(OPS + tuple(BWD))}")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile variant")
    ap.add_argument("--no-backward", action="store_true", help="skip the rmsnorm_bwd / swiglu_bwd rows")
    ap.add_argument("--tune", action="store_true", help="also sweep RMSNorm / softmax launch parameters")
    ap.add_argument("--budget-s", type=float, default=240.0,
                    help="after this many seconds, skip the (slow to compile) torch.compile variant")
    ap.add_argument("--selftest", action="store_true", help="tiny CPU run under TRITON_INTERPRET=1")
    a = ap.parse_args(argv)
    if not a.out and not a.selftest:
        ap.error("--out DIR is required (except with --selftest)")
    import torch

    device = "cpu" if a.selftest else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        log("no CUDA device: use --selftest for the CPU smoke run")
        return 2
    t_start = time.perf_counter()
    DEADLINE[0] = t_start + a.budget_s
    info = env_info(device)
    bench = timer(device)
    ops = a.ops.split(",") if a.ops else list(OPS) + ([] if a.no_backward else list(BWD))
    variants = {"eager", "triton", "liger"} | (set() if (a.no_compile or a.selftest) else {"compile"})
    copy = copy_bandwidth(device, bench)
    log(f"copy bandwidth: {copy['gbps']:.0f} GB/s ({copy['ms']:.3f} ms for {copy['bytes'] / 2**30:.1f} GiB r+w)")
    rows: list = []
    for op in ops:
        if op in BWD:
            fwd_op, names = BWD[op]
            if a.selftest:
                shapes = SELFTEST_SHAPES[fwd_op]
            else:
                all_shapes = importlib.import_module(f"profkit.kernels.{fwd_op}").WORKLOAD.shapes
                shapes = {s: all_shapes[s] for s in (names[:1] if a.quick else names)}
            run_backward(op, shapes, a.dtype, device, bench, copy["gbps"], variants, rows)
            continue
        w = importlib.import_module(f"profkit.kernels.{op}").WORKLOAD
        if a.selftest:
            shapes = SELFTEST_SHAPES[op]
        elif a.quick:
            shapes = {s: w.shapes[s] for s in QUICK[op]}
        else:
            shapes = dict(w.shapes)
        run_forward(op, shapes, a.dtype, device, bench, copy["gbps"], variants, rows)
    add_speedups(rows)
    tuned = tune(device, bench, copy["gbps"], a.dtype) if (a.tune or a.selftest) else []
    info["wall_s"] = round(time.perf_counter() - t_start, 1)
    info["mode"] = "selftest" if a.selftest else "quick" if a.quick else "default"
    result = {"info": info, "copy": copy, "rows": rows, "tune": tuned}
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "kernels.json"), "w") as f:
            json.dump(result, f, indent=1, default=str)
    print(markdown(rows, info, copy))
    bad = [r for r in rows if r.get("error") or (r.get("ok") is False)]
    triton_bad = [r for r in bad if r["variant"] == "triton"]
    log(f"{len(rows)} rows, {len(bad)} failing ({len(triton_bad)} triton), {info['wall_s']}s")
    return 1 if triton_bad else 0


if __name__ == "__main__":
    sys.exit(main())
