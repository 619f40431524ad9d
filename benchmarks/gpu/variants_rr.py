#!/usr/bin/env python3
"""Round-robin GPU time of one lab operator's variants at chosen shapes.

kernels.py times each variant once, one after the other; a 1-3 % difference between two variants
needs them interleaved. Here, in one process: the copy bandwidth, then for each shape every
variant's output checked against the float64 reference, then R rounds, each timing every variant
(CUDA-graph replay median over input sets rotated past the L2, kernels.py's way), the order
rotated each round. Prints each variant's median and its ratio to the first one named; writes
variants_rr_<op>.json with every timing and the GPU/driver/torch/triton/date stamp.

    python3 benchmarks/gpu/variants_rr.py --op rope --variants triton,triton_gathered,liger,compile \
        --shapes llama8b-t4096,llama8b-t32768 [--rounds 5] [--out DIR]
"""
import argparse
import json
import os
import statistics


def main():
    from profkit.kernels import get
    from profkit.kernels.timing import (
        copy_bandwidth,
        fresh,
        graph_timer,
        header,
        input_sets,
        rotating,
        stamp,
        timer,
        tuned_choices,
    )

    ap = argparse.ArgumentParser()
    ap.add_argument("--op", required=True)
    ap.add_argument("--variants", required=True, help="comma list; ratios are to the first")
    ap.add_argument("--shapes", required=True, help="comma list of registered shape names")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    hdr = header("cuda")
    print(json.dumps(stamp(hdr)), flush=True)
    copy = copy_bandwidth("cuda", timer("cuda"))  # kernels.py's way, so % of copy reads the same
    bench = graph_timer(rep_ms=50)
    print(f"copy {copy['gbps']:.0f} GB/s", flush=True)
    w = get(args.op)
    names = args.variants.split(",")
    out = dict(header=hdr, copy=copy, op=args.op, dtype=args.dtype, rounds=args.rounds, shapes={})
    for shape in args.shapes.split(","):
        p = w.shapes[shape]
        states = input_sets(w, p, args.dtype, "cuda")
        state = states[0]
        ref_state = fresh(state)  # untouched inputs for the reference (Liger's RoPE rotates in place)
        fns = {}
        for v in names:
            try:
                o = w.variants[v](fresh(state))
            except NotImplementedError as e:  # a peer that refuses this shape (Liger's RoPE: partial rotary)
                print(f"{shape:22} {v:22} skipped: {e}", flush=True)
                continue
            r = w.check(ref_state, v, o, args.dtype)
            if r is not None and not r.ok:
                raise SystemExit(f"{args.op}/{v}/{shape}: rel err {r.rel_err:.2e} over {r.tol:.1e}")
            fns[v] = rotating(w.variants[v], states)
        ran = list(fns)
        times = {v: [] for v in ran}
        for r in range(args.rounds):
            for v in ran[r % len(ran):] + ran[:r % len(ran)]:
                times[v].append(bench(fns[v]))
        nbytes = w.model(p, args.dtype)["bytes"]
        base = statistics.median(times[names[0]])
        rows = []
        for v in ran:
            med = statistics.median(times[v])
            pct = 100 * nbytes / med / 1e6 / copy["gbps"]
            rows.append(dict(variant=v, graph_ms=med, all_ms=times[v], pct_copy=pct, x_first=med / base, **stamp(hdr)))
            print(f"{shape:22} {v:22} {med * 1e3:9.2f} us [{min(times[v]) * 1e3:.2f}-{max(times[v]) * 1e3:.2f}] "
                  f"{pct:5.1f} % copy  {names[0]} is {med / base:.3f}x faster", flush=True)
        out["shapes"][shape] = rows
        del state, states, fns
    out["tuned"] = tuned_choices()  # each launcher's pick in this process, with its candidates' times
    for key, v in out["tuned"].items():
        print(f"tuned {key}: {v}", flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"variants_rr_{args.op}.json"), "w") as f:
        json.dump(out, f, indent=1, default=str)


def run_with(op: str, extra: dict, first=(), last=()):
    """A probe's launches timed beside the registered ones: register `extra` ({name: fn(state)})
    on OP's workload in this process only, then main() over first + extra + last, the rest of the
    command line (--shapes, --rounds, --out) passed on."""
    import sys

    from profkit.kernels import get

    get(op).variants.update(extra)
    names = [*first, *extra, *last]
    sys.argv = [sys.argv[0], "--op", op, "--variants", ",".join(names), *sys.argv[1:]]
    main()


if __name__ == "__main__":
    main()
