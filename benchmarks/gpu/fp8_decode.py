#!/usr/bin/env python3
"""Round 6 (issue 21 item 3): fp8 split-K for decode shapes against v3 and torch._scaled_mm.

At every decode shape (M = 16 and 64 of the LLM projections; the registered one is
llama8b-qkv-m16), both scale modes:
- float64 check of every variant first (the workload's own check);
- round-robin over R rounds: each variant timed in turn with the lab's timer (do_bench median,
  L2 flushed: the weights come from DRAM, as in a decode step through a whole model), median of
  the R;
- GPU time only: CUDA-graph replay (the lab's graph_timer; no flush, weights warm in the L2);
- host time per call;
- every split-K candidate alone (do_bench and graph replay), so the pick can be read against the rest.

    python3 benchmarks/gpu/fp8_decode.py [--rounds 5] [--out DIR] [--shapes a,b]   # -> DIR/fp8_decode.json
"""
import argparse
import json
import os
import sys

import torch

from profkit.kernels import fp8_gemm as F
from profkit.kernels import get
from profkit.kernels.timing import graph_timer, header, stamp, timer, tuned_choices

sys.path.insert(0, os.path.dirname(__file__))
from fp8_launch import host_us, round_robin  # noqa: E402

MODES = {"row": ("triton_splitk", "triton_promote", "scaled_mm"),
         "tensor": ("triton_splitk_tensor", "triton_promote_tensor", "scaled_mm_tensor")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--shapes", default="", help="comma-separated; default: every M <= 64 shape of the full sweep")
    args = ap.parse_args()
    w = get("fp8_gemm")
    shapes = {k: v for k, v in F.all_shapes().items() if v["M"] <= F.SPLITK_MAX_M}
    if args.shapes:
        shapes = {k: shapes[k] for k in args.shapes.split(",")}
    hdr = header("cuda")
    print(json.dumps(stamp(hdr)), flush=True)
    bench, gbench = timer("cuda", warmup_ms=10, rep_ms=40), graph_timer(rep_ms=40)
    rows, cands = [], {}
    for shape, p in shapes.items():
        state = w.setup(p, "fp8", "cuda")
        fns = {}
        for mode, names in MODES.items():
            for v in names:
                r = w.check(state, v, w.variants[v](state), "fp8")
                assert r.ok, (shape, v, str(r))
                fns[v] = (lambda v: lambda: w.variants[v](state))(v)
        torch.cuda.synchronize()
        times, med = round_robin(fns, bench, args.rounds)
        graph = {v: gbench(fn) for v, fn in fns.items()}
        host = {v: host_us(fn, 200) for v, fn in fns.items()}
        for mode, (sk, v3, peer) in MODES.items():
            for v in (sk, v3, peer):
                row = dict(shape=shape, mode=mode, variant=v, params=p, ms=med[v], ms_all=times[v], peer=peer,
                           pct_peer=100 * med[peer] / med[v], graph_ms=graph[v],
                           graph_pct_peer=100 * graph[peer] / graph[v], host_us_per_call=round(host[v], 1),
                           gbps=(p["M"] * p["K"] + p["N"] * p["K"] + 2 * p["M"] * p["N"]) / med[v] / 1e6,
                           **stamp(hdr))
                rows.append(row)
                print(f"{shape:20} {v:22} {med[v] * 1e3:7.1f} us [{min(times[v]) * 1e3:.1f}-{max(times[v]) * 1e3:.1f}]"
                      f" {row['pct_peer']:6.1f} % of {peer:16}  graph {graph[v] * 1e3:6.1f} us "
                      f"({row['graph_pct_peer']:6.1f} %)  host {host[v]:.0f} us", flush=True)
            # every candidate alone
            aq, bq, sa, sb = state[mode]
            out = torch.empty((p["M"], p["N"]), dtype=torch.bfloat16, device="cuda")
            per = {}
            for c in F.splitk_candidates(p["M"], p["N"], p["K"], torch.cuda.get_device_properties(0).multi_processor_count):
                fn = (lambda c: lambda: F.fp8_gemm_splitk(aq, bq, sa, sb, out=out, config=c))(c)
                try:
                    fn()
                    per[str(c)] = {"ms": bench(fn), "graph_ms": gbench(fn)}
                except Exception as e:  # noqa: BLE001 - a candidate this GPU cannot run: say so, go on
                    per[str(c)] = {"error": f"{type(e).__name__}: {str(e)[:160]}"}
            cands[f"{shape}/{mode}"] = per
            print(f"   {mode} candidates: " + ", ".join(f"{c} {d.get('ms', 0) * 1e3:.1f}/{d.get('graph_ms', 0) * 1e3:.1f}"
                                                       if "ms" in d else f"{c} {d['error']}" for c, d in per.items()),
                  flush=True)
        del state
        torch.cuda.empty_cache()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "fp8_decode.json"), "w") as f:
        json.dump(dict(header=hdr, rounds=args.rounds, rows=rows, candidates=cands,
                       tuned={k: v for k, v in tuned_choices().items() if "fp8_gemm_splitk" in k},
                       autotune=F.autotune_choices().get("fp8_gemm.promote")), f, indent=1)


if __name__ == "__main__":
    main()
