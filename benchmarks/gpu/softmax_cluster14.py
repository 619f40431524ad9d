#!/usr/bin/env python3
"""Round 14 (issue 21 item 1): the CUDA C++ cluster softmax (kernels/cuda/softmax.cu) on the GPU.

    python3 benchmarks/gpu/softmax_cluster14.py check [--out DIR]   # against float64, every dtype,
        # cluster size and an edge of each kind (ragged last slice, one cluster for every row,
        # strided rows, rows of -inf, a dominant element)
    python3 benchmarks/gpu/softmax_cluster14.py sweep [--out DIR]   # every (cluster, stages) and
        # bounded grids at the vocabulary shapes, by graph replay over inputs rotated past the L2,
        # beside the Triton softmax and a copy of the same bytes

Writes softmax_cluster14_<mode>.json (every row stamped with GPU, driver, torch, triton, date).
"""
import argparse
import json
import os
import statistics


def _ref(x):
    import torch

    return torch.softmax(x.double(), dim=-1)


def _err(y, ref):
    """max |y - ref| over the row's largest probability, worst row; NaN where both are NaN is 0."""
    import torch

    d = (y.double() - ref).abs()
    both_nan = torch.isnan(y) & torch.isnan(ref)
    d = torch.where(both_nan, torch.zeros_like(d), d)
    scale = ref.nan_to_num(0).abs().amax(dim=-1, keepdim=True).clamp_min(1e-300)
    return float((d / scale).nan_to_num(float("inf")).max())


TOL = {"bfloat16": 8e-3, "float16": 1.2e-3, "float32": 2e-5}  # a few ulps of the output dtype


def check(out_dir, hdr, stamp):
    import torch

    from profkit.kernels._cuda_ops import CLUSTER_SIZES, softmax_cluster_plan, softmax_cuda

    rows, bad = [], 0
    cases = [("llama3vocab", 2048, 128256), ("qwen7bvocab", 1024, 152064), ("odd-rows", 37, 128256),
             ("narrow", 3, 16384), ("ragged", 7, 65544), ("min", 1, 8192), ("many-rows", 533, 32768)]
    for dt in (torch.bfloat16, torch.float16, torch.float32):
        for name, r, n in cases:
            x = torch.randn(r, n, device="cuda", dtype=torch.float32).mul_(4).to(dt)
            ref = _ref(x)
            for c, per in ((c, per) for c in CLUSTER_SIZES for per in (1, 2)):
                try:
                    softmax_cluster_plan(n, x.element_size(), c, per)
                except ValueError:
                    continue
                for stages, maxc, pb in ((7, 0, 0), (2, 0, 0), (5, 1, 0)):
                    if maxc == 1 and r * n > 600 * 32768:  # one cluster for every row: small cases only
                        continue
                    y, g = softmax_cuda(x, cluster=c, stages=stages, max_clusters=maxc, per_sm=per, probe=pb)
                    torch.cuda.synchronize()
                    e = _err(y, ref)
                    ok = e <= TOL[str(dt).removeprefix("torch.")]
                    bad += not ok
                    rows.append(dict(case=name, dtype=str(dt), rows=r, n=n, cluster=c, per_sm=per, stages=stages,
                                     bulk_store=bool(pb & 8), clusters=g,
                                     err=e, ok=ok, **stamp))
                    if not ok or (name == "llama3vocab" and stages == 7):
                        print(f"{str(dt):15} {name:12} {r}x{n} cluster {c} per SM {per} stages {stages} grid {g}: err {e:.2e} "
                              f"{'ok' if ok else 'FAIL'}", flush=True)
    # edges: strided rows (no copy), a row of -inf (NaN as torch), a dominant element, preallocated out
    big = torch.randn(64, 128256 + 64, device="cuda", dtype=torch.bfloat16) * 4
    x = big[:, :128256]
    x[0] = float("-inf")
    x[1, 777] = 1e4
    y = torch.empty(64, 128256, device="cuda", dtype=torch.bfloat16)
    softmax_cuda(x, out=y)
    ref = _ref(x)
    e = _err(y, ref)
    edge_ok = e <= TOL["bfloat16"] and bool(torch.isnan(y[0]).all()) and float(y[1, 777]) == 1.0
    bad += not edge_ok
    rows.append(dict(case="edges", err=e, ok=edge_ok, nan_row=bool(torch.isnan(y[0]).all()),
                     dominant=float(y[1, 777]), **stamp))
    print(f"edges (strided, -inf row, dominant element, out=): err {e:.2e} {'ok' if edge_ok else 'FAIL'}", flush=True)
    print(f"check: {len(rows)} rows, {bad} failed", flush=True)
    return dict(header=hdr, rows=rows, failed=bad)


