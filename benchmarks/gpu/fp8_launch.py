#!/usr/bin/env python3
"""Round 5 (issue 21 item 3): the fp8 v3 launcher's host time, and what it does to the timed cells.

v3 as round 4 registered it (`@r4`: through the autotuner on every call, `F._PLANS` cleared before
each; per-row scales loaded before each promotion) against the planned launcher (the autotuner's
pick kept per problem, the kernel launched directly) with the scales loaded after the last
promotion (`triton_promote`, the default) and before it (`triton_promote_early`), and
torch._scaled_mm, both scale modes, every registered shape:
- float64 check of every variant first (the workload's own check);
- round-robin: each variant timed R times in turn (the lab's timer: do_bench median, L2 flushed),
  median of the R, so clock drift hits all alike;
- GPU time only: CUDA-graph replay (the lab's graph_timer), planned v3 vs _scaled_mm;
- host time per call: N back-to-back calls without a sync (the GPU queue absorbs them);
- at the decode shape, what one planned call's host time is made of (each piece timed alone)
  and a cProfile of the planned launcher.

    python3 benchmarks/gpu/fp8_launch.py [--rounds 7] [--out DIR]   # -> DIR/fp8_launch.json
"""
import argparse
import cProfile
import io
import json
import os
import pstats
import time

import torch

from profkit.kernels import fp8_gemm as F
from profkit.kernels import get
from profkit.kernels.timing import graph_timer, header, stamp, timer

MODES = {"row": ("triton_promote", "scaled_mm"), "tensor": ("triton_promote_tensor", "scaled_mm_tensor")}
GRAPHED = ("triton_promote", "triton_promote_early", "scaled_mm", "triton_promote_tensor", "scaled_mm_tensor")


def host_us(fn, n=200):
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t = (time.perf_counter() - t0) / n * 1e6
    torch.cuda.synchronize()
    return t


