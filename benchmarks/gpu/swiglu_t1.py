#!/usr/bin/env python3
"""Round 10 (issue 21 item 1): why SwiGLU at one token (llama8b-t1: 1 x 14336 bf16) measured
0.88-0.90x of torch.compile in round 9's kernels.py run but 1.02-1.09x in round 6's decode sweep,
while the tuner timed its own pick at 1.19-1.26 us in the same round-9 process.

One process, every timing by the lab's graph_timer (do_bench_cudagraph median, GPU time), round-robin
over R rounds, for the lab's launch and torch.compile's, each in four ways:
  kernel   the launch alone on one set of inputs, output preallocated (the tuner's way)
  alloc    the variant function on one set (output allocated per call)
  rotate   the variant function over the 8 input sets kernels.py rotates over (its way)
plus the SMALL_CANDIDATES launches alone (kernel way), so the tuner's pick can be read against all.

    python3 benchmarks/gpu/swiglu_t1.py [--rounds 5] [--out DIR]
"""
import argparse
import ast
import json
import os
import statistics


def main():
    import torch

    from profkit.kernels import get
    from profkit.kernels import swiglu as SW
    from profkit.kernels._numerics import compiled
    from profkit.kernels.timing import graph_timer, header, n_copies, rotating, stamp, tuned_choices

    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    hdr = header("cuda")
    print(json.dumps(stamp(hdr)), flush=True)
    w = get("swiglu")
    p = w.shapes["llama8b-t1"]
    state = w.setup(p, "bf16", "cuda")
    states = [state] + [w.setup(p, "bf16", "cuda") for _ in range(n_copies(state, "cuda") - 1)]
    g, u = state["gate"], state["up"]
    y = torch.empty_like(g)
    comp = compiled("swiglu_t1_probe", SW.swiglu_eager)
    w.variants["triton"](state)  # the tuner picks (graph replay of each candidate)
    pick = [v for k, v in tuned_choices().items() if "swiglu_fwd" in k and "small" in k]
    print("tuner's pick and its timings", pick, flush=True)
    cfg = ast.literal_eval(pick[0]["config"]) if pick else SW.SMALL_CANDIDATES[0]
    comp(g, u)
    fns = {
        "triton:kernel": lambda: SW.swiglu_fwd(g, u, out=y, config=tuple(cfg)),
        "triton:alloc": lambda: w.variants["triton"](state),
        "triton:rotate": rotating(w.variants["triton"], states),
        "compile:kernel": lambda: comp(g, u),
        "compile:alloc": lambda: w.variants["compile"](state),
        "compile:rotate": rotating(w.variants["compile"], states),
    }
    for c in SW.SMALL_CANDIDATES:
        fns[f"cand{tuple(c)}"] = (lambda c: lambda: SW.swiglu_fwd(g, u, out=y, config=c))(c)
    bench = graph_timer(rep_ms=20)
    times = {k: [] for k in fns}
    for r in range(args.rounds):
        order = list(fns)[r % len(fns):] + list(fns)[:r % len(fns)]
        for k in order:
            times[k].append(bench(fns[k]))
    rows = []
    for k, v in times.items():
        med = statistics.median(v)
        rows.append(dict(name=k, graph_ms=med, all_ms=v, **stamp(hdr)))
        print(f"{k:40} {med * 1e3:6.3f} us  [{min(v) * 1e3:.3f}-{max(v) * 1e3:.3f}]", flush=True)
    for way in ("kernel", "alloc", "rotate"):
        t, c = statistics.median(times[f"triton:{way}"]), statistics.median(times[f"compile:{way}"])
        print(f"== {way:7}: triton {t * 1e3:.3f} us, compile {c * 1e3:.3f} us: {c / t:.2f}x", flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "swiglu_t1.json"), "w") as f:
        json.dump(dict(header=hdr, rounds=args.rounds, pick=pick, rows=rows), f, indent=1, default=str)


if __name__ == "__main__":
    main()