def sweep(out_dir, hdr, stamp, rounds):
    import torch

    from profkit.kernels import get
    from profkit.kernels._cuda_ops import softmax_cluster_plan, softmax_cuda
    from profkit.kernels.softmax import softmax
    from profkit.kernels.timing import copy_bandwidth, graph_timer, n_copies, rotating, timer

    copy = copy_bandwidth("cuda", timer("cuda"))
    print(f"copy {copy['gbps']:.0f} GB/s", flush=True)
    bench = graph_timer(rep_ms=50)
    w = get("softmax")
    out = dict(header=hdr, copy=copy, rounds=rounds, shapes={})
    for shape in ("llama3vocab-t2048", "qwen7bvocab-t1024"):
        p = w.shapes[shape]
        st = w.setup(p, "bf16", "cuda")
        xs = [st["x"]] + [w.setup(p, "bf16", "cuda")["x"] for _ in range(n_copies(st, "cuda") - 1)]
        ys = [torch.empty_like(xs[0]) for _ in xs]
        pairs = list(zip(xs, ys))
        n = p["n"]
        fns = {"triton": rotating(lambda s: softmax(s[0], out=s[1]), pairs)}
        # (cluster, stages, CTAs an SM, probe): one an SM at every cluster size that fits; two an SM
        cfgs = [(c, 12, 1, 0) for c in range(3, 9)] + [(4, 8, 1, 0), (4, 12, 1, 1)]
        cfgs += [(c, k, 2, 0) for c in (6, 7, 8) for k in (4, 6, 7)] + [(4, 6, 2, 0), (8, 6, 2, 1), (8, 6, 2, 5)]
        if os.environ.get("SWEEP_CFGS"):  # "cluster,stages,per_sm,probe;..."
            cfgs = [tuple(int(t) for t in c.split(",")) for c in os.environ["SWEEP_CFGS"].split(";")]
        for c, k, per, pb in cfgs:
            try:
                softmax_cluster_plan(n, 2, c, per)
            except ValueError:
                continue
            fns[f"c{c}_s{k}_p{per}_b{pb}"] = rotating(
                lambda s, c=c, k=k, per=per, pb=pb: softmax_cuda(s[0], s[1], c, k, 0, pb, per), pairs)
        grids = {}
        for k, f in fns.items():
            f()
            if k != "triton":
                c, stages, per, pb = (int(t[1:]) for t in k.split("_"))
                grids[k] = softmax_cuda(xs[0], ys[0], c, stages, 0, pb, per)[1]
        torch.cuda.synchronize()
        times = {k: [] for k in fns}
        names = list(fns)
        for r in range(rounds):
            for k in names[r % len(names):] + names[:r % len(names)]:
                times[k].append(bench(fns[k]))
        nbytes = w.model(p, "bf16")["bytes"]
        base = statistics.median(times["triton"])
        res = []
        for k in names:
            med = statistics.median(times[k])
            pct = 100 * nbytes / med / 1e6 / copy["gbps"]
            res.append(dict(config=k, clusters=grids.get(k), graph_ms=med, all_ms=times[k], pct_copy=pct,
                            x_triton=base / med, **stamp))
            print(f"{shape:20} {k:14} grid {str(grids.get(k)):>4} {med * 1e3:8.1f} us {pct:5.1f} % copy "
                  f"{base / med:5.3f}x triton", flush=True)
        out["shapes"][shape] = res
        del xs, ys, pairs, fns, st
        torch.cuda.empty_cache()
    return out


def main():
    from profkit.kernels.timing import header, stamp

    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("check", "sweep"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    a = ap.parse_args()
    hdr = header("cuda")
    st = stamp(hdr)
    print(json.dumps(st), flush=True)
    res = check(a.out, hdr, st) if a.mode == "check" else sweep(a.out, hdr, st, a.rounds)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, f"softmax_cluster14_{a.mode}.json"), "w") as f:
        json.dump(res, f, indent=1, default=str)
    if a.mode == "check" and res["failed"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
