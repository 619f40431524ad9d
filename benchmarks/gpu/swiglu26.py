#!/usr/bin/env python3
"""Round 26 probe (issue 21 item 1): why SwiGLU at one token (llama8b-t1: 1 x 14336 bf16) is
1.03-1.08x of torch.compile in a fresh process (round 10, swiglu_t1.py) but 0.86-0.89x in the
full `kernels.py --graph` run, where the tuner had timed the same launch at 1.25 us seconds
before the row measured 1.51 us.

One process. The SwiGLU t1 launches are timed (graph replay, round-robin, ROUNDS rounds) first
fresh, then after the full run's rows that come before SwiGLU (kernels.py's run_forward over
every op ahead of it, the table's variants), then after each of these, one at a time:
  empty    gc.collect() + torch.cuda.empty_cache()
  idle     5 s with the GPU idle (clocks, heat)
  states   new input sets and output (fresh allocations)
Each phase times:
  triton:kernel   the tuned launch through the lab's fast launcher, output preallocated
  triton:normal   the same kernel object through Triton's own launch
  triton:newjit   a new JITFunction of the same source, made in this phase (a new module load)
  triton:rotate   the variant over the rotated input sets (kernels.py's way)
  compile:kernel / compile:rotate
nvidia-smi's SM clock, power and the active clock-event reasons are read after each phase.

    python3 benchmarks/gpu/swiglu26.py [--rounds 3] [--skip-run] --out DIR
"""
import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time


def smi() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu,"
                               "clocks_event_reasons.active", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception as e:  # noqa: BLE001
        return repr(e)


def main():
    import torch
    import triton

    from profkit.kernels import benched, get
    from profkit.kernels import swiglu as SW
    from profkit.kernels._numerics import compiled
    from profkit.kernels.timing import graph_timer, header, input_sets, rotating, stamp

    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--skip-run", action="store_true", help="no full-run rows in between (control)")
    ap.add_argument("--variants", default="triton,triton_gathered,triton_h2,triton_direct,compile,compile_direct,liger")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    a = ap.parse_args()
    hdr = header("cuda")
    print(json.dumps(stamp(hdr)), flush=True)
    w = get("swiglu")
    p = w.shapes["llama8b-t1"]
    comp = compiled("swiglu26_probe", SW.swiglu_eager)

    def inputs():
        states = input_sets(w, p, "bf16", "cuda")
        return states[0], states, torch.empty_like(states[0]["gate"])

    state, states, y = inputs()
    w.variants["triton"](state)  # the tuner picks, as in the full run (graph replay of each candidate)
    g0 = state["gate"]
    cfg = tuple(SW._config("swiglu_fwd", g0.numel(), g0, None, None, small=True))  # that pick, cached
    print("tuner's pick", cfg, flush=True)
    bench = graph_timer(rep_ms=20)
    phases = []

    def fns_now():
        g, u = state["gate"], state["up"]
        n = g.numel()
        jit = triton.JITFunction(SW._swiglu_fwd.fn)  # a new kernel object: compiled and loaded now
        grid = (triton.cdiv(n, cfg[0]),)

        def newjit():
            jit[grid](g, u, y, n, BLOCK=cfg[0], EVICT=cfg[2], num_warps=cfg[1])

        def normal():
            SW._swiglu_fwd[grid](g, u, y, n, BLOCK=cfg[0], EVICT=cfg[2], num_warps=cfg[1])

        newjit(), normal(), comp(g, u)
        torch.cuda.synchronize()
        return {
            "triton:kernel": lambda: SW.swiglu_fwd(g, u, out=y, config=cfg),
            "triton:normal": normal,
            "triton:newjit": newjit,
            "triton:rotate": rotating(w.variants["triton"], states),
            "compile:kernel": lambda: comp(g, u),
            "compile:rotate": rotating(w.variants["compile"], states),
        }

    def phase(tag):
        fns = fns_now()
        times = {k: [] for k in fns}
        for r in range(a.rounds):
            order = list(fns)[r % len(fns):] + list(fns)[:r % len(fns)]
            for k in order:
                times[k].append(bench(fns[k]))
        clocks = smi()
        med = {k: statistics.median(v) for k, v in times.items()}
        phases.append(dict(phase=tag, median_ms=med, all_ms=times, smi=clocks, t=time.time()))
        print(f"== {tag}: smi {clocks}", flush=True)
        for k, v in med.items():
            print(f"   {k:16} {v * 1e3:6.3f} us  [{min(times[k]) * 1e3:.3f}-{max(times[k]) * 1e3:.3f}]", flush=True)
        print(f"   rotate: compile/triton {med['compile:rotate'] / med['triton:rotate']:.3f}x;"
              f" kernel: {med['compile:kernel'] / med['triton:kernel']:.3f}x", flush=True)

    phase("fresh")
    if not a.skip_run:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
        import kernels as K  # benchmarks/kernels.py: the full run's own loop

        from profkit.kernels.timing import copy_bandwidth, timer

        b = timer("cuda")
        copy = copy_bandwidth("cuda", b)
        rows: list = []
        t0 = time.perf_counter()
        for op in benched("kernels"):
            if op.startswith("swiglu"):
                break
            K.run_forward(op, K.pick_shapes(benched("kernels")[op], "default"), "bf16", "cuda", b, copy["gbps"],
                          set(a.variants.split(",")), rows, stamp(hdr), graph_timer())
        print(f"full run's rows before swiglu: {len(rows)} in {time.perf_counter() - t0:.0f} s", flush=True)
        phase("after-run")
    gc.collect()
    torch.cuda.empty_cache()
    phase("empty")
    torch.cuda.synchronize()
    time.sleep(5)
    phase("idle")
    state, states, y = inputs()
    phase("states")
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "swiglu26.json"), "w") as f:
        json.dump(dict(header=hdr, rounds=a.rounds, pick=cfg, phases=phases), f, indent=1, default=str)


if __name__ == "__main__":
    main()