def round_robin(fns, bench, rounds):
    """({name: the times of each round}, {name: their median}): every fn timed once per round,
    in turn, so clock drift hits all alike."""
    times = {v: [] for v in fns}
    for _ in range(rounds):
        for v, fn in fns.items():
            times[v].append(bench(fn))
    return times, {v: sorted(t)[len(t) // 2] for v, t in times.items()}


def checked_launches(w, state, shape, mode, v3, peer, launches, keep_failed=()):
    """The round-robin scripts' contenders at one (shape, scale mode): v3 and its peer (the
    workload's variants), then each experiment launch (name -> fn(out) writing the bf16 product
    into out), checked against v3's float64 reference first. A launch that raises or fails the
    check is printed and left out, unless named in keep_failed (timed only). -> (fns, checks)."""
    fns, checks = {}, {}
    for v in (v3, peer):
        checks[v] = str(w.check(state, v, w.variants[v](state), "fp8"))
        fns[v] = (lambda v: lambda: w.variants[v](state))(v)
    aq, bq = state[mode][:2]
    for name, launch in launches.items():
        out = torch.empty((aq.shape[0], bq.shape[0]), dtype=torch.bfloat16, device="cuda")
        try:
            launch(out)
        except Exception as e:  # noqa: BLE001 - a launch that does not compile is a row
            print(f"{shape} {mode} {name}: {type(e).__name__}: {str(e)[:300]}", flush=True)
            continue
        r = w.check(state, v3, out, "fp8")
        checks[name] = str(r)
        if not r.ok and name not in keep_failed:
            print(f"{shape} {mode} {name}: check failed {r}", flush=True)
            continue
        fns[name] = (lambda launch, out: lambda: launch(out))(launch, out)
    torch.cuda.synchronize()
    return fns, checks


def measure(shape, mode, fns, checks, v3, peer, bench, gbench, rounds, hdr):
    """The round-robin scripts' timing of one (shape, scale mode): do_bench round-robin, graph
    replay and host time per call of each fn; one stamped row each, printed."""
    times, med = round_robin(fns, bench, rounds)
    graph = {v: gbench(fn) for v, fn in fns.items()}
    host = {v: host_us(fn, 50) for v, fn in fns.items()}
    rows = []
    for v in fns:
        row = dict(shape=shape, mode=mode, variant=v, ms=med[v], ms_all=times[v], peer=peer,
                   pct_peer=100 * med[peer] / med[v], graph_ms=graph[v], graph_pct_peer=100 * graph[peer] / graph[v],
                   graph_x_v3=graph[v3] / graph[v], host_us_per_call=round(host[v], 1), check=checks[v], **stamp(hdr))
        rows.append(row)
        print(f"{shape:20} {mode:6} {v:24} {med[v] * 1e3:7.1f} us [{min(times[v]) * 1e3:.1f}-"
              f"{max(times[v]) * 1e3:.1f}] {row['pct_peer']:5.1f} % graph {graph[v] * 1e3:7.1f} us "
              f"({row['graph_pct_peer']:5.1f} % of peer, {row['graph_x_v3']:.3f}x v3) host {host[v]:.0f} us", flush=True)
    return rows


def sweep(w, shapes, launches_for, bench, gbench, rounds, hdr):
    """The experiment scripts' loop: at each shape and scale mode, the launches of
    launches_for(aq, bq, sa, sb) ({name: fn(out)}) checked (checked_launches) and timed beside v3
    and _scaled_mm (measure). -> the stamped rows."""
    rows = []
    for shape, p in shapes.items():
        state = w.setup(p, "fp8", "cuda")
        for mode, (v3, peer) in MODES.items():
            aq, bq, sa, sb = state[mode]
            sa, sb = sa.reshape(-1).float(), sb.reshape(-1).float()
            fns, checks = checked_launches(w, state, shape, mode, v3, peer, launches_for(aq, bq, sa, sb))
            rows += measure(shape, mode, fns, checks, v3, peer, bench, gbench, rounds, hdr)
        del state
        torch.cuda.empty_cache()
    return rows


def selected_configs(configs):
    """The experiment scripts' --configs=i,j (removed from sys.argv before device_cli parses it):
    those rows of configs, else all."""
    import sys

    sel = [a for a in sys.argv if a.startswith("--configs=")]
    if not sel:
        return configs
    sys.argv.remove(sel[0])
    return [configs[int(i)] for i in sel[0].split("=")[1].split(",")]


def edge_checks(shapes, configs, launch, name, after=None):
    """Every config at each (M, N, K) of shapes, both scale modes, against float64 first: e4m3
    operands of N(0, 0.5), scales in [0.5, 1.5); out NaN-filled, so a block never written fails;
    max|err|/rms under 5e-2 (the lab's GEMM bound). launch(a, b, sa, sb, out, config);
    after(a, b, sa, sb, out, config, tag), if given, runs further checks on the checked output."""
    torch.manual_seed(0)
    for (m, n, k) in shapes:
        a = (torch.randn(m, k, device="cuda") * 0.5).to(torch.float8_e4m3fn)
        b = (torch.randn(n, k, device="cuda") * 0.5).to(torch.float8_e4m3fn)
        ref = a.double() @ b.double().T
        for mode in ("row", "tensor"):
            sa = torch.rand(m if mode == "row" else 1, device="cuda") + 0.5
            sb = torch.rand(n if mode == "row" else 1, device="cuda") + 0.5
            want = ref * sa.double().reshape(-1, 1) * sb.double().reshape(1, -1)
            for c in configs:
                out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
                launch(a, b, sa, sb, out, c)
                err = ((out.double() - want).abs().max() / want.pow(2).mean().sqrt()).item()
                tag = f"edge {m}x{n}x{k} {mode} {name(c)}"
                print(f"{tag}: max|err|/rms {err:.2e}", flush=True)
                assert err < 5e-2, err  # NaN fails too
                if after:
                    after(a, b, sa, sb, out, c, tag)


def write_rows(out, name, **fields):
    """fields as OUT/name.json."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"{name}.json"), "w") as f:
        json.dump(fields, f, indent=1)


def device_cli(op, rounds, keep):
    """The round-robin scripts' common start: (args, workload, its shapes kept by keep(p) or named
    by --shapes, the run's header, do_bench timer, graph timer); the header printed."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=rounds)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--shapes", default="", help="comma-separated shape names")
    args = ap.parse_args()
    w = get(op)
    shapes = {k: v for k, v in w.shapes.items() if keep(v)}
    if args.shapes:
        shapes = {k: shapes[k] for k in args.shapes.split(",")}
    hdr = header("cuda")
    print(json.dumps(stamp(hdr)), flush=True)
    return args, w, shapes, hdr, timer("cuda", warmup_ms=10, rep_ms=60), graph_timer(rep_ms=60)


# M, N not multiples of the tiles (257: an odd number of 128-row tiles; N = 200 and 3600: the last
# 112- or 128-wide tile, or a narrow chain of it, past N), K not of 128 (TMA zero-fills, the
# stores clip), and qwen7b-down-m1024 itself
EDGES = ((1000, 3584, 4096), (257, 200, 1040), (1024, 3600, 2064), (1024, 3584, 18944))


def config_sweep(name, configs, launch, label, ir, edges=EDGES, after=None, beside_gluon_ws=True):
    """The fp8 kernel experiments' main (rounds 15-17): the configs picked by --configs=, each
    checked at `edges` against float64 (edge_checks, with `after`), then swept (sweep) beside v3
    and _scaled_mm, and gluon_ws where beside_gluon_ws, at the shapes with M >= 1024 (or
    --shapes); rows to OUT/name.json with ir(), what the build says of the kernels.
    launch(a, b, sa, sb, out, config, nprog); label(config) names a row."""
    from profkit.kernels import fp8_gemm_ws as W

    configs = selected_configs(configs)
    args, w, shapes, hdr, bench, gbench = device_cli("fp8_gemm", 5, lambda p: p["M"] >= 1024)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    edge_checks(edges, configs, lambda a, b, sa, sb, out, c: launch(a, b, sa, sb, out, c, sms), label,
                after and (lambda a, b, sa, sb, out, c, tag: after(a, b, sa, sb, out, c, tag, sms)))

    def launches(aq, bq, sa, sb):
        fns = {label(c): (lambda c: lambda out: launch(aq, bq, sa, sb, out, c, sms))(c) for c in configs}
        if beside_gluon_ws:
            fns["gluon_ws"] = lambda out: W.fp8_gemm_ws(aq, bq, sa, sb, out)
        return fns

    rows = sweep(w, shapes, launches, bench, gbench, args.rounds, hdr)
    write_rows(args.out, name, header=hdr, rounds=args.rounds, rows=rows, ir=ir(), configs=configs)

def pieces(s):
    """Host time of each piece of one planned call (decode shape), timed alone."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    aq, bq, sa, sb = s
    M, K = aq.shape
    N = bq.shape[0]
    out = torch.empty((M, N), dtype=torch.bfloat16, device=aq.device)
    F.fp8_gemm_promote(aq, bq, sa, sb, out=out)
    key = next(k for k in F._PLANS if k[:3] == (M, N, K) and k[6])
    grid, box_a, box_b, box_c, kw = F._PLANS[key]
    descs = (TensorDescriptor.from_tensor(aq, box_a), TensorDescriptor.from_tensor(bq, box_b),
             TensorDescriptor.from_tensor(out, box_c))
    sa2, sb2 = sa.reshape(-1).float(), sb.reshape(-1).float()

    def jit():
        F._fp8_gemm_pchunk[grid](*descs, sa2, sb2, M, N, K, **kw)

    out_p = {
        "whole planned call": lambda: F.fp8_gemm_promote(aq, bq, sa, sb, out=out),
        "whole call, out allocated": lambda: F.fp8_gemm_promote(aq, bq, sa, sb),
        "_fp8_args": lambda: F._fp8_args(aq, bq, sa, sb, out),
        "tma_supported": lambda: F.tma_supported(aq, bq, out, names=("A", "B", "out")),
        "3 TensorDescriptor.from_tensor": lambda: [TensorDescriptor.from_tensor(t, [64, 128]) for t in (aq, bq, out)],
        "torch.empty out": lambda: torch.empty((M, N), dtype=torch.bfloat16, device=aq.device),
        "JIT launch, descriptors ready": jit,
        "scaled_mm": lambda: F.scaled_mm(aq, bq, sa, sb),
    }
    try:  # the compiled kernel's own runner (Triton internals: measured, not used by the lab)
        ck = F._fp8_gemm_pchunk.warmup(*descs, sa2, sb2, M, N, K, grid=grid, **kw)
        run = ck[grid]
        names = F._fp8_gemm_pchunk.arg_names
        given = dict(zip(names, (*descs, sa2, sb2, M, N, K)), **kw)
        every = [given[n] for n in names]  # Triton >= 3.3 launchers take the constexprs too
        out_p["compiled runner, descriptors ready"] = lambda: run(*every)
    except Exception as e:  # noqa: BLE001 - an experiment; say why and go on
        print("compiled runner: not measured:", type(e).__name__, str(e)[:200], flush=True)
    res = {}
    for name, fn in out_p.items():
        try:
            res[name] = round(host_us(fn, 500), 2)
        except Exception as e:  # noqa: BLE001
            res[name] = f"failed: {type(e).__name__}: {str(e)[:150]}"
        print(f"   host {name:40} {res[name]} us", flush=True)
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(2000):
        F.fp8_gemm_promote(aq, bq, sa, sb, out=out)
    pr.disable()
    torch.cuda.synchronize()
    buf = io.StringIO()
    pstats.Stats(pr, stream=buf).sort_stats("tottime").print_stats(18)
    return res, buf.getvalue()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    w = get("fp8_gemm")
    hdr = header("cuda")
    print(json.dumps(stamp(hdr)), flush=True)
    bench, gbench = timer("cuda", warmup_ms=10, rep_ms=60), graph_timer(rep_ms=60)
    rows, prof = [], {}
    for shape, p in w.shapes.items():
        state = w.setup(p, "fp8", "cuda")
        fns = {}
        for mode, (v3, peer) in MODES.items():
            s = state[mode]
            # round 4's registered launcher: the autotuner on every call, scales before each promotion
            fns[f"{v3}@r4"] = (lambda s: lambda: (F._PLANS.clear(), F.fp8_gemm_promote(*s, scale_late=False)))(s)
            fns[v3] = (lambda s: lambda: F.fp8_gemm_promote(*s))(s)
            if mode == "row":
                fns["triton_promote_early"] = (lambda s: lambda: F.fp8_gemm_promote(*s, scale_late=False))(s)
            fns[peer] = (lambda s: lambda: F.scaled_mm(*s))(s)
        for v in GRAPHED:
            r = w.check(state, v, w.variants[v](state), "fp8")
            assert r.ok, (shape, v, str(r))
        torch.cuda.synchronize()
        times, med = round_robin(fns, bench, args.rounds)
        graph = {}
        for v in GRAPHED:
            fns[v]()
            graph[v] = gbench(fns[v])
        host = {v: host_us(fn, 200 if p["M"] <= 1024 else 30) for v, fn in fns.items()}
        for mode, (v3, peer) in MODES.items():
            for v in (f"{v3}@r4", v3, *(("triton_promote_early",) if mode == "row" else ()), peer):
                row = dict(shape=shape, mode=mode, variant=v, ms=med[v], ms_all=times[v], peer=peer,
                           pct_peer=100 * med[peer] / med[v], host_us_per_call=round(host[v], 1),
                           tflops=2 * p["M"] * p["N"] * p["K"] / med[v] / 1e9, **stamp(hdr))
                if v in graph:
                    row["graph_ms"] = graph[v]
                    row["graph_pct_peer"] = 100 * graph[peer] / graph[v]
                rows.append(row)
                print(f"{shape:20} {v:34} {med[v]:.4f} ms [{min(times[v]):.4f}-{max(times[v]):.4f}] "
                      f"{row['pct_peer']:5.1f} % of {peer}  host {host[v]:.0f} us"
                      + (f"  graph {graph[v] * 1e3:.1f} us ({row['graph_pct_peer']:.1f} %)" if v in graph else ""),
                      flush=True)
        if p["M"] <= 64:
            for mode in MODES:
                prof[mode] = pieces(state[mode])
                print(prof[mode][1], flush=True)
        del state
        torch.cuda.empty_cache()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "fp8_launch.json"), "w") as f:
        json.dump(dict(header=hdr, rounds=args.rounds, rows=rows,
                       host_pieces={m: v[0] for m, v in prof.items()},
                       cprofile={m: v[1] for m, v in prof.items()},
                       autotune=F.autotune_choices().get("fp8_gemm.promote")), f, indent=1)


if __name__ == "__main__":
    main()
